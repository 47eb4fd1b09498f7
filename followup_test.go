package baton

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/faultnet"
)

// TestOwnerCrashBeforeFollowup: the smooth policy moves a stateful task
// in two rounds: its old owner revokes it (committing its work), and the
// follow-up round hands it to the learner that warmed it. Here the old
// owner dies right after the revoke, before it can join the follow-up
// round: once c joins, the instance whose revoke of a stateful task comes
// first loses its network from inside that revoke's event. The group goes on
// without it, the remaining instances run every task, and no count is
// lost (exact under exactly-once; under at-least-once none higher than
// the dead owner's uncommitted work explains).
func TestOwnerCrashBeforeFollowup(t *testing.T) {
	for _, g := range guarantees {
		t.Run(g.String(), func(t *testing.T) {
			h := newHarness(t, 4)
			h.prefill(3000)
			var once sync.Mutex // guards armed, victim and moved
			armed, victim, moved := false, "", ""
			start := func(id string) (*running, *faultnet.Cutter) {
				cut := &faultnet.Cutter{}
				r := h.start(id, WithGuarantee(g), WithKafkaOptions(kgo.Dialer(cut.Dial)), WithListener(func(e Event) {
					h.listener(e)
					if e.Kind != EventRevoked || !strings.HasPrefix(e.Task, "1_") {
						return
					}
					once.Lock()
					defer once.Unlock()
					if armed && victim == "" {
						victim, moved = id, e.Task
						cut.Cut()
					}
				}))
				return r, cut
			}
			// a counts the prefill alone first: b's learners then catch up
			// with changelogs that stand still.
			a, _ := start("a")
			h.checkCounts(g, 60*time.Second)
			b, _ := start("b")
			h.eventually(60*time.Second, "a and b to share the tasks", func() bool { return balanced(a, b) })
			f := h.startFlow(20 * time.Millisecond)
			held := h.mark(a, b)
			once.Lock()
			armed = true
			once.Unlock()
			c := h.start("c", WithGuarantee(g))
			h.eventually(60*time.Second, "a revoke of a stateful task for c", func() bool {
				once.Lock()
				defer once.Unlock()
				return victim != ""
			})
			t.Logf("%s revoked %s for c and lost its network", victim, moved)
			survivor := map[string]*running{"a": b, "b": a}[victim]
			// What the victim ran when c joined (its status, stuck in the
			// revoke, no longer says).
			lost := map[string]string{}
			for task, owner := range held.owners {
				if owner == victim {
					lost[task] = owner
				}
			}
			uncommitted := h.uncommitted(lost)
			h.eventually(60*time.Second, "c and the survivor to run every task", func() bool { _, all := owners(survivor, c); return all })
			h.mu.Lock()
			for _, e := range h.events {
				if e.Kind == EventRevoked && e.Instance == victim && e.Task == moved {
					break
				}
				if e.Kind == EventAssigned && e.Instance == "c" && e.Task == moved {
					t.Errorf("c ran %s before %s revoked it: the crash did not fall between the rounds", moved, victim)
				}
			}
			h.mu.Unlock()
			f.stop()
			h.checkCounts(g, 60*time.Second)
			if g == AtLeastOnce {
				h.checkOverCount(uncommitted)
			}
			alive(t, survivor, c)
		})
	}
}

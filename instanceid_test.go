package baton

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestDuplicateInstanceID: a second instance starts with the instance id
// of a running one (a copied deployment, a typo), so with the same
// group.instance.id and, under exactly-once, the same transactional id.
// Kafka's static membership gives the id to the member that joined last
// and fences the older one (FENCED_INSTANCE_ID); the older instance must
// stop with an error naming the instance id instead of joining again and
// fencing the newer one in turn. The newer instance runs every task, and
// no count is lost (exact under exactly-once; under at-least-once none
// higher than what the older instance processed without committing,
// from the moment the newer one started until it stopped, explains).
func TestDuplicateInstanceID(t *testing.T) {
	for _, g := range guarantees {
		t.Run(g.String(), func(t *testing.T) {
			h := newHarness(t, 4)
			h.prefill(500)
			first := h.start("x", WithGuarantee(g))
			h.eventually(60*time.Second, "the first x to run every task", func() bool { _, all := owners(first); return all })
			h.checkCounts(g, 60*time.Second)
			f := h.startFlow(20 * time.Millisecond)
			tasks, _ := owners(first)
			before := h.uncommitted(tasks)
			second := h.start("x", WithGuarantee(g))
			var err error
			select {
			case err = <-first.done:
				first.done <- err
			case <-time.After(60 * time.Second):
				t.Fatal("the first instance x still runs 60 s after a second one joined with its instance id")
			}
			if !errors.Is(err, ErrInstanceIDInUse) || !strings.Contains(err.Error(), `"x"`) {
				t.Fatalf("the first instance x stopped with %v; want ErrInstanceIDInUse naming the instance id", err)
			}
			uncommitted := before.widen(h.uncommitted(tasks))
			h.eventually(60*time.Second, "the second x to run every task", func() bool { _, all := owners(second); return all })
			f.stop()
			h.checkCounts(g, 60*time.Second)
			if g == AtLeastOnce {
				h.checkOverCount(uncommitted)
			}
			alive(t, second)
		})
	}
}

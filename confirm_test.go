package baton

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/faultnet"
)

// TestCutOffMemberSaysUnconfirmed: an instance cut off from the cluster
// cannot know whether the group still counts it in; the others take its
// tasks after the session timeout. Its Status says it is unconfirmed, and
// marks any active task it still lists, within a session timeout of the
// cut (plus slack for a loaded machine); the instance that stays
// connected is confirmed throughout.
func TestCutOffMemberSaysUnconfirmed(t *testing.T) {
	h := newHarness(t, 4)
	h.prefill(200)
	a := h.start("a")
	cut := &faultnet.Cutter{}
	b := h.start("b", WithKafkaOptions(kgo.Dialer(cut.Dial)))
	h.eventually(60*time.Second, "a and b to share the tasks", func() bool { return balanced(a, b) })
	if st := b.app.Status(); st.Unconfirmed || st.ConfirmedAt.IsZero() {
		t.Fatalf("b before the cut: unconfirmed %v, confirmed at %v; want confirmed", st.Unconfirmed, st.ConfirmedAt)
	}
	cut.Cut()
	cutAt := time.Now()
	h.eventually(DefaultSessionTimeout+10*time.Second, "b to say it is unconfirmed", func() bool {
		if st := a.app.Status(); st.Unconfirmed {
			t.Fatalf("a, still connected, says it is unconfirmed (confirmed at %v)", st.ConfirmedAt)
		}
		st := b.app.Status()
		for _, ts := range st.Tasks {
			if ts.Role == "active" && ts.Unconfirmed != st.Unconfirmed {
				t.Fatalf("b's active task %s: unconfirmed %v, b %v", ts.ID, ts.Unconfirmed, st.Unconfirmed)
			}
		}
		return st.Unconfirmed
	})
	t.Logf("b unconfirmed %v after the cut (last confirmed %v before it)", time.Since(cutAt).Round(10*time.Millisecond), cutAt.Sub(b.app.Status().ConfirmedAt).Round(10*time.Millisecond))
	h.eventually(60*time.Second, "a to own every task", func() bool { _, all := owners(a); return all })
}

// TestCommitGivesUpWhenUnconfirmed: an instance's link to the cluster
// stalls as one of its commits starts with work to make durable
// (faultnet.Stall: nothing fails at once, the brokers just never
// answer), so that commit cannot finish. A commit must not
// wait longer than the member can stay in the group: once the group has
// not confirmed the member for a session timeout, the commit in progress
// is given up for that reason (counted in baton_commits_given_up_total),
// not for its own time limit (10 s for offsets, 30 s for
// acknowledgements). The instance that stays connected gives up none.
func TestCommitGivesUpWhenUnconfirmed(t *testing.T) {
	for _, g := range guarantees {
		t.Run(g.String(), func(t *testing.T) {
			h := newHarness(t, 4)
			h.prefill(200)
			a := h.start("a", WithGuarantee(g))
			link := &faultnet.Stall{}
			var armed atomic.Bool
			stallAtCommit := func(c *config) {
				c.OnCommitWork = func() {
					if armed.CompareAndSwap(true, false) {
						link.Stall()
					}
				}
			}
			b := h.start("b", WithGuarantee(g), WithKafkaOptions(kgo.Dialer(link.Dial)), stallAtCommit)
			h.eventually(60*time.Second, "a and b to share the tasks", func() bool { return balanced(a, b) })
			f := h.startFlow(10 * time.Millisecond)
			processed := func(r *running) int64 {
				n := int64(0)
				for _, ts := range r.app.Status().Tasks {
					n += ts.Processed
				}
				return n
			}
			before := processed(b)
			h.eventually(60*time.Second, "b to process the flow", func() bool { return processed(b) > before })
			armed.Store(true)
			h.eventually(DefaultSessionTimeout+30*time.Second, "b to give up a commit", func() bool {
				return testutil.ToFloat64(b.app.e.Metrics().CommitsGivenUp) > 0
			})
			if !b.app.Status().Unconfirmed {
				t.Error("b gave up a commit for being unconfirmed, but its Status says it is confirmed")
			}
			h.eventually(60*time.Second, "a to own every task", func() bool { _, all := owners(a); return all })
			f.stop()
			if n := testutil.ToFloat64(a.app.e.Metrics().CommitsGivenUp); n > 0 {
				t.Errorf("a, connected throughout, gave up %v commits", n)
			}
		})
	}
}

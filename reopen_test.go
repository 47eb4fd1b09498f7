package baton

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/baton-streams/baton/assign"
	"github.com/baton-streams/baton/state"
)

// TestReopenWhileOpening: a task dropped while its stores open, and given
// back to the same instance before that open is done, must not have its
// stores opened twice at once: the second open found the store locked,
// and the instance stopped ("opening its stores: state: locked"; seen in
// `bench versus` under eager). Here every store takes 2 s to open, and
// under eager every rebalance drops every task and hands them out again:
// b joins while a still opens the stores of its first assignment.
func TestReopenWhileOpening(t *testing.T) {
	h := newHarness(t, 4)
	h.prefill(200)
	slow := WithStoreOptions(state.WithPebbleOptions(func(*pebble.Options) { time.Sleep(2 * time.Second) }))
	a := h.start("a", WithPolicy(assign.Eager), slow)
	h.eventually(30*time.Second, "a to be assigned its tasks", func() bool { return len(a.app.Status().Tasks) > 0 })
	b := h.start("b", WithPolicy(assign.Eager), slow)
	running := func(name string, r *running) {
		select {
		case err := <-r.done:
			r.done <- err // for the cleanup
			t.Fatalf("%s stopped: %v", name, err)
		default:
		}
	}
	h.eventually(60*time.Second, "a and b to share the tasks", func() bool {
		running("a", a)
		running("b", b)
		return balanced(a, b)
	})
	h.produce(100)
	h.checkCounts(AtLeastOnce, 60*time.Second)
	running("a", a)
	running("b", b)
}

package baton

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/baton-streams/baton/assign"
)

// TestMixedPolicyGroupRefused: an instance with policy eager cannot join
// a group that runs smooth. The policies speak different rebalance
// protocols (eager revokes everything before rejoining, smooth keeps what
// it is not told to give up), so in one group an eager leader could hand
// a task to a new owner while its smooth owner still runs it. Each policy
// joins with its own group protocol name, the broker answers the eager
// member's JoinGroup with INCONSISTENT_GROUP_PROTOCOL, and its Run returns
// an ErrConfig naming the policy at once; the smooth instance runs on
// undisturbed. Both kfake (its protocolsMatch) and Apache Kafka refuse a
// member whose protocols do not intersect those of a non-empty group, so
// this runs on either. Under the former single protocol name "baton" the
// eager instance joined the group and this test fails on its deadline.
func TestMixedPolicyGroupRefused(t *testing.T) {
	h := newHarness(t, 4)
	h.produce(200)
	a := h.start("a", WithPolicy(assign.Smooth))
	h.eventually(60*time.Second, "a to run every task", func() bool { return balanced(a) })
	before := h.eventCount()

	b := h.start("b", WithPolicy(assign.Eager))
	var err error
	select {
	case err = <-b.done:
		b.done <- err // for the cleanup
	case <-time.After(30 * time.Second):
		t.Fatalf("the eager instance still runs after 30s in a group running smooth; want Run to return a configuration error")
	}
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("eager instance: Run = %v; want an error wrapping ErrConfig", err)
	}
	for _, want := range []string{"policy eager", "another policy", "--policy"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("eager instance: Run error %q does not say %q", err, want)
		}
	}
	t.Logf("eager instance: %v", err)
	for _, kind := range []EventKind{EventAssigned, EventRebalance, EventLeader} {
		if ev := h.eventsSince(0, "b", kind); len(ev) > 0 {
			t.Errorf("eager instance reported %d %s events; it must never have been a member", len(ev), kind)
		}
	}
	if ev := h.eventsSince(before, "a", EventRevoked); len(ev) > 0 {
		t.Errorf("smooth instance had %d revocations after the eager one tried to join: %v", len(ev), ev)
	}
	h.produce(200)
	h.waitExact(60 * time.Second)
	if !balanced(a) {
		t.Errorf("smooth instance no longer runs every task: %v", a.app.Status().Tasks)
	}
}

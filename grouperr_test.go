package baton

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/baton-streams/baton/assign"
)

// TestFatalGroupError: the errors that end a group session and that every
// later join would get again stop the App with an ErrConfig naming what
// to change (a session timeout outside the brokers' bounds; a policy
// other than the group's), or with ErrInstanceIDInUse naming the
// instance id another member took; the others are left to the client's
// retries.
func TestFatalGroupError(t *testing.T) {
	for _, err := range []error{
		nil,
		context.Canceled,
		errors.New("dial tcp 127.0.0.1:9092: connect: connection refused"),
		kerr.RebalanceInProgress,
		kerr.NotCoordinator,
		kerr.CoordinatorNotAvailable,
		kerr.CoordinatorLoadInProgress,
		kerr.UnknownMemberID,
		kerr.IllegalGeneration,
	} {
		if got := fatalGroupError(err, config{session: 2 * time.Second, policy: assign.Smooth}); got != nil {
			t.Errorf("fatalGroupError(%v) = %v; want nil (retried)", err, got)
		}
	}

	check := func(name string, got error, cause error, want ...string) {
		t.Helper()
		if got == nil {
			t.Errorf("%s: nil; want a fatal error", name)
			return
		}
		if !errors.Is(got, ErrConfig) {
			t.Errorf("%s: %v does not wrap ErrConfig", name, got)
		}
		if !errors.Is(got, cause) {
			t.Errorf("%s: %v does not wrap %v", name, got, cause)
		}
		for _, w := range want {
			if !strings.Contains(got.Error(), w) {
				t.Errorf("%s: %q does not say %q", name, got, w)
			}
		}
	}
	for _, err := range []error{kerr.InvalidSessionTimeout, fmt.Errorf("joining: %w", kerr.InvalidSessionTimeout)} {
		check(fmt.Sprint(err), fatalGroupError(err, config{session: 2 * time.Second, policy: assign.Smooth}), kerr.InvalidSessionTimeout,
			"session timeout: 2s", "group.min.session.timeout.ms", "group.max.session.timeout.ms")
	}
	for _, p := range assign.Policies {
		for _, err := range []error{kerr.InconsistentGroupProtocol, fmt.Errorf("joining: %w", kerr.InconsistentGroupProtocol)} {
			check(fmt.Sprintf("%s, %v", p, err), fatalGroupError(err, config{session: 2 * time.Second, policy: p}), kerr.InconsistentGroupProtocol,
				"policy "+string(p)+":", `"baton-`+string(p)+`"`, "the group already runs another policy",
				"every instance of a group must run the same --policy")
		}
	}
	for _, err := range []error{kerr.FencedInstanceID, fmt.Errorf("heartbeating: %w", kerr.FencedInstanceID)} {
		got := fatalGroupError(err, config{appID: "wc", instanceID: "host-7", policy: assign.Smooth})
		if !errors.Is(got, ErrInstanceIDInUse) || !errors.Is(got, kerr.FencedInstanceID) {
			t.Errorf("%v: %v; want ErrInstanceIDInUse wrapping it", err, got)
			continue
		}
		for _, w := range []string{`instance id "host-7"`, "group wc", "--instance-id"} {
			if !strings.Contains(got.Error(), w) {
				t.Errorf("%v: %q does not say %q", err, got, w)
			}
		}
	}
}

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

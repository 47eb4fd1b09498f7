package engine

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
		if got := fatalGroupError(err, Config{Session: 2 * time.Second, Policy: assign.Smooth}); got != nil {
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
		check(fmt.Sprint(err), fatalGroupError(err, Config{Session: 2 * time.Second, Policy: assign.Smooth}), kerr.InvalidSessionTimeout,
			"session timeout: 2s", "group.min.session.timeout.ms", "group.max.session.timeout.ms")
	}
	for _, p := range assign.Policies {
		for _, err := range []error{kerr.InconsistentGroupProtocol, fmt.Errorf("joining: %w", kerr.InconsistentGroupProtocol)} {
			check(fmt.Sprintf("%s, %v", p, err), fatalGroupError(err, Config{Session: 2 * time.Second, Policy: p}), kerr.InconsistentGroupProtocol,
				"policy "+string(p)+":", `"baton-`+string(p)+`"`, "the group already runs another policy",
				"every instance of a group must run the same --policy")
		}
	}
	for _, err := range []error{kerr.FencedInstanceID, fmt.Errorf("heartbeating: %w", kerr.FencedInstanceID)} {
		got := fatalGroupError(err, Config{AppID: "wc", InstanceID: "host-7", Policy: assign.Smooth})
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

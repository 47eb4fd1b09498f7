package baton

import (
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/baton-streams/baton/assign"
	"github.com/baton-streams/baton/member"
)

// fatalGroupError maps an error that ended a group session (kgo's
// OnGroupManageError) to the error that stops the App, or returns nil when
// the client should go on retrying, as it does for most: a coordinator
// moving, a rebalance, a broker down. The fatal ones are those every later
// join would get again because of how this instance is configured; each
// wraps ErrConfig and err and says what to change.
//
//   - INVALID_SESSION_TIMEOUT: session is outside the brokers' bounds.
//   - INCONSISTENT_GROUP_PROTOCOL: none of the group protocols this member
//     joins with is one every member of the group supports. A baton
//     member joins with one protocol named after its policy
//     (member.ProtocolName), so this is another policy running the group
//     (or a client that is not this application using its group id).
func fatalGroupError(err error, session time.Duration, policy assign.Policy) error {
	switch {
	case errors.Is(err, kerr.InvalidSessionTimeout):
		return fmt.Errorf("%w: session timeout: %v is outside the bounds the brokers allow (group.min.session.timeout.ms, default 6s, and group.max.session.timeout.ms, default 30m): %w",
			ErrConfig, session, err)
	case errors.Is(err, kerr.InconsistentGroupProtocol):
		return fmt.Errorf("%w: policy %s: the group already runs another policy (its members do not join with group protocol %q) or clients that are not baton use its group id; every instance of a group must run the same --policy (WithPolicy): %w",
			ErrConfig, policy, member.ProtocolName(policy), err)
	}
	return nil
}

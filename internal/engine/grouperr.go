package engine

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/baton-streams/baton/member"
)

// fatalGroupError maps an error that ended a group session (kgo's
// OnGroupManageError) to the error that stops the App, or returns nil when
// the client should go on retrying, as it does for most: a coordinator
// moving, a rebalance, a broker down. The fatal ones are those every later
// join would get again because of how this instance is configured or
// run; each wraps ErrConfig (ErrInstanceIDInUse for the last) and err and
// says what to change.
//
//   - INVALID_SESSION_TIMEOUT: session is outside the brokers' bounds.
//   - INCONSISTENT_GROUP_PROTOCOL: none of the group protocols this member
//     joins with is one every member of the group supports. A baton
//     member joins with one protocol named after its policy
//     (member.ProtocolName), so this is another policy running the group
//     (or a client that is not this application using its group id).
//   - FENCED_INSTANCE_ID: another member joined with this instance's
//     group.instance.id and the group gave the id to it (static
//     membership keeps the member that joined last). Joining again would
//     take the id back and fence the other instance in turn, and both
//     would write with one transactional id: this one stops instead
//     (ErrInstanceIDInUse), as a Kafka consumer does.
func fatalGroupError(err error, cfg Config) error {
	switch {
	case errors.Is(err, kerr.InvalidSessionTimeout):
		return fmt.Errorf("%w: session timeout: %v is outside the bounds the brokers allow (group.min.session.timeout.ms, default 6s, and group.max.session.timeout.ms, default 30m): %w",
			ErrConfig, cfg.Session, err)
	case errors.Is(err, kerr.InconsistentGroupProtocol):
		return fmt.Errorf("%w: policy %s: the group already runs another policy (its members do not join with group protocol %q) or clients that are not baton use its group id; every instance of a group must run the same --policy (WithPolicy): %w",
			ErrConfig, cfg.Policy, member.ProtocolName(cfg.Policy), err)
	case errors.Is(err, kerr.FencedInstanceID):
		return instanceIDInUse(cfg, err)
	}
	return nil
}

// instanceIDInUse is the error that stops an instance whose instance id
// another instance of the group took.
func instanceIDInUse(cfg Config, cause error) error {
	return fmt.Errorf("%w: instance id %q: another instance joined group %s with the same instance id (its group.instance.id, and under exactly-once its transactional id) and took its place; give every running instance its own --instance-id (WithInstanceID): %w",
		ErrInstanceIDInUse, cfg.InstanceID, cfg.AppID, cause)
}

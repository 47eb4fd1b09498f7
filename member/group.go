package member

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/baton-streams/baton/protocol"
	"github.com/baton-streams/baton/topology"
)

// Group is a baton consumer group as DescribeGroups shows it to a reader
// that is not a member.
type Group struct {
	// State is the coordinator's view: Stable, PreparingRebalance,
	// CompletingRebalance, Empty or Dead.
	State string
	// Protocol is the group protocol in use: for a baton group
	// "baton-<policy>" (member.ProtocolName; member.PolicyOf reads the
	// policy back).
	Protocol string
	// Members are sorted by instance id, then member id.
	Members []Member
}

// Member is one group member with its decoded baton subscription.
type Member struct {
	MemberID   string
	ClientHost string
	// Subscription is what the member sent at its last join. When Err is
	// set it holds what could be read (InstanceID falls back to MemberID).
	Subscription protocol.Subscription
	// Generation is the generation the member last joined with (-1 before
	// its first); the newest claim wins a task two members claim.
	Generation int32
	// Topics are the source topics the member subscribed to.
	Topics []string
	// Assigned is the partitions the leader gave the member, by topic.
	Assigned map[string][]int32
	// Assignment is baton's part of what the leader gave the member in
	// the last round: what it runs now. The Subscription is older (it was
	// sent before that round), so it is the source of lags, not of roles.
	// HasAssignment is false before the member's first round completes or
	// when the leader's user data is unreadable.
	Assignment    protocol.Assignment
	HasAssignment bool
	// Err says why the subscription could not be read in full.
	Err error
	// Pending is true when the coordinator returned no join metadata for
	// the member, as it does while the group rebalances; Subscription then
	// holds only the member id.
	Pending bool
}

// ReadGroup describes the consumer group id through adm without joining
// it and decodes each member's ConsumerMemberMetadata and baton
// subscription. A member whose user data is unreadable is returned with
// Err set rather than failing the whole read: a group in the middle of an
// upgrade still shows up. A group that does not exist is returned with
// State "Dead" and no members.
func ReadGroup(ctx context.Context, adm *kadm.Client, id string) (Group, error) {
	described, err := adm.DescribeGroups(ctx, id)
	if err != nil {
		return Group{}, fmt.Errorf("baton: describing group %q: %w", id, err)
	}
	d, ok := described[id]
	if !ok {
		return Group{}, fmt.Errorf("baton: describing group %q: no answer for it", id)
	}
	if d.Err != nil {
		return Group{}, fmt.Errorf("baton: describing group %q: %w", id, d.Err)
	}
	g := Group{State: d.State, Protocol: d.Protocol}
	for _, dm := range d.Members {
		g.Members = append(g.Members, decodeMember(dm))
	}
	sort.Slice(g.Members, func(i, j int) bool {
		a, b := g.Members[i], g.Members[j]
		if a.Subscription.InstanceID != b.Subscription.InstanceID {
			return a.Subscription.InstanceID < b.Subscription.InstanceID
		}
		return a.MemberID < b.MemberID
	})
	return g, nil
}

func decodeMember(dm kadm.DescribedGroupMember) Member {
	m := Member{MemberID: dm.MemberID, ClientHost: dm.ClientHost, Assigned: map[string][]int32{}}
	if ca, ok := dm.Assigned.AsConsumer(); ok {
		for _, t := range ca.Topics {
			m.Assigned[t.Topic] = append(m.Assigned[t.Topic], t.Partitions...)
		}
		if a, err := protocol.DecodeAssignment(ca.UserData); err == nil || errors.Is(err, protocol.ErrUnsupportedVersion) {
			m.Assignment, m.HasAssignment = a, len(ca.UserData) > 0
		}
	}
	meta, ok := dm.Join.AsConsumer()
	if raw, isRaw := dm.Join.Raw(); (isRaw && len(raw) == 0) || (ok && len(meta.UserData) == 0) {
		m.Pending = true
		m.Subscription = protocol.Subscription{InstanceID: dm.MemberID}
		return m
	}
	if !ok {
		m.Err = errors.New("join metadata is not a consumer protocol envelope")
		m.Subscription = protocol.Subscription{InstanceID: dm.MemberID}
		return m
	}
	m.Topics = meta.Topics
	m.Generation = meta.Generation
	sub, err := protocol.DecodeSubscription(meta.UserData)
	var uv *protocol.UnsupportedVersionError
	switch {
	case errors.As(err, &uv):
		// The fields this build knows are all there.
		m.Err = err
	case err != nil:
		m.Err = err
		sub = protocol.Subscription{InstanceID: dm.MemberID}
	}
	if sub.InstanceID == "" {
		sub.InstanceID = dm.MemberID
	}
	m.Subscription = sub
	return m
}

// Subtopologies returns the subtopology ids that the members' task ids
// name, sorted.
func (g Group) Subtopologies() []int {
	seen := map[int]bool{}
	for _, id := range g.TaskIDs() {
		if s, _, err := topology.ParseTaskID(id); err == nil {
			seen[s] = true
		}
	}
	out := make([]int, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	sort.Ints(out)
	return out
}

// Roles returns what the member runs now: its last assignment when there
// is one, else what it reported at its last join.
func (m Member) Roles() (active, standby, learner []string) {
	if m.HasAssignment {
		return m.Assignment.Active, m.Assignment.Standby, m.Assignment.Learner
	}
	s := m.Subscription
	return s.Active, s.Standby, s.Learner
}

// TaskIDs returns every task id some member runs or reports (active,
// standby, learner or a lag), sorted.
func (g Group) TaskIDs() []string {
	seen := map[string]bool{}
	for _, m := range g.Members {
		s := m.Subscription
		active, standby, learner := m.Roles()
		for _, list := range [][]string{s.Active, s.Standby, s.Learner, active, standby, learner} {
			for _, id := range list {
				seen[id] = true
			}
		}
		for id := range s.Lags {
			seen[id] = true
		}
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

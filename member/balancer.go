package member

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/baton-streams/baton/assign"
	"github.com/baton-streams/baton/internal/load"
	"github.com/baton-streams/baton/protocol"
	"github.com/baton-streams/baton/topology"
)

// ProtocolPrefix begins the name of every group protocol baton members
// join with; ProtocolName appends the policy.
const ProtocolPrefix = "baton-"

// ProtocolName returns the group protocol a member running policy p joins
// with: "baton-smooth", "baton-cooperative" or "baton-eager". Each policy
// has its own name because the policies do not speak the same rebalance
// protocol (eager is not cooperative, see Balancer.IsCooperative): the
// brokers form a group only from members that share a protocol name, so a
// member with another policy is refused (INCONSISTENT_GROUP_PROTOCOL)
// rather than admitted into a group where an eager leader could hand a
// task to a new owner while its cooperative owner still runs it.
func ProtocolName(p assign.Policy) string { return ProtocolPrefix + string(p) }

// PolicyOf returns the policy whose members join with the group protocol
// name, as DescribeGroups reports it, and whether it is one.
func PolicyOf(protocol string) (assign.Policy, bool) {
	name, ok := strings.CutPrefix(protocol, ProtocolPrefix)
	if !ok {
		return "", false
	}
	p, err := assign.ParsePolicy(name)
	return p, err == nil
}

// Subtopology is what the balancer needs to know of one subtopology: the
// topics its tasks read (co-partitioned: task ID_p reads partition p of
// each) and whether its tasks have state.
type Subtopology struct {
	ID       int
	Sources  []string
	Stateful bool
}

// Self is the instance the balancer belongs to. Its methods are called from
// the client's group goroutine and must not block.
type Self interface {
	// Subscription returns what the instance reports at a join. owned is
	// the partitions the client holds now.
	Subscription(owned map[string][]int32) protocol.Subscription
	// Assigned receives this member's assignment when a round ends.
	Assigned(a protocol.Assignment)
	// Led is called on the leader with the state it read and the plan it
	// made (with reasons), once per round it leads.
	Led(generation int32, state assign.State, plan assign.Plan)
}

// Config configures a Balancer.
type Config struct {
	Subtopologies []Subtopology
	Assign        assign.Config
	// Policy decides the plans and the group protocol the member joins
	// with (ProtocolName); every member of a group must run the same one.
	// The zero value is assign.Smooth.
	Policy assign.Policy
	Self   Self
	Logger *slog.Logger
	// Loads, when set, returns the loads the member reports for its
	// active tasks at a join (protocol.Subscription.Loads).
	Loads func(active []string) map[string]int32
	// Version is the protocol version the member speaks: zero is
	// protocol.CurrentVersion. A lower one makes the member behave as one
	// of an older release, for the tests of a rolling upgrade: it encodes
	// its subscription at that version and, leading, reads of a newer
	// member's subscription only the fields of that version and answers
	// it at that version with protocol.ErrorVersionProbing.
	Version int16
}

// Balancer is baton's kgo.GroupBalancer: cooperative, with baton's
// subscription and assignment in the consumer protocol's user data, and
// the assign package deciding. Use one Balancer per client.
type Balancer struct {
	cfg Config
}

var _ kgo.GroupBalancer = (*Balancer)(nil)

// NewBalancer returns a Balancer.
func NewBalancer(cfg Config) *Balancer {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Policy == "" {
		cfg.Policy = assign.Smooth
	}
	if cfg.Version <= 0 || cfg.Version > protocol.CurrentVersion {
		cfg.Version = protocol.CurrentVersion
	}
	return &Balancer{cfg: cfg}
}

// ProtocolName implements kgo.GroupBalancer: ProtocolName of the
// balancer's policy.
func (b *Balancer) ProtocolName() string { return ProtocolName(b.cfg.Policy) }

// IsCooperative implements kgo.GroupBalancer: members keep what they are
// not told to give up. Under the eager policy the group speaks the eager
// protocol instead: every member revokes (and commits) everything before
// it rejoins, so a task never has two owners even though eager plans move
// tasks in one round: the stop-the-world baseline.
func (b *Balancer) IsCooperative() bool { return b.cfg.Policy != assign.Eager }

// JoinGroupMetadata implements kgo.GroupBalancer.
func (b *Balancer) JoinGroupMetadata(topics []string, owned map[string][]int32, generation int32) []byte {
	sub := b.cfg.Self.Subscription(owned)
	if b.cfg.Loads != nil {
		sub.Loads = b.cfg.Loads(sub.Active)
	}
	if b.cfg.Version < protocol.CurrentVersion {
		sub.Version, sub.LatestSupportedVersion = b.cfg.Version, b.cfg.Version
	}
	data, err := sub.MarshalBinary()
	if err != nil {
		// A subscription the instance built itself is invalid only through
		// a bug; join as a member with nothing rather than not at all.
		b.cfg.Logger.Error("encoding subscription", "err", err)
		data, _ = protocol.Subscription{InstanceID: sub.InstanceID, Capacity: 1}.MarshalBinary()
	}
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 2
	meta.Topics = topics
	meta.UserData = data
	meta.Generation = generation
	for _, t := range slices.Sorted(maps.Keys(owned)) {
		meta.OwnedPartitions = append(meta.OwnedPartitions, kmsg.ConsumerMemberMetadataOwnedPartition{Topic: t, Partitions: owned[t]})
	}
	return meta.AppendTo(nil)
}

// ParseSyncAssignment implements kgo.GroupBalancer. It hands baton's part
// of the assignment to the instance and returns the partitions.
func (b *Balancer) ParseSyncAssignment(data []byte) (map[string][]int32, error) {
	var ca kmsg.ConsumerMemberAssignment
	if err := ca.ReadFrom(data); err != nil {
		return nil, fmt.Errorf("baton: decoding the group assignment: %w", err)
	}
	parts := make(map[string][]int32, len(ca.Topics))
	for _, t := range ca.Topics {
		parts[t.Topic] = append(parts[t.Topic], t.Partitions...)
	}
	a, err := protocol.DecodeAssignment(ca.UserData)
	var uv *protocol.UnsupportedVersionError
	switch {
	case errors.As(err, &uv):
		b.cfg.Logger.Warn("the leader speaks a newer baton protocol; using the fields this version knows", "version", uv.Version)
	case err != nil:
		// Without baton's part the partitions are still the truth about
		// actives; standbys and learners wait for the next round.
		b.cfg.Logger.Warn("assignment user data unreadable; running actives only", "err", err)
		a = protocol.Assignment{}
	}
	b.cfg.Self.Assigned(a)
	return parts, nil
}

// MemberBalancer implements kgo.GroupBalancer. It decodes every member's
// subscription; one that cannot be decoded is treated as a new member with
// no state (and logged), never as an error: the leader must not fail.
func (b *Balancer) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	mb := &memberBalancer{b: b}
	topics := map[string]struct{}{}
	for _, s := range b.cfg.Subtopologies {
		for _, t := range s.Sources {
			topics[t] = struct{}{}
		}
	}
	for _, m := range members {
		jm := joined{memberID: m.MemberID}
		var meta kmsg.ConsumerMemberMetadata
		if err := meta.ReadFrom(m.ProtocolMetadata); err != nil {
			b.cfg.Logger.Warn("member metadata unreadable; treating it as a new member", "member", m.MemberID, "err", err)
			jm.sub = protocol.Subscription{InstanceID: m.MemberID, Capacity: 1}
			mb.members = append(mb.members, jm)
			continue
		}
		for _, t := range meta.Topics {
			topics[t] = struct{}{}
		}
		jm.generation = meta.Generation
		sub, err := protocol.DecodeSubscription(meta.UserData)
		var uv *protocol.UnsupportedVersionError
		switch {
		case errors.As(err, &uv):
			jm.version = uv.Version
			b.cfg.Logger.Info("member speaks a newer baton protocol; answering at ours", "member", m.MemberID, "version", uv.Version)
		case err != nil:
			b.cfg.Logger.Warn("member subscription unreadable; treating it as a new member", "member", m.MemberID, "err", err)
			sub = protocol.Subscription{InstanceID: m.MemberID, Capacity: 1}
		default:
			jm.version = sub.Version
			if sub.Version > b.cfg.Version {
				// A member of an older release reads only its own fields.
				sub = olderView(sub, b.cfg.Version)
			}
		}
		jm.sub = sub
		mb.members = append(mb.members, jm)
	}
	return mb, topics, nil
}

type joined struct {
	memberID   string
	generation int32
	version    int16
	sub        protocol.Subscription
}

type memberBalancer struct {
	b       *Balancer
	members []joined
	info    kgo.BalanceInfo
}

// SetBalanceInfo implements kgo.GroupMemberBalancerInfo.
func (mb *memberBalancer) SetBalanceInfo(info kgo.BalanceInfo) { mb.info = info }

// Balance implements kgo.GroupMemberBalancer.
func (mb *memberBalancer) Balance(topics map[string]int32) kgo.IntoSyncAssignment {
	state, sources := buildState(mb.b.cfg, mb.members, topics, mb.b.cfg.Logger)
	plan, err := assign.Assign(state, mb.b.cfg.Policy)
	if err != nil {
		// BuildState only builds valid states; if it ever did not, keep
		// everyone running what it has rather than failing the group.
		mb.b.cfg.Logger.Error("assignor rejected the group state; keeping current ownership", "err", err)
		plan = keepAll(state)
	}
	mb.b.cfg.Self.Led(mb.info.Generation, state, plan)
	out := make(syncAssignment, 0, len(mb.members))
	byInstance := map[string]assign.InstancePlan{}
	for _, ip := range plan.Instances {
		byInstance[ip.ID] = ip
	}
	for _, m := range mb.members {
		ip := byInstance[instanceKey(m)]
		version, code := mb.b.negotiate(m.version)
		a := protocol.Assignment{Version: version, LatestSupportedVersion: mb.b.cfg.Version, Error: code, Followup: plan.Followup,
			Active: ids(ip.Active), Standby: ids(ip.Standby), Learner: ids(ip.Learner), Revoked: ids(ip.Revoked)}
		user, err := a.MarshalBinary()
		if err != nil {
			mb.b.cfg.Logger.Error("encoding assignment", "member", m.memberID, "err", err)
		}
		ca := kmsg.NewConsumerMemberAssignment()
		ca.Version = 0
		ca.UserData = user
		parts := map[string][]int32{}
		for _, id := range ip.Active {
			sub, p, perr := topology.ParseTaskID(string(id))
			ok := perr == nil
			if !ok {
				continue
			}
			for _, t := range sources[sub] {
				parts[t] = append(parts[t], p)
			}
		}
		for _, t := range slices.Sorted(maps.Keys(parts)) {
			ps := parts[t]
			slices.Sort(ps)
			ca.Topics = append(ca.Topics, kmsg.ConsumerMemberAssignmentTopic{Topic: t, Partitions: ps})
		}
		out = append(out, kmsg.SyncGroupRequestGroupAssignment{MemberID: m.memberID, MemberAssignment: ca.AppendTo(nil)})
	}
	return out
}

// negotiate is protocol.Negotiate for a member that speaks b's version.
func (b *Balancer) negotiate(memberVersion int16) (int16, protocol.ErrorCode) {
	if memberVersion > b.cfg.Version {
		return b.cfg.Version, protocol.ErrorVersionProbing
	}
	return protocol.Negotiate(memberVersion)
}

// olderView returns what a build that speaks version v reads of sub.
func olderView(sub protocol.Subscription, v int16) protocol.Subscription {
	if v < 2 {
		sub.Loads = nil
	}
	return sub
}

type syncAssignment []kmsg.SyncGroupRequestGroupAssignment

func (s syncAssignment) IntoSyncAssignment() []kmsg.SyncGroupRequestGroupAssignment { return s }

// instanceKey is the assignor's id for a member: its instance id, made
// unique with the member id if two members claim the same instance.
func instanceKey(m joined) string { return m.sub.InstanceID + "#" + m.memberID }

// buildState turns the members' subscriptions into the assignor's input.
// It cleans what a live group can produce but the assignor must not see: a
// task claimed active by two members (a zombie: the newest generation
// wins), tasks the topology no longer has, a task in two roles on one
// member. It returns the state and each subtopology's source topics.
func buildState(cfg Config, members []joined, topics map[string]int32, log *slog.Logger) (assign.State, map[int][]string) {
	state := assign.State{Config: cfg.Assign}
	sources := map[int][]string{}
	known := map[string]bool{}
	stateful := map[string]bool{}
	for _, s := range cfg.Subtopologies {
		sources[s.ID] = s.Sources
		parts := int32(-1)
		for _, t := range s.Sources {
			n, ok := topics[t]
			if !ok {
				log.Warn("source topic has no metadata; its tasks are not assigned this round", "topic", t, "subtopology", s.ID)
				n = 0
			}
			if parts >= 0 && n != parts {
				log.Warn("source topics of a subtopology differ in partitions; using the fewest", "subtopology", s.ID, "topic", t, "partitions", n, "other", parts)
			}
			if parts < 0 || n < parts {
				parts = n
			}
		}
		for p := int32(0); p < max(parts, 0); p++ {
			id := topology.TaskID(s.ID, p)
			known[id] = true
			stateful[id] = s.Stateful
			state.Tasks = append(state.Tasks, assign.Task{ID: assign.TaskID(id), Stateful: s.Stateful, Load: 1})
		}
	}
	claims := make([]Claim, len(members))
	for k, m := range members {
		claims[k] = Claim{Key: instanceKey(m), Generation: m.generation, Sub: m.sub, Active: m.sub.Active, Standby: m.sub.Standby, Learner: m.sub.Learner}
	}
	state.Instances = Instances(claims, known, stateful)
	SetLoads(state.Tasks, claims, state.Instances)
	return state, sources
}

// SetLoads sets the load of each task to what the members report, in
// shares of a worker. A load counts only from the member the task is
// active on (instances are Instances(claims, ...), in the order of
// claims), not from a zombie that claims it too. Tasks nobody reports
// (new, orphaned, or run by a member of version 1) are estimated by
// load.Estimate: their subtopology's mean, else the mean of all reported
// loads, else 1; with no load reported every task weighs 1, as before
// members reported loads.
func SetLoads(tasks []assign.Task, claims []Claim, instances []assign.Instance) {
	reported := map[string]float64{}
	for k, in := range instances {
		for _, id := range in.Active {
			if l, ok := claims[k].Sub.Loads[string(id)]; ok && l > 0 {
				reported[string(id)] = float64(l) * protocol.LoadUnit
			}
		}
	}
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		ids[i] = string(t.ID)
	}
	est := load.Estimate(ids, reported)
	for i := range tasks {
		tasks[i].Load = est[ids[i]]
	}
}

// Claim is a member as the group holds it: its assignor key (instance id
// and member id), the generation it last joined with, its subscription
// and the tasks it claims in each role.
type Claim struct {
	Key                      string
	Generation               int32
	Sub                      protocol.Subscription
	Active, Standby, Learner []string
}

// Instances turns claims into the assignor's instances, by the rules a
// live group needs: a task claimed active by two members stays with the
// newest generation (the other is a zombie; at equal generations the
// lower key), tasks not in known are dropped, a task claimed in two roles
// by one member keeps the first of active, learner, standby, and only
// stateful tasks keep learner, standby and lag claims.
func Instances(claims []Claim, known, stateful map[string]bool) []assign.Instance {
	owner := map[string]int{}
	for k, c := range claims {
		for _, id := range c.Active {
			if o, ok := owner[id]; !ok || c.Generation > claims[o].Generation ||
				(c.Generation == claims[o].Generation && c.Key < claims[o].Key) {
				owner[id] = k
			}
		}
	}
	var out []assign.Instance
	for k, c := range claims {
		in := assign.Instance{ID: c.Key, Capacity: int(max(c.Sub.Capacity, 1)), Rack: c.Sub.Rack, Leaving: c.Sub.Leaving, Lag: map[assign.TaskID]int64{}}
		seen := map[string]bool{}
		for _, id := range c.Active {
			if known[id] && owner[id] == k && !seen[id] {
				seen[id] = true
				in.Active = append(in.Active, assign.TaskID(id))
			}
		}
		for _, id := range c.Learner {
			if known[id] && stateful[id] && !seen[id] {
				seen[id] = true
				in.Learner = append(in.Learner, assign.TaskID(id))
			}
		}
		for _, id := range c.Standby {
			if known[id] && stateful[id] && !seen[id] {
				seen[id] = true
				in.Standby = append(in.Standby, assign.TaskID(id))
			}
		}
		for id, lag := range c.Sub.Lags {
			if known[id] && stateful[id] && lag >= 0 {
				in.Lag[assign.TaskID(id)] = lag
			}
		}
		out = append(out, in)
	}
	return out
}

// keepAll is the plan that changes nothing.
func keepAll(s assign.State) assign.Plan {
	var p assign.Plan
	for _, in := range s.Instances {
		p.Instances = append(p.Instances, assign.InstancePlan{ID: in.ID, Active: in.Active, Standby: in.Standby, Learner: in.Learner})
	}
	return p
}

// InstanceOf returns the instance id part of an assignor instance key.
func InstanceOf(key string) string {
	id, _, _ := strings.Cut(key, "#")
	return id
}

func ids(list []assign.TaskID) []string {
	out := make([]string, len(list))
	for i, id := range list {
		out[i] = string(id)
	}
	return out
}

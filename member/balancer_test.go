package member

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/baton-streams/baton/assign"
	"github.com/baton-streams/baton/protocol"
	"github.com/baton-streams/baton/topology"
)

// fakeSelf records what the balancer hands the instance.
type fakeSelf struct {
	sub      protocol.Subscription
	assigned []protocol.Assignment
	led      []assign.Plan
	states   []assign.State
}

func (f *fakeSelf) Subscription(map[string][]int32) protocol.Subscription { return f.sub }
func (f *fakeSelf) Assigned(a protocol.Assignment)                        { f.assigned = append(f.assigned, a) }
func (f *fakeSelf) Led(_ int32, st assign.State, p assign.Plan) {
	f.led = append(f.led, p)
	f.states = append(f.states, st)
}

func testBalancer() (*Balancer, *fakeSelf) {
	self := &fakeSelf{}
	return NewBalancer(Config{
		Subtopologies: []Subtopology{{ID: 0, Sources: []string{"in"}}, {ID: 1, Sources: []string{"rep"}, Stateful: true}},
		Assign:        assign.Config{MaxLearners: 2, AcceptableLag: 10},
		Policy:        assign.Smooth,
		Self:          self,
	}), self
}

// member builds a group member whose metadata carries sub, or raw user
// data when raw is not nil.
func member(t *testing.T, id string, sub protocol.Subscription, raw []byte, generation int32) kmsg.JoinGroupResponseMember {
	t.Helper()
	user := raw
	if user == nil {
		var err error
		if user, err = sub.MarshalBinary(); err != nil {
			t.Fatal(err)
		}
	}
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 2
	meta.Topics = []string{"in", "rep"}
	meta.UserData = user
	meta.Generation = generation
	return kmsg.JoinGroupResponseMember{MemberID: id, ProtocolMetadata: meta.AppendTo(nil)}
}

// balance runs a whole leader round and decodes every member's assignment.
func balance(t *testing.T, b *Balancer, members []kmsg.JoinGroupResponseMember) map[string]decoded {
	t.Helper()
	mb, topics, err := b.MemberBalancer(members)
	if err != nil {
		t.Fatalf("MemberBalancer: %v", err)
	}
	for _, want := range []string{"in", "rep"} {
		if _, ok := topics[want]; !ok {
			t.Errorf("topics %v lack %s", topics, want)
		}
	}
	out := map[string]decoded{}
	for _, sa := range mb.Balance(map[string]int32{"in": 2, "rep": 2}).IntoSyncAssignment() {
		parts, err := b.ParseSyncAssignment(sa.MemberAssignment)
		if err != nil {
			t.Fatalf("member %s: %v", sa.MemberID, err)
		}
		self := b.cfg.Self.(*fakeSelf)
		out[sa.MemberID] = decoded{parts: parts, a: self.assigned[len(self.assigned)-1]}
	}
	return out
}

type decoded struct {
	parts map[string][]int32
	a     protocol.Assignment
}

func TestBalanceNewGroup(t *testing.T) {
	b, self := testBalancer()
	got := balance(t, b, []kmsg.JoinGroupResponseMember{
		member(t, "m1", protocol.Subscription{InstanceID: "a", Capacity: 1}, nil, -1),
		member(t, "m2", protocol.Subscription{InstanceID: "b", Capacity: 1}, nil, -1),
	})
	if len(self.led) != 1 {
		t.Fatalf("Led called %d times", len(self.led))
	}
	// Every task active somewhere, partitions match the actives.
	seen := map[string]bool{}
	for id, d := range got {
		for _, task := range d.a.Active {
			seen[task] = true
			sub, p, _ := topology.ParseTaskID(task)
			topic := []string{"in", "rep"}[sub]
			if !slices.Contains(d.parts[topic], p) {
				t.Errorf("member %s active %s without partition %s[%d]: %v", id, task, topic, p, d.parts)
			}
		}
	}
	if len(seen) != 4 {
		t.Errorf("tasks assigned: %v, want 0_0 0_1 1_0 1_1", seen)
	}
}

func TestBalanceGarbledMemberIsNew(t *testing.T) {
	b, _ := testBalancer()
	bad := member(t, "m2", protocol.Subscription{}, []byte{0xff, 0x01, 0x02}, 3)
	notConsumer := kmsg.JoinGroupResponseMember{MemberID: "m3", ProtocolMetadata: []byte{1}}
	got := balance(t, b, []kmsg.JoinGroupResponseMember{
		member(t, "m1", protocol.Subscription{InstanceID: "a", Capacity: 1, Active: []string{"0_0", "0_1", "1_0", "1_1"}, Lags: map[string]int64{"1_0": 0, "1_1": 0}}, nil, 3),
		bad, notConsumer,
	})
	if len(got) != 3 {
		t.Fatalf("want an assignment for every member, got %d", len(got))
	}
	// The garbled members are treated as new: they get learners or
	// stateless tasks moved to them, never a cold stateful active.
	for _, id := range []string{"m2", "m3"} {
		for _, task := range got[id].a.Active {
			if task[0] == '1' {
				t.Errorf("member %s got stateful %s cold", id, task)
			}
		}
	}
}

func TestBalanceNewerVersionAnsweredAtOurs(t *testing.T) {
	b, _ := testBalancer()
	sub := protocol.Subscription{InstanceID: "b", Capacity: 1}
	data, err := sub.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	future := protocol.CurrentVersion + 1
	data[0], data[1], data[2], data[3] = byte(future>>8), byte(future), byte(future>>8), byte(future)
	data = append(data, 0xca, 0xfe) // fields only the future knows
	got := balance(t, b, []kmsg.JoinGroupResponseMember{
		member(t, "m1", protocol.Subscription{InstanceID: "a", Capacity: 1}, nil, -1),
		member(t, "m2", protocol.Subscription{}, data, -1),
	})
	a := got["m2"].a
	if a.Error != protocol.ErrorVersionProbing || a.Version != protocol.CurrentVersion {
		t.Errorf("newer member answered with version %d error %v, want version %d and version probing", a.Version, a.Error, protocol.CurrentVersion)
	}
	if len(got["m2"].a.Active)+len(got["m1"].a.Active) != 4 {
		t.Errorf("tasks lost when a member is newer: %+v", got)
	}
}

func TestBalanceZombieNewestGenerationWins(t *testing.T) {
	b, _ := testBalancer()
	got := balance(t, b, []kmsg.JoinGroupResponseMember{
		member(t, "old", protocol.Subscription{InstanceID: "a", Capacity: 1, Active: []string{"1_0"}, Lags: map[string]int64{"1_0": 0}}, nil, 4),
		member(t, "new", protocol.Subscription{InstanceID: "b", Capacity: 1, Active: []string{"1_0"}, Lags: map[string]int64{"1_0": 0}}, nil, 5),
	})
	if !slices.Contains(got["new"].a.Active, "1_0") || slices.Contains(got["old"].a.Active, "1_0") {
		t.Errorf("task claimed twice: want it kept by the newest generation, got old=%v new=%v", got["old"].a.Active, got["new"].a.Active)
	}
}

// TestProtocolNamePerPolicy: every policy joins with its own group
// protocol name, so the brokers refuse a member whose policy differs from
// the group's instead of letting an eager and a cooperative member share
// the group; the name a balancer reports is its policy's, IsCooperative
// matches it, and PolicyOf reads each name back.
func TestProtocolNamePerPolicy(t *testing.T) {
	want := map[assign.Policy]string{assign.Smooth: "baton-smooth", assign.Cooperative: "baton-cooperative", assign.Eager: "baton-eager"}
	if len(want) != len(assign.Policies) {
		t.Fatalf("assign.Policies = %v: this test knows %d policies", assign.Policies, len(want))
	}
	seen := map[string]assign.Policy{}
	for _, p := range assign.Policies {
		name := ProtocolName(p)
		if name != want[p] {
			t.Errorf("ProtocolName(%s) = %q, want %q", p, name, want[p])
		}
		if other, dup := seen[name]; dup {
			t.Errorf("policies %s and %s share the protocol name %q", other, p, name)
		}
		seen[name] = p
		b := NewBalancer(Config{Policy: p, Self: &fakeSelf{}})
		if got := b.ProtocolName(); got != name {
			t.Errorf("Balancer with policy %s: ProtocolName() = %q, want %q", p, got, name)
		}
		if got, want := b.IsCooperative(), p != assign.Eager; got != want {
			t.Errorf("Balancer with policy %s: IsCooperative() = %v, want %v", p, got, want)
		}
		if got, ok := PolicyOf(name); !ok || got != p {
			t.Errorf("PolicyOf(%q) = %q, %v; want %q, true", name, got, ok, p)
		}
	}
	if got := NewBalancer(Config{Self: &fakeSelf{}}).ProtocolName(); got != "baton-smooth" {
		t.Errorf("Balancer with no policy: ProtocolName() = %q, want the default's, baton-smooth", got)
	}
	for _, name := range []string{"baton", "baton-", "baton-probing", "cooperative-sticky", "range", "smooth", ""} {
		if p, ok := PolicyOf(name); ok {
			t.Errorf("PolicyOf(%q) = %q, true; want not a baton policy", name, p)
		}
	}
}

func TestJoinGroupMetadataRoundTrip(t *testing.T) {
	b, self := testBalancer()
	self.sub = protocol.Subscription{InstanceID: "a", Capacity: 2, Standby: []string{"1_1"}, Lags: map[string]int64{"1_1": 7}}
	data := b.JoinGroupMetadata([]string{"in", "rep"}, map[string][]int32{"in": {0}}, 9)
	var meta kmsg.ConsumerMemberMetadata
	if err := meta.ReadFrom(data); err != nil {
		t.Fatal(err)
	}
	sub, err := protocol.DecodeSubscription(meta.UserData)
	if err != nil {
		t.Fatal(err)
	}
	if sub.InstanceID != "a" || sub.Capacity != 2 || sub.Lags["1_1"] != 7 || meta.Generation != 9 || len(meta.OwnedPartitions) != 1 {
		t.Errorf("round trip lost fields: meta %+v sub %+v", meta, sub)
	}
}

func TestParseSyncAssignmentGarbled(t *testing.T) {
	b, _ := testBalancer()
	if _, err := b.ParseSyncAssignment([]byte{0xff}); err == nil {
		t.Error("garbled consumer assignment accepted")
	}
	ca := kmsg.NewConsumerMemberAssignment()
	ca.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "in", Partitions: []int32{1}}}
	ca.UserData = []byte{0xde, 0xad}
	parts, err := b.ParseSyncAssignment(ca.AppendTo(nil))
	if err != nil || !slices.Equal(parts["in"], []int32{1}) {
		t.Errorf("bad baton user data must still yield the partitions: %v %v", parts, err)
	}
}

// FuzzMemberMetadata: whatever bytes members send, the leader neither
// panics nor leaves a member without an assignment.
func FuzzMemberMetadata(f *testing.F) {
	sub, _ := protocol.Subscription{InstanceID: "a", Capacity: 1, Active: []string{"1_0"}, Lags: map[string]int64{"1_0": 3}}.MarshalBinary()
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 2
	meta.UserData = sub
	f.Add(meta.AppendTo(nil))
	f.Add([]byte{0, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		b, _ := testBalancer()
		members := []kmsg.JoinGroupResponseMember{{MemberID: "x", ProtocolMetadata: data}, {MemberID: "y", ProtocolMetadata: data}}
		mb, _, err := b.MemberBalancer(members)
		if err != nil {
			t.Fatal(err)
		}
		out := mb.Balance(map[string]int32{"in": 3, "rep": 3}).IntoSyncAssignment()
		if len(out) != 2 {
			t.Fatalf("%d assignments for 2 members", len(out))
		}
	})
}

package member

import (
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/baton-streams/baton/protocol"
)

// taskLoads returns the loads of the leader's last input, by task.
func taskLoads(self *fakeSelf) map[string]float64 {
	out := map[string]float64{}
	for _, t := range self.states[len(self.states)-1].Tasks {
		out[string(t.ID)] = t.Load
	}
	return out
}

func checkLoads(t *testing.T, got, want map[string]float64) {
	t.Helper()
	for id, w := range want {
		if math.Abs(got[id]-w) > 1e-9 {
			t.Errorf("task %s: load %v, want %v (all: %v)", id, got[id], w, got)
		}
	}
}

// TestBalanceUsesReportedLoads: the leader plans with the loads members
// report for the tasks they run, estimates the tasks a version 1 member
// runs from their subtopology's reported loads, and ignores a load a
// zombie reports for a task another member runs.
func TestBalanceUsesReportedLoads(t *testing.T) {
	b, self := testBalancer()
	v2 := protocol.Subscription{InstanceID: "a", Capacity: 1, Active: []string{"0_0", "1_0"}, Lags: map[string]int64{"1_0": 0},
		Loads: map[string]int32{"0_0": 3000, "1_0": 1000}}
	v1 := protocol.Subscription{Version: 1, InstanceID: "b", Capacity: 1, Active: []string{"0_1", "1_1"}, Lags: map[string]int64{"1_1": 0},
		Loads: map[string]int32{"0_1": 9000}} // version 1 cannot carry it
	zombie := protocol.Subscription{InstanceID: "c", Capacity: 1, Active: []string{"0_0"}, Loads: map[string]int32{"0_0": 9999}}
	got := balance(t, b, []kmsg.JoinGroupResponseMember{
		member(t, "m1", v2, nil, 5), member(t, "m2", v1, nil, 5), member(t, "m3", zombie, nil, 4),
	})
	checkLoads(t, taskLoads(self), map[string]float64{"0_0": 0.3, "1_0": 0.1, "0_1": 0.3, "1_1": 0.1})
	// Each member is answered at its own version.
	if a := got["m1"].a; a.Version != 2 || a.Error != protocol.ErrorNone {
		t.Errorf("version 2 member answered at version %d, error %v", a.Version, a.Error)
	}
	if a := got["m2"].a; a.Version != 1 || a.Error != protocol.ErrorNone {
		t.Errorf("version 1 member answered at version %d, error %v", a.Version, a.Error)
	}
}

// TestBalanceWithoutLoadsWeighsTasksAlike: a group that reports no loads
// (all of version 1, or nothing measured yet) is planned as before loads
// existed, every task of load 1.
func TestBalanceWithoutLoadsWeighsTasksAlike(t *testing.T) {
	b, self := testBalancer()
	balance(t, b, []kmsg.JoinGroupResponseMember{
		member(t, "m1", protocol.Subscription{Version: 1, InstanceID: "a", Capacity: 1, Active: []string{"0_0", "1_0"}, Lags: map[string]int64{"1_0": 0}}, nil, 5),
		member(t, "m2", protocol.Subscription{InstanceID: "b", Capacity: 1}, nil, 5),
	})
	checkLoads(t, taskLoads(self), map[string]float64{"0_0": 1, "0_1": 1, "1_0": 1, "1_1": 1})
}

// TestOlderReleaseMember: a balancer of Version 1 stands for a member of
// the release before loads: it joins with a version 1 subscription
// without loads and, leading, plans without the loads of newer members
// and answers them at version 1 with version probing.
func TestOlderReleaseMember(t *testing.T) {
	b, self := testBalancer()
	b.cfg.Version = 1
	self.sub = protocol.Subscription{InstanceID: "a", Capacity: 1, Active: []string{"0_0"}, Loads: map[string]int32{"0_0": 500}}
	var meta kmsg.ConsumerMemberMetadata
	if err := meta.ReadFrom(b.JoinGroupMetadata([]string{"in"}, nil, 1)); err != nil {
		t.Fatal(err)
	}
	sub, err := protocol.DecodeSubscription(meta.UserData)
	if err != nil || sub.Version != 1 || sub.LatestSupportedVersion != 1 || sub.Loads != nil {
		t.Fatalf("an older release's subscription: %+v, %v; want version 1 without loads", sub, err)
	}

	got := balance(t, b, []kmsg.JoinGroupResponseMember{
		member(t, "m1", protocol.Subscription{InstanceID: "a", Capacity: 1, Active: []string{"0_0", "1_0"}, Lags: map[string]int64{"1_0": 0},
			Loads: map[string]int32{"0_0": 3000, "1_0": 1000}}, nil, 5),
		member(t, "m2", protocol.Subscription{Version: 1, InstanceID: "b", Capacity: 1}, nil, 5),
	})
	checkLoads(t, taskLoads(self), map[string]float64{"0_0": 1, "0_1": 1, "1_0": 1, "1_1": 1})
	if a := got["m1"].a; a.Version != 1 || a.LatestSupportedVersion != 1 || a.Error != protocol.ErrorVersionProbing {
		t.Errorf("newer member answered %+v; want version 1, latest 1, version probing", a)
	}
	if a := got["m2"].a; a.Version != 1 || a.Error != protocol.ErrorNone {
		t.Errorf("member of its own version answered %+v", a)
	}
	var tasks int
	for _, d := range got {
		tasks += len(d.a.Active)
	}
	if tasks != 4 {
		t.Errorf("%d tasks assigned in a mixed group, want 4: %+v", tasks, got)
	}
}

// TestJoinReportsLoads: a member joins with the loads Config.Loads gives
// for its active tasks.
func TestJoinReportsLoads(t *testing.T) {
	b, self := testBalancer()
	var asked []string
	b.cfg.Loads = func(active []string) map[string]int32 {
		asked = active
		return map[string]int32{"0_0": 700}
	}
	self.sub = protocol.Subscription{InstanceID: "a", Capacity: 1, Active: []string{"0_0"}}
	var meta kmsg.ConsumerMemberMetadata
	if err := meta.ReadFrom(b.JoinGroupMetadata([]string{"in"}, nil, 1)); err != nil {
		t.Fatal(err)
	}
	sub, err := protocol.DecodeSubscription(meta.UserData)
	if err != nil || sub.Loads["0_0"] != 700 || len(asked) != 1 || asked[0] != "0_0" {
		t.Fatalf("joined with %+v, %v (loads asked for %v); want 0_0 at 700", sub, err, asked)
	}
}

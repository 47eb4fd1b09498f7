package assign

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// checkState: A runs 1_0, 1_1 and 0_0; B runs 1_2 and 0_1 and has a
// caught-up copy of 1_0; C is new, with an old copy of 1_1 far behind.
// 0_* are stateless, 1_* stateful; acceptable lag 10, one learner at most,
// no standbys.
func checkState() State {
	return State{
		Config: Config{Standbys: 0, MaxLearners: 1, AcceptableLag: 10},
		Tasks: []Task{{ID: "0_0", Load: 1}, {ID: "0_1", Load: 1},
			{ID: "1_0", Stateful: true, Load: 1}, {ID: "1_1", Stateful: true, Load: 1}, {ID: "1_2", Stateful: true, Load: 1}},
		Instances: []Instance{
			{ID: "A", Capacity: 1, Active: []TaskID{"0_0", "1_0", "1_1"}, Lag: map[TaskID]int64{"1_0": 0, "1_1": 0}},
			{ID: "B", Capacity: 1, Active: []TaskID{"0_1", "1_2"}, Lag: map[TaskID]int64{"1_0": 5, "1_2": 0}},
			{ID: "C", Capacity: 1, Lag: map[TaskID]int64{"1_1": 500}},
		},
	}
}

// keep is the plan that changes nothing in checkState.
func keep() Plan {
	return Plan{Instances: []InstancePlan{
		{ID: "A", Active: []TaskID{"0_0", "1_0", "1_1"}},
		{ID: "B", Active: []TaskID{"0_1", "1_2"}},
		{ID: "C"},
	}}
}

// TestCheckRejects gives Check, for each guarantee of one round, plans
// that break it; each must be rejected, naming that guarantee. The plans
// the policies make pass Check in the other tests of this package; here
// the unchanged plan and the smooth plan of the same state are the
// controls.
func TestCheckRejects(t *testing.T) {
	type edit func(s *State, p *Plan)
	inst := func(p *Plan, id string) *InstancePlan {
		for k := range p.Instances {
			if p.Instances[k].ID == id {
				return &p.Instances[k]
			}
		}
		panic("no instance " + id)
	}
	cases := []struct {
		name      string
		guarantee int
		edit      edit
	}{
		{"an instance missing", 0, func(s *State, p *Plan) { p.Instances = p.Instances[:2] }},
		{"instances out of id order", 0, func(s *State, p *Plan) { p.Instances[0], p.Instances[1] = p.Instances[1], p.Instances[0] }},
		{"a list not sorted", 0, func(s *State, p *Plan) { inst(p, "A").Active = []TaskID{"1_0", "0_0", "1_1"} }},
		{"an unknown task", 0, func(s *State, p *Plan) { inst(p, "C").Standby = []TaskID{"9_9"} }},
		{"active on two instances", 1, func(s *State, p *Plan) { inst(p, "C").Active = []TaskID{"1_2"} }},
		{"an orphan left unassigned", 1, func(s *State, p *Plan) {
			s.Instances[1].Active = []TaskID{"0_1"} // 1_2 has no owner
			inst(p, "B").Active = []TaskID{"0_1"}
		}},
		{"two roles on one instance", 2, func(s *State, p *Plan) { inst(p, "A").Standby = []TaskID{"1_0"} }},
		{"revoking a task owned elsewhere", 3, func(s *State, p *Plan) {
			inst(p, "A").Revoked = []TaskID{"1_2"}
			p.Followup = true
		}},
		{"a move without a revoke", 3, func(s *State, p *Plan) {
			inst(p, "A").Active = []TaskID{"1_0", "1_1"}
			inst(p, "C").Active = []TaskID{"0_0"}
		}},
		{"revoked and active in one round", 3, func(s *State, p *Plan) {
			inst(p, "A").Active = []TaskID{"1_0", "1_1"}
			inst(p, "A").Revoked = []TaskID{"0_0"}
			inst(p, "C").Active = []TaskID{"0_0"}
			p.Followup = true
		}},
		{"a revoke without a follow-up round", 3, func(s *State, p *Plan) {
			inst(p, "A").Active = []TaskID{"1_0", "1_1"}
			inst(p, "A").Revoked = []TaskID{"0_0"}
		}},
		{"a cold handover", 4, func(s *State, p *Plan) {
			inst(p, "A").Active = []TaskID{"0_0", "1_0"}
			inst(p, "A").Revoked = []TaskID{"1_1"} // only C has a copy, 500 behind
			p.Followup = true
		}},
		{"an orphan to a copy far behind", 5, func(s *State, p *Plan) {
			s.Instances[0].Active = []TaskID{"0_0", "1_0"} // 1_1 orphaned; A's copy is at lag 0
			inst(p, "A").Active = []TaskID{"0_0", "1_0"}
			inst(p, "C").Active = []TaskID{"1_1"}
		}},
		{"an orphan past its warm learner", 5, func(s *State, p *Plan) {
			s.Instances[0].Active = []TaskID{"0_0", "1_1"} // 1_0 orphaned
			s.Instances[1].Learner = []TaskID{"1_0"}       // B's copy (lag 5) is a learner
			inst(p, "A").Active = []TaskID{"0_0", "1_0", "1_1"}
		}},
		{"a learner for a stateless task", 6, func(s *State, p *Plan) { inst(p, "C").Learner = []TaskID{"0_0"} }},
		{"a learner with no active to follow", 7, func(s *State, p *Plan) {
			inst(p, "A").Active = []TaskID{"0_0", "1_1"}
			inst(p, "A").Revoked = []TaskID{"1_0"} // B is caught up: no cold handover
			inst(p, "C").Learner = []TaskID{"1_0"}
			p.Followup = true
		}},
		{"two learners for a task", 7, func(s *State, p *Plan) {
			s.Config.MaxLearners = 2
			inst(p, "B").Learner = []TaskID{"1_1"}
			inst(p, "C").Learner = []TaskID{"1_1"}
		}},
		{"a learner dropped before it was ready", 7, func(s *State, p *Plan) {
			s.Instances[2].Learner = []TaskID{"1_1"} // lag 500
		}},
		{"more learners than max_learners", 7, func(s *State, p *Plan) {
			inst(p, "C").Learner = []TaskID{"1_0", "1_1"}
		}},
		{"more standbys than configured", 8, func(s *State, p *Plan) { inst(p, "C").Standby = []TaskID{"1_1"} }},
		{"a new task for a leaving instance", 9, func(s *State, p *Plan) {
			s.Instances[2].Leaving = true
			s.Config.Standbys = 1
			inst(p, "C").Standby = []TaskID{"1_1"}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, p := checkState(), keep()
			c.edit(&s, &p)
			err := Check(s, p)
			if !errors.Is(err, ErrGuarantee) || !strings.Contains(err.Error(), fmt.Sprintf("violated %d:", c.guarantee)) {
				t.Fatalf("Check = %v, want a violation of guarantee %d", err, c.guarantee)
			}
			t.Log(err)
		})
	}
	if err := Check(checkState(), keep()); err != nil {
		t.Errorf("the unchanged plan: %v", err)
	}
	plan, err := Assign(checkState(), Smooth)
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(checkState(), plan); err != nil {
		t.Errorf("the smooth plan: %v", err)
	}
}

// TestCheckInvalidState: a state the assignor refuses is reported as
// invalid, not as a plan that breaks a guarantee.
func TestCheckInvalidState(t *testing.T) {
	s := checkState()
	s.Instances[0].Capacity = 0
	if err := Check(s, keep()); !errors.Is(err, ErrInvalidState) {
		t.Errorf("Check = %v, want ErrInvalidState", err)
	}
}

// TestCheckNeedlessRevoke: a task kept on its owner is not revoked. Each
// state is checked with hand-made plans; every revoke must have a reason
// in the round (the instance leaves, a ready learner takes the task, or
// the balance moves it off an instance above its share), and no instance
// gives up more than its excess. The smooth plan of each state is the
// control.
func TestCheckNeedlessRevoke(t *testing.T) {
	ids := func(s ...TaskID) []TaskID { return s }
	stateless := func(loads map[TaskID]float64) []Task {
		var ts []Task
		for _, id := range []TaskID{"0_0", "0_1", "0_2", "0_3"} {
			if l, ok := loads[id]; ok {
				ts = append(ts, Task{ID: id, Load: l})
			}
		}
		return ts
	}
	equal := map[TaskID]float64{"0_0": 1, "0_1": 1, "0_2": 1, "0_3": 1}
	cfg := Config{MaxLearners: 1, AcceptableLag: 10}
	// atShare: A and B each run two of four stateless tasks: in line.
	atShare := State{Config: cfg, Tasks: stateless(equal), Instances: []Instance{
		{ID: "A", Capacity: 1, Active: ids("0_0", "0_1")},
		{ID: "B", Capacity: 1, Active: ids("0_2", "0_3")},
	}}
	// joined: A runs all four, B has just joined: A is two above its share.
	joined := State{Config: cfg, Tasks: stateless(equal), Instances: []Instance{
		{ID: "A", Capacity: 1, Active: ids("0_0", "0_1", "0_2", "0_3")},
		{ID: "B", Capacity: 1},
	}}
	// leaving: as atShare, but A is leaving.
	leaving := atShare
	leaving.Instances = []Instance{
		{ID: "A", Capacity: 1, Leaving: true, Active: ids("0_0", "0_1")},
		{ID: "B", Capacity: 1, Active: ids("0_2", "0_3")},
	}
	// stateful: A and B each run one stateful task, at their share; B
	// holds a caught-up standby of A's, C a ready learner of it.
	stateful := State{Config: Config{MaxLearners: 1, AcceptableLag: 10, Standbys: 1},
		Tasks: []Task{{ID: "1_0", Stateful: true, Load: 1}, {ID: "1_1", Stateful: true, Load: 1}, {ID: "1_2", Stateful: true, Load: 1}},
		Instances: []Instance{
			{ID: "A", Capacity: 1, Active: ids("1_0"), Lag: map[TaskID]int64{"1_0": 0}},
			{ID: "B", Capacity: 1, Active: ids("1_1"), Standby: ids("1_0"), Lag: map[TaskID]int64{"1_0": 3, "1_1": 0}},
			{ID: "C", Capacity: 1, Active: ids("1_2"), Lag: map[TaskID]int64{"1_2": 0}},
		}}
	withLearner := stateful
	withLearner.Instances = slices.Clone(stateful.Instances)
	withLearner.Instances[1].Standby = nil
	withLearner.Instances[1].Learner = ids("1_0") // ready: lag 3
	// weighted: A runs three tasks of load 1, B one of load 0.5: A is
	// more than a largest task above its share (1.75).
	weighted := State{Config: cfg, Tasks: stateless(map[TaskID]float64{"0_0": 1, "0_1": 1, "0_2": 1, "0_3": 0.5}), Instances: []Instance{
		{ID: "A", Capacity: 1, Active: ids("0_0", "0_1", "0_2")},
		{ID: "B", Capacity: 1, Active: ids("0_3")},
	}}
	// short: seven stateless tasks on A (5), B (2) and C (new): A is two
	// over its ceiling (3), C two under its floor (2); two moves do.
	var seven []Task
	for k := range 7 {
		seven = append(seven, Task{ID: TaskID(fmt.Sprintf("0_%d", k)), Load: 1})
	}
	short := State{Config: cfg, Tasks: seven, Instances: []Instance{
		{ID: "A", Capacity: 1, Active: ids("0_0", "0_1", "0_2", "0_3", "0_4")},
		{ID: "B", Capacity: 1, Active: ids("0_5", "0_6")},
		{ID: "C", Capacity: 1},
	}}
	// warming: A runs four stateful tasks (2_*) and six stateless ones,
	// B has just joined. While B's learners warm, the stateless tasks
	// stand in: the level of total load per instance is 5, so A's
	// stateless share is 1 and B's 5 (its own share of the bucket is 3).
	warmTasks := []Task{{ID: "2_0", Stateful: true, Load: 1}, {ID: "2_1", Stateful: true, Load: 1}, {ID: "2_2", Stateful: true, Load: 1}, {ID: "2_3", Stateful: true, Load: 1}}
	for k := range 6 {
		warmTasks = append(warmTasks, Task{ID: TaskID(fmt.Sprintf("0_%d", k)), Load: 1})
	}
	warming := State{Config: Config{MaxLearners: 2, AcceptableLag: 10}, Tasks: warmTasks, Instances: []Instance{
		{ID: "A", Capacity: 1, Active: ids("0_0", "0_1", "0_2", "0_3", "0_4", "0_5", "2_0", "2_1", "2_2", "2_3"),
			Lag: map[TaskID]int64{"2_0": 0, "2_1": 0, "2_2": 0, "2_3": 0}},
		{ID: "B", Capacity: 1},
	}}
	separate := warming
	separate.Config.SeparateBuckets = true
	plan := func(a, b InstancePlan, more ...InstancePlan) Plan {
		a.ID, b.ID = "A", "B"
		p := Plan{Instances: append([]InstancePlan{a, b}, more...)}
		for _, ip := range p.Instances {
			p.Followup = p.Followup || len(ip.Revoked) > 0
		}
		return p
	}
	cases := []struct {
		name     string
		state    State
		plan     Plan
		needless bool
	}{
		{"nothing revoked", atShare, plan(InstancePlan{Active: ids("0_0", "0_1")}, InstancePlan{Active: ids("0_2", "0_3")}), false},
		{"an unmoved stateless task revoked at its share", atShare,
			plan(InstancePlan{Active: ids("0_1"), Revoked: ids("0_0")}, InstancePlan{Active: ids("0_2", "0_3")}), true},
		{"every stateless task revoked", atShare,
			plan(InstancePlan{Revoked: ids("0_0", "0_1")}, InstancePlan{Revoked: ids("0_2", "0_3")}), true},
		{"over its share: its excess revoked", joined,
			plan(InstancePlan{Active: ids("0_2", "0_3"), Revoked: ids("0_0", "0_1")}, InstancePlan{}), false},
		{"over its share: one more than its excess revoked", joined,
			plan(InstancePlan{Active: ids("0_3"), Revoked: ids("0_0", "0_1", "0_2")}, InstancePlan{}), true},
		{"the moves the group needs", short,
			plan(InstancePlan{Active: ids("0_2", "0_3", "0_4"), Revoked: ids("0_0", "0_1")}, InstancePlan{Active: ids("0_5", "0_6")}, InstancePlan{ID: "C"}), false},
		{"a move more than the group needs", short,
			plan(InstancePlan{Active: ids("0_3", "0_4"), Revoked: ids("0_0", "0_1", "0_2")}, InstancePlan{Active: ids("0_5", "0_6")}, InstancePlan{ID: "C"}), true},
		{"leaving: everything revoked", leaving,
			plan(InstancePlan{Revoked: ids("0_0", "0_1")}, InstancePlan{Active: ids("0_2", "0_3")}), false},
		{"at its share, revoked with only a caught-up standby elsewhere", stateful,
			plan(InstancePlan{Revoked: ids("1_0")}, InstancePlan{Active: ids("1_1")}, InstancePlan{ID: "C", Active: ids("1_2")}), true},
		{"at its share, revoked for its ready learner", withLearner,
			plan(InstancePlan{Revoked: ids("1_0")}, InstancePlan{Active: ids("1_1")}, InstancePlan{ID: "C", Active: ids("1_2")}), false},
		{"unequal loads: over its share, a task revoked", weighted,
			plan(InstancePlan{Active: ids("0_1", "0_2"), Revoked: ids("0_0")}, InstancePlan{Active: ids("0_3")}), false},
		{"unequal loads: over its share, everything revoked", weighted,
			plan(InstancePlan{Revoked: ids("0_0", "0_1", "0_2")}, InstancePlan{Active: ids("0_3")}), true},
		{"warm-up: stateless tasks stand in for the stateful ones", warming,
			plan(InstancePlan{Active: ids("0_5", "2_0", "2_1", "2_2", "2_3"), Revoked: ids("0_0", "0_1", "0_2", "0_3", "0_4")}, InstancePlan{Learner: ids("2_0", "2_1")}), false},
		{"warm-up: one more than the level asks", warming,
			plan(InstancePlan{Active: ids("2_0", "2_1", "2_2", "2_3"), Revoked: ids("0_0", "0_1", "0_2", "0_3", "0_4", "0_5")}, InstancePlan{Learner: ids("2_0", "2_1")}), true},
		{"no warm-up: the stand-in's revokes", warming,
			plan(InstancePlan{Active: ids("0_5", "2_0", "2_1", "2_2", "2_3"), Revoked: ids("0_0", "0_1", "0_2", "0_3", "0_4")}, InstancePlan{}), true},
		{"separate_buckets: the stand-in's revokes", separate,
			plan(InstancePlan{Active: ids("0_5", "2_0", "2_1", "2_2", "2_3"), Revoked: ids("0_0", "0_1", "0_2", "0_3", "0_4")}, InstancePlan{Learner: ids("2_0", "2_1")}), true},
		{"separate_buckets: the bucket's own moves", separate,
			plan(InstancePlan{Active: ids("0_3", "0_4", "0_5", "2_0", "2_1", "2_2", "2_3"), Revoked: ids("0_0", "0_1", "0_2")}, InstancePlan{Learner: ids("2_0", "2_1")}), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Check(c.state, c.plan)
			switch {
			case c.needless && (!errors.Is(err, ErrGuarantee) || !strings.Contains(err.Error(), "violated 3: needless revoke")):
				t.Fatalf("Check = %v, want a needless revoke (guarantee 3)", err)
			case !c.needless && err != nil:
				t.Fatalf("Check = %v, want nil", err)
			}
			if err != nil {
				t.Log(err)
			}
		})
	}
	for _, s := range []State{atShare, joined, short, leaving, stateful, withLearner, weighted, warming, separate} {
		p, err := Assign(s, Smooth)
		if err != nil {
			t.Fatal(err)
		}
		if err := Check(s, p); err != nil {
			t.Errorf("the smooth plan: %v\n%s", err, table(p))
		}
	}
}

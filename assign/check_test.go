package assign

import (
	"errors"
	"fmt"
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

package sim

import (
	"flag"
	"strings"
	"testing"

	"github.com/baton-streams/baton/assign"
)

var chaosRuns = flag.Int("chaos.runs", 60, "random scenarios per policy in TestChaos")
var chaosSeed = flag.Uint64("chaos.seed", 1, "first seed of TestChaos")

// TestChaos runs random scenarios under smooth and probing with every
// guarantee checked at every round and convergence at the end. A failure
// names its seed; replay it with `baton sim --chaos --seed N --runs 1`.
func TestChaos(t *testing.T) {
	runs := *chaosRuns
	if testing.Short() {
		runs = 10
	}
	for _, name := range []string{"smooth", "probing"} {
		pol, _ := ParsePolicy(name)
		for i := range runs {
			seed := *chaosSeed + uint64(i)
			if f := Chaos(seed, pol); f != nil {
				t.Errorf("policy %s, seed %d:\n  %s\nscenario:\n%s", name, seed, strings.Join(f.Problems, "\n  "), f.Text)
			}
		}
	}
}

// TestChaosCanFail: the checks are not vacuous. Cooperative moves
// stateful tasks cold, so judged by smooth's contract it must be caught.
func TestChaosCanFail(t *testing.T) {
	pol, _ := ParsePolicy("cooperative")
	pol.Checks = CheckAll
	caught := 0
	for seed := uint64(1); seed <= 20; seed++ {
		if f := Chaos(seed, pol); f != nil {
			caught++
			if !strings.Contains(strings.Join(f.Problems, "\n"), "guarantee") {
				t.Errorf("seed %d: failure without a named guarantee: %v", seed, f.Problems)
			}
		}
	}
	if caught == 0 {
		t.Fatal("cooperative passed smooth's checks on 20 random scenarios")
	}
}

// TestChaosScenarioParses: the generator writes valid scenarios.
func TestChaosScenarioParses(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		if _, err := ParseString("chaos", ChaosScenario(seed)); err != nil {
			t.Fatalf("seed %d: %v\n%s", seed, err, ChaosScenario(seed))
		}
	}
}

// TestCheckPlanCatches feeds hand-made bad plans to the checker.
func TestCheckPlanCatches(t *testing.T) {
	st := assign.State{
		Config: assign.Config{MaxLearners: 1, AcceptableLag: 10, Standbys: 0},
		Tasks:  []assign.Task{{ID: "1_0", Stateful: true, Load: 1}, {ID: "1_1", Stateful: true, Load: 1}, {ID: "0_0", Load: 1}},
		Instances: []assign.Instance{
			{ID: "A", Capacity: 1, Active: []assign.TaskID{"1_0", "1_1"}, Lag: map[assign.TaskID]int64{"1_0": 0, "1_1": 0}},
			{ID: "B", Capacity: 1, Active: []assign.TaskID{"0_0"}, Lag: map[assign.TaskID]int64{}},
			{ID: "C", Capacity: 1, Leaving: true, Lag: map[assign.TaskID]int64{}},
		},
	}
	plan := func(a, b, c assign.InstancePlan, followup bool) assign.Plan {
		a.ID, b.ID, c.ID = "A", "B", "C"
		return assign.Plan{Instances: []assign.InstancePlan{a, b, c}, Followup: followup}
	}
	ids := func(s ...assign.TaskID) []assign.TaskID { return s }
	cases := []struct {
		name string
		p    assign.Plan
		want string
	}{
		{"two owners", plan(assign.InstancePlan{Active: ids("1_0", "1_1")}, assign.InstancePlan{Active: ids("0_0", "1_0")}, assign.InstancePlan{}, false), "guarantee 1"},
		{"two roles", plan(assign.InstancePlan{Active: ids("1_0", "1_1"), Learner: ids("1_0")}, assign.InstancePlan{Active: ids("0_0")}, assign.InstancePlan{}, false), "guarantee 2"},
		{"move in one round", plan(assign.InstancePlan{Active: ids("1_0")}, assign.InstancePlan{Active: ids("0_0", "1_1")}, assign.InstancePlan{}, false), "guarantee 3"},
		{"cold handover", plan(assign.InstancePlan{Active: ids("1_0"), Revoked: ids("1_1")}, assign.InstancePlan{Active: ids("0_0")}, assign.InstancePlan{}, true), "guarantee 4"},
		{"revoke without followup", plan(assign.InstancePlan{Active: ids("1_0"), Revoked: ids("1_1")}, assign.InstancePlan{Active: ids("0_0")}, assign.InstancePlan{}, false), "guarantee 3"},
		{"stateless learner", plan(assign.InstancePlan{Active: ids("1_0", "1_1")}, assign.InstancePlan{Active: ids("0_0")}, assign.InstancePlan{Learner: ids("0_0")}, false), "guarantee 6"},
		{"leaving gets work", plan(assign.InstancePlan{Active: ids("1_0", "1_1")}, assign.InstancePlan{Active: ids("0_0")}, assign.InstancePlan{Learner: ids("1_0")}, false), "guarantee 9"},
		{"too many learners", plan(assign.InstancePlan{Active: ids("1_0", "1_1")}, assign.InstancePlan{Active: ids("0_0"), Learner: ids("1_0", "1_1")}, assign.InstancePlan{}, false), "guarantee 7"},
	}
	for _, c := range cases {
		got := strings.Join(CheckPlan(st, c.p, CheckAll), "\n")
		if !strings.Contains(got, c.want) {
			t.Errorf("%s: got %q, want a %s violation", c.name, got, c.want)
		}
	}
	good := plan(assign.InstancePlan{Active: ids("1_0", "1_1")}, assign.InstancePlan{Active: ids("0_0")}, assign.InstancePlan{}, false)
	if v := CheckPlan(st, good, CheckAll); len(v) != 0 {
		t.Errorf("a plan that changes nothing is flagged: %v", v)
	}
}

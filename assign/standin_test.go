package assign

import (
	"fmt"
	"testing"
)

// scaleOutWorld is a settled group of four single-worker instances, A to
// D, running 24 stateful tasks (0_*) and 12 stateless ones (1_*), six and
// three each; E and F join. Learners restore a third of a task's state
// per round.
func scaleOutWorld(cfg Config) *world {
	var tasks []Task
	for k := range 24 {
		tasks = append(tasks, Task{ID: TaskID(fmt.Sprintf("0_%d", k)), Stateful: true, Load: 1})
	}
	for k := range 12 {
		tasks = append(tasks, Task{ID: TaskID(fmt.Sprintf("1_%d", k)), Load: 1})
	}
	w := newWorld(cfg, tasks, 1)
	w.restore = func(l, size int64) int64 { return max(0, l-size/3) }
	w.drift = func() int64 { return 0 }
	old := []string{"A", "B", "C", "D"}
	for _, id := range old {
		w.join(id, 1, "")
	}
	for k, t := range tasks {
		m := w.insts[old[k%4]]
		m.Active = append(m.Active, t.ID)
		if t.Stateful {
			m.Lag[t.ID] = 0
		}
	}
	w.join("E", 1, "")
	w.join("F", 1, "")
	return w
}

// runToStable feeds plans back until one is stable (at most 100 rounds),
// checking every plan, and returns them.
func runToStable(t *testing.T, w *world) ([]State, []Plan) {
	t.Helper()
	var states []State
	var plans []Plan
	for range 100 {
		s := w.state()
		p, err := Assign(s, Smooth)
		if err != nil {
			t.Fatal(err)
		}
		if err := Check(s, p); err != nil {
			t.Fatalf("round %d: %v", len(plans)+1, err)
		}
		states, plans = append(states, s), append(plans, p)
		if settled(s, p) {
			if err := checkBalanced(s, p); err != nil {
				t.Fatalf("stable plan: %v", err)
			}
			return states, plans
		}
		w.apply(p)
	}
	t.Fatal("not stable after 100 rounds")
	return nil, nil
}

// TestStandInScaleOut: two instances join four that run 24 stateful and
// 12 stateless tasks. From the follow-up of the first round, while their
// learners still restore, each new instance runs its share of all 36
// tasks (six), all of them stateless; as its stateful tasks arrive it
// gives the stateless ones back, and the stable plan balances each bucket
// on its own (four stateful and two stateless each). A stateless task
// moves to a new instance once at most, and back once at most. Under
// SeparateBuckets the new instances run two tasks each until their first
// stateful tasks arrive.
func TestStandInScaleOut(t *testing.T) {
	for _, separate := range []bool{false, true} {
		cfg := Config{MaxLearners: 2, AcceptableLag: 100, SeparateBuckets: separate}
		states, plans := runToStable(t, scaleOutWorld(cfg))
		want := 6
		if separate {
			want = 2
		}
		second := plans[1]
		if len(second.Instances[4].Learner)+len(second.Instances[5].Learner) == 0 {
			t.Fatalf("separate=%v: no learner left in round 2; the test needs a warm-up in progress", separate)
		}
		for _, id := range []string{"E", "F"} {
			ip, _ := second.Instance(id)
			if len(ip.Active) != want {
				t.Errorf("separate=%v: round 2: %s runs %v, want %d tasks", separate, id, ip.Active, want)
			}
		}
		// Every stateless task's owners, from the first state, round by
		// round.
		owners := map[TaskID][]string{}
		for _, in := range states[0].Instances {
			for _, id := range in.Active {
				owners[id] = []string{in.ID}
			}
		}
		for _, p := range plans {
			for _, ip := range p.Instances {
				for _, id := range ip.Active {
					if id[0] == '1' {
						if o := owners[id]; len(o) == 0 || o[len(o)-1] != ip.ID {
							owners[id] = append(owners[id], ip.ID)
						}
					}
				}
			}
		}
		moved := 0
		for id, o := range owners {
			moves := len(o) - 1
			moved += moves
			toNew := 0
			for _, x := range o[1:] {
				if x == "E" || x == "F" {
					toNew++
				}
			}
			if toNew > 1 || moves > 2 || (separate && moves > 1) {
				t.Errorf("separate=%v: stateless task %s ran on %v: more than once to a new instance and once back", separate, id, o)
			}
		}
		if moved == 0 {
			t.Errorf("separate=%v: no stateless task moved", separate)
		}
	}
}

// TestStandInMovesBack: once the last stateful task has arrived, the new
// instance keeps no stateless task beyond its own share. In the round
// that plans the last handover (no learner left), the stateless tasks
// that stood in are revoked from it.
func TestStandInMovesBack(t *testing.T) {
	_, plans := runToStable(t, scaleOutWorld(Config{MaxLearners: 2, AcceptableLag: 100}))
	last := -1 // the last round with a learner
	for k, p := range plans {
		for _, ip := range p.Instances {
			if len(ip.Learner) > 0 {
				last = k
			}
		}
	}
	if last < 0 || last+2 >= len(plans) {
		t.Fatalf("the last learner is in round %d of %d", last+1, len(plans))
	}
	handover := plans[last+1]
	for _, id := range []string{"E", "F"} {
		ip, _ := handover.Instance(id)
		n := 0
		for _, x := range ip.Active {
			if x[0] == '1' {
				n++
			}
		}
		if n > 2 {
			t.Errorf("round %d (no learner left): %s still runs %d stateless tasks, want its share, 2", last+2, id, n)
		}
	}
}

// TestStandInKeepsBucketsWithoutWarmUp: stand-ins only while a plan warms
// stateful tasks for a balance move. A drain's learners do not count: the
// instances that receive a leaving instance's stateful tasks keep their
// share of the stateless ones.
func TestStandInKeepsBucketsWithoutWarmUp(t *testing.T) {
	s := State{Config: Config{MaxLearners: 2, AcceptableLag: 100},
		Tasks: []Task{{ID: "0_0", Stateful: true, Load: 1}, {ID: "0_1", Stateful: true, Load: 1}, {ID: "0_2", Stateful: true, Load: 1},
			{ID: "1_0", Load: 1}, {ID: "1_1", Load: 1}},
		Instances: []Instance{
			{ID: "A", Capacity: 1, Active: []TaskID{"0_0", "1_0"}, Lag: map[TaskID]int64{"0_0": 0}},
			{ID: "B", Capacity: 1, Active: []TaskID{"0_1", "1_1"}, Lag: map[TaskID]int64{"0_1": 0}},
			{ID: "C", Capacity: 1, Leaving: true, Active: []TaskID{"0_2"}, Lag: map[TaskID]int64{"0_2": 0}},
		}}
	p, err := Assign(s, Smooth)
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(s, p); err != nil {
		t.Fatal(err)
	}
	for _, ip := range p.Instances {
		if len(ip.Revoked) > 0 {
			t.Errorf("%s revokes %v: a drain's learner is no warm-up for the balance", ip.ID, ip.Revoked)
		}
	}
	learners := 0
	for _, ip := range p.Instances {
		learners += len(ip.Learner)
	}
	if learners != 1 {
		t.Fatalf("want one learner draining C, plan %+v", p.Instances)
	}
}

func TestLevelFill(t *testing.T) {
	for _, c := range []struct {
		load       float64
		caps, base []float64
		want       []float64
	}{
		{3, []float64{1, 1}, []float64{4, 0}, []float64{0, 3}},
		{1, []float64{1, 1}, []float64{4, 0}, []float64{0, 1}},
		{6, []float64{1, 1}, []float64{2, 0}, []float64{2, 4}},
		{12, []float64{1, 1, 1, 1, 1, 1}, []float64{6, 6, 6, 6, 0, 0}, []float64{0, 0, 0, 0, 6, 6}},
		{12, []float64{1, 1, 1, 1, 1, 1}, []float64{5, 5, 5, 5, 2, 2}, []float64{1, 1, 1, 1, 4, 4}},
		{4, []float64{2, 0, 1}, []float64{0, 9, 0}, []float64{8.0 / 3, 0, 4.0 / 3}},
		{2, []float64{1, 1}, []float64{3, 3}, []float64{1, 1}},
	} {
		got := levelFill(c.load, c.caps, c.base)
		ok := len(got) == len(c.want)
		for k := range got {
			ok = ok && got[k]-c.want[k] < 1e-9 && c.want[k]-got[k] < 1e-9
		}
		if !ok {
			t.Errorf("levelFill(%v, %v, %v) = %v, want %v", c.load, c.caps, c.base, got, c.want)
		}
	}
}

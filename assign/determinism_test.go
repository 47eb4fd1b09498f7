package assign

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestDeterminism: the same state in any order gives byte-identical JSON,
// for every policy, on states taken from random runs.
func TestDeterminism(t *testing.T) {
	for seed := uint64(1); seed <= 60; seed++ {
		s := randomState(seed)
		for _, p := range Policies {
			want := mustJSON(t, s, p)
			rng := rand.New(rand.NewPCG(seed, 99))
			for range 5 {
				got := mustJSON(t, shuffled(s, rng), p)
				if got != want {
					t.Fatalf("seed %d policy %s: shuffled input changed the output\nwant %s\ngot  %s", seed, p, want, got)
				}
			}
		}
	}
}

func mustJSON(t *testing.T, s State, p Policy) string {
	t.Helper()
	plan, err := Assign(s, p)
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// randomState plays a random group for a few rounds and returns the state
// the leader sees next: learners, standbys, orphans and lags included.
func randomState(seed uint64) State {
	rng := rand.New(rand.NewPCG(seed, 3))
	var tasks []Task
	for sub := range 3 {
		for part := range 2 + rng.IntN(6) {
			tasks = append(tasks, Task{ID: TaskID(string(rune('0'+sub)) + "_" + string(rune('a'+part))), Stateful: sub != 0, Load: 1})
		}
	}
	w := newWorld(Config{Standbys: rng.IntN(2), MaxLearners: 2, AcceptableLag: 100}, tasks, seed)
	for k := range 2 + rng.IntN(3) {
		w.join(string(rune('A'+k)), 1+rng.IntN(2), []string{"x", "y"}[k%2])
	}
	for r := range 3 + rng.IntN(5) {
		if r == 2 {
			w.join("Z", 2, "x")
		}
		plan, _ := Assign(w.state(), Smooth)
		w.apply(plan)
	}
	if rng.IntN(2) == 0 {
		w.crash(w.ids()[0])
	}
	return w.state()
}

func shuffled(s State, rng *rand.Rand) State {
	out := State{Config: s.Config, Tasks: append([]Task(nil), s.Tasks...)}
	rng.Shuffle(len(out.Tasks), func(i, j int) { out.Tasks[i], out.Tasks[j] = out.Tasks[j], out.Tasks[i] })
	for _, in := range s.Instances {
		c := in
		for _, l := range []*[]TaskID{&c.Active, &c.Standby, &c.Learner} {
			*l = append([]TaskID(nil), *l...)
			rng.Shuffle(len(*l), func(i, j int) { (*l)[i], (*l)[j] = (*l)[j], (*l)[i] })
		}
		out.Instances = append(out.Instances, c)
	}
	rng.Shuffle(len(out.Instances), func(i, j int) { out.Instances[i], out.Instances[j] = out.Instances[j], out.Instances[i] })
	return out
}

// TestAssignLeavesInputAlone: Assign must not change the state it reads
// (callers reuse it, and the leader may compute the plan twice).
func TestAssignLeavesInputAlone(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		s := randomState(seed)
		before := dump(s)
		for _, p := range Policies {
			if _, err := Assign(s, p); err != nil {
				t.Fatal(err)
			}
			if after := dump(s); after != before {
				t.Fatalf("seed %d policy %s changed its input:\nbefore %s\nafter  %s", seed, p, before, after)
			}
		}
	}
}

// TestConcurrentPlans: plans made at the same time, which share the pool
// of working arrays, are the plans made one by one, reasons included.
func TestConcurrentPlans(t *testing.T) {
	type job struct {
		s    State
		p    Policy
		want string
	}
	var jobs []job
	for seed := uint64(1); seed <= 20; seed++ {
		s := randomState(seed)
		for _, p := range Policies {
			plan, err := Assign(s, p)
			if err != nil {
				t.Fatal(err)
			}
			jobs = append(jobs, job{s, p, fmt.Sprintf("%+v", plan)})
		}
	}
	errs := make(chan error, 4)
	for w := range 4 {
		go func() {
			for round := range 10 {
				for k := range jobs {
					j := jobs[(k+w*7+round)%len(jobs)]
					plan, err := Assign(j.s, j.p)
					if err == nil && fmt.Sprintf("%+v", plan) != j.want {
						err = fmt.Errorf("policy %s: a concurrent plan differs from the one made alone", j.p)
					}
					if err != nil {
						errs <- err
						return
					}
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

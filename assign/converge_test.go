package assign

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
)

var (
	convergeSeed = flag.Uint64("seed", 0, "run TestConvergence with this seed only")
	convergeRuns = flag.Int("runs", 300, "number of seeds TestConvergence tries")
)

// TestConvergence drives random groups through joins, crashes, returns
// with old state, capacity changes and graceful leaves, feeding every plan
// back as the next state. Every round must keep the per-round guarantees;
// once events stop the group must reach a stable, balanced plan that maps
// to itself. Failures print the seed: rerun with -seed N.
func TestConvergence(t *testing.T) {
	seeds := []uint64{}
	if *convergeSeed != 0 {
		seeds = append(seeds, *convergeSeed)
	} else {
		runs := *convergeRuns
		if testing.Short() {
			runs = 40
		}
		for s := 1; s <= runs; s++ {
			seeds = append(seeds, uint64(s))
		}
	}
	for _, seed := range seeds {
		for _, p := range []Policy{Smooth, Cooperative} {
			if err := converge(seed, p); err != nil {
				t.Fatalf("seed %d, policy %s: %v\n(rerun: go test ./assign -run TestConvergence -seed %d -v)", seed, p, err, seed)
			}
		}
	}
}

// converge runs one random group under policy p. Every round of the smooth
// policy is checked against the per-round guarantees; the cooperative
// baseline only has to converge.
func converge(seed uint64, policy Policy) error { return convergeLoads(seed, policy, false) }

// convergeLoads is converge; with fractional, every group has unequal
// loads, which are not all integers (see fractionalLoad).
func convergeLoads(seed uint64, policy Policy, fractional bool) error {
	rng := rand.New(rand.NewPCG(seed, 7))
	cfg := Config{
		Standbys:      rng.IntN(3),
		MaxLearners:   1 + rng.IntN(4),
		AcceptableLag: int64(rng.IntN(3)) * 100,
	}
	var tasks []Task
	weighted := rng.IntN(4) == 0 || fractional
	style := 0
	if fractional {
		style = rng.IntN(3)
	}
	for sub := range 1 + rng.IntN(3) {
		stateful := rng.IntN(3) != 0
		for part := range 1 + rng.IntN(12) {
			load := 1.0
			if weighted {
				load = float64(1 + rng.IntN(5))
			}
			if fractional {
				load = fractionalLoad(rng, style, load)
			}
			tasks = append(tasks, Task{ID: TaskID(fmt.Sprintf("%d_%d", sub, part)), Stateful: stateful, Load: load})
		}
	}
	w := newWorld(cfg, tasks, seed)
	racks := []string{"", "a", "b", "c"}[:1+rng.IntN(3)]
	next := 0
	newID := func() string { next++; return fmt.Sprintf("i%02d", next) }
	for range 1 + rng.IntN(4) {
		w.join(newID(), 1+rng.IntN(3), racks[rng.IntN(len(racks))])
	}

	var prev State
	round := 0
	step := func() (Plan, error) {
		round++
		s := w.state()
		plan, err := Assign(s, policy)
		if err != nil {
			return plan, fmt.Errorf("round %d: %v", round, err)
		}
		if policy != Smooth {
			prev = s
			w.apply(plan)
			return plan, nil
		}
		if err := Check(s, plan); err != nil {
			return plan, fmt.Errorf("round %d: %v\nstate: %s\nplan:\n%s", round, err, dump(s), table(plan))
		}
		prev = s
		w.apply(plan)
		return plan, nil
	}

	// Chaos: events between rounds.
	for range 20 + rng.IntN(40) {
		switch ids := w.ids(); rng.IntN(12) {
		case 0, 1:
			w.join(newID(), 1+rng.IntN(3), racks[rng.IntN(len(racks))])
		case 2:
			if len(w.disk) > 0 { // an old instance comes back with its state
				for id := range w.disk {
					for t := range w.disk[id] {
						w.disk[id][t] += rng.Int64N(3000)
					}
					w.join(id, 1+rng.IntN(3), racks[rng.IntN(len(racks))])
					break
				}
			}
		case 3:
			if len(ids) > 1 {
				w.crash(ids[rng.IntN(len(ids))])
			}
		case 4:
			if len(ids) > 1 {
				w.insts[ids[rng.IntN(len(ids))]].Leaving = true
			}
		case 5:
			if len(ids) > 0 {
				w.insts[ids[rng.IntN(len(ids))]].Capacity = 1 + rng.IntN(4)
			}
		}
		if len(w.insts) == 0 {
			w.join(newID(), 1, racks[0])
		}
		if _, err := step(); err != nil {
			return err
		}
	}
	// Quiet: no more events; the group must settle.
	for range 400 {
		plan, err := step()
		if err != nil {
			return err
		}
		if !settled(prev, plan) {
			continue
		}
		if err := checkBalanced(prev, plan); err != nil {
			return fmt.Errorf("stable after %d rounds but unbalanced: %v\nplan:\n%s", round, err, table(plan))
		}
		again, err := Assign(w.state(), policy) // stickiness: maps to itself
		if err != nil {
			return err
		}
		if !settled(w.state(), again) {
			return fmt.Errorf("stable plan does not map to itself:\n%s\nthen\n%s", table(plan), table(again))
		}
		return nil
	}
	return fmt.Errorf("no stable plan after %d rounds; last state: %s", round, dump(w.state()))
}

func dump(s State) string {
	out := fmt.Sprintf("config=%+v", s.Config)
	for _, t := range s.Tasks {
		out += fmt.Sprintf(" %s(stateful=%v,load=%v)", t.ID, t.Stateful, t.Load)
	}
	for _, in := range s.Instances {
		out += fmt.Sprintf("\n  %s cap=%d rack=%q leaving=%v active=%v standby=%v learner=%v lag=%v",
			in.ID, in.Capacity, in.Rack, in.Leaving, in.Active, in.Standby, in.Learner, in.Lag)
	}
	return out
}

package sim

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/baton-streams/baton/assign"
	"github.com/baton-streams/baton/lifecycle"
)

// fullState builds the leader's input from scratch, the plain way: every
// task, and every copy of every member. state keeps it up to date
// incrementally instead; they must agree.
func fullState(e *engine) assign.State {
	s := assign.State{Config: e.sc.Config}
	for _, t := range e.tasks {
		s.Tasks = append(s.Tasks, assign.Task{ID: t.spec.ID, Stateful: t.spec.Stateful, Load: t.spec.Load})
	}
	slices.SortFunc(s.Tasks, func(a, b assign.Task) int { return strings.Compare(string(a.ID), string(b.ID)) })
	for _, in := range e.insts {
		if !in.inGroup || !in.running {
			continue
		}
		ai := assign.Instance{ID: in.spec.ID, Capacity: in.spec.Capacity, Rack: in.spec.Rack, Leaving: in.leaving, Lag: map[assign.TaskID]int64{}}
		for ti, c := range in.copies {
			t := e.tasks[ti]
			var lag float64
			if !c.following {
				lag = t.end(e.now) - c.pos
			}
			ai.Lag[t.spec.ID] = lagInt(lag)
			switch c.role {
			case lifecycle.Standby:
				ai.Standby = append(ai.Standby, t.spec.ID)
			case lifecycle.Learner:
				ai.Learner = append(ai.Learner, t.spec.ID)
			}
		}
		for _, t := range e.tasks {
			if t.owner == in.idx {
				ai.Active = append(ai.Active, t.spec.ID)
			}
		}
		slices.Sort(ai.Active)
		slices.Sort(ai.Standby)
		slices.Sort(ai.Learner)
		s.Instances = append(s.Instances, ai)
	}
	return s
}

func diffState(got, want assign.State) string {
	if got.Config != want.Config || !slices.Equal(got.Tasks, want.Tasks) {
		return "config or tasks differ"
	}
	if len(got.Instances) != len(want.Instances) {
		return fmt.Sprintf("%d members, want %d", len(got.Instances), len(want.Instances))
	}
	for k, g := range got.Instances {
		w := want.Instances[k]
		switch {
		case g.ID != w.ID || g.Capacity != w.Capacity || g.Rack != w.Rack || g.Leaving != w.Leaving:
			return fmt.Sprintf("member %d: %+v, want %+v", k, g, w)
		case !slices.Equal(g.Active, w.Active):
			return fmt.Sprintf("member %s: active %v, want %v", g.ID, g.Active, w.Active)
		case !slices.Equal(g.Standby, w.Standby):
			return fmt.Sprintf("member %s: standby %v, want %v", g.ID, g.Standby, w.Standby)
		case !slices.Equal(g.Learner, w.Learner):
			return fmt.Sprintf("member %s: learner %v, want %v", g.ID, g.Learner, w.Learner)
		case !maps.Equal(g.Lag, w.Lag):
			return fmt.Sprintf("member %s: lag %v, want %v", g.ID, g.Lag, w.Lag)
		}
	}
	return ""
}

// TestIncrementalState: the leader's input that state keeps up to date
// between rounds is, at every round, the one built from scratch, for the
// shipped scenarios and random ones under every policy.
func TestIncrementalState(t *testing.T) {
	var scs []*Scenario
	for _, f := range scenarioFiles(t) {
		scs = append(scs, loadScenario(t, f))
	}
	for seed := uint64(1); seed <= 40; seed++ {
		sc, err := ParseString(fmt.Sprintf("chaos-%d", seed), ChaosScenario(seed))
		if err != nil {
			t.Fatal(err)
		}
		scs = append(scs, sc)
	}
	for _, sc := range scs {
		for _, name := range PolicyNames {
			pol, _ := ParsePolicy(name)
			e, err := newEngine(sc, pol, Options{MaxRounds: 20000})
			if err != nil {
				t.Fatal(err)
			}
			rounds := 0
			e.onState = func(st assign.State) {
				rounds++
				if d := diffState(st, fullState(e)); d != "" {
					e.fail(fmt.Errorf("round %d at %s: %s", rounds, fmtTime(e.now), d))
				}
			}
			e.loop()
			if e.err != nil {
				t.Errorf("%s, policy %s: %v", sc.Name, name, e.err)
			}
		}
	}
}

package engine

import (
	"reflect"
	"testing"
	"time"
)

// TestReportLoads: an instance reports its measured active tasks' loads
// in protocol.LoadUnits, quantised to its step; with a step of 0 it
// reports none, and so never has a figure to ask a rebalance for.
func TestReportLoads(t *testing.T) {
	measured := map[string]float64{"0_0": 0.26, "0_1": 0.5, "1_0": 0.9}
	a := &App{cfg: Config{LoadStep: 0.05}}
	a.measured.Store(&measured)
	got := a.reportLoads([]string{"0_0", "0_1"})
	if want := map[string]int32{"0_0": 2500, "0_1": 5000}; !reflect.DeepEqual(got, want) {
		t.Errorf("reported %v, want %v", got, want)
	}
	if a.reportedAt.Load() == 0 {
		t.Error("the time of the report was not kept")
	}
	off := &App{cfg: Config{LoadStep: 0}}
	off.measured.Store(&measured)
	if got := off.reportLoads([]string{"0_0", "0_1"}); got != nil || off.reported.Load() != nil {
		t.Errorf("with a step of 0: reported %v (kept %v), want none", got, off.reported.Load())
	}
}

// TestAskForLoadsBetweenRounds: an instance whose loads would bring an
// ask does not ask while a round is under way (it reports in that
// round), nor while it leaves; a held ask would make a second round
// after it.
func TestAskForLoadsBetweenRounds(t *testing.T) {
	now := time.Now()
	active := map[string]time.Duration{"0_0": 0, "1_0": 0}
	measured := map[string]float64{"0_0": 0.5, "1_0": 0.2}
	for _, c := range []struct {
		name    string
		leaving bool
	}{{"a round under way", false}, {"leaving", true}} {
		a := &App{cfg: Config{LoadStep: 0.05, LoadRebalance: time.Second, Rebalance: 10 * time.Second}}
		a.reportedAt.Store(now.Add(-time.Hour).UnixNano())
		if !c.leaving {
			a.joinedAt.Store(now.UnixNano()) // joined, not yet assigned
		}
		a.leaving.Store(c.leaving)
		s := &shell{a: a}
		s.askForLoads(now, active, measured)
		if s.rejoinWhy != "" || !a.loadAskedAt.IsZero() {
			t.Errorf("%s: asked (held: %q, at %v), want no ask", c.name, s.rejoinWhy, a.loadAskedAt)
		}
	}
}

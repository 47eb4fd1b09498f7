package engine

import (
	"reflect"
	"testing"
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

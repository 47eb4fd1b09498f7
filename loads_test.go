package baton

import (
	"math"
	"slices"
	"testing"
	"time"
)

// withProtocolVersion makes an instance speak protocol version v, as an
// instance of an older release would (member.Config.Version).
func withProtocolVersion(v int16) Option { return func(c *config) { c.ProtocolVersion = v } }

// withLoadTimings shortens the load meter's time constant and settle, so
// that loads are measured within a test's time.
func withLoadTimings(smoothing, settle time.Duration) Option {
	return func(c *config) { c.LoadSmoothing, c.LoadSettle = smoothing, settle }
}

// lastPlan returns the last plan a leader computed, if any.
func (h *harness) lastPlan() (PlanStatus, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.plans) == 0 {
		return PlanStatus{}, false
	}
	return h.plans[len(h.plans)-1], true
}

// measuredEverywhere reports whether every active task of every app has
// a load measured where it runs: with none measured, Status estimates 1.
func measuredEverywhere(apps ...*App) bool {
	for _, a := range apps {
		for _, ts := range a.Status().Tasks {
			if ts.Role == "active" && ts.Load == 1 {
				return false
			}
		}
	}
	return true
}

// TestRollingUpgradeToLoads: a group of three instances, two of which
// speak protocol version 1 (the release before loads), is upgraded one
// instance at a time to version 2 while records flow; every count stays
// exact through the mixed group, and once all speak version 2 the
// leader plans with the loads the members measured and reported (the
// wordcount's tasks are light: one step each), not with a load of 1.
func TestRollingUpgradeToLoads(t *testing.T) {
	h := newHarness(t, 4)
	fast := []Option{withInputLagInterval(200 * time.Millisecond), withLoadTimings(10*time.Second, time.Second)}
	v1 := append([]Option{withProtocolVersion(1)}, fast...)
	h.produce(300)
	run := map[string]*running{"a": h.start("a", v1...), "b": h.start("b", v1...), "c": h.start("c", fast...)}
	h.waitExact(60 * time.Second)
	plan, ok := h.lastPlan()
	if !ok {
		t.Fatal("no plan seen")
	}
	if len(plan.Loads) != 8 {
		t.Fatalf("the plan's input has loads for %d tasks, want 8: %v", len(plan.Loads), plan.Loads)
	}

	for _, id := range []string{"a", "b"} {
		h.produce(200)
		run[id].stop(t)
		h.produce(200)
		run[id] = h.start(id, fast...)
		h.waitExact(60 * time.Second)
	}

	// Every instance speaks version 2. Once each has measured its tasks,
	// a fourth joins: the rounds that place work on it carry the loads.
	deadline := time.Now().Add(30 * time.Second)
	for !measuredEverywhere(run["a"].app, run["b"].app, run["c"].app) {
		if time.Now().After(deadline) {
			t.Fatal("the instances did not measure their tasks' loads in 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	seen := len(h.plans)
	run["d"] = h.start("d", fast...)
	h.produce(200)
	h.waitExact(60 * time.Second)
	h.mu.Lock()
	plans := slices.Clone(h.plans[seen:])
	h.mu.Unlock()
	if len(plans) == 0 {
		t.Fatal("no plan after the fourth instance joined")
	}
	for _, p := range plans {
		for id, l := range p.Loads {
			// Light tasks are reported at one step, and the tasks of the
			// new instance are estimated at their subtopology's mean.
			if math.Abs(l-DefaultLoadStep) > 1e-9 {
				t.Errorf("generation %d: task %s planned with load %v, want %v (the reported step); loads %v", p.Generation, id, l, DefaultLoadStep, p.Loads)
			}
		}
		if len(p.Loads) != 8 {
			t.Errorf("generation %d: loads for %d tasks, want 8", p.Generation, len(p.Loads))
		}
	}
	// What c reports of its light tasks is one step each. A task that
	// came to c in the last rounds (d's join moves some, and stateless
	// ones standing in on d come back) has no report of c's yet.
	reported := 0
	for _, ts := range run["c"].app.Status().Tasks {
		if ts.Role != "active" || ts.LoadReported == 0 {
			continue
		}
		reported++
		if ts.LoadReported != DefaultLoadStep {
			t.Errorf("c's active task %s: reported load %v, want %v", ts.ID, ts.LoadReported, DefaultLoadStep)
		}
	}
	if reported == 0 {
		t.Error("c reported the load of none of its active tasks")
	}
}

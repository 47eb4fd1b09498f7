package load

import (
	"math"
	"reflect"
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// run observes the tasks every 5 s from *at for d, each busy for the
// share share(id, i) of the i-th span, and moves *at on.
func run(m *Meter, at *time.Time, d time.Duration, share func(id string, i int) float64, ids ...string) {
	const every = 5 * time.Second
	for i := 0; time.Duration(i)*every < d; i++ {
		*at = at.Add(every)
		busy := map[string]time.Duration{}
		for _, id := range ids {
			busy[id] = time.Duration(share(id, i) * float64(every))
		}
		m.Observe(*at, busy)
	}
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestMeterSteadyShare(t *testing.T) {
	m := &Meter{Smoothing: 2 * time.Minute, Settle: 30 * time.Second}
	at := t0
	m.Observe(at, map[string]time.Duration{"0_0": time.Hour, "1_0": 0}) // first sight: not counted
	run(m, &at, 20*time.Second, func(id string, _ int) float64 { return map[string]float64{"0_0": 0.25, "1_0": 0.5}[id] }, "0_0", "1_0")
	if got := m.Loads(at); len(got) != 0 {
		t.Fatalf("loads after 20 s of a 30 s settle: %v, want none", got)
	}
	run(m, &at, 10*time.Second, func(id string, _ int) float64 { return map[string]float64{"0_0": 0.25, "1_0": 0.5}[id] }, "0_0", "1_0")
	got := m.Loads(at)
	// The mean corrects its start at 0: a steady share is measured as
	// itself from the first span on.
	if !near(got["0_0"], 0.25, 1e-9) || !near(got["1_0"], 0.5, 1e-9) || len(got) != 2 {
		t.Fatalf("loads = %v, want 0_0 0.25 and 1_0 0.5", got)
	}
	// A task no longer active is forgotten; one that comes back starts
	// over.
	m.Observe(at.Add(time.Second), map[string]time.Duration{"1_0": 0})
	m.Observe(at.Add(2*time.Second), map[string]time.Duration{"1_0": 0, "0_0": 0})
	if got := m.Loads(at.Add(2 * time.Second)); len(got) != 1 {
		t.Fatalf("after 0_0 left and came back: %v, want 1_0 alone", got)
	}
}

func TestMeterFollowsAChangeOverItsTimeConstant(t *testing.T) {
	tau := 2 * time.Minute
	m := &Meter{Smoothing: tau, Settle: time.Second}
	at := t0
	m.Observe(at, map[string]time.Duration{"0_0": 0})
	run(m, &at, 30*time.Minute, func(string, int) float64 { return 0.2 }, "0_0")
	run(m, &at, tau, func(string, int) float64 { return 0.6 }, "0_0")
	want := 0.2 + 0.4*(1-math.Exp(-1))
	if got := m.Loads(at)["0_0"]; !near(got, want, 1e-6) {
		t.Fatalf("one time constant after a step from 0.2 to 0.6: load %.6f, want %.6f", got, want)
	}
}

func TestMeterSmoothsBursts(t *testing.T) {
	m := &Meter{Smoothing: 2 * time.Minute, Settle: time.Second}
	at := t0
	m.Observe(at, map[string]time.Duration{"0_0": 0})
	// Busy all of one span, idle the next: half a worker on average.
	run(m, &at, 20*time.Minute, func(_ string, i int) float64 { return float64(i % 2) }, "0_0")
	if got := m.Loads(at)["0_0"]; !near(got, 0.5, 0.02) {
		t.Fatalf("load of a task busy every other 5 s: %.4f, want 0.5 within 0.02", got)
	}
}

func TestMeterIgnoresAnObservationBackInTime(t *testing.T) {
	m := &Meter{Smoothing: time.Minute, Settle: time.Second}
	m.Observe(t0, map[string]time.Duration{"0_0": 0})
	m.Observe(t0.Add(10*time.Second), map[string]time.Duration{"0_0": 5 * time.Second})
	m.Observe(t0.Add(5*time.Second), map[string]time.Duration{"0_0": time.Hour})
	if got := m.Loads(t0.Add(10 * time.Second))["0_0"]; !near(got, 0.5, 1e-9) {
		t.Fatalf("load = %v, want 0.5", got)
	}
}

func TestQuantise(t *testing.T) {
	const step = 0.05
	cases := []struct {
		name           string
		measured, prev float64
		hasPrev        bool
		want           float64
	}{
		{"nearest step", 0.26, 0, false, 0.25},
		{"below half a step is one step", 0.001, 0, false, 0.05},
		{"zero is one step", 0, 0, false, 0.05},
		{"kept within a step above", 0.299, 0.25, true, 0.25},
		{"kept within a step below", 0.201, 0.25, true, 0.25},
		{"a step above moves", 0.30, 0.25, true, 0.30},
		{"further moves to the nearest", 0.41, 0.25, true, 0.40},
		{"a step below moves", 0.20, 0.25, true, 0.20},
		{"never below one step", 0, 0.05, true, 0.05},
	}
	for _, c := range cases {
		prev := map[string]float64{}
		if c.hasPrev {
			prev["0_0"] = c.prev
		}
		got := Quantise(map[string]float64{"0_0": c.measured}, prev, step)
		if !near(got["0_0"], c.want, 1e-12) {
			t.Errorf("%s: Quantise(%v, prev %v) = %v, want %v", c.name, c.measured, prev, got["0_0"], c.want)
		}
	}
	// A load wavering around the middle of two steps is reported the
	// same at every join.
	prev := Quantise(map[string]float64{"0_0": 0.124}, nil, step)
	for i := range 50 {
		l := 0.125 + 0.004*math.Sin(float64(i))
		next := Quantise(map[string]float64{"0_0": l}, prev, step)
		if next["0_0"] != prev["0_0"] {
			t.Fatalf("join %d: load %.4f changed the report from %v to %v", i, l, prev["0_0"], next["0_0"])
		}
	}
	if got := Quantise(map[string]float64{"0_0": 0.26}, nil, 0); !near(got["0_0"], 0.25, 1e-12) {
		t.Errorf("step 0 is DefaultStep: got %v", got)
	}
}

func TestEstimate(t *testing.T) {
	known := map[string]float64{"0_0": 0.1, "0_1": 0.3, "1_0": 0.6}
	got := Estimate([]string{"0_0", "0_2", "1_1", "2_0", "x"}, known)
	want := map[string]float64{
		"0_0": 0.1,                   // its own
		"0_2": 0.2,                   // its subtopology's mean
		"1_1": 0.6,                   // its subtopology's mean
		"2_0": (0.1 + 0.3 + 0.6) / 3, // nobody measured subtopology 2: the mean of all
		"x":   (0.1 + 0.3 + 0.6) / 3,
	}
	for id, w := range want {
		if !near(got[id], w, 1e-12) {
			t.Errorf("Estimate[%s] = %v, want %v", id, got[id], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("Estimate returned %d loads, want %d: %v", len(got), len(want), got)
	}
	if got := Estimate([]string{"0_0", "1_0"}, nil); !reflect.DeepEqual(got, map[string]float64{"0_0": 1, "1_0": 1}) {
		t.Errorf("with nothing known: %v, want every task 1", got)
	}
}

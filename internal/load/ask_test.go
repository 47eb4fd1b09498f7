package load

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestAskDue(t *testing.T) {
	k := Ask{Step: 0.05, Every: time.Minute}
	last := t0
	at := t0.Add(time.Minute)
	active := []string{"0_0", "0_1"}
	measured := map[string]float64{"0_0": 0.26, "0_1": 0.5}
	reported := map[string]float64{"0_0": 0.25, "0_1": 0.5}
	cases := []struct {
		name     string
		at       time.Time
		active   []string
		measured map[string]float64
		reported map[string]float64
		want     bool
		why      string
	}{
		{"steady", at, active, measured, reported, false, ""},
		{"within a step", at, active, map[string]float64{"0_0": 0.299, "0_1": 0.451}, reported, false, ""},
		{"a step away", at, active, map[string]float64{"0_0": 0.30, "0_1": 0.5}, reported, true, "0_0 0.30 (reported 0.25)"},
		{"too soon after the last report", t0.Add(59 * time.Second), active, map[string]float64{"0_0": 0.9, "0_1": 0.5}, reported, false, ""},
		{"never reported", at, active, measured, map[string]float64{"0_0": 0.25}, true, "0_1 0.50 (not reported)"},
		{"not settled: a task not measured yet", at, active, map[string]float64{"0_0": 0.9}, reported, false, ""},
		{"no active task", at, nil, measured, reported, false, ""},
		{"a task no longer active does not count", at, []string{"0_1"}, map[string]float64{"0_0": 0.9, "0_1": 0.5}, reported, false, ""},
	}
	for _, c := range cases {
		why, ok := k.Due(c.at, last, c.active, c.measured, c.reported)
		if ok != c.want || !strings.Contains(why, c.why) {
			t.Errorf("%s: Due = %q, %v; want %v with %q", c.name, why, ok, c.want, c.why)
		}
	}
	if _, ok := (Ask{}).Due(t0.Add(DefaultAskEvery-time.Second), t0, active, map[string]float64{"0_0": 0.9, "0_1": 0.9}, reported); ok {
		t.Error("a zero Every asked before DefaultAskEvery")
	}
}

// member plays a member's side of the loads over simulated time: a
// meter observes its tasks every 5 s, a join reports Quantise of the
// loads measured, and the member joins when Ask says so. It returns the
// times of the asks.
func member(k Ask, d time.Duration, share func(id string, at time.Duration) float64, ids ...string) []time.Duration {
	m := &Meter{Smoothing: 2 * time.Minute, Settle: 30 * time.Second}
	at := t0
	busy := map[string]time.Duration{}
	for _, id := range ids {
		busy[id] = 0
	}
	m.Observe(at, busy)
	var reported map[string]float64
	last := at // the member joined at t0, with nothing measured
	var asks []time.Duration
	const every = 5 * time.Second
	for at.Sub(t0) < d {
		for _, id := range ids {
			busy[id] = time.Duration(share(id, at.Sub(t0)) * float64(every))
		}
		at = at.Add(every)
		m.Observe(at, busy)
		measured := m.Loads(at)
		if _, ok := k.Due(at, last, ids, measured, reported); ok {
			asks = append(asks, at.Sub(t0))
			last = at
			reported = Quantise(measured, reported, k.Step) // the join the ask brings
		}
	}
	return asks
}

// TestAskSteadyLoadsAskOnce: loads that waver around the middle between
// two steps, slowly enough for the smoothed load to cross it again and
// again, bring one ask (the first report of the measured loads) in two
// hours: the hysteresis of Quantise keeps the reported figure.
func TestAskSteadyLoadsAskOnce(t *testing.T) {
	k := Ask{Step: 0.05, Every: 5 * time.Minute}
	share := func(id string, at time.Duration) float64 {
		phase := 2 * math.Pi * at.Seconds() / (20 * time.Minute).Seconds()
		if id == "0_1" {
			phase += 1
		}
		return 0.125 + 0.02*math.Sin(phase) // the middle between 0.10 and 0.15
	}
	asks := member(k, 2*time.Hour, share, "0_0", "0_1")
	if len(asks) != 1 || asks[0] != k.Every {
		t.Fatalf("asks at %v in two hours of steady loads; want one, at %v (the first report)", asks, k.Every)
	}
}

// TestAskAtMostOnceEvery: a load that climbs all the time changes the
// figure to report step after step, and brings at most one ask in
// Every.
func TestAskAtMostOnceEvery(t *testing.T) {
	k := Ask{Step: 0.05, Every: 5 * time.Minute}
	climb := func(_ string, at time.Duration) float64 { return min(1, 0.05+at.Minutes()/60) }
	asks := member(k, time.Hour, climb, "0_0")
	if len(asks) < 2 {
		t.Fatalf("asks at %v while the load climbed from 0.05 to 1 in an hour; want several", asks)
	}
	for i := 1; i < len(asks); i++ {
		if asks[i]-asks[i-1] < k.Every {
			t.Fatalf("asks at %v: %v and %v are closer than %v", asks, asks[i-1], asks[i], k.Every)
		}
	}
}

package measure

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

type part struct {
	topic string
	n     int32
}

func TestMeterRatio(t *testing.T) {
	type r struct{ at, count, base float64 }
	for _, c := range []struct {
		name     string
		window   time.Duration
		readings []r
		want     float64
	}{
		{"no reading", time.Minute, nil, 0},
		{"one reading", time.Minute, []r{{0, 100, 1}}, 0},
		{"steady", time.Minute, []r{{0, 0, 0}, {1, 50, 0.5}, {2, 100, 1}}, 100},
		{"base did not grow: nothing measured", time.Minute, []r{{0, 10, 2}, {5, 10, 2}}, 0},
		// Only the newest reading at or before the window's start and
		// those after it count: the early burst is forgotten.
		{"window", 10 * time.Second, []r{{0, 0, 0}, {5, 1000, 1}, {20, 1100, 2}, {30, 1300, 4}}, 100},
		// A count that went down starts over.
		{"reset", time.Minute, []r{{0, 500, 5}, {1, 600, 6}, {2, 10, 1}, {3, 210, 3}}, 100},
		{"clock went back", time.Minute, []r{{10, 0, 0}, {11, 100, 1}, {5, 200, 2}, {6, 300, 4}}, 50},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := Meter{Window: c.window}
			for _, x := range c.readings {
				m.Add(Reading{At: at(x.at), Count: x.count, Base: x.base})
			}
			if got := m.Ratio(); got != c.want {
				t.Errorf("ratio = %v, want %v (readings kept: %v)", got, c.want, m.readings)
			}
		})
	}
}

func TestOffsetRates(t *testing.T) {
	a0, a1, b0 := part{"a", 0}, part{"a", 1}, part{"b", 0}
	r := NewRates[part](30 * time.Second)
	r.Observe(at(0), map[part]int64{a0: 100, a1: 0, b0: 7})
	if got := r.Rate(a0); got != 0 {
		t.Fatalf("rate after one read = %v, want 0", got)
	}
	r.Observe(at(10), map[part]int64{a0: 1100, a1: 50, b0: 7})
	for tp, want := range map[part]float64{a0: 100, a1: 5, b0: 0, {"c", 0}: 0} {
		if got := r.Rate(tp); got != want {
			t.Errorf("rate(%v) = %v, want %v", tp, got, want)
		}
	}
	// b0 is gone from the read (its topic deleted): forgotten; a0 was
	// recreated (its end went down): starts over.
	r.Observe(at(20), map[part]int64{a0: 10, a1: 100})
	if _, ok := r.parts[b0]; ok {
		t.Errorf("partition missing from the read still kept")
	}
	if got, want := r.Rate(a0), 0.0; got != want {
		t.Errorf("rate of a recreated partition = %v, want %v", got, want)
	}
	if got, want := r.Rate(a1), 5.0; got != want {
		t.Errorf("rate(a1) = %v, want %v", got, want)
	}
}

func TestInputLag(t *testing.T) {
	for _, c := range []struct {
		name            string
		ends, positions map[string]int64
		want            int64
	}{
		{"caught up", map[string]int64{"in": 10}, map[string]int64{"in": 10}, 0},
		{"behind", map[string]int64{"in": 10}, map[string]int64{"in": 4}, 6},
		{"summed over the task's topics", map[string]int64{"x": 10, "y": 5}, map[string]int64{"x": 4, "y": 0}, 11},
		// A position past the end read a moment earlier.
		{"ahead counts 0", map[string]int64{"x": 10, "y": 5}, map[string]int64{"x": 12, "y": 3}, 2},
		{"no end known", nil, map[string]int64{"x": 3}, 0},
	} {
		if got := InputLag(c.ends, c.positions); got != c.want {
			t.Errorf("%s: inputLag = %d, want %d", c.name, got, c.want)
		}
	}
}

func TestSecondsBehind(t *testing.T) {
	now := at(100)
	for _, c := range []struct {
		name          string
		lag           int64
		last          time.Time
		processedHere bool
		since         time.Time
		want          float64
	}{
		{"caught up", 0, at(10), true, at(0), 0},
		{"behind the last record processed", 5, at(90), true, at(0), 10},
		{"nothing processed here yet: since active", 5, at(90), false, at(70), 30},
		{"record from the future", 5, at(110), true, at(0), 0},
		{"no time known", 5, time.Time{}, false, time.Time{}, 0},
	} {
		if got := SecondsBehind(c.lag, c.last, c.processedHere, c.since, now); got != c.want {
			t.Errorf("%s: secondsBehind = %v, want %v", c.name, got, c.want)
		}
	}
}

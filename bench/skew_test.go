package bench

import (
	"math"
	"testing"
	"time"
)

// TestSkewFigures: a window's busy shares come from the busy seconds at
// its ends, its latencies from the outputs that arrived within it,
// split by the input partition their word names.
func TestSkewFigures(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	start := BusyReading{At: t0, Busy: map[string]float64{"i1": 100, "i2": 50, "i3": 0}}
	end := BusyReading{At: t0.Add(10 * time.Second), Busy: map[string]float64{"i1": 108, "i2": 52, "i3": 2}}
	var samples []OutputSample
	for i := 1; i <= 100; i++ {
		at := t0.Add(time.Duration(i) * 50 * time.Millisecond) // within the window
		samples = append(samples, OutputSample{At: at, Partition: 0, Latency: time.Duration(i) * time.Millisecond})
		samples = append(samples, OutputSample{At: at, Partition: 3, Latency: time.Duration(i) * 100 * time.Microsecond})
	}
	// Outside the window: not counted.
	samples = append(samples, OutputSample{At: t0.Add(-time.Millisecond), Partition: 0, Latency: time.Hour},
		OutputSample{At: end.At, Partition: 0, Latency: time.Hour})
	w := SkewFigures(start, end, samples, 0)
	for id, want := range map[string]float64{"i1": 0.8, "i2": 0.2, "i3": 0.2} {
		if math.Abs(w.Busy[id]-want) > 1e-9 {
			t.Errorf("busy share of %s = %v, want %v", id, w.Busy[id], want)
		}
	}
	if math.Abs(w.Ratio-2) > 1e-9 {
		t.Errorf("busiest over mean = %v, want 2 (0.8 over 0.4)", w.Ratio)
	}
	if w.Hot != (LatencyFigures{N: 100, P50: 50 * time.Millisecond, P99: 99 * time.Millisecond, Max: 100 * time.Millisecond}) {
		t.Errorf("hot latencies %+v", w.Hot)
	}
	if w.Cold.N != 100 || w.Cold.P99 != 9900*time.Microsecond {
		t.Errorf("cold latencies %+v", w.Cold)
	}
	if got := SkewFigures(start, start, nil, 0); got.Ratio != 0 || got.Hot.N != 0 {
		t.Errorf("an empty window: %+v", got)
	}
}

func TestSkewWord(t *testing.T) {
	for _, p := range []int32{0, 7, 11, 123} {
		if got := skewPartition(SkewWord(p, 17)); got != p {
			t.Errorf("partition of %q = %d, want %d", SkewWord(p, 17), got, p)
		}
	}
	for _, w := range []string{"alpha", "p", "pw1", "px1w2", "q1w2"} {
		if got := skewPartition(w); got != -1 {
			t.Errorf("partition of %q = %d, want -1", w, got)
		}
	}
}

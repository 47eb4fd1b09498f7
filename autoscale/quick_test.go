package autoscale

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// naiveHistory keeps every need ever recorded and answers window queries
// by looking at all of them: the reference for Recommender's merged,
// pruned history.
type naiveHistory []sample

func (h *naiveHistory) record(now time.Time, need int) {
	if n := len(*h); n > 0 && (*h)[n-1].at.Equal(now) {
		*h = (*h)[:n-1]
	}
	*h = append(*h, sample{at: now, need: need})
}

// window: the needs in effect at some moment of [now-w, now] are those of
// the samples made after now-w, and of the last one made at or before it.
func (h naiveHistory) window(now time.Time, w time.Duration) (lo, hi int, covered bool) {
	start := now.Add(-w)
	lo, hi = math.MaxInt, math.MinInt
	last := -1
	for i, s := range h {
		if s.at.After(start) {
			lo, hi = min(lo, s.need), max(hi, s.need)
		} else {
			last = i
		}
	}
	if last >= 0 {
		lo, hi = min(lo, h[last].need), max(hi, h[last].need)
	}
	return lo, hi, last >= 0
}

// TestAgainstNaive drives Recommenders with random observations and checks
// their windows against naiveHistory, and each recommendation against the
// rule's guarantees.
func TestAgainstNaive(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		cfg := DefaultConfig()
		cfg.OutWindow = time.Duration(rng.IntN(4)) * 15 * time.Second
		cfg.InWindow = cfg.OutWindow + time.Duration(rng.IntN(4))*time.Minute
		cfg.MinInstances = 1 + rng.IntN(3)
		cfg.MaxInstances = cfg.MinInstances + rng.IntN(10)
		cfg.MaxStep = rng.IntN(3)
		r, err := New(cfg)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		var naive naiveHistory
		now := start
		o := Observation{Instances: 1 + rng.IntN(12), WorkersPerInstance: 1 + rng.IntN(3)}
		prev := 0 // the previous recommendation
		for step := 0; step < 300; step++ {
			now = now.Add(time.Duration(rng.IntN(21)) * time.Second)
			o.Now = now
			if rng.IntN(10) == 0 {
				o.Instances = 1 + rng.IntN(12)
			}
			o.InputRate = float64(rng.IntN(100)) * 1000
			o.WorkerRate = float64(rng.IntN(3)) * 9100
			o.Lag = int64(rng.IntN(3)) * 500000
			o.LagDraining = rng.IntN(2) == 0
			o.Moves = max(0, rng.IntN(4)-2)
			rec, err := r.Recommend(o)
			if err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			naive.record(now, rec.Needed)
			for _, w := range []time.Duration{cfg.OutWindow, cfg.InWindow} {
				lo, hi, covered := r.window(now, w)
				nlo, nhi, ncovered := naive.window(now, w)
				if lo != nlo || hi != nhi || covered != ncovered {
					t.Fatalf("seed %d step %d: window %v: got %d..%d covered %v, naive %d..%d covered %v",
						seed, step, w, lo, hi, covered, nlo, nhi, ncovered)
				}
			}
			// The rule works from the observed count, or from its previous
			// recommendation while the group has not reached it.
			if rec.From != o.Instances && rec.From != prev {
				t.Fatalf("seed %d step %d: worked from %d, neither the %d observed nor the %d recommended before", seed, step, rec.From, o.Instances, prev)
			}
			prev = rec.Instances
			cur, got := rec.From, rec.Instances
			inBounds := cur >= cfg.MinInstances && cur <= cfg.MaxInstances
			switch {
			case rec.Needed < cfg.MinInstances || rec.Needed > cfg.MaxInstances:
				t.Fatalf("seed %d step %d: need %d outside [%d, %d]", seed, step, rec.Needed, cfg.MinInstances, cfg.MaxInstances)
			case cfg.MaxStep > 0 && (got-cur > cfg.MaxStep || cur-got > cfg.MaxStep):
				t.Fatalf("seed %d step %d: %d → %d exceeds max step %d", seed, step, cur, got, cfg.MaxStep)
			case inBounds && got < cur && (o.Moves > 0 || o.LagDraining && o.Lag > 0):
				t.Fatalf("seed %d step %d: scaled in %d → %d with %d moves, lag %d draining %v: %s", seed, step, cur, got, o.Moves, o.Lag, o.LagDraining, rec.Reason)
			case inBounds && got > cur && got > rec.Needed:
				t.Fatalf("seed %d step %d: scaled out %d → %d beyond the need %d", seed, step, cur, got, rec.Needed)
			case inBounds && got < cur && got < rec.Needed:
				t.Fatalf("seed %d step %d: scaled in %d → %d below the need %d", seed, step, cur, got, rec.Needed)
			case len(r.history) > 0 && r.history[0].at.Before(now.Add(-cfg.InWindow)) && len(r.history) > 1 && !r.history[1].at.After(now.Add(-cfg.InWindow)):
				t.Fatalf("seed %d step %d: history keeps a sample no window can reach", seed, step)
			}
			if rng.IntN(4) != 0 {
				o.Instances = rec.Instances
			}
		}
	}
}

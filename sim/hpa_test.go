package sim

import (
	"testing"
	"time"
)

func hpaFor(mod func(c *HPAConfig)) *HPA {
	c := DefaultHPAConfig()
	c.Max = 1000000
	mod(&c)
	return NewHPA(c, 1000000)
}

// Every rule of the lag-threshold autoscaler changes the outcome of one
// of these cases: removing any one makes its case fail.
func TestHPARules(t *testing.T) {
	s := time.Second
	type step struct {
		at   time.Duration
		cur  int
		lag  float64
		want int
	}
	run := func(name string, h *HPA, steps []step) {
		t.Helper()
		for i, st := range steps {
			got, why := h.Scale(st.at, st.cur, st.lag)
			if got != st.want {
				t.Errorf("%s: step %d (at %v, %d replicas, lag %v): got %d, want %d (%s)", name, i, st.at, st.cur, st.lag, got, st.want, why)
			}
		}
	}
	// AverageValue: ⌈lag / threshold⌉.
	run("average value", hpaFor(func(c *HPAConfig) {}), []step{{0, 10, 151, 16}})
	// Tolerance: within 10% of the target per replica, no change.
	run("tolerance", hpaFor(func(c *HPAConfig) {}), []step{{0, 10, 105, 10}, {15 * s, 10, 95, 10}, {30 * s, 10, 115, 12}})
	// Partition cap: the metric is capped at partitions × threshold
	// (KEDA divides in integers: a lag of 509 over 50 partitions of 10 is
	// not above the cap, and the HPA asks for 51).
	run("partition cap", hpaFor(func(c *HPAConfig) { c.Partitions = 50 }), []step{{0, 40, 10000, 50}})
	run("partition cap, KEDA's division", hpaFor(func(c *HPAConfig) { c.Partitions = 50 }), []step{{0, 40, 509, 51}})
	run("idle consumers allowed", hpaFor(func(c *HPAConfig) { c.Partitions = 50; c.AllowIdle = true }), []step{{0, 40, 10000, 80}})
	// Scale-up rate: at most max(100%, 4 pods) per 15 s period, counted
	// from the replicas at the start of the period.
	run("up 100%", hpaFor(func(c *HPAConfig) {}), []step{{0, 10, 1e6, 20}, {5 * s, 20, 1e6, 20}, {15 * s, 20, 1e6, 40}})
	run("up 4 pods", hpaFor(func(c *HPAConfig) {}), []step{{0, 2, 1e6, 6}})
	// Scale-down: the highest recommendation of the last 5 minutes (the
	// first evaluation counts the current replicas as one).
	run("down window", hpaFor(func(c *HPAConfig) { c.Min = 3 }), []step{{0, 10, 100, 10}, {15 * s, 10, 0, 10}, {299 * s, 10, 0, 10}, {301 * s, 10, 0, 3}})
	run("down window keeps the highest", hpaFor(func(c *HPAConfig) {}), []step{{0, 10, 100, 10}, {60 * s, 10, 80, 10}, {120 * s, 10, 0, 10}, {301 * s, 10, 0, 8}, {361 * s, 8, 0, 1}})
	// A new HPA counts the current replicas as its past recommendation,
	// as Kubernetes seeds it: no lag does not scale in at once.
	run("seeded", hpaFor(func(c *HPAConfig) {}), []step{{0, 10, 0, 10}})
	// Scale-down rate: at most DownPercent per period (100% by default,
	// which never limits).
	run("down rate", hpaFor(func(c *HPAConfig) { c.DownWindow = 0; c.DownPercent = 50 }), []step{{0, 10, 0, 5}, {5 * s, 5, 0, 5}, {15 * s, 5, 0, 2}})
	// Bounds.
	run("max", hpaFor(func(c *HPAConfig) { c.Max = 12 }), []step{{0, 10, 1e6, 12}})
	run("min", hpaFor(func(c *HPAConfig) { c.Min = 4; c.DownWindow = 0 }), []step{{0, 10, 0, 4}})
	// A scale-up window holds a rise to the lowest recommendation in it.
	run("up window", hpaFor(func(c *HPAConfig) { c.UpWindow = time.Minute }), []step{{0, 10, 100, 10}, {15 * s, 10, 200, 10}, {75 * s, 10, 200, 20}})
}

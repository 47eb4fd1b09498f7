package sim

import (
	"fmt"
	"math"
	"time"
)

// The lag-threshold autoscaler: KEDA's Apache Kafka scaler feeding a
// Kubernetes HorizontalPodAutoscaler, with both projects' defaults. It
// knows the consumer group's total lag and nothing else.
//
//   - KEDA's metric is the group's total lag. Unless idle consumers are
//     allowed, it is capped at partitions × lagThreshold, so that the HPA
//     never asks for more replicas than there are partitions.
//   - The HPA's target is an AverageValue of lagThreshold per replica: it
//     wants ⌈metric / lagThreshold⌉ replicas, unless metric / (lagThreshold
//     × current) is within the tolerance (10%) of 1, when it keeps the
//     current count.
//   - Stabilisation: the count rises to at most the lowest recommendation
//     of the scale-up window (0 by default: at once) and falls to no less
//     than the highest of the scale-down window (300 s).
//   - Rate limits per 15 s period: up by at most max(100% of the replicas
//     at the start of the period, 4 pods); down by at most 100%.
//   - The result is kept within the min and max replica counts.

// HPAConfig holds the lag-threshold autoscaler's settings.
type HPAConfig struct {
	// Threshold is KEDA's lagThreshold: the lag per replica the HPA aims
	// at. KEDA's default is 10.
	Threshold float64
	// Partitions caps the replicas through the metric unless AllowIdle;
	// 0 takes the number of tasks (one input partition per task).
	Partitions int
	AllowIdle  bool
	// Min and Max bound the replicas (minReplicaCount, maxReplicaCount);
	// defaults 1 and 100 (KEDA's default max).
	Min, Max int
	// Tolerance is the HPA's (default 0.1).
	Tolerance float64
	// UpWindow and DownWindow are the stabilisation windows (defaults 0
	// and 5m).
	UpWindow, DownWindow time.Duration
	// Period is the rate limits' period (15s); UpPods and UpPercent bound a
	// period's increase (the larger wins: 4 pods, 100%), DownPercent its
	// decrease (100%).
	Period                 time.Duration
	UpPods                 int
	UpPercent, DownPercent float64
}

// DefaultHPAConfig returns KEDA's and Kubernetes' defaults, except a
// minimum of 1 replica (KEDA's is 0, a group with no member).
func DefaultHPAConfig() HPAConfig {
	return HPAConfig{Threshold: 10, Min: 1, Max: 100, Tolerance: 0.1, DownWindow: 5 * time.Minute,
		Period: 15 * time.Second, UpPods: 4, UpPercent: 100, DownPercent: 100}
}

// HPA is the state of one lag-threshold autoscaler: past recommendations
// (for the stabilisation windows) and past changes (for the rate limits).
// It reads no clock; the caller passes the time.
type HPA struct {
	cfg     HPAConfig
	recs    []hpaMark
	changes []hpaMark
	seeded  bool
}

type hpaMark struct {
	at time.Duration
	n  int // replicas recommended, or added (negative: removed)
}

// NewHPA returns a lag-threshold autoscaler. partitions replaces a
// Partitions of 0.
func NewHPA(cfg HPAConfig, partitions int) *HPA {
	if cfg.Partitions == 0 {
		cfg.Partitions = partitions
	}
	return &HPA{cfg: cfg}
}

// Scale returns the replica count the HPA sets at now, given the current
// count and the group's total lag, and says why.
func (h *HPA) Scale(now time.Duration, current int, lag float64) (int, string) {
	c := h.cfg
	metric := lag
	why := fmt.Sprintf("lag %s, threshold %s", fmtCount(math.Round(lag)), fmtCount(c.Threshold))
	if !c.AllowIdle && math.Floor(metric/c.Threshold) > float64(c.Partitions) {
		metric = float64(c.Partitions) * c.Threshold
		why += fmt.Sprintf(", capped at %d partitions", c.Partitions)
	}
	desired := current
	ratio := metric / (c.Threshold * float64(current))
	if math.Abs(1-ratio) > c.Tolerance {
		desired = int(math.Ceil(metric/c.Threshold - 1e-9))
		why += fmt.Sprintf(": %d wanted", desired)
	} else {
		why += fmt.Sprintf(": within %s of %d", percentOf(c.Tolerance), current)
	}
	// Stabilisation over the recommendations of the windows, this one
	// included. An HPA seen for the first time has recommended the
	// current count so far, as Kubernetes seeds it.
	if !h.seeded {
		h.seeded = true
		h.recs = append(h.recs, hpaMark{at: now, n: current})
	}
	h.recs = append(h.recs, hpaMark{at: now, n: desired})
	keep := 0
	for keep < len(h.recs) && h.recs[keep].at <= now-max(c.UpWindow, c.DownWindow) {
		keep++
	}
	h.recs = h.recs[keep:]
	up, down := desired, desired
	for _, r := range h.recs {
		if r.at > now-c.UpWindow {
			up = min(up, r.n)
		}
		if r.at > now-c.DownWindow {
			down = max(down, r.n)
		}
	}
	rec := current
	if rec < up {
		rec = up
	}
	if rec > down {
		rec = down
		if down != desired {
			why += fmt.Sprintf("; %d within the %s scale-down window", down, fmtDur(c.DownWindow))
		}
	}
	if up != desired && rec == up {
		why += fmt.Sprintf("; %d within the %s scale-up window", up, fmtDur(c.UpWindow))
	}
	// Rate limits over the changes of the last period.
	keep = 0
	for keep < len(h.changes) && h.changes[keep].at <= now-c.Period {
		keep++
	}
	h.changes = h.changes[keep:]
	added, removed := 0, 0
	for _, ch := range h.changes {
		if ch.n > 0 {
			added += ch.n
		} else {
			removed -= ch.n
		}
	}
	if rec > current {
		start := current - added
		limit := max(start+c.UpPods, int(math.Ceil(float64(start)*(1+c.UpPercent/100))))
		if rec > limit {
			rec = limit
			why += fmt.Sprintf("; scale-up limit %d per %s", limit, fmtDur(c.Period))
		}
	}
	if rec < current {
		start := current + removed
		limit := int(float64(start) * (1 - c.DownPercent/100))
		if rec < limit {
			rec = limit
			why += fmt.Sprintf("; scale-down limit %d per %s", limit, fmtDur(c.Period))
		}
	}
	if rec > c.Max {
		rec = c.Max
		why += fmt.Sprintf("; max %d", c.Max)
	}
	if rec < c.Min {
		rec = c.Min
		why += fmt.Sprintf("; min %d", c.Min)
	}
	if rec != current {
		h.changes = append(h.changes, hpaMark{at: now, n: rec - current})
	}
	return rec, why
}

func percentOf(f float64) string { return fmt.Sprintf("%g%%", f*100) }

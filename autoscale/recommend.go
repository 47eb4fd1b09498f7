package autoscale

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Observation is what the group looks like at one evaluation.
type Observation struct {
	// Now is when the observation was made. It must not be before the
	// Now of the previous evaluation of the same Recommender.
	Now time.Time

	// Instances is how many instances run now; at least 1.
	Instances int

	// WorkersPerInstance is how many workers each instance runs; at
	// least 1. Instances the recommendation adds are taken to run as
	// many.
	WorkersPerInstance int

	// InputRate is the records per second arriving on the input topics,
	// summed over all tasks.
	InputRate float64

	// WorkerRate is the records per second one fully busy worker was
	// measured to sustain. Zero means not measured yet.
	WorkerRate float64

	// Lag is the records of input not yet processed, summed over all
	// tasks, and LagDraining says whether it is shrinking.
	Lag         int64
	LagDraining bool

	// Moves is the number of moves in flight: learners still restoring
	// and revoked tasks awaiting their follow-up round.
	Moves int
}

func (o Observation) validate() error {
	switch {
	case o.Instances < 1:
		return observationErr("Instances", "must be at least 1, got %d", o.Instances)
	case o.WorkersPerInstance < 1:
		return observationErr("WorkersPerInstance", "must be at least 1, got %d", o.WorkersPerInstance)
	case !(o.InputRate >= 0) || math.IsInf(o.InputRate, 1):
		return observationErr("InputRate", "must be a finite rate of 0 or more, got %v", o.InputRate)
	case !(o.WorkerRate >= 0) || math.IsInf(o.WorkerRate, 1):
		return observationErr("WorkerRate", "must be a finite rate of 0 or more (0: not measured yet), got %v", o.WorkerRate)
	case o.Lag < 0:
		return observationErr("Lag", "must not be negative, got %d", o.Lag)
	case o.Moves < 0:
		return observationErr("Moves", "must not be negative, got %d", o.Moves)
	}
	return nil
}

// Recommendation is the outcome of one evaluation.
type Recommendation struct {
	// Instances is the number of instances the group should run: a
	// target, not a change. It equals From when the rule holds.
	Instances int

	// From is the count the rule worked from: Observation.Instances, or,
	// while the group has not reached an earlier recommendation (new
	// instances still starting, or leaving ones still there), that
	// recommendation. A hold holds the group to where it is going, not to
	// where it is: an autoscaler acting on it never cancels instances
	// still on their way.
	From int

	// Needed is what this observation alone calls for, within
	// [MinInstances, MaxInstances]; Instances differs from it while the
	// windows have not confirmed it.
	Needed int

	// Reason says, for a person, how Needed was worked out and why
	// Instances is what it is.
	Reason string
}

// sample is the need computed at one evaluation. It stays in effect
// until the next sample.
type sample struct {
	at   time.Time
	need int
}

// Recommender turns a series of observations into recommendations. It
// remembers the needs of past evaluations as far back as InWindow, and
// nothing else. It is not safe for concurrent use; one goroutine owns it.
type Recommender struct {
	cfg       Config
	history   []sample  // by time; consecutive needs differ
	last      time.Time // Now of the latest evaluation
	evaluated bool      // whether there has been one
	// target is the latest recommendation while the observed count has
	// not reached it, else 0.
	target int
}

// New returns a Recommender with the given config, or a *FieldError
// wrapping ErrInvalidConfig.
func New(cfg Config) (*Recommender, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Recommender{cfg: cfg}, nil
}

// Config returns the recommender's config.
func (r *Recommender) Config() Config { return r.cfg }

// Recommend evaluates one observation. An invalid observation returns a
// *FieldError wrapping ErrInvalidObservation and leaves the Recommender
// as it was.
func (r *Recommender) Recommend(o Observation) (Recommendation, error) {
	if err := o.validate(); err != nil {
		return Recommendation{}, err
	}
	if r.evaluated && o.Now.Before(r.last) {
		return Recommendation{}, observationErr("Now", "%v is before the previous evaluation (%v)", o.Now, r.last)
	}
	r.last, r.evaluated = o.Now, true
	cfg := r.cfg
	cur := o.Instances
	if r.target > 0 && r.target != o.Instances {
		cur = r.target
	}
	need, why := r.need(o)
	r.record(o.Now, need)

	rec := Recommendation{Instances: cur, Needed: need, From: cur}
	var decision string
	switch {
	case cur < cfg.MinInstances:
		rec.Instances = r.step(cur, cfg.MinInstances)
		decision = fmt.Sprintf("scale out %d → %d%s: below min %d", cur, rec.Instances, r.stepNote(cur, cfg.MinInstances), cfg.MinInstances)
	case cur > cfg.MaxInstances:
		rec.Instances = r.step(cur, cfg.MaxInstances)
		decision = fmt.Sprintf("scale in %d → %d%s: above max %d", cur, rec.Instances, r.stepNote(cur, cfg.MaxInstances), cfg.MaxInstances)
	case need > cur:
		lo, _, covered := r.window(o.Now, cfg.OutWindow)
		switch {
		case !covered:
			decision = fmt.Sprintf("hold %d: %d needed now; scale-out waits for %s of history (have %s)", cur, need, dur(cfg.OutWindow), dur(r.span(o.Now)))
		case lo <= cur:
			decision = fmt.Sprintf("hold %d: %d needed now but not throughout the %s out-window", cur, need, dur(cfg.OutWindow))
		default:
			rec.Instances = r.step(cur, lo)
			decision = fmt.Sprintf("scale out %d → %d%s: at least %d needed throughout the %s out-window", cur, rec.Instances, r.stepNote(cur, lo), lo, dur(cfg.OutWindow))
		}
	case need < cur:
		_, hi, covered := r.window(o.Now, cfg.InWindow)
		var blocked []string
		if o.Moves > 0 {
			blocked = append(blocked, plural(o.Moves, "move")+" in flight")
		}
		if o.LagDraining && o.Lag > 0 {
			blocked = append(blocked, "lag of "+count(float64(o.Lag))+" records draining")
		}
		switch {
		case !covered:
			decision = fmt.Sprintf("hold %d: %d needed now; scale-in waits for %s of history (have %s)", cur, need, dur(cfg.InWindow), dur(r.span(o.Now)))
		case hi >= cur:
			decision = fmt.Sprintf("hold %d: %d needed now but %d within the %s in-window", cur, need, hi, dur(cfg.InWindow))
		case len(blocked) > 0:
			decision = fmt.Sprintf("hold %d: scale-in to %d blocked: %s", cur, hi, strings.Join(blocked, ", "))
		default:
			rec.Instances = r.step(cur, hi)
			decision = fmt.Sprintf("scale in %d → %d%s: at most %d needed throughout the %s in-window", cur, rec.Instances, r.stepNote(cur, hi), hi, dur(cfg.InWindow))
		}
	default:
		decision = fmt.Sprintf("hold %d", cur)
	}
	if cur != o.Instances {
		decision += fmt.Sprintf(" (%d recommended before; %d run now)", cur, o.Instances)
	}
	r.target = 0
	if rec.Instances != o.Instances {
		r.target = rec.Instances
	}
	rec.Reason = why + "; " + decision
	return rec, nil
}

// need works out how many instances the observation calls for, within
// the bounds, and says how.
func (r *Recommender) need(o Observation) (int, string) {
	cfg := r.cfg
	var b strings.Builder
	fmt.Fprintf(&b, "input %s records/s", count(o.InputRate))
	if o.WorkerRate == 0 {
		n := min(max(o.Instances, cfg.MinInstances), cfg.MaxInstances)
		fmt.Fprintf(&b, "; per-worker rate not measured yet: %s", plural(n, "instance"))
		return n, b.String()
	}
	rate := o.InputRate
	if o.Lag > 0 {
		if o.LagDraining {
			fmt.Fprintf(&b, "; lag %s records draining", count(float64(o.Lag)))
		} else {
			drain := float64(o.Lag) / cfg.DrainTime.Seconds()
			rate += drain
			fmt.Fprintf(&b, "; lag %s records not draining: +%s/s to drain it in %s", count(float64(o.Lag)), count(drain), dur(cfg.DrainTime))
		}
	}
	perInstance := o.WorkerRate * float64(o.WorkersPerInstance)
	fmt.Fprintf(&b, "; one worker sustains %s/s", count(o.WorkerRate))
	if o.WorkersPerInstance > 1 {
		fmt.Fprintf(&b, ", an instance of %d workers %s/s", o.WorkersPerInstance, count(perInstance))
	}
	// A tiny tolerance keeps a rate that exactly fills n instances from
	// asking for n+1 through rounding.
	x := math.Ceil(rate*(1+cfg.Headroom)/perInstance - 1e-9)
	n := cfg.MaxInstances + 1
	if x <= float64(cfg.MaxInstances) {
		n = int(max(x, 0))
	}
	fmt.Fprintf(&b, "; %s headroom: ", percent(cfg.Headroom))
	switch {
	case n > cfg.MaxInstances:
		fmt.Fprintf(&b, "%s instances, capped at max %d", count(x), cfg.MaxInstances)
		n = cfg.MaxInstances
	case n < cfg.MinInstances:
		fmt.Fprintf(&b, "%s, raised to min %d", plural(n, "instance"), cfg.MinInstances)
		n = cfg.MinInstances
	default:
		b.WriteString(plural(n, "instance"))
	}
	return n, b.String()
}

// record adds a need to the history and forgets what no window can
// reach any more.
func (r *Recommender) record(now time.Time, need int) {
	h := r.history
	if n := len(h); n > 0 && h[n-1].at.Equal(now) {
		h = h[:n-1]
	}
	if n := len(h); n == 0 || h[n-1].need != need {
		h = append(h, sample{at: now, need: need})
	}
	// Keep the last sample at or before now-InWindow: it was in effect
	// at the start of the longest window.
	cut := now.Add(-r.cfg.InWindow)
	drop := 0
	for drop+1 < len(h) && !h[drop+1].at.After(cut) {
		drop++
	}
	r.history = append(r.history[:0], h[drop:]...)
}

// window returns the lowest and highest need in effect at any moment of
// [now-w, now], and whether the history reaches back to now-w.
func (r *Recommender) window(now time.Time, w time.Duration) (lo, hi int, covered bool) {
	start := now.Add(-w)
	lo, hi = math.MaxInt, math.MinInt
	for i := len(r.history) - 1; i >= 0; i-- {
		s := r.history[i]
		lo, hi = min(lo, s.need), max(hi, s.need)
		if !s.at.After(start) {
			return lo, hi, true
		}
	}
	return lo, hi, false
}

// span is how far back the history reaches.
func (r *Recommender) span(now time.Time) time.Duration {
	if len(r.history) == 0 {
		return 0
	}
	return now.Sub(r.history[0].at)
}

// step moves from cur towards target by at most MaxStep.
func (r *Recommender) step(cur, target int) int {
	if r.cfg.MaxStep == 0 {
		return target
	}
	return min(max(target, cur-r.cfg.MaxStep), cur+r.cfg.MaxStep)
}

func (r *Recommender) stepNote(cur, target int) string {
	if r.step(cur, target) == target {
		return ""
	}
	return fmt.Sprintf(" (max step %d)", r.cfg.MaxStep)
}

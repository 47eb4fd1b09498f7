package sim

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Result is what one run produced. It is owned by the caller.
type Result struct {
	Scenario string
	Policy   string
	// Autoscaler is the autoscaler that drove the group's size, if any.
	Autoscaler string

	// Balanced: the group ended balanced (every member within its share,
	// nothing unavailable, no learners, no rebalance in progress);
	// BalancedAt is when it got there for the last time, TimeToBalance
	// the same counted from the scenario's first event.
	Balanced      bool
	BalancedAt    time.Duration
	TimeToBalance time.Duration
	// SharesHeld: from the scenario's first event on, the group came to
	// have every stateful task running (active and restored) on a member,
	// each member within its share of them, whether or not learners or
	// stateless tasks' moves were still under way; TimeToShares is from
	// the first event to the first instant it did. It is what a count of
	// who runs what from outside sees first.
	SharesHeld   bool
	TimeToShares time.Duration
	// TotalShareHeld: from the scenario's first event on, every running
	// member that is not leaving came to hold, as active, at least its
	// share of all the tasks, stateful and stateless together, rounded
	// down (with unequal loads: its share of the whole load less the
	// largest task's); TimeToTotalShare is from the first event to the
	// first instant it did. After a join, it is how long the new
	// instances take to carry their part of the work.
	TotalShareHeld   bool
	TimeToTotalShare time.Duration
	End              time.Duration

	UnavailableTaskSeconds float64 // integral of unavailable tasks over time
	MaxUnavailable         int     // most tasks unavailable at once
	// UnavailableStatefulSeconds and MaxUnavailableStateful are the same
	// two figures for the stateful tasks alone.
	UnavailableStatefulSeconds float64
	MaxUnavailableStateful     int
	RestoredCritical           float64 // records new owners restored before processing
	Reprocessed                float64 // input records processed again after crashes
	Moves                      int     // times a task became active on another instance
	MaxMovesPerTask            int
	Rebalances                 int
	Thrash                     int // times a task went back to an instance that gave it up

	Violations []string
	Timeline   []Entry
	Series     []Point

	// Load holds the figures of a scenario with load, and LoadSeries its
	// samples; nil without load.
	Load       *LoadFigures
	LoadSeries []LoadPoint
}

// Entry is one timeline line.
type Entry struct {
	At   time.Duration
	Kind string
	Text string
}

// Point is a sample of the two plotted series; each holds until the next.
type Point struct {
	At          time.Duration
	Unavailable int
	OffBalance  int // tasks away from their member's share
}

func (r *Result) sample(at time.Duration, unavailable, off int) {
	p := Point{At: at, Unavailable: unavailable, OffBalance: off}
	if n := len(r.Series); n > 0 {
		last := &r.Series[n-1]
		if last.Unavailable == unavailable && last.OffBalance == off {
			return
		}
		if last.At == at {
			*last = p
			return
		}
	}
	r.Series = append(r.Series, p)
}

// fmtTime prints a virtual time as seconds with millisecond precision.
func fmtTime(d time.Duration) string {
	return fmt.Sprintf("%.3fs", d.Seconds())
}

// WriteTimeline writes the timeline, one line per entry.
func (r *Result) WriteTimeline(w io.Writer) error {
	for _, e := range r.Timeline {
		if _, err := fmt.Fprintf(w, "%11s  %-10s %s\n", fmtTime(e.At), e.Kind, e.Text); err != nil {
			return err
		}
	}
	return nil
}

// WriteSummary writes the figures of one run.
func (r *Result) WriteSummary(w io.Writer) error {
	return WriteComparison(w, []*Result{r})
}

func fmtBalance(r *Result) string {
	if !r.Balanced {
		return "never"
	}
	return fmtDur(r.TimeToBalance)
}

// fmtDur prints a duration rounded for people: 1h2m3s, 4.5s.
func fmtDur(d time.Duration) string {
	if d >= time.Minute {
		return d.Round(time.Second).String()
	}
	return d.Round(time.Millisecond).String()
}

func fmtCount(f float64) string {
	switch {
	case f >= 1e9:
		return fmt.Sprintf("%.2fG", f/1e9)
	case f >= 1e6:
		return fmt.Sprintf("%.2fM", f/1e6)
	case f >= 1e4:
		return fmt.Sprintf("%.1fk", f/1e3)
	case f == math.Trunc(f):
		return fmt.Sprintf("%.0f", f)
	}
	return fmt.Sprintf("%.1f", f)
}

// WriteComparison writes one column per run, side by side.
func WriteComparison(w io.Writer, rs []*Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(name string, f func(r *Result) string) {
		fmt.Fprintf(tw, "%s\t", name)
		for _, r := range rs {
			fmt.Fprintf(tw, "%s\t", f(r))
		}
		fmt.Fprintln(tw)
	}
	load := false
	for _, r := range rs {
		load = load || r.Load != nil
	}
	row("policy", func(r *Result) string { return r.Policy })
	if load {
		row("autoscaler", func(r *Result) string {
			if r.Autoscaler == "" {
				return "none"
			}
			return r.Autoscaler
		})
	}
	row("time to balance", fmtBalance)
	row("time to total share", func(r *Result) string {
		if !r.TotalShareHeld {
			return "never"
		}
		return fmtDur(r.TimeToTotalShare)
	})
	row("unavailable task-seconds", func(r *Result) string { return fmtCount(r.UnavailableTaskSeconds) })
	row("most unavailable at once", func(r *Result) string { return fmt.Sprint(r.MaxUnavailable) })
	row("restored on critical path", func(r *Result) string { return fmtCount(r.RestoredCritical) })
	row("reprocessed after crash", func(r *Result) string { return fmtCount(r.Reprocessed) })
	row("moves", func(r *Result) string { return fmt.Sprint(r.Moves) })
	row("most moves of one task", func(r *Result) string { return fmt.Sprint(r.MaxMovesPerTask) })
	row("returns to a giver (thrash)", func(r *Result) string { return fmt.Sprint(r.Thrash) })
	row("rebalances", func(r *Result) string { return fmt.Sprint(r.Rebalances) })
	if load {
		lrow := func(name string, f func(l *LoadFigures) string) {
			row(name, func(r *Result) string {
				if r.Load == nil {
					return "-"
				}
				return f(r.Load)
			})
		}
		since := func(d time.Duration) string {
			if d < 0 {
				return "never"
			}
			return fmtDur(d)
		}
		lrow("spike at", func(l *LoadFigures) string { return since(l.SpikeAt) })
		lrow("spike to new instances processing", func(l *LoadFigures) string { return since(l.FirstNew) })
		lrow("spike to lag first back under bound", func(l *LoadFigures) string { return since(l.Absorbed) })
		lrow("spike to lag under bound for good", func(l *LoadFigures) string { return since(l.Settled) })
		lrow("time lag above bound", func(l *LoadFigures) string { return fmtDur(l.AboveBound) })
		lrow("lag bound (records)", func(l *LoadFigures) string { return fmtCount(math.Round(l.Bound)) })
		lrow("peak lag (records)", func(l *LoadFigures) string { return fmtCount(math.Round(l.PeakLag)) })
		lrow("peak lag (seconds of input)", func(l *LoadFigures) string { return fmt.Sprintf("%.1f", l.PeakSeconds) })
		lrow("peak lag at", func(l *LoadFigures) string { return fmtDur(l.PeakAt) })
		lrow("instance-count changes", func(l *LoadFigures) string { return fmt.Sprint(l.Changes) })
		lrow("instances min / max", func(l *LoadFigures) string { return fmt.Sprintf("%d / %d", l.MinInstances, l.MaxInstances) })
		lrow("instances at the end", func(l *LoadFigures) string { return fmt.Sprint(l.EndInstances) })
		lrow("instance-hours", func(l *LoadFigures) string { return fmt.Sprintf("%.1f", l.InstanceSeconds/3600) })
		lrow("lag at the end (records)", func(l *LoadFigures) string { return fmtCount(math.Round(l.EndLag)) })
	}
	return tw.Flush()
}

// ExpectResult is the verdict on one expectation.
type ExpectResult struct {
	Expect Expect
	OK     bool
	Got    string
}

// CheckExpects judges the scenario's expectations that apply to r's policy.
func CheckExpects(sc *Scenario, r *Result) []ExpectResult {
	var out []ExpectResult
	for _, e := range sc.Expects {
		if len(e.Policies) > 0 && !slices.Contains(e.Policies, r.Policy) {
			continue
		}
		var ok bool
		var got string
		num := func(v float64) {
			ok, got = v <= e.Max+1e-9, fmtCount(v)
		}
		switch e.Kind {
		case "balanced":
			ok = r.Balanced && r.BalancedAt <= e.By
			got = "never"
			if r.Balanced {
				got = "at " + fmtTime(r.BalancedAt)
			}
		case "unavailable":
			num(float64(r.MaxUnavailable))
		case "unavailable-seconds":
			num(r.UnavailableTaskSeconds)
		case "moves":
			num(float64(r.Moves))
		case "moves-per-task":
			num(float64(r.MaxMovesPerTask))
		case "restored":
			num(r.RestoredCritical)
		case "rebalances":
			num(float64(r.Rebalances))
		case "no-thrash":
			ok, got = r.Thrash == 0, fmt.Sprintf("%d returns", r.Thrash)
		}
		out = append(out, ExpectResult{Expect: e, OK: ok, Got: got})
	}
	return out
}

// WriteExpects writes one line per verdict and reports whether all held.
func WriteExpects(w io.Writer, policy string, vs []ExpectResult) bool {
	all := true
	for _, v := range vs {
		mark := "ok  "
		if !v.OK {
			mark, all = "FAIL", false
		}
		fmt.Fprintf(w, "%s %-12s line %d: expect %s (got %s)\n", mark, policy, v.Expect.Line, strings.TrimSpace(v.Expect.Text), v.Got)
	}
	return all
}

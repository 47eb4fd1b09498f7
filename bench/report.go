package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"
)

// PrintScale writes the side-by-side table: for each event, one line per
// policy.
func PrintScale(w io.Writer, res *ScaleResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "event\tpolicy\tbalanced\tmoved\thandover max\tmedian\tunmoved longest gap\tvs normal\twaiting in gap\tfetch/loop wait in gap\tinput gap (normal)\tunmoved revoked\treplayed (critical path)\tmax lag at assign\tcold\tlearner restore\tthroughput dip\tsampler gap\tGC CPU\t")
	var events []string
	seen := map[string]bool{}
	for _, r := range res.Runs {
		for _, e := range r.Events {
			if !seen[e.Event] {
				seen[e.Event] = true
				events = append(events, e.Event)
			}
		}
	}
	for _, name := range events {
		for _, r := range res.Runs {
			ef := r.event(name)
			if ef == nil {
				fmt.Fprintf(tw, "%s\t%s\t(not run)\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\n", name, r.Policy)
				continue
			}
			bal := "never"
			if ef.Balanced > 0 {
				bal = secs(ef.TimeToBalance)
			}
			ratio := "-"
			if ef.UnmovedNormal > 0 {
				ratio = fmt.Sprintf("x%.1f", ef.UnmovedPause)
			}
			waiting := "-"
			if ef.UnmovedNormal > 0 && ef.UnmovedWaiting >= 0 {
				waiting = fmt.Sprint(ef.UnmovedWaiting)
			}
			pollAge := "-"
			if ef.UnmovedNormal > 0 {
				pollAge = fmt.Sprintf("%d/%dms", ef.UnmovedFetchWait.Milliseconds(), ef.UnmovedLoopWait.Milliseconds())
			}
			input := "-"
			if ef.InputGap > 0 {
				input = fmt.Sprintf("%s (%s)", ms(ef.InputGap), ms(ef.InputNormal))
			}
			learner := "-"
			if ef.LearnerRestoreMax > 0 {
				learner = secs(ef.LearnerRestoreMax)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\t%d (max %d)\t%d\t%d\t%s\t%.0f%%\t%s\t%.0f%%\t\n",
				name, r.Policy, bal, ef.Moved, ms(ef.HandoverMax), ms(ef.HandoverMedian),
				ms(ef.UnmovedGap), ratio, waiting, pollAge, input, ef.UnmovedRevoked, ef.Unmoved,
				ef.ReplayedSum, ef.ReplayedMax, ef.AssignedLagMax, ef.Cold, learner, 100*ef.Dip,
				ms(ef.SamplerGap), 100*ef.GCShare)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Longest handover of each event, in parts (last record, revoke, assignment, first record):")
	for _, name := range events {
		for _, r := range res.Runs {
			if ef := r.event(name); ef != nil && ef.HandoverTask != "" {
				fmt.Fprintf(w, "  %-14s %-12s %s %s: %s\n", name, r.Policy, ef.HandoverTask, ms(ef.HandoverMax), ef.HandoverParts)
			}
		}
	}
	fmt.Fprintln(w)
	if err := printPredictions(w, events, res); err != nil {
		return err
	}
	for _, r := range res.Runs {
		status := fmt.Sprintf("verified %d words (%d over-counted after crashes)", r.Words, r.OverCounted)
		if r.Error != "" {
			status = "FAILED: " + r.Error
		}
		fmt.Fprintf(w, "%-12s %6.0fs  %d lines produced during the script; %s\n", r.Policy, r.Elapsed.Seconds(), r.Produced, status)
	}
	return nil
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

func ms(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	if d >= 10*time.Second {
		return secs(d)
	}
	return fmt.Sprintf("%dms", d.Milliseconds())
}

// WriteJSON writes v as indented JSON to dir/name, creating dir.
func WriteJSON(dir, name string, v any) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	return path, os.WriteFile(path, append(b, '\n'), 0o644)
}

// event returns the run's figures of the named event, or nil if it did
// not run (the last, should a name repeat).
func (r *PolicyRun) event(name string) *EventFigures {
	var ef *EventFigures
	for i := range r.Events {
		if r.Events[i].Event == name {
			ef = &r.Events[i]
		}
	}
	return ef
}

// printPredictions writes, for each event and policy, every figure the
// simulator predicts beside the measured one and their ratio, and the
// model's measured parameters (a letter says where each came from: e
// measured in the event, r over the run before it, a assumed).
func printPredictions(w io.Writer, events []string, res *ScaleResult) error {
	fmt.Fprintln(w, "measured against the simulator's prediction (sim/meas: predicted / measured)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "event\tpolicy\tbalanced\tsim\tsim/meas\tunavailable task-s\tsim\tsim/meas\tmost unavailable\tsim\tsim/meas\t"+
		"restored (critical path)\tsim\tsim/meas\trounds\tsim\tsim/meas\trestore/s\tjoin\tsync\tstart\t")
	from := map[string]string{FromEvent: "e", FromRun: "r", FromAssumed: "a"}
	for _, name := range events {
		for _, r := range res.Runs {
			ef := r.event(name)
			if ef == nil {
				continue
			}
			bal := "never"
			if ef.Balanced > 0 {
				bal = secs(ef.TimeToBalance)
			}
			p := ef.Predicted
			if p == nil || p.Error != "" {
				why := "no prediction"
				if p != nil {
					why = p.Error
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t\t\t%.2f\t\t\t%d\t\t\t%d\t\t\t%d\t\t\t\t\t\t\t%s\n", name, r.Policy, bal,
					ef.UnavailableTaskSeconds, ef.MaxUnavailable, ef.ReplayedSum, ef.Rounds, why)
				continue
			}
			ratio := func(fig string) string {
				if v, ok := p.Ratios[fig]; ok {
					return fmt.Sprintf("%.2f", v)
				}
				return "-"
			}
			pbal := "never"
			if p.Balanced {
				pbal = secs(p.TimeToBalance)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.2f\t%.2f\t%s\t%d\t%d\t%s\t%d\t%.0f\t%s\t%d\t%d\t%s\t%.0f %s\t%s %s\t%s %s\t%s %s\t\n",
				name, r.Policy, bal, pbal, ratio(FigureTimeToBalance),
				ef.UnavailableTaskSeconds, p.UnavailableTaskSeconds, ratio(FigureUnavailableSecs),
				ef.MaxUnavailable, p.MaxUnavailable, ratio(FigureMaxUnavailable),
				ef.ReplayedSum, p.RestoredCritical, ratio(FigureRestoredCritical),
				ef.Rounds, p.Rounds, ratio(FigureRounds),
				p.Params.RestoreRate, from[p.Params.RestoreFrom], msec(p.Params.Join), from[p.Params.JoinFrom], msec(p.Params.Sync), from[p.Params.SyncFrom], msec(p.Params.Start), from[p.Params.StartFrom])
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "(restore/s, join, sync, start: the model's parameters; e measured in the event, r over the run before it, a assumed)")
	fmt.Fprintln(w)
	return nil
}

// msec prints a duration in milliseconds with a decimal: round trips are
// often under one.
func msec(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond)) }

package versus

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Print writes one table per event (a row per configuration) and the
// throughput table.
func Print(w io.Writer, res *Result) error {
	var events []string
	for _, r := range res.Runs {
		if !slices.Contains(events, r.Event) {
			events = append(events, r.Event)
		}
	}
	for _, ev := range events {
		fmt.Fprintf(w, "%s (latency and gaps: %v steady before, %v after)\n", ev, res.Config.Steady, res.Config.After)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "engine\tp50\tp99\tmax\tsteady p50\tp99\tmax\tmoved\tmoved gap\tunmoved gap\tsteady gap\tstalled>1s\tbalanced\trestored\tcounts\t")
		for _, r := range res.Runs {
			if r.Event != ev {
				continue
			}
			if r.Unsupported != "" {
				fmt.Fprintf(tw, "%s\tnot supported (below)\t\t\t\t\t\t\t\t\t\t\t\t\t\t\n", r.Configuration)
				continue
			}
			if r.Error != "" && r.Recording == nil {
				fmt.Fprintf(tw, "%s\tFAILED (below)\t\t\t\t\t\t\t\t\t\t\t\t\t\t\n", r.Configuration)
				continue
			}
			f := r.Figures
			bal := "not balanced"
			if f.Balanced {
				bal = secs(f.TimeToBalance)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t\n", r.Configuration,
				dur(f.After.P50), dur(f.After.P99), dur(f.After.Max), dur(f.Steady.P50), dur(f.Steady.P99), dur(f.Steady.Max),
				f.Moved, f.Moved+f.Unmoved, dur(f.MovedLongestGap), dur(f.UnmovedLongestGap), dur(f.UnmovedSteadyGap),
				f.Stalled, bal, restoredCell(f.Restored), countsCell(r))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
		if err := printQueries(w, res, ev); err != nil {
			return err
		}
		if err := printPredictions(w, res, ev); err != nil {
			return err
		}
	}
	if len(res.Throughput) > 0 {
		fmt.Fprintf(w, "backlog: %d lines, 2 instances from a cold start, done when the output holds every occurrence\n", res.Config.Backlog)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "engine\tfrom start\tlines/s\tfrom first output\tlines/s\tinput read\tcounts exact\t")
		for _, t := range res.Throughput {
			if t.Error != "" {
				fmt.Fprintf(tw, "%s\tFAILED: %s\t\t\t\t\t\t\n", t.Configuration, clip(t.Error))
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%.0f\t%s\t%v\t\n", t.Configuration, secs(t.FromStart), t.LinesPerSec,
				secs(t.FromFirst), t.FirstPerSec, secs(t.InputDone), t.Counts.Exact())
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	for _, r := range res.Runs {
		if r.Unsupported != "" {
			fmt.Fprintf(w, "%s %s not supported: %s\n", r.Configuration, r.Event, r.Unsupported)
		}
		if r.Error != "" {
			fmt.Fprintf(w, "%s %s FAILED: %s\n", r.Configuration, r.Event, r.Error)
		}
	}
	return nil
}

// printQueries prints the query load's figures of event ev, for the
// runs that had one.
func printQueries(w io.Writer, res *Result, ev string) error {
	var runs []Run
	for _, r := range res.Runs {
		if r.Event == ev && r.Queries != nil {
			runs = append(runs, r)
		}
	}
	if len(runs) == 0 {
		return nil
	}
	q := runs[0].Queries
	bound := "the active only"
	if q.MaxLag >= 0 {
		bound = fmt.Sprintf("max-lag %d", q.MaxLag)
	}
	fmt.Fprintf(w, "%s: queries (%d clients, %d reads/s each, %s; during: from the event until balanced, at least 5s)\n", ev, q.Clients, q.Rate, bound)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "engine\tsteady reads\tanswered\tp99\tduring reads\tanswered\trefused\terrors\twrong\tback\tnot found\tp99\tp99/steady\t")
	for _, r := range runs {
		st, du := r.Queries.Steady, r.Queries.During
		ratio := "-"
		if st.P99 > 0 && du.P99 > 0 {
			ratio = fmt.Sprintf("x%.1f", float64(du.P99)/float64(st.P99))
		}
		fmt.Fprintf(tw, "%s\t%d\t%.2f%%\t%s\t%d\t%.2f%%\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t\n", r.Configuration,
			st.Reads, 100*st.Share(), dur(st.P99), du.Reads, 100*du.Share(), du.Refused, du.Errors, du.Wrong, du.Back, du.Missing, dur(du.P99), ratio)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range runs {
		if ex := r.Queries.During.Example; ex != "" {
			fmt.Fprintf(w, "  %s: %s\n", r.Configuration, clip(ex))
		}
	}
	fmt.Fprintln(w)
	return nil
}

// restoredCell is the records restored on the critical path, or "not
// observed" when the engine does not report them.
func restoredCell(n *int64) string {
	if n == nil {
		return "not observed"
	}
	return strconv.FormatInt(*n, 10)
}

func countsCell(r Run) string {
	c := r.Counts
	switch {
	case c.Words == 0:
		return "-"
	case c.Exact():
		return fmt.Sprintf("exact (%d words)", c.Words)
	}
	return fmt.Sprintf("%d lost, %d over of %d", c.Lost, c.Over, c.Words)
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

func dur(d time.Duration) string {
	if d >= 10*time.Second {
		return secs(d)
	}
	return fmt.Sprintf("%dms", d.Milliseconds())
}

// printPredictions writes, for the runs of event ev that have a
// prediction, each figure as measured / predicted with the ratio
// predicted / measured.
func printPredictions(w io.Writer, res *Result, ev string) error {
	var runs []Run
	for _, r := range res.Runs {
		if r.Event == ev && r.Prediction != nil {
			runs = append(runs, r)
		}
	}
	if len(runs) == 0 {
		return nil
	}
	fmt.Fprintf(w, "%s: baton sim beside the run (measured / predicted, and predicted / measured; count tasks)\n", ev)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "engine\tpolicy\trestore/s\ttime to balance\tunavailable task-s\tmost unavailable\trestored\t")
	var none []string
	for _, r := range runs {
		p := r.Prediction
		if p.Error != "" {
			none = append(none, fmt.Sprintf("%s: no prediction: %s", r.Configuration, strings.TrimPrefix(p.Error, "versus: "+r.Configuration+": ")))
			continue
		}
		m := p.Measured
		bal := func(ok bool, d time.Duration) string {
			if !ok {
				return "not balanced"
			}
			return secs(d)
		}
		cell := func(meas, pred, figure string) string {
			c := meas + " / " + pred
			if x, ok := p.Ratios[figure]; ok {
				c += fmt.Sprintf(" x%.2f", x)
			}
			return c
		}
		restored := "not observed"
		if m.Restored != nil {
			restored = strconv.FormatInt(*m.Restored, 10)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f (%s)\t%s\t%s\t%s\t%s\t\n", r.Configuration, p.Params.Model.Policy, p.Params.RestoreRate, p.Params.RestoreFrom[:1],
			cell(bal(m.Balanced, m.TimeToBalance), bal(p.Balanced, p.TimeToBalance), FigureTimeToBalance),
			cell(fmt.Sprintf("%.2f", m.UnavailableSeconds), fmt.Sprintf("%.2f", p.UnavailableSeconds), FigureUnavailable),
			cell(strconv.Itoa(m.MaxUnavailable), strconv.Itoa(p.MaxUnavailable), FigureMaxUnavailable),
			cell(restored, fmt.Sprintf("%.0f", p.RestoredCritical), FigureRestored))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range none {
		fmt.Fprintln(w, n)
	}
	fmt.Fprintln(w)
	return nil
}

// RecordingFile is the name of run r's recording in an output directory.
func RecordingFile(r Run) string {
	return fmt.Sprintf("recording-%s-%s.json", r.Event, r.Configuration)
}

// Load reads a run's output directory back: versus.json and the
// recording of every run that has one there.
func Load(dir string) (*Result, error) {
	b, err := os.ReadFile(filepath.Join(dir, "versus.json"))
	if err != nil {
		return nil, fmt.Errorf("versus: %w", err)
	}
	var res Result
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("versus: %s: %w", filepath.Join(dir, "versus.json"), err)
	}
	for i := range res.Runs {
		path := filepath.Join(dir, RecordingFile(res.Runs[i]))
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("versus: %w", err)
		}
		var rec Recording
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("versus: %s: %w", path, err)
		}
		res.Runs[i].Recording = &rec
	}
	return &res, nil
}

package main

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"time"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/bench/versus"
	"github.com/baton-streams/baton/internal/tick"
)

// statusLine turns one App.Status into the line of the peer contract
// (compare/README.md) that --status-every prints. processed counts the
// input lines of the split tasks (0_*) since the process started, restored
// the changelog records restored into tasks while they were active here.
func statusLine(st baton.Status, instance string, now time.Time, processed, restored *versus.ProcessedCounter) versus.StatusLine {
	l := versus.StatusLine{Engine: "baton", Instance: instance, TimeMS: now.UnixMilli(),
		Active: []string{}, Standby: []string{}, Warmup: []string{}}
	switch {
	case st.Leaving:
		l.State = "LEAVING"
	case st.Generation > 0:
		l.State = "RUNNING"
	default:
		l.State = "STARTING"
	}
	split := map[string]int64{}
	// Every open task's restored counter, whatever its role now: it grows
	// only while the task is active, and a task left out would count
	// whole again when it came back.
	rest := map[string]int64{}
	for _, t := range st.Tasks {
		rest[t.ID] = t.Restored
		switch t.Role {
		case "active":
			l.Active = append(l.Active, t.ID)
		case "standby":
			l.Standby = append(l.Standby, t.ID)
		case "learner":
			l.Warmup = append(l.Warmup, t.ID)
		}
		if strings.HasPrefix(t.ID, "0_") {
			split[t.ID] = t.Processed
		}
	}
	l.Processed = processed.Observe(split)
	r := restored.Observe(rest)
	l.Restored = &r
	return l
}

// printStatus writes a status line to w every period until ctx ends.
func printStatus(ctx context.Context, w io.Writer, period time.Duration, instance string, status func() baton.Status) {
	var processed, restored versus.ProcessedCounter
	enc := json.NewEncoder(w)
	_ = tick.Every(ctx, period, func() error {
		// A closed stdout (the harness went away) is not the instance's
		// problem: keep running, print nothing.
		_ = enc.Encode(statusLine(status(), instance, time.Now(), &processed, &restored))
		return nil
	})
}

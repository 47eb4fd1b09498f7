package main

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/bench/versus"
	"github.com/baton-streams/baton/internal/tick"
)

// statusLine turns one App.Status into the line of the peer contract
// (compare/README.md) that --status-every prints. processed counts the
// input lines of the split tasks (0_*) since the process started, restored
// the changelog records restored into tasks while they were active here
// (both from Status.Totals, which keep what tasks closed since did),
// restoring the time spent restoring them.
func statusLine(st baton.Status, instance string, now time.Time, restoring *restoreClock) versus.StatusLine {
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
	var pending map[string]bool
	if restoring != nil {
		pending = restoring.restoring()
	}
	for _, t := range st.Tasks {
		switch {
		case t.Role == "active" && pending[t.ID]:
			// Not running yet: the contract lists it apart, as Kafka
			// Streams lists a restoring task in no role.
			l.Restoring = append(l.Restoring, t.ID)
		case t.Role == "active":
			l.Active = append(l.Active, t.ID)
		case t.Role == "standby":
			l.Standby = append(l.Standby, t.ID)
		case t.Role == "learner":
			l.Warmup = append(l.Warmup, t.ID)
		}
	}
	var restored int64
	for id, c := range st.Totals {
		if strings.HasPrefix(id, "0_") {
			l.Processed += c.Processed
		}
		restored += c.Restored
	}
	l.Restored = &restored
	if restoring != nil {
		ms := restoring.elapsed(now).Milliseconds()
		l.RestoreMS = &ms
	}
	return l
}

// restoreClock measures, from an instance's events, the wall time during
// which at least one of its active tasks was restoring: from the task's
// EventPaused (active, its state behind its changelog) to its
// EventRestored, or to its revoke.
type restoreClock struct {
	mu      sync.Mutex
	pending map[string]bool // tasks restoring now
	done    time.Duration   // over the stretches that ended
	from    time.Time       // when the current stretch began
}

func newRestoreClock() *restoreClock { return &restoreClock{pending: map[string]bool{}} }

// listen is a baton.Listener.
func (c *restoreClock) listen(e baton.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch e.Kind {
	case baton.EventPaused:
		if len(c.pending) == 0 {
			c.from = e.Time
		}
		c.pending[e.Task] = true
	case baton.EventRestored, baton.EventRevoked, baton.EventLost:
		if !c.pending[e.Task] {
			return
		}
		delete(c.pending, e.Task)
		if len(c.pending) == 0 && e.Time.After(c.from) {
			c.done += e.Time.Sub(c.from)
		}
	}
}

// restoring returns the active tasks restoring now.
func (c *restoreClock) restoring() map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]bool, len(c.pending))
	for id := range c.pending {
		m[id] = true
	}
	return m
}

// elapsed is the time spent restoring up to now.
func (c *restoreClock) elapsed(now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.done
	if len(c.pending) > 0 && now.After(c.from) {
		d += now.Sub(c.from)
	}
	return d
}

// printStatus writes a status line to w every period until ctx ends.
func printStatus(ctx context.Context, w io.Writer, period time.Duration, instance string, status func() baton.Status, restoring *restoreClock) {
	enc := json.NewEncoder(w)
	_ = tick.Every(ctx, period, func() error {
		// A closed stdout (the harness went away) is not the instance's
		// problem: keep running, print nothing.
		_ = enc.Encode(statusLine(status(), instance, time.Now(), restoring))
		return nil
	})
}

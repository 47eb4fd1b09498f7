package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/bench/versus"
)

func TestStatusLine(t *testing.T) {
	now := time.UnixMilli(1764582000123)
	st := baton.Status{Generation: 3, Tasks: []baton.TaskStatus{
		{ID: "0_1", Role: "active", Processed: 100},
		{ID: "1_1", Role: "active", Processed: 300, Restored: 40},
		{ID: "1_2", Role: "standby"},
		{ID: "1_5", Role: "learner", Lag: 8000},
	}, Totals: map[string]baton.TaskTotals{"0_1": {Processed: 100}, "1_1": {Processed: 300, Restored: 40}}}
	l := statusLine(st, "b", now, newRestoreClock())
	want := versus.StatusLine{Engine: "baton", Instance: "b", TimeMS: 1764582000123, State: "RUNNING",
		Active: []string{"0_1", "1_1"}, Standby: []string{"1_2"}, Warmup: []string{"1_5"}, Processed: 100, Restored: ptr(40)}
	if !equalLines(l, want) {
		t.Fatalf("got %+v, want %+v", l, want)
	}
	// 0_1 and 1_1 move away, 0_2 arrives, 1_5 is promoted after restoring
	// the tail and 1_2 restores from scratch: the totals keep what the
	// tasks that left did, and the line sums the totals, not the tasks.
	st = baton.Status{Generation: 4, Leaving: true, Tasks: []baton.TaskStatus{
		{ID: "0_2", Role: "active", Processed: 7},
		{ID: "1_2", Role: "active", Restored: 500},
		{ID: "1_5", Role: "active", Restored: 3},
	}, Totals: map[string]baton.TaskTotals{"0_1": {Processed: 100}, "1_1": {Processed: 300, Restored: 40},
		"0_2": {Processed: 7}, "1_2": {Restored: 500}, "1_5": {Restored: 3}}}
	l = statusLine(st, "b", now, nil)
	if l.State != "LEAVING" || l.Processed != 107 || len(l.Standby) != 0 || l.Standby == nil || l.Restored == nil || *l.Restored != 543 {
		t.Fatalf("after a move: %+v", l)
	}

	// Empty lists are [] on the wire, as the contract shows them; restored
	// is there, 0 before anything was restored.
	b, _ := json.Marshal(statusLine(baton.Status{}, "c", now, newRestoreClock()))
	if !strings.Contains(string(b), `"warmup":[]`) || !strings.Contains(string(b), `"state":"STARTING"`) || !strings.Contains(string(b), `"restored":0`) {
		t.Fatalf("line %s", b)
	}
	back, ok, err := versus.ParseStatusLine(string(b))
	if !ok || err != nil {
		t.Fatalf("the line does not parse back: %v", err)
	}
	if back.Restored == nil || *back.Restored != 0 || back.RestoreMS == nil || *back.RestoreMS != 0 {
		t.Fatalf("restored and restore_ms do not parse back: %+v", back)
	}
}

// TestRestoreClock: the time during which some active task restored,
// overlapping restores counted once, a revoke ending a task's restore,
// and a restore under way counted up to now.
func TestRestoreClock(t *testing.T) {
	c := newRestoreClock()
	t0 := time.UnixMilli(1764582000000)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ev := func(kind baton.EventKind, task string, ms int) {
		c.listen(baton.Event{Kind: kind, Task: task, Time: at(ms)})
	}
	ev(baton.EventPaused, "1_0", 0)
	ev(baton.EventPaused, "1_1", 100)
	ev(baton.EventRestored, "1_0", 300)
	ev(baton.EventAssigned, "1_2", 350) // no restore: not counted
	ev(baton.EventRestored, "1_2", 360)
	ev(baton.EventRevoked, "1_1", 500) // given up while restoring
	if d := c.elapsed(at(2000)); d != 500*time.Millisecond {
		t.Fatalf("after one stretch: %v, want 500ms", d)
	}
	ev(baton.EventPaused, "1_3", 1000)
	if d := c.elapsed(at(1200)); d != 700*time.Millisecond {
		t.Fatalf("during the second: %v, want 700ms", d)
	}
	ev(baton.EventLost, "1_3", 1400)
	ev(baton.EventRestored, "1_3", 1600) // already ended by the loss
	if d := c.elapsed(at(3000)); d != 900*time.Millisecond {
		t.Fatalf("after both: %v, want 900ms", d)
	}
	l := statusLine(baton.Status{}, "c", at(3000), c)
	if l.RestoreMS == nil || *l.RestoreMS != 900 {
		t.Fatalf("status line restore_ms %v, want 900", l.RestoreMS)
	}
	// An active task still restoring is listed apart from the ones that
	// run, as Kafka Streams leaves it out of its active tasks.
	ev(baton.EventPaused, "1_4", 3100)
	st := baton.Status{Generation: 2, Tasks: []baton.TaskStatus{{ID: "1_4", Role: "active"}, {ID: "1_5", Role: "active"}}}
	l = statusLine(st, "c", at(3200), c)
	if !slices.Equal(l.Active, []string{"1_5"}) || !slices.Equal(l.Restoring, []string{"1_4"}) {
		t.Fatalf("while 1_4 restores: active %v, restoring %v; want [1_5] and [1_4]", l.Active, l.Restoring)
	}
	ev(baton.EventRestored, "1_4", 3300)
	l = statusLine(st, "c", at(3400), c)
	if !slices.Equal(l.Active, []string{"1_4", "1_5"}) || len(l.Restoring) != 0 {
		t.Fatalf("once 1_4 restored: active %v, restoring %v", l.Active, l.Restoring)
	}
}

func ptr(n int64) *int64 { return &n }

func equalLines(a, b versus.StatusLine) bool {
	return a.Engine == b.Engine && a.Instance == b.Instance && a.TimeMS == b.TimeMS && a.State == b.State &&
		slices.Equal(a.Active, b.Active) && slices.Equal(a.Standby, b.Standby) && slices.Equal(a.Warmup, b.Warmup) &&
		a.Processed == b.Processed && (a.Restored == nil) == (b.Restored == nil) && (a.Restored == nil || *a.Restored == *b.Restored)
}

func TestStatusEveryRejectsNegative(t *testing.T) {
	_, stderr, code := runBaton(t, "", "run", "wordcount", "--brokers", "127.0.0.1:1", "--app-id", "a", "--input", "i",
		"--output", "o", "--state-dir", t.TempDir(), "--status-every", "-1s")
	if code != 2 || !strings.Contains(stderr, "--status-every") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

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
	var pc, rc versus.ProcessedCounter
	now := time.UnixMilli(1764582000123)
	st := baton.Status{Generation: 3, Tasks: []baton.TaskStatus{
		{ID: "0_1", Role: "active", Processed: 100},
		{ID: "1_1", Role: "active", Processed: 300, Restored: 40},
		{ID: "1_2", Role: "standby"},
		{ID: "1_5", Role: "learner", Lag: 8000},
	}}
	l := statusLine(st, "b", now, &pc, &rc)
	want := versus.StatusLine{Engine: "baton", Instance: "b", TimeMS: 1764582000123, State: "RUNNING",
		Active: []string{"0_1", "1_1"}, Standby: []string{"1_2"}, Warmup: []string{"1_5"}, Processed: 100, Restored: ptr(40)}
	if !equalLines(l, want) {
		t.Fatalf("got %+v, want %+v", l, want)
	}
	// 0_1 and 1_1 move away, 0_2 arrives, 1_5 is promoted after restoring
	// the tail and 1_2 restores from scratch: the totals keep what the
	// tasks that left did.
	st = baton.Status{Generation: 4, Leaving: true, Tasks: []baton.TaskStatus{
		{ID: "0_2", Role: "active", Processed: 7},
		{ID: "1_2", Role: "active", Restored: 500},
		{ID: "1_5", Role: "active", Restored: 3},
	}}
	l = statusLine(st, "b", now, &pc, &rc)
	if l.State != "LEAVING" || l.Processed != 107 || len(l.Standby) != 0 || l.Standby == nil || l.Restored == nil || *l.Restored != 543 {
		t.Fatalf("after a move: %+v", l)
	}
	// 1_2 closed and opened again here: its counter restarted, and all
	// of it is new.
	st = baton.Status{Generation: 5, Tasks: []baton.TaskStatus{
		{ID: "1_2", Role: "active", Restored: 20},
		{ID: "1_5", Role: "active", Restored: 3},
	}}
	if l = statusLine(st, "b", now, &pc, &rc); *l.Restored != 563 {
		t.Fatalf("after a reopen: restored %d, want 563", *l.Restored)
	}
	// Empty lists are [] on the wire, as the contract shows them; restored
	// is there, 0 before anything was restored.
	b, _ := json.Marshal(statusLine(baton.Status{}, "c", now, &versus.ProcessedCounter{}, &versus.ProcessedCounter{}))
	if !strings.Contains(string(b), `"warmup":[]`) || !strings.Contains(string(b), `"state":"STARTING"`) || !strings.Contains(string(b), `"restored":0`) {
		t.Fatalf("line %s", b)
	}
	back, ok, err := versus.ParseStatusLine(string(b))
	if !ok || err != nil {
		t.Fatalf("the line does not parse back: %v", err)
	}
	if back.Restored == nil || *back.Restored != 0 {
		t.Fatalf("restored does not parse back: %+v", back)
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

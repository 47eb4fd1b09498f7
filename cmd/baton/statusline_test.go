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
	var pc versus.ProcessedCounter
	now := time.UnixMilli(1764582000123)
	st := baton.Status{Generation: 3, Tasks: []baton.TaskStatus{
		{ID: "0_1", Role: "active", Processed: 100},
		{ID: "1_1", Role: "active", Processed: 300},
		{ID: "1_2", Role: "standby"},
		{ID: "1_5", Role: "learner", Lag: 8000},
	}}
	l := statusLine(st, "b", now, &pc)
	want := versus.StatusLine{Engine: "baton", Instance: "b", TimeMS: 1764582000123, State: "RUNNING",
		Active: []string{"0_1", "1_1"}, Standby: []string{"1_2"}, Warmup: []string{"1_5"}, Processed: 100}
	if !equalLines(l, want) {
		t.Fatalf("got %+v, want %+v", l, want)
	}
	// 0_1 moves away, 0_2 arrives: the total keeps what 0_1 did.
	st = baton.Status{Generation: 4, Leaving: true, Tasks: []baton.TaskStatus{{ID: "0_2", Role: "active", Processed: 7}}}
	l = statusLine(st, "b", now, &pc)
	if l.State != "LEAVING" || l.Processed != 107 || len(l.Standby) != 0 || l.Standby == nil {
		t.Fatalf("after a move: %+v", l)
	}
	// Empty lists are [] on the wire, as the contract shows them.
	b, _ := json.Marshal(statusLine(baton.Status{}, "c", now, &versus.ProcessedCounter{}))
	if !strings.Contains(string(b), `"warmup":[]`) || !strings.Contains(string(b), `"state":"STARTING"`) {
		t.Fatalf("line %s", b)
	}
	if _, ok, err := versus.ParseStatusLine(string(b)); !ok || err != nil {
		t.Fatalf("the line does not parse back: %v", err)
	}
}

func equalLines(a, b versus.StatusLine) bool {
	return a.Engine == b.Engine && a.Instance == b.Instance && a.TimeMS == b.TimeMS && a.State == b.State &&
		slices.Equal(a.Active, b.Active) && slices.Equal(a.Standby, b.Standby) && slices.Equal(a.Warmup, b.Warmup) &&
		a.Processed == b.Processed
}

func TestStatusEveryRejectsNegative(t *testing.T) {
	_, stderr, code := runBaton(t, "", "run", "wordcount", "--brokers", "127.0.0.1:1", "--app-id", "a", "--input", "i",
		"--output", "o", "--state-dir", t.TempDir(), "--status-every", "-1s")
	if code != 2 || !strings.Contains(stderr, "--status-every") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

package main

import (
	"bytes"
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baton-streams/baton/internal/kafkatest"
)

// verifiedRe matches the demo's verification line: every count exact, or,
// after an instance lost tasks without a commit, none below its word's
// occurrences (at-least-once does the lost work again) and the excess
// (group 2) within what the lost tasks' uncommitted work can count again
// (group 3).
var verifiedRe = regexp.MustCompile(`(?m)^Verified: all (\d+) words have (?:exactly the count of their occurrences\.|at least the count of their occurrences, (\d+) more than it, within the (\d+) the lost tasks' uncommitted work could count again \(.+\)\.).*$`)

// logLost reports a verification that held only because tasks were lost:
// the group expelled an instance (a starved machine can miss the demo's
// 3s session timeout), so exact counts were not owed, only an excess
// within the lost work's bound; m is verifiedRe's match, and an excess
// the line states above its bound fails t.
func logLost(t *testing.T, m []string) {
	if m[2] == "" {
		return
	}
	t.Logf("an instance lost tasks, so counts were checked to be at least right and over by no more than the lost work: %s", m[0])
	excess, _ := strconv.ParseInt(m[2], 10, 64)
	bound, _ := strconv.ParseInt(m[3], 10, 64)
	if excess > bound {
		t.Errorf("the verification line states an excess of %d, over its bound of %d: %s", excess, bound, m[0])
	}
}

// TestCompareCounts: exact counts with no task lost; after a loss, none
// low, no word never produced, and the excess summed over the words
// within the bound.
func TestCompareCounts(t *testing.T) {
	want := map[string]int64{"a": 2, "b": 3, "c": 1}
	for _, c := range []struct {
		name   string
		got    map[string]int64
		lost   bool
		bound  int64
		excess int64
		bad    string
	}{
		{"exact", map[string]int64{"a": 2, "b": 3, "c": 1}, false, 0, 0, ""},
		{"exact after a loss", map[string]int64{"a": 2, "b": 3, "c": 1}, true, 0, 0, ""},
		{"over without a loss", map[string]int64{"a": 3, "b": 3, "c": 1}, false, 100, 1, "a: got 3, want 2"},
		{"over after a loss, within the bound", map[string]int64{"a": 3, "b": 5, "c": 1}, true, 3, 3, ""},
		{"over after a loss, beyond the bound", map[string]int64{"a": 3, "b": 5, "c": 1}, true, 2, 3,
			"the counts exceed the occurrences by 3 (the first word over: a: got 3, want 2), more than the 2 the lost tasks' uncommitted work could count again"},
		{"over after a loss that bounds nothing", map[string]int64{"a": 2, "b": 3, "c": 2}, true, 0, 1,
			"the counts exceed the occurrences by 1 (the first word over: c: got 2, want 1), more than the 0 the lost tasks' uncommitted work could count again"},
		{"under after a loss", map[string]int64{"a": 3, "b": 2, "c": 1}, true, 100, 1, "b: got 2, want 3"},
		{"a word never produced, after a loss", map[string]int64{"a": 2, "b": 3, "c": 1, "z": 1}, true, 100, 0, "z: got 1, want 0"},
		{"missing", map[string]int64{"a": 2, "b": 3}, false, 0, 0, "c: got 0, want 1"},
		{"two wrong: the first in word order", map[string]int64{"a": 1, "b": 2, "c": 1}, false, 0, 0, "a: got 1, want 2"},
	} {
		excess, bad := compareCounts(want, c.got, c.lost, c.bound)
		if excess != c.excess || bad != c.bad {
			t.Errorf("%s: compareCounts = %d, %q; want %d, %q", c.name, excess, bad, c.excess, c.bad)
		}
	}
	exact, lost := verifiedLine(3, 0, 0, nil), verifiedLine(3, 12, 340, []string{"i2 lost 1_1"})
	if m := verifiedRe.FindStringSubmatch(exact); m == nil || m[2] != "" {
		t.Errorf("verifiedRe does not match verifiedLine's exact line %q as one: %q", exact, m)
	}
	if m := verifiedRe.FindStringSubmatch(lost); m == nil || m[2] != "12" || m[3] != "340" {
		t.Errorf("verifiedRe does not match verifiedLine's line after a loss %q with its excess and bound: %q", lost, m)
	}
}

// TestDemo runs the README's headline command, `baton demo`, as a user
// would, and checks what it ends with: a handover row for every count
// task that moved to i3, warm (lag within the demo's acceptable lag of
// 100), and the line verifying every count.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the demo restores 300,000 words and takes about ten seconds")
	}
	if kafkatest.Real(t) {
		t.Skipf("the demo starts its own embedded cluster whatever %s says; the default pass runs it", kafkatest.EnvMode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, batonBin, "demo")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("baton demo: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	m := verifiedRe.FindStringSubmatch(out)
	if m == nil || !strings.Contains(m[0], " Time to balance after the join: ") {
		t.Fatalf("no verification line in the demo's output:\n%s", out)
	}
	logLost(t, m)
	if n, _ := strconv.Atoi(m[1]); n < distinct {
		t.Errorf("verified %d words, want at least the %d the demo starts with", n, distinct)
	}
	// task from to gap lag replayed
	row := regexp.MustCompile(`(?m)^  (1_\d+) +(i[12]) +i3 +\S+ +(\d+) +(\d+)$`)
	rows := row.FindAllStringSubmatch(out, -1)
	if len(rows) == 0 {
		t.Fatalf("no count task moved to i3 in the handover table:\n%s", out)
	}
	for _, r := range rows {
		if lag, _ := strconv.Atoi(r[3]); lag > 100 {
			t.Errorf("task %s moved from %s to i3 with lag %d, more than the demo's acceptable lag (100)", r[1], r[2], lag)
		}
	}
	// Every move's gap runs from the old owner's last record to the new
	// one's first: never below zero, also for a task that moved twice (a
	// stateless task standing in on i3 and going back).
	for _, r := range regexp.MustCompile(`(?m)^  (\d+_\d+) +(i\d) +(i\d) +(-\d\S*) `).FindAllStringSubmatch(out, -1) {
		t.Errorf("task %s from %s to %s: gap %s, below zero", r[1], r[2], r[3], r[4])
	}
}

// TestDemoAutoscale runs `baton demo --autoscale` and checks what it must
// show: the supervisor followed the recommendation out and back to one
// instance, new instances warmed learners, and every count is exact.
func TestDemoAutoscale(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the autoscale demo runs for about two minutes")
	}
	if kafkatest.Real(t) {
		t.Skipf("the demo starts its own embedded cluster whatever %s says; the default pass runs it", kafkatest.EnvMode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, batonBin, "demo", "--autoscale")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("baton demo --autoscale: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	v := verifiedRe.FindStringSubmatch(out)
	if v == nil {
		t.Fatalf("no verification line:\n%s", out)
	}
	logLost(t, v)
	m := regexp.MustCompile(`(?m)^The instance count changed (\d+) times: ([\d >-]+)\.$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no instance-count line:\n%s", out)
	}
	counts := strings.Split(m[2], " -> ")
	peak := 0
	for _, c := range counts {
		n, _ := strconv.Atoi(c)
		peak = max(peak, n)
	}
	if n, _ := strconv.Atoi(m[1]); n != len(counts)-1 || n < 2 || peak < 2 || counts[0] != "1" || counts[len(counts)-1] != "1" {
		t.Errorf("instance counts %q (%s changes): want 1, more during the spike, and 1 again", m[2], m[1])
	}
	// event balanced moved handover unmoved revoked pause learners
	row := regexp.MustCompile(`(?m)^  (\d+) -> (\d+) +\S+ +\d+ +\S+ +\d+ +(\d+) +\S+ +(\S+)$`)
	rows := row.FindAllStringSubmatch(out, -1)
	if len(rows) != len(counts)-1 {
		t.Fatalf("%d scale-event rows, want one per change (%d):\n%s", len(rows), len(counts)-1, out)
	}
	parts := regexp.MustCompile(`(?m)^  \d+ -> \d+: longest handover \d+_\d+: release \S+ \+ assign \S+ \+ first record \S+ ms$`)
	if n := len(parts.FindAllString(out, -1)); n != len(rows) {
		t.Errorf("%d handovers split in parts, want one per scale event (%d):\n%s", n, len(rows), out)
	}
	warmed := false
	for _, r := range rows {
		from, _ := strconv.Atoi(r[1])
		to, _ := strconv.Atoi(r[2])
		if d, err := time.ParseDuration(r[4]); err == nil && d > 0 && to > from {
			warmed = true
		}
		if to < from && r[3] != "0" {
			t.Errorf("scale-in %s -> %s revoked %s tasks it did not move: a drain moves only the leaving instance's tasks", r[1], r[2], r[3])
		}
	}
	if !warmed {
		t.Errorf("no scale-out warmed a learner:\n%s", out)
	}
	if !strings.Contains(out, "starts a learner for 1_") {
		t.Errorf("no learner narrated:\n%s", out)
	}
}

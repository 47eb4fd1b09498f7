package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/internal/kafkatest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	kafkatest.StopShared()
	os.Exit(code)
}

// external returns the shared Apache Kafka cluster as the run's cluster
// with BATON_KAFKA=real, or nil for an embedded cluster of the run's own.
// Its restarts kill -9 one broker and start it again: at once under
// at-least-once; under exactly-once once the cluster has moved the
// broker's leaderships away (kafkatest.RestartFenced: restarted at once, a
// broker can complete a transaction the cluster has aborted).
// BATON_FAULT_RESTART=at-once or =fenced makes them all one way.
func external(t *testing.T, g baton.Guarantee) *External {
	tg := kafkatest.ForTest(t)
	if tg.Kafka == nil {
		return nil
	}
	fenced, err := kafkatest.FencedRestart(g == baton.ExactlyOnce)
	if err != nil {
		t.Fatal(err)
	}
	return &External{Brokers: tg.Brokers, Prefix: tg.Name(""),
		RestartBroker: func(ctx context.Context, rng *rand.Rand) (string, error) {
			node := 1 + rng.IntN(tg.Kafka.Nodes())
			if err := tg.Kafka.Kill(node); err != nil {
				return "", err
			}
			if !fenced {
				if err := tg.Kafka.Restart(ctx, node); err != nil {
					return "", err
				}
				return fmt.Sprintf("broker %d was killed (kill -9) and restarted", node), nil
			}
			start := time.Now()
			if err := tg.Kafka.RestartFenced(ctx, node); err != nil {
				return "", err
			}
			return fmt.Sprintf("broker %d was killed (kill -9) and restarted once it led nothing (%v later)", node, time.Since(start).Round(100*time.Millisecond)), nil
		}}
}

// TestChaosShort is the CI-sized chaos run, once per guarantee: about 20 s
// of joins, drains, crashes, leader crashes and cluster restarts under
// continuous input, then every count is checked against the input. On
// Apache Kafka (BATON_KAFKA=real) a restart kills -9 one broker and starts
// it again. BATON_CHAOS_DURATION makes it a long run.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("a chaos run takes about a minute; it runs in the full test pass")
	}
	for _, g := range []baton.Guarantee{baton.AtLeastOnce, baton.ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) {
			cfg := Config{Duration: 20 * time.Second, Every: 2 * time.Second, Seed: 7, Guarantee: g, External: external(t, g)}
			if s := os.Getenv("BATON_CHAOS_DURATION"); s != "" {
				d, err := time.ParseDuration(s)
				if err != nil || d <= 0 {
					t.Fatalf("BATON_CHAOS_DURATION=%q: want a positive duration such as 10m", s)
				}
				cfg.Duration = d
			}
			if testing.Verbose() {
				cfg.Out = os.Stdout
			}
			res, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(res)
			if !res.OK() {
				t.Fatalf("%s broken: %v (low words: %v; unexcused duplicates: %v)", g, res, res.LowWords, res.Unexcused())
			}
			if res.RecordsIn == 0 || len(res.Events) == 0 {
				t.Fatalf("the run did nothing: %v", res)
			}
		})
	}
}

// TestResultOK: the verdict. The cases marked "old" passed under the
// verdict that let any crash excuse every duplicate and never failed on
// lost input.
func TestResultOK(t *testing.T) {
	eos, alo := baton.ExactlyOnce.String(), baton.AtLeastOnce.String()
	// i1 runs 0_0 and 1_0, i2 runs 0_1 and 1_1; i2 crashes in the second
	// interval; in the third, i1 has given 0_0 to i3 and crashes.
	run := []Interval{
		{Event: "start", Active: map[string][]string{"0_0": {"i1"}, "1_0": {"i1"}, "0_1": {"i2"}, "1_1": {"i2"}}},
		{Event: "crash", Active: map[string][]string{"0_0": {"i1"}, "1_0": {"i1"}, "0_1": {"i1", "i2"}, "1_1": {"i1", "i2"}}, Lost: []string{"i2"}},
		{Event: "crash", Active: map[string][]string{"0_0": {"i3"}, "1_0": {"i1"}, "0_1": {"i1"}, "1_1": {"i1"}}, Lost: []string{"i1"}},
	}
	restart := []Interval{
		{Event: "start", Active: map[string][]string{"0_0": {"i1"}, "1_0": {"i2"}}},
		{Event: "cluster-restart", Active: map[string][]string{"0_0": {"i1"}, "1_0": {"i2"}}, Lost: []string{"i1", "i2"}},
	}
	crashes := map[string]int{"crash": 2}
	dup := func(tasks ...string) []Duplicate { return []Duplicate{{Word: "w", Extra: 5, Tasks: tasks}} }
	for _, c := range []struct {
		name string
		r    Result
		want bool
	}{
		{"a lost owner's splitting task", Result{Guarantee: alo, Events: crashes, Duplicated: 5, Duplicates: dup("0_1", "1_0"), Intervals: run}, true},
		{"a lost owner's counting task", Result{Guarantee: alo, Events: crashes, Duplicated: 5, Duplicates: dup("0_0", "1_1"), Intervals: run}, true},
		{"old: the word's tasks ran on no lost instance", Result{Guarantee: alo, Events: map[string]int{"crash": 1}, Duplicated: 5, Duplicates: dup("0_0", "1_0"), Intervals: run[:2]}, false},
		{"old: the owner was lost in another interval", Result{Guarantee: alo, Events: crashes, Duplicated: 5, Duplicates: dup("0_0"), Intervals: run}, false},
		{"cut off by a cluster restart", Result{Guarantee: alo, Events: map[string]int{"cluster-restart": 1}, Duplicated: 5, Duplicates: dup("0_0", "1_0"), Intervals: restart}, true},
		{"no loss at all", Result{Guarantee: alo, Events: map[string]int{"drain": 1}, Duplicated: 5, Duplicates: dup("0_0", "1_0"), Intervals: run[:1]}, false},
		{"nothing duplicated", Result{Guarantee: alo, Events: map[string]int{"drain": 1}, Intervals: run[:1]}, true},
		{"lost counts", Result{Guarantee: alo, Events: crashes, Lost: 1, Intervals: run}, false},
		{"old: lost input", Result{Guarantee: alo, Events: map[string]int{"cluster-restart": 1}, InputLost: 3, Intervals: restart}, false},
		{"old: lost input, exactly-once", Result{Guarantee: eos, Events: map[string]int{"cluster-restart": 1}, InputLost: 3, Intervals: restart}, false},
		{"exactly-once duplicate", Result{Guarantee: eos, Events: crashes, Duplicated: 1, Duplicates: dup("0_1", "1_1"), Intervals: run}, false},
		{"old: exactly-once history with a repeat", Result{Guarantee: eos, Events: crashes, Histories: []string{"w: value 3 of 6 is 2, want 3"}, Intervals: run}, false},
		{"exactly-once exact", Result{Guarantee: eos, Events: crashes, Intervals: run}, true},
	} {
		if got := c.r.OK(); got != c.want {
			t.Errorf("%s: OK() = %v, want %v (%v)", c.name, got, c.want, c.r)
		}
	}
}

// TestIntervals: who ran which task between two events, from the
// instances' events, and who was lost then.
func TestIntervals(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	ev := func(s float64, kind baton.EventKind, instance, task string) baton.Event {
		return baton.Event{Time: at(s), Kind: kind, Instance: instance, Task: task}
	}
	events := []baton.Event{
		ev(0.5, baton.EventAssigned, "i1", "0_0"),
		ev(0.6, baton.EventAssigned, "i2", "1_0"),
		ev(2.5, baton.EventRevoked, "i1", "0_0"), // a drain: i1 hands 0_0 to i2
		ev(2.6, baton.EventAssigned, "i2", "0_0"),
		ev(4.5, baton.EventLost, "i2", "1_0"), // the cluster restarts
		ev(5.5, baton.EventAssigned, "i3", "1_0"),
		ev(6.5, baton.EventAssigned, "i2", "1_0"), // after its crash: ignored
	}
	marks := []mark{{at(2), "drain"}, {at(4), "cluster-restart"}, {at(6), "crash"}}
	losses := []loss{{at(4.1), "i2", false}, {at(4.1), "i3", false}, {at(6.1), "i2", true}}
	got := intervals(t0, at(8), marks, events, losses)
	want := []Interval{
		{From: 0, To: 2 * time.Second, Event: "start", Active: map[string][]string{"0_0": {"i1"}, "1_0": {"i2"}}},
		{From: 2 * time.Second, To: 4 * time.Second, Event: "drain", Active: map[string][]string{"0_0": {"i1", "i2"}, "1_0": {"i2"}}},
		{From: 4 * time.Second, To: 6 * time.Second, Event: "cluster-restart", Active: map[string][]string{"0_0": {"i2"}, "1_0": {"i2", "i3"}}, Lost: []string{"i2", "i3"}},
		{From: 6 * time.Second, To: 8 * time.Second, Event: "crash", Active: map[string][]string{"0_0": {"i2"}, "1_0": {"i3"}}, Lost: []string{"i2"}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("intervals:\n got %v\nwant %v", got, want)
	}
}

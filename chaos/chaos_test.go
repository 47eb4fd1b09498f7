package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
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

// mustCover are the event kinds TestChaosShort requires, with what the
// run did when it did one.
var mustCover = []struct{ kind, what string }{
	{"leader-crash", "crashed the leader while a learner warmed"},
	{"handover-crash", "crashed an instance as a stateful task was handed over to it"},
}

// chaosSeed is the seed of TestChaosShort's runs: BATON_CHAOS_SEED, or a
// fresh one per test run.
func chaosSeed(t *testing.T) uint64 {
	s := os.Getenv("BATON_CHAOS_SEED")
	if s == "" {
		return 1 + rand.Uint64N(1_000_000_000)
	}
	seed, err := strconv.ParseUint(s, 10, 64)
	if err != nil || seed == 0 {
		t.Fatalf("BATON_CHAOS_SEED=%q: want a positive integer such as 12345", s)
	}
	return seed
}

// replay is the command that runs t again with seed (and the run's other
// settings from the environment). The seed fixes the run's choices, not
// their timing: a replay meets the same events, not the same moments.
func replay(t *testing.T, seed uint64) string {
	var env []string
	for _, k := range []string{"BATON_KAFKA", "BATON_FAULT_RESTART", "BATON_CHAOS_DURATION"} {
		if v := os.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	env = append(env, fmt.Sprintf("BATON_CHAOS_SEED=%d", seed))
	return fmt.Sprintf("%s go test ./chaos -run '%s'", strings.Join(env, " "), t.Name())
}

// TestChaosShort is the CI-sized chaos run, once per guarantee: about 20 s
// of joins, drains, crashes, leader crashes, crashes at a handover and
// cluster restarts under continuous input, then every count is checked
// against the input. Every run crashes the leader while a learner warms
// and an instance as a task is handed over to it at least once
// (Config.Cover). On Apache Kafka (BATON_KAFKA=real) a restart kills -9
// one broker and starts it again. BATON_CHAOS_DURATION makes it a long
// run. The seed is fresh per test run and logged first, with the command
// that replays it; BATON_CHAOS_SEED sets it.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("a chaos run takes about a minute; it runs in the full test pass")
	}
	seed := chaosSeed(t)
	for _, g := range []baton.Guarantee{baton.AtLeastOnce, baton.ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) {
			t.Logf("chaos seed %d (replay: %s)", seed, replay(t, seed))
			cfg := Config{Duration: 20 * time.Second, Every: 2 * time.Second, Seed: seed, Guarantee: g, External: external(t, g)}
			for _, c := range mustCover {
				cfg.Cover = append(cfg.Cover, c.kind)
			}
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
				t.Fatalf("chaos seed %d: %v", seed, err)
			}
			t.Log(res)
			if !res.OK() {
				if res.Unsettled != "" {
					t.Logf("the counts never settled:\n%s", res.Unsettled)
				}
				t.Fatalf("chaos seed %d: %s broken: %v (low words: %v; unexcused duplicates: %v; duplicated %d, bound %d)",
					seed, g, res, res.LowWords, res.Unexcused(), res.Duplicated, res.DuplicateBound)
			}
			if res.RecordsIn == 0 || len(res.Events) == 0 {
				t.Fatalf("chaos seed %d: the run did nothing: %v", seed, res)
			}
			for _, c := range mustCover {
				if res.Events[c.kind] == 0 {
					t.Errorf("chaos seed %d: the run never %s (%s): %v", seed, c.what, c.kind, res)
				}
			}
		})
	}
}

// TestCoverChecked: a kind to cover that no run knows, or that this run
// cannot do, is an error before anything starts.
func TestCoverChecked(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Cover: []string{"leader-crash", "meteor"}}, `unknown event kind "meteor"`},
		{Config{Cover: []string{"cluster-restart"}, NoRestart: true}, `"cluster-restart" cannot happen`},
		{Config{Cover: []string{"broker-restart"}}, `"broker-restart" cannot happen`},
		{Config{Cover: []string{"handover-crash"}, MaxAlive: 2}, `"handover-crash" cannot happen`},
	} {
		_, err := Run(context.Background(), c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Cover %v: error %v, want one saying %s", c.cfg.Cover, err, c.want)
		}
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
		{"a lost owner's splitting task", Result{Guarantee: alo, Events: crashes, Duplicated: 5, DuplicateBound: 5, Duplicates: dup("0_1", "1_0"), Intervals: run}, true},
		{"a lost owner's counting task", Result{Guarantee: alo, Events: crashes, Duplicated: 5, DuplicateBound: 9, Duplicates: dup("0_0", "1_1"), Intervals: run}, true},
		{"excused, but more than the lost work explains", Result{Guarantee: alo, Events: crashes, Duplicated: 5, DuplicateBound: 4, Duplicates: dup("0_1", "1_0"), Intervals: run}, false},
		{"excused, but no bound at all", Result{Guarantee: alo, Events: crashes, Duplicated: 5, Duplicates: dup("0_0", "1_1"), Intervals: run}, false},
		{"within the bound, but unexcused", Result{Guarantee: alo, Events: crashes, Duplicated: 5, DuplicateBound: 100, Duplicates: dup("0_0"), Intervals: run}, false},
		{"old: the word's tasks ran on no lost instance", Result{Guarantee: alo, Events: map[string]int{"crash": 1}, Duplicated: 5, Duplicates: dup("0_0", "1_0"), Intervals: run[:2]}, false},
		{"old: the owner was lost in another interval", Result{Guarantee: alo, Events: crashes, Duplicated: 5, Duplicates: dup("0_0"), Intervals: run}, false},
		{"cut off by a cluster restart", Result{Guarantee: alo, Events: map[string]int{"cluster-restart": 1}, Duplicated: 5, DuplicateBound: 5, Duplicates: dup("0_0", "1_0"), Intervals: restart}, true},
		{"cut off by a cluster restart, over the bound", Result{Guarantee: alo, Events: map[string]int{"cluster-restart": 1}, Duplicated: 6, DuplicateBound: 5, Duplicates: dup("0_0", "1_0"), Intervals: restart}, false},
		{"no loss at all", Result{Guarantee: alo, Events: map[string]int{"drain": 1}, Duplicated: 5, Duplicates: dup("0_0", "1_0"), Intervals: run[:1]}, false},
		{"nothing duplicated", Result{Guarantee: alo, Events: map[string]int{"drain": 1}, Intervals: run[:1]}, true},
		{"lost counts", Result{Guarantee: alo, Events: crashes, Lost: 1, Intervals: run}, false},
		{"old: lost input", Result{Guarantee: alo, Events: map[string]int{"cluster-restart": 1}, InputLost: 3, Intervals: restart}, false},
		{"old: lost input, exactly-once", Result{Guarantee: eos, Events: map[string]int{"cluster-restart": 1}, InputLost: 3, Intervals: restart}, false},
		{"exactly-once duplicate", Result{Guarantee: eos, Events: crashes, Duplicated: 1, Duplicates: dup("0_1", "1_1"), Intervals: run}, false},
		{"old: exactly-once history with a repeat", Result{Guarantee: eos, Events: crashes, Histories: []string{"w: value 3 of 6 is 2, want 3"}, Intervals: run}, false},
		{"exactly-once exact", Result{Guarantee: eos, Events: crashes, Intervals: run}, true},
		{"exactly-once duplicate within a bound", Result{Guarantee: eos, Events: crashes, Duplicated: 1, DuplicateBound: 10, Duplicates: dup("0_1", "1_1"), Intervals: run}, false},
	} {
		if got := c.r.OK(); got != c.want {
			t.Errorf("%s: OK() = %v, want %v (%v)", c.name, got, c.want, c.r)
		}
	}
}

// TestActiveAt: the tasks an instance ran as active when lost, from its
// events.
func TestActiveAt(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	ev := func(s float64, kind baton.EventKind, instance, task string) baton.Event {
		return baton.Event{Time: at(s), Kind: kind, Instance: instance, Task: task}
	}
	events := []baton.Event{
		ev(1, baton.EventAssigned, "i1", "0_0"),
		ev(1, baton.EventAssigned, "i1", "1_0"),
		ev(1, baton.EventAssigned, "i1", "0_1"),
		ev(1, baton.EventAssigned, "i2", "1_1"),
		ev(1, baton.EventStandby, "i1", "1_1"),
		ev(2, baton.EventRevoked, "i1", "0_1"), // committed and handed over
		ev(3, baton.EventLost, "i1", "1_0"),    // lost at 3 without a commit
		ev(4, baton.EventLost, "i1", "0_2"),
		ev(5, baton.EventAssigned, "i1", "0_3"),
	}
	for _, c := range []struct {
		since float64
		want  []string
	}{{0, []string{"0_0", "0_2", "0_3", "1_0"}}, {3.5, []string{"0_0", "0_2", "0_3"}}, {9, []string{"0_0", "0_3"}}} {
		if got := activeAt(events, "i1", at(c.since)); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("activeAt(i1, since %vs) = %v, want %v", c.since, got, c.want)
		}
	}
	// Of what i1 ran at 1.5 s, it revoked 0_1 and lost 1_0 since; 0_0 it
	// still holds.
	if got, want := stillHeld(events, "i1", []string{"0_0", "0_1", "1_0"}, at(1.5)), []string{"0_0"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("stillHeld(i1, since 1.5s) = %v, want %v", got, want)
	}
	if got, want := stillHeld(events, "i1", []string{"0_0", "0_1", "1_0"}, at(2.5)), []string{"0_0", "0_1"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("stillHeld(i1, since 2.5s) = %v, want %v", got, want)
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

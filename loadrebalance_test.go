package baton

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-streams/baton/topology"
)

// costlyWordCount is wordcount whose line splitting takes cost (read at
// each line) of wall time per line: the first subtopology's tasks weigh
// what the test sets.
func costlyWordCount(appID, input, output string, cost *atomic.Int64) func() (*topology.Topology, error) {
	return func() (*topology.Topology, error) {
		b := topology.NewBuilder(appID)
		lines := topology.FromTopic(b, input, topology.Bytes, topology.String)
		words := topology.FlatMapValues(lines, func(line string) []string {
			if d := time.Duration(cost.Load()); d > 0 {
				time.Sleep(d)
			}
			return strings.Fields(line)
		})
		byWord := topology.GroupBy(words, func(_ []byte, word string) string { return word }, topology.String, "words")
		topology.Count(byWord, "counts").ToStream().To(output)
		return b.Build()
	}
}

// reportedEverywhere reports whether every active task of every app has
// a load reported to the group at least min.
func reportedEverywhere(min float64, apps ...*running) bool {
	n := 0
	for _, r := range apps {
		for _, ts := range r.app.Status().Tasks {
			if ts.Role == "active" {
				n++
				if ts.LoadReported < min {
					return false
				}
			}
		}
	}
	return n > 0
}

// plansSince returns the plans the leaders made after the first n.
func (h *harness) plansSince(n int) []PlanStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]PlanStatus(nil), h.plans[n:]...)
}

// TestLoadChangeRebalances: loads reach the group without another reason
// to rebalance. Two instances run wordcount while records flow; once
// their tasks are measured they report them (one rebalance), and then a
// steady group makes no plan over many rebalance intervals. When the
// line splitting becomes costly, the splitting tasks' loads climb by
// steps: the instances ask for a rebalance, and the leader plans with
// the new loads.
func TestLoadChangeRebalances(t *testing.T) {
	h := newHarness(t, 4)
	var cost atomic.Int64
	h.build = costlyWordCount(h.appID, h.input, h.output, &cost)
	const (
		step  = 0.1
		every = 2 * time.Second
	)
	opts := []Option{withInputLagInterval(200 * time.Millisecond), withLoadTimings(3*time.Second, time.Second),
		WithLoadStep(step), WithLoadRebalanceInterval(every), WithWorkers(2)}
	f := h.startFlow(50 * time.Millisecond) // 400 lines a second, 100 to each partition
	a, b := h.start("a", opts...), h.start("b", opts...)
	h.eventually(60*time.Second, "both instances report the loads of their active tasks", func() bool {
		return reportedEverywhere(step, a) && reportedEverywhere(step, b)
	})

	// steady waits for the group to settle (no plan for 4 intervals),
	// then requires no plan for 5 more.
	steady := func(what string) {
		t.Helper()
		n := len(h.plansSince(0))
		h.eventually(60*time.Second, "the group to settle "+what, func() bool {
			time.Sleep(4 * every)
			m := len(h.plansSince(0))
			defer func() { n = m }()
			return m == n
		})
		time.Sleep(5 * every)
		if ps := h.plansSince(n); len(ps) > 0 {
			for _, p := range ps {
				t.Logf("generation %d: loads %v; reasons %v", p.Generation, p.Loads, p.Reasons)
			}
			t.Fatalf("%d plans in %v of steady loads %s, want none", len(ps), 5*every, what)
		}
	}
	steady("before the change")
	for _, r := range []*running{a, b} {
		for _, ts := range r.app.Status().Tasks {
			if ts.Role == "active" && ts.LoadReported != step {
				t.Fatalf("%s: task %s reported at %v, want %v (light tasks weigh one step)", r.app.InstanceID(), ts.ID, ts.LoadReported, step)
			}
		}
	}

	// 2 ms a line at 100 lines a second: a fifth of a worker for a
	// splitting task of an even share of the lines (the flow's keys
	// spread them unevenly), a step or more above what was reported.
	seen := len(h.plansSince(0))
	cost.Store(int64(2 * time.Millisecond))
	h.eventually(60*time.Second, "a plan with the splitting tasks' new loads (8 steps in all, 4 before)", func() bool {
		for _, p := range h.plansSince(seen) {
			var sum float64
			for id, l := range p.Loads {
				if strings.HasPrefix(id, "0_") {
					sum += l
				}
			}
			if sum >= 8*step-1e-9 {
				return true
			}
		}
		return false
	})
	// Whether the group is quiet again once the new loads hold steady
	// depends on how steady they are: on a shared machine a costly
	// processor's busy share wobbles by more than a step for minutes, and
	// each instance then asks again once per interval, as it should. The
	// hysteresis and the limit are held by TestAskSteadyLoadsAskOnce and
	// TestAskAtMostOnceEvery (internal/load), on loads the tests set.

	f.stop()
	h.waitExact(60 * time.Second)
}

// TestLoadOptions: the step may be 0 (no loads reported) up to 1, and
// the rebalance interval is at least a second.
func TestLoadOptions(t *testing.T) {
	top, err := topology.WordCount("app", "in", "out")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		opts []Option
		want string
	}{
		{[]Option{WithLoadStep(-0.1)}, "load step: want at least 0 and at most 1, got -0.1"},
		{[]Option{WithLoadStep(1.5)}, "load step: want at least 0 and at most 1, got 1.5"},
		{[]Option{WithLoadRebalanceInterval(time.Millisecond)}, "load rebalance interval: want at least 1s, got 1ms"},
		{[]Option{WithLoadStep(0)}, ""},
		{[]Option{WithLoadStep(1), WithLoadRebalanceInterval(time.Second)}, ""},
	} {
		_, err := New(top, append([]Option{WithBrokers("127.0.0.1:1"), WithMemoryState()}, c.opts...)...)
		if c.want == "" && err != nil || c.want != "" && (!errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: got %v, want %q", fmt.Sprint(c.opts), err, c.want)
		}
	}
}

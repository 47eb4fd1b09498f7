package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestMeasureScaleGaps measures, from outside, what a scale-out and a
// drain cost the tasks of `baton run wordcount` processes: two instances
// run under a steady word flow, a third joins, then drains (SIGTERM). A
// sampler reads every instance's /status every 20 ms and notes when each
// task's processed count moves. For each event it reports the normal gap
// (the longest pause of any task in the 5 s before it), the longest pause
// of the tasks that did not move during the event and its ratio to the
// normal gap, and the handover gap of the tasks that moved. It asserts no
// timing (the machine is shared); it checks that no word is under-counted.
// Run it with
//
//	BATON_MEASURE=1 go test ./cmd/baton -run TestMeasureScaleGaps -v
//
// (add BATON_KAFKA=real for Apache Kafka).
func TestMeasureScaleGaps(t *testing.T) {
	if os.Getenv("BATON_MEASURE") == "" {
		t.Skip("a measurement: set BATON_MEASURE=1")
	}
	e := clusterWithLines(t)
	s := &sampler{addrs: map[string]string{}, last: map[string]sample{}, moves: map[string][]time.Time{}, owner: map[string]string{}}
	start := func(id string) *proc {
		p, addr := e.run(t, "--instance-id", id, "--state-dir", t.TempDir())
		s.mu.Lock()
		s.addrs[id] = addr
		s.mu.Unlock()
		return p
	}
	a, b := start("a"), start("b")
	stop := make(chan struct{})
	go s.run(stop)
	defer close(stop)
	waitUntil(t, 90*time.Second, "a and b to run the 8 tasks", func() bool { return len(s.owners()) == 8 })
	flow := e.startWordFlow(1)
	time.Sleep(8 * time.Second)

	event := func(name string, act func(), settled func() bool) {
		before := s.owners()
		from := time.Now()
		act()
		waitUntil(t, 120*time.Second, name+" to settle", settled)
		time.Sleep(2 * time.Second)
		to := time.Now()
		after := s.owners()
		normal := s.longestGap(nil, from.Add(-5*time.Second), from)
		var unmoved, moved []string
		for id, in := range before {
			if after[id] == in {
				unmoved = append(unmoved, id)
			} else {
				moved = append(moved, id)
			}
		}
		sort.Strings(moved)
		longest := s.longestGap(unmoved, from, to)
		handover := s.longestGap(moved, from, to)
		t.Logf("%s: normal gap %v; unmoved tasks (%d) longest gap %v = x%.1f; moved %v, longest handover gap %v",
			name, normal.Round(time.Millisecond), len(unmoved), longest.Round(time.Millisecond),
			float64(longest)/float64(max(normal, time.Millisecond)), moved, handover.Round(time.Millisecond))
		time.Sleep(5 * time.Second) // the next event's baseline
	}
	var c *proc
	event("scale-out 2->3", func() { c = start("c") }, func() bool {
		n := map[string]int{}
		for _, in := range s.owners() {
			n[in]++
		}
		return len(s.owners()) == 8 && n["c"] >= 2 && n["a"] >= 2 && n["b"] >= 2
	})
	event("drain 3->2", func() {
		if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}, func() bool {
		n := 0
		for _, in := range s.owners() {
			if in != "c" {
				n++
			}
		}
		return n == 8
	})
	want := flow.end(t)
	waitUntil(t, 60*time.Second, "every word counted", func() bool {
		got := e.readCounts(t)
		for w, n := range want {
			if got[w] < n {
				return false
			}
		}
		return true
	})
	c.stop(t, 60*time.Second)
	a.stop(t, 60*time.Second)
	b.stop(t, 60*time.Second)
	if os.Getenv("BATON_MEASURE_LOGS") != "" {
		for id, p := range map[string]*proc{"a": a, "b": b, "c": c} {
			t.Logf("instance %s:\n%s", id, p.stderr)
		}
	}
}

type sample struct {
	instance  string
	processed int64
}

// sampler polls every instance's /status and keeps, per task, the times
// its processed count moved.
type sampler struct {
	mu    sync.Mutex
	addrs map[string]string // instance -> http address
	last  map[string]sample // task@instance -> last count seen
	moves map[string][]time.Time
	owner map[string]string // task -> instance running it
}

func (s *sampler) run(stop <-chan struct{}) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		s.mu.Lock()
		addrs := maps.Clone(s.addrs)
		s.mu.Unlock()
		now := time.Now()
		seen := map[string]string{}
		for in, addr := range addrs {
			st, err := fetchStatus(addr)
			if err != nil {
				continue // stopped or stopping
			}
			for _, task := range st.Tasks {
				if task.Role != "active" {
					continue
				}
				seen[task.ID] = in
				key := task.ID + "@" + in
				s.mu.Lock()
				// A task that comes back to an instance counts from 0
				// again: any change of a positive count is progress.
				if task.Processed > 0 && task.Processed != s.last[key].processed {
					s.moves[task.ID] = append(s.moves[task.ID], now)
					s.last[key] = sample{instance: in, processed: task.Processed}
				}
				s.mu.Unlock()
			}
		}
		s.mu.Lock()
		s.owner = seen
		s.mu.Unlock()
	}
}

func (s *sampler) owners() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.owner)
}

// longestGap is the longest time between two moves of any of tasks (all
// when nil) within [from, to], counting the edges.
func (s *sampler) longestGap(tasks []string, from, to time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var longest time.Duration
	for id, ms := range s.moves {
		if tasks != nil && !slices.Contains(tasks, id) {
			continue
		}
		prev := from
		for _, m := range ms {
			if m.Before(from) {
				continue
			}
			if m.After(to) {
				break
			}
			longest = max(longest, m.Sub(prev))
			prev = m
		}
		longest = max(longest, to.Sub(prev))
	}
	return longest
}

func fetchStatus(addr string) (statusDoc, error) {
	var st statusDoc
	cl := http.Client{Timeout: time.Second}
	resp, err := cl.Get("http://" + addr + "/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return st, fmt.Errorf("status %d", resp.StatusCode)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

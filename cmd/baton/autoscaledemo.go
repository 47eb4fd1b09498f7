package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/autoscale"
	"github.com/baton-streams/baton/bench"
	"github.com/baton-streams/baton/topology"
)

// The autoscale demo's load and costs. Each line costs lineCost of work
// (a sleep: on one machine a real computation would not scale with the
// instances, which share its cores), so one instance of one worker
// sustains about 1/lineCost lines a second: 250. The steady load needs
// one instance, the spike three or more, the lull one again.
const (
	lineCost      = 4 * time.Millisecond
	steadyRate    = 150 // lines/s
	spikeRate     = 600
	lullRate      = 100
	steadyFor     = 20 * time.Second
	spikeFor      = 45 * time.Second
	lullAtMost    = 150 * time.Second // the lull ends earlier once the group is back at its minimum
	autoDistinct  = 120000            // words the counts start with: state for the learners to restore
	autoMax       = partitions        // one count task per instance at most
	superviseTick = 500 * time.Millisecond
	settleFor     = time.Second // balanced this long counts as balanced
)

// demoAutoscaleConfig is the rule the demo's instances follow: the defaults'
// shape with windows short enough for a demo of a few minutes (out after
// 5s of higher need, in after 20s of lower need; a lag that does not
// shrink is to be worked off within 30s).
func demoAutoscaleConfig() autoscale.Config {
	cfg := autoscale.DefaultConfig()
	cfg.OutWindow = 5 * time.Second
	cfg.InWindow = 20 * time.Second
	cfg.DrainTime = 30 * time.Second
	cfg.MaxInstances = autoMax
	return cfg
}

// slowWordCount is wordcount whose split step costs lineCost a line.
func slowWordCount() (*topology.Topology, error) {
	b := topology.NewBuilder(demoApp)
	lines := topology.FromTopic(b, demoLines, topology.Bytes, topology.String)
	words := topology.FlatMapValues(lines, func(line string) []string {
		time.Sleep(lineCost) // the work a line takes
		return strings.Fields(line)
	})
	byWord := topology.GroupBy(words, func(_ []byte, word string) string { return word }, topology.String, demoWords)
	topology.Count(byWord, "counts").ToStream().To(demoCounts)
	return b.Build()
}

// scaler is one run of `baton demo --autoscale`: the demo's cluster and
// instances, a supervisor that follows the leader's recommendation, and
// what it saw.
type scaler struct {
	*demo
	rec  *bench.Recorder
	rate atomic.Int64 // lines/s the producer writes now

	mu      sync.Mutex // guards the fields below
	live    []string   // running and not draining, oldest first
	next    int        // the number of the next instance id
	changes []change
	figures []bench.EventFigures
	peakLag int64
	peakAt  time.Duration
	// draining: instances asked to drain whose Run has not returned;
	// drainErrs: what the others' Run returned, if not nil.
	draining  map[string]bool
	drainErrs []error
	recStart  time.Time
	failed    error // what the supervisor returned, if it did
}

// change is one action of the supervisor.
type change struct {
	at       time.Duration
	from, to int
	reason   string
	ids      []string
}

func runAutoscaleDemo(ctx context.Context, out io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	d := newDemo(out)
	s := &scaler{demo: d, rec: bench.NewRecorder(20 * time.Millisecond), draining: map[string]bool{}}
	s.recStart = s.rec.Snapshot().Start
	d.build = slowWordCount
	d.opts = []baton.Option{baton.WithAutoscale(demoAutoscaleConfig())}
	d.listener, d.terse = s.rec.Listen, true
	cleanup, err := d.setUp()
	if err != nil {
		return err
	}
	defer cleanup()
	fmt.Fprintln(out, "baton demo --autoscale: wordcount on an embedded cluster, scaled by its own recommendation.")
	fmt.Fprintf(out, "Each line costs %v of work, so one instance (one worker) sustains about %d lines/s.\n", lineCost, int(time.Second/lineCost))
	fmt.Fprintf(out, "Load: %d lines/s for %v, a spike of %d lines/s for %v, then %d lines/s until the group is back at one instance.\n",
		steadyRate, steadyFor, spikeRate, spikeFor, lullRate)
	fmt.Fprintln(out, "A supervisor starts and drains instances only as the leader's recommendation (baton_desired_instances) says.")
	fmt.Fprintln(out)
	d.say("cluster ready at %s", strings.Join(d.brokers, ","))

	cl, err := d.createTopics(ctx, autoDistinct)
	if err != nil {
		return err
	}
	defer cl.Close()
	defer d.pollOffsets(ctx, cl)()
	defer d.stopAll()
	recCtx, stopRec := context.WithCancel(ctx)
	defer stopRec()
	go s.rec.Run(recCtx)
	if err := s.load(ctx); err != nil {
		return err
	}
	if _, err := s.start(); err != nil {
		return err
	}
	if err := d.waitFor(ctx, 40*time.Second, "i1 to run every task", s.balanced); err != nil {
		return err
	}
	d.mu.Lock()
	d.joinAt = time.Now() // narrate from here
	d.mu.Unlock()

	pctx, stopProducer := context.WithCancel(ctx)
	defer stopProducer()
	produced := make(chan error, 1)
	var credit float64
	go func() {
		produced <- d.produce(pctx, cl, func() int { // lines per 20ms tick at the current rate
			credit += float64(s.rate.Load()) / 50
			n := int(credit)
			credit -= float64(n)
			return n
		})
	}()
	sctx, stopSupervisor := context.WithCancel(ctx)
	defer stopSupervisor()
	supervised := make(chan error, 1)
	go func() {
		err := s.supervise(sctx)
		s.mu.Lock()
		s.failed = err
		s.mu.Unlock()
		supervised <- err
	}()

	s.setRate(steadyRate, "steady load")
	pause := func(d time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-supervised:
			return fmt.Errorf("supervisor: %w", err)
		case <-time.After(d):
			return nil
		}
	}
	if err := pause(steadyFor); err != nil {
		return err
	}
	spikeAt := s.setRate(spikeRate, "spike")
	if err := pause(spikeFor); err != nil {
		return err
	}
	lullAt := s.setRate(lullRate, "lull")
	scaledOut := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, c := range s.changes {
			if c.to > c.from {
				return true
			}
		}
		return false
	}
	if !scaledOut() {
		return fmt.Errorf("demo: the group was never recommended more than one instance during the spike (%d lines/s)", spikeRate)
	}
	err = d.waitFor(ctx, lullAtMost, "the group to be back at one instance", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.failed != nil || len(s.live) == 1 && !s.acting()
	})
	if err != nil {
		return err
	}
	s.mu.Lock()
	failed := s.failed
	s.mu.Unlock()
	if failed != nil {
		return fmt.Errorf("supervisor: %w", failed)
	}
	if err := pause(5 * time.Second); err != nil {
		return err
	}
	stopSupervisor()
	if err := <-supervised; err != nil && ctx.Err() == nil {
		return fmt.Errorf("supervisor: %w", err)
	}
	stopProducer()
	if err := <-produced; err != nil {
		return err
	}
	s.mu.Lock()
	errs := s.drainErrs
	s.mu.Unlock()
	if len(errs) > 0 {
		return fmt.Errorf("demo: a drained instance failed: %w", errors.Join(errs...))
	}
	d.say("producer stopped; checking every count")
	verified, err := d.verify(ctx)
	if err != nil {
		return err
	}
	s.summary(verified, spikeAt, lullAt)
	return nil
}

// load has the words written so far counted by an instance of plain
// (fast) wordcount, which then leaves: the counts' state is in place
// before the story starts, without the per-line cost.
func (s *scaler) load(ctx context.Context) error {
	build := s.build
	s.build = nil
	defer func() { s.build = build }()
	if err := s.startInstance("loader"); err != nil {
		return err
	}
	s.demo.mu.Lock()
	app, stop, done := s.apps["loader"], s.stops["loader"], s.dones["loader"]
	delete(s.apps, "loader")
	delete(s.stops, "loader")
	delete(s.dones, "loader")
	s.demo.mu.Unlock()
	err := s.waitFor(ctx, 60*time.Second, "the loader to count the first words", func() bool {
		var n int64
		for _, t := range app.Status().Tasks {
			if strings.HasPrefix(t.ID, "1_") {
				n += t.Processed
			}
		}
		return n >= autoDistinct
	})
	stop()
	if err2 := <-done; err == nil && err2 != nil {
		err = fmt.Errorf("loader: %w", err2)
	}
	if err == nil {
		s.say("a loader instance counted them and left")
	}
	return err
}

// setRate changes the producer's rate and returns when, since the start.
func (s *scaler) setRate(lines int64, what string) time.Duration {
	s.rate.Store(lines)
	s.say("%s: %d lines/s", what, lines)
	return time.Since(s.demo.start)
}

// start starts the next instance and counts it as live.
func (s *scaler) start() (string, error) {
	s.mu.Lock()
	s.next++
	id := "i" + strconv.Itoa(s.next)
	s.mu.Unlock()
	if err := s.startInstance(id); err != nil {
		return "", err
	}
	s.demo.mu.Lock()
	app := s.apps[id]
	s.demo.mu.Unlock()
	s.rec.Watch(id, app)
	s.mu.Lock()
	s.live = append(s.live, id)
	s.mu.Unlock()
	return id, nil
}

// acting reports whether an instance is still draining. s.mu is held.
func (s *scaler) acting() bool { return len(s.draining) > 0 }

// statuses returns the live instances' statuses.
func (s *scaler) statuses() []baton.Status {
	s.mu.Lock()
	ids := append([]string(nil), s.live...)
	s.mu.Unlock()
	s.demo.mu.Lock()
	defer s.demo.mu.Unlock()
	sts := make([]baton.Status, 0, len(ids))
	for _, id := range ids {
		sts = append(sts, s.apps[id].Status())
	}
	return sts
}

// balanced reports whether the live instances share every task with no
// learner left.
func (s *scaler) balanced() bool { return bench.Balanced(partitions, s.statuses()...) }

// supervise follows the leader's recommendation until ctx is done: it
// starts instances when it is above the live count, drains the newest
// ones (never the leader) when it is below, and after each change waits
// for the group to be balanced before it looks again.
func (s *scaler) supervise(ctx context.Context) error {
	lastEnd := time.Duration(0)
	lastNeeded := -1
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(superviseTick):
		}
		var rec *baton.AutoscaleStatus
		leader := ""
		for _, st := range s.statuses() {
			if st.Leader && st.Autoscale != nil {
				rec, leader = st.Autoscale, st.Instance
			}
		}
		if rec == nil {
			continue
		}
		s.mu.Lock()
		if rec.Lag > s.peakLag {
			s.peakLag, s.peakAt = rec.Lag, time.Since(s.demo.start)
		}
		n := len(s.live)
		s.mu.Unlock()
		want := rec.DesiredInstances
		if rec.Needed != lastNeeded {
			s.say("leader %s: %s", leader, rec.Reason)
			lastNeeded = rec.Needed
		}
		if want == n {
			continue
		}
		t0 := time.Since(s.recStart)
		c := change{at: time.Since(s.demo.start), from: n, to: want, reason: rec.Reason}
		if want > n {
			for range want - n {
				id, err := s.start()
				if err != nil {
					return err
				}
				c.ids = append(c.ids, id)
			}
			s.say("recommendation %d instances (%s): starting %s", want, rec.Reason, strings.Join(c.ids, ", "))
		} else {
			c.ids = s.drain(n-want, leader)
			s.say("recommendation %d instances (%s): draining %s", want, rec.Reason, strings.Join(c.ids, ", "))
		}
		s.mu.Lock()
		s.changes = append(s.changes, c)
		s.mu.Unlock()
		var balancedAt time.Duration
		since := time.Duration(-1)
		err := s.waitFor(ctx, 90*time.Second, fmt.Sprintf("%d instances to balance", want), func() bool {
			now := time.Since(s.recStart)
			s.mu.Lock()
			busy := s.acting()
			s.mu.Unlock()
			if busy || !s.balanced() {
				since = -1
				return false
			}
			if since < 0 {
				since = now
			}
			return now-since >= settleFor
		})
		if err != nil {
			return err
		}
		balancedAt = since
		s.say("balanced at %d instances (%.1fs after the change)", want, (balancedAt - t0).Seconds())
		time.Sleep(2 * time.Second)
		s.rec.Sample()
		name := fmt.Sprintf("%d -> %d", c.from, c.to)
		w := bench.Window{Event: name, Start: t0, Balanced: balancedAt, End: time.Since(s.recStart),
			Baseline: min(5*time.Second, t0-lastEnd)}
		ef := bench.Analyze(s.rec.Snapshot(), w, func(task string) bool { return strings.HasPrefix(task, "1_") })
		lastEnd = w.End
		s.mu.Lock()
		s.figures = append(s.figures, ef)
		s.mu.Unlock()
	}
}

// drain asks the k newest live instances other than leader to drain and
// returns their ids; they stop being live at once, and are draining until
// their Run returns.
func (s *scaler) drain(k int, leader string) []string {
	s.mu.Lock()
	var ids []string
	for i := len(s.live) - 1; i >= 0 && len(ids) < k; i-- {
		if id := s.live[i]; id != leader {
			ids = append(ids, id)
			s.live = append(s.live[:i], s.live[i+1:]...)
			s.draining[id] = true
		}
	}
	s.mu.Unlock()
	s.demo.mu.Lock()
	defer s.demo.mu.Unlock()
	for _, id := range ids {
		done := s.dones[id]
		s.stops[id]() // cancelling Run drains the instance
		delete(s.stops, id)
		delete(s.dones, id)
		delete(s.apps, id)
		go func() {
			err := <-done
			s.mu.Lock()
			defer s.mu.Unlock()
			delete(s.draining, id)
			if err != nil {
				s.drainErrs = append(s.drainErrs, fmt.Errorf("%s: %w", id, err))
			}
		}()
	}
	return ids
}

// summary prints the recommendation's changes, each scale event's figures
// and the result.
func (s *scaler) summary(verified string, spikeAt, lullAt time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.demo.mu.Lock()
	s.quiet = true
	s.demo.mu.Unlock()
	out := s.out
	fmt.Fprintln(out)
	fmt.Fprintln(out, "Instance count, as the recommendation changed:")
	counts := []string{"1"}
	for _, c := range s.changes {
		fmt.Fprintf(out, "  %6.1fs  %d -> %d  %s  (%s)\n", c.at.Seconds(), c.from, c.to, strings.Join(c.ids, ","), c.reason)
		counts = append(counts, strconv.Itoa(c.to))
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, "Scale events (unmoved pause: an unmoved task's longest gap over its normal gap):")
	fmt.Fprintf(out, "  %-7s %9s %6s %10s %10s %9s %9s %9s\n", "event", "balanced", "moved", "handover", "unmoved", "revoked", "pause", "learners")
	for _, ef := range s.figures {
		fmt.Fprintf(out, "  %-7s %8.1fs %6d %10s %10d %9d %8.1fx %9s\n", ef.Event, ef.TimeToBalance.Seconds(), ef.Moved,
			ef.HandoverMax.Round(time.Millisecond), ef.Unmoved, ef.UnmovedRevoked, ef.UnmovedPause, ef.LearnerRestoreMax.Round(time.Millisecond))
	}
	for _, ef := range s.figures {
		if ef.HandoverTask != "" {
			fmt.Fprintf(out, "  %s: longest handover %s: %s\n", ef.Event, ef.HandoverTask, ef.HandoverParts)
		}
	}
	for _, ef := range s.figures {
		for _, tf := range ef.Tasks {
			if tf.Revoked && !tf.Moved {
				fmt.Fprintf(out, "  %s: %s revoked but not moved (from %q to %q)\n", ef.Event, tf.Task, tf.From, tf.To)
			}
		}
	}
	// The first record a new instance processed after the spike began.
	rec := s.rec.Snapshot()
	firstNew := time.Duration(-1)
	var events []baton.Event
	events = append(events, rec.Events...)
	sort.SliceStable(events, func(i, j int) bool { return events[i].Time.Before(events[j].Time) })
	for _, e := range events {
		at := e.Time.Sub(s.demo.start)
		if e.Kind == baton.EventFirstRecord && e.Instance != "i1" && at > spikeAt {
			firstNew = at
			break
		}
	}
	fmt.Fprintln(out)
	if firstNew >= 0 {
		fmt.Fprintf(out, "Spike at %.1fs; a new instance processed its first record at %.1fs (%.1fs later).\n",
			spikeAt.Seconds(), firstNew.Seconds(), (firstNew - spikeAt).Seconds())
	}
	fmt.Fprintf(out, "Peak group lag: %d records at %.1fs (lull from %.1fs).\n", s.peakLag, s.peakAt.Seconds(), lullAt.Seconds())
	fmt.Fprintf(out, "The instance count changed %d times: %s.\n", len(s.changes), strings.Join(counts, " -> "))
	fmt.Fprintln(out, verified)
}

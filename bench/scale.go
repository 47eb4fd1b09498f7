package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/assign"
)

// ScaleConfig sets up `bench scale`. Zero fields take the defaults of
// DefaultScaleConfig.
type ScaleConfig struct {
	Policies   []assign.Policy `json:"policies"`
	Keys       int             `json:"keys"`       // distinct words prefilled: the state
	Rate       int             `json:"rate"`       // input lines/s during the script
	Partitions int32           `json:"partitions"` // input partitions: 2 tasks each
	// AcceptableLag is the instances' WithAcceptableLag.
	AcceptableLag int64 `json:"acceptable_lag"`
	// Steady is the baseline before each event; Settle how long the group
	// must stay balanced for the event to count as over.
	Steady time.Duration `json:"steady_ns"`
	Settle time.Duration `json:"settle_ns"`
	// Sample is the Status sampling interval: the resolution of gaps.
	Sample  time.Duration `json:"sample_ns"`
	Timeout time.Duration `json:"timeout_ns"` // for any one wait
	// Brokers, if set, is a cluster to run on instead of a fresh embedded
	// one per policy (topic names and application ids unique to the run).
	Brokers []string `json:"brokers,omitempty"`
	// Heartbeat and Session are the instances' group heartbeat interval
	// and session timeout (0: baton's defaults). They are fields rather
	// than Options because the simulator's scenarios need them.
	Heartbeat time.Duration `json:"heartbeat_ns,omitempty"`
	Session   time.Duration `json:"session_ns,omitempty"`
	// Options are added to every instance's.
	Options []baton.Option `json:"-"`
	// SimScenarios, if set, is a directory (created if missing) where the
	// bench writes each event's scenario for `baton sim`, named
	// POLICY-EVENT.txt. The prediction beside each event's figures is
	// computed from that scenario whether or not it is written.
	SimScenarios string `json:"sim_scenarios,omitempty"`
	// Log, if set, receives a line per step as the script runs.
	Log io.Writer `json:"-"`
}

// DefaultScaleConfig is the full-size run: a cold restore of a moved
// task's state takes seconds on a 2-core machine.
func DefaultScaleConfig() ScaleConfig {
	return ScaleConfig{Policies: assign.Policies, Keys: 1_000_000, Rate: 1000, Partitions: 6, AcceptableLag: assign.DefaultAcceptableLag,
		Steady: 5 * time.Second, Settle: 2 * time.Second, Sample: 5 * time.Millisecond, Timeout: 3 * time.Minute}
}

// SmokeScaleConfig is a tiny run for tests and CI. Its acceptable lag is
// scaled down with the state, so that moves still go through learners.
func SmokeScaleConfig() ScaleConfig {
	c := DefaultScaleConfig()
	c.Keys, c.Rate, c.Partitions, c.AcceptableLag = 3000, 300, 6, 50
	c.Steady, c.Settle, c.Timeout = 1200*time.Millisecond, 800*time.Millisecond, 60*time.Second
	c.Session = time.Second
	c.Options = []baton.Option{baton.WithRebalanceTimeout(3 * time.Second)}
	return c
}

func (c ScaleConfig) withDefaults() ScaleConfig {
	d := DefaultScaleConfig()
	if len(c.Policies) == 0 {
		c.Policies = d.Policies
	}
	orDefault(&c.Keys, d.Keys)
	orDefault(&c.Rate, d.Rate)
	orDefault(&c.Partitions, d.Partitions)
	orDefault(&c.Steady, d.Steady)
	orDefault(&c.Settle, d.Settle)
	orDefault(&c.AcceptableLag, d.AcceptableLag)
	orDefault(&c.Sample, d.Sample)
	orDefault(&c.Timeout, d.Timeout)
	if c.Log == nil {
		c.Log = io.Discard
	}
	return c
}

// orDefault sets *v to d unless *v is positive.
func orDefault[T int | int32 | int64 | time.Duration](v *T, d T) {
	if *v <= 0 {
		*v = d
	}
}

// The scripted events, in the order they run.
const (
	EventOut          = "out 2->3"
	EventIn           = "in 3->2 (drain)"
	EventCrash        = "crash 3->2, 0 standbys"
	EventCrashStandby = "crash 3->2, 1 standby"
)

// ScaleResult is the output of RunScale: one run of the script per policy.
type ScaleResult struct {
	Config ScaleConfig `json:"config"`
	Runs   []PolicyRun `json:"runs"`
}

// PolicyRun is the script under one policy.
type PolicyRun struct {
	Policy string         `json:"policy"`
	Events []EventFigures `json:"events"`
	// Throughput is records/s processed per instance, in buckets of
	// Bucket from the start of the recording.
	Bucket     time.Duration        `json:"bucket_ns"`
	Throughput map[string][]float64 `json:"throughput"`
	// Words is the distinct words verified in the output at the end;
	// OverCounted those counted more than produced (replays after a crash).
	Words       int           `json:"words"`
	OverCounted int           `json:"over_counted"`
	Produced    int64         `json:"produced_lines"`
	Elapsed     time.Duration `json:"elapsed_ns"`
	Error       string        `json:"error,omitempty"`
}

// RunScale runs the scale script once per policy, each on a fresh cluster.
// A policy whose run fails is reported with its error and the others
// still run; the error returned is the first one.
func RunScale(ctx context.Context, cfg ScaleConfig) (*ScaleResult, error) {
	cfg = cfg.withDefaults()
	if cfg.SimScenarios != "" {
		if err := os.MkdirAll(cfg.SimScenarios, 0o755); err != nil {
			return nil, fmt.Errorf("bench: directory for the sim scenarios %q: %w", cfg.SimScenarios, err)
		}
	}
	res := &ScaleResult{Config: cfg}
	var first error
	for _, p := range cfg.Policies {
		fmt.Fprintf(cfg.Log, "== policy %s\n", p)
		run, err := runScalePolicy(ctx, cfg, p)
		if err != nil {
			run.Error = err.Error()
			fmt.Fprintf(cfg.Log, "   policy %s failed: %v\n", p, err)
			if first == nil {
				first = err
			}
		}
		res.Runs = append(res.Runs, run)
		if ctx.Err() != nil {
			break
		}
	}
	return res, first
}

// script is one policy's run in progress.
type script struct {
	ctx    context.Context
	cfg    ScaleConfig
	policy assign.Policy
	e      *env
	rec    *Recorder
	run    *PolicyRun
	flow   *flow // the steady input, once started
	// before is the group as it was just before the event in progress.
	before []groupMember
}

// taskIDs lists the wordcount's tasks: 0_p and 1_p for every partition.
func (s *script) taskIDs() []string {
	ids := make([]string, 0, 2*s.cfg.Partitions)
	for p := range s.cfg.Partitions {
		ids = append(ids, fmt.Sprintf("0_%d", p), fmt.Sprintf("1_%d", p))
	}
	return ids
}

func (s *script) logf(format string, args ...any) {
	fmt.Fprintf(s.cfg.Log, "%7.1fs  %s\n", time.Since(s.rec.start).Seconds(), fmt.Sprintf(format, args...))
}

func (s *script) start(id string, standbys int) (*instance, error) {
	opts := []baton.Option{baton.WithPolicy(s.policy), baton.WithStandbys(standbys),
		baton.WithAcceptableLag(s.cfg.AcceptableLag)}
	if s.cfg.Heartbeat > 0 {
		opts = append(opts, baton.WithHeartbeatInterval(s.cfg.Heartbeat))
	}
	if s.cfg.Session > 0 {
		opts = append(opts, baton.WithSessionTimeout(s.cfg.Session))
	}
	opts = append(opts, s.cfg.Options...)
	in, err := s.e.start(instanceConfig{appID: "wc" + s.e.suffix, id: id, opts: opts, listener: s.rec.Listen})
	if err != nil {
		return nil, err
	}
	s.rec.Watch(in.id, in.app)
	return in, nil
}

func runScalePolicy(ctx context.Context, cfg ScaleConfig, policy assign.Policy) (PolicyRun, error) {
	run := PolicyRun{Policy: string(policy), Bucket: 250 * time.Millisecond}
	began := time.Now()
	e, err := newPrefilledEnv(ctx, cfg.Brokers, cfg.Partitions, cfg.Keys)
	if err != nil {
		return run, err
	}
	defer e.close()
	rec := NewRecorder(cfg.Sample)
	s := &script{ctx: ctx, cfg: cfg, policy: policy, e: e, rec: rec, run: &run}
	s.logf("prefilled %d keys", cfg.Keys)
	rctx, stopRec := context.WithCancel(ctx)
	recDone := make(chan struct{})
	go func() { rec.Run(rctx); close(recDone) }()
	err = s.play()
	if s.flow != nil {
		if ferr := s.flow.stop(); err == nil {
			err = ferr
		}
		run.Produced = s.flow.produced.Load()
	}
	stopRec()
	<-recDone
	r := rec.Snapshot()
	run.Throughput = throughput(r, run.Bucket)
	if err == nil {
		s.logf("verifying every count")
		run.Words, run.OverCounted, err = e.verify(ctx, cfg.Timeout)
	}
	run.Elapsed = time.Since(began)
	return run, err
}

// play runs the events. The steady input starts once the prefill is
// processed.
func (s *script) play() error {
	p := s.cfg.Partitions
	i1, err := s.start("i1", 0)
	if err != nil {
		return err
	}
	i2, err := s.start("i2", 0)
	if err != nil {
		return err
	}
	if err := s.waitBalanced("i1 and i2 to share the work", i1, i2); err != nil {
		return err
	}
	if err := waitFor(s.ctx, s.cfg.Timeout, "the prefill to be processed", func() bool {
		return s.rec.total("1_") >= int64(s.cfg.Keys)
	}); err != nil {
		return err
	}
	s.logf("i1 and i2 processed the prefill; steady input at %d lines/s", s.cfg.Rate)
	s.flow = s.e.startFlow(s.cfg.Rate, s.cfg.Keys)
	s.rec.WatchInput(s.flow.produced.Load)
	s.pause(s.cfg.Steady)

	// out: a third instance joins.
	s.snapshot(i1, i2)
	t0 := s.now()
	i3, err := s.start("i3", 0)
	if err != nil {
		return err
	}
	if err := s.event(EventOut, t0, simEvent{"join", "i3"}, i1, i2, i3); err != nil {
		return err
	}
	// in: i3 drains.
	s.snapshot(i1, i2, i3)
	t0 = s.now()
	i3.drain()
	if err := s.event(EventIn, t0, simEvent{"leave", "i3"}, i1, i2); err != nil {
		return err
	}
	if err := i3.wait(s.cfg.Timeout); err != nil {
		return fmt.Errorf("bench: drained instance i3: %w", err)
	}
	// crash without standbys: i4 joins (not measured), then dies.
	i4, err := s.start("i4", 0)
	if err != nil {
		return err
	}
	if err := s.waitBalanced("i4 to take its share", i1, i2, i4); err != nil {
		return err
	}
	s.pause(s.cfg.Steady)
	s.snapshot(i1, i2, i4)
	t0 = s.now()
	i4.crash()
	err = s.event(EventCrash, t0, simEvent{"crash", "i4"}, i1, i2)
	i4.kill()
	if err != nil {
		return err
	}
	// crash with one standby: a new generation of instances, configured
	// with a standby per task, restores (not measured); then one dies.
	s.logf("restarting with 1 standby per task")
	i1.kill()
	i2.kill()
	j1, err := s.start("j1", 1)
	if err != nil {
		return err
	}
	j2, err := s.start("j2", 1)
	if err != nil {
		return err
	}
	j3, err := s.start("j3", 1)
	if err != nil {
		return err
	}
	if err := s.waitBalanced("j1, j2 and j3 to share the work", j1, j2, j3); err != nil {
		return err
	}
	if err := waitFor(s.ctx, s.cfg.Timeout, "standbys to catch up", func() bool {
		return warmStandbys(s.cfg.AcceptableLag, j1, j2, j3) >= int(p)
	}); err != nil {
		return err
	}
	s.pause(s.cfg.Steady)
	s.snapshot(j1, j2, j3)
	t0 = s.now()
	j3.crash()
	err = s.event(EventCrashStandby, t0, simEvent{"crash", "j3"}, j1, j2)
	j3.kill()
	return err
}

// snapshot keeps the group's statuses just before an event: the
// simulator's scenario of the event starts from them.
func (s *script) snapshot(group ...*instance) {
	s.before = s.before[:0]
	for _, in := range group {
		s.before = append(s.before, groupMember{id: in.id, status: in.app.Status()})
	}
}

// event waits for the group of live instances to be balanced again after
// an action taken at t0, then records the event's figures and the
// simulator's prediction of them (act is the action, as the scenario
// says it).
func (s *script) event(name string, t0 time.Duration, act simEvent, live ...*instance) error {
	s.logf("event %s", name)
	balancedAt, err := s.balancedSince(name, live...)
	if err == nil {
		// A task may be assigned before it runs (its stores still
		// opening): the window stays open until every task made
		// progress after the balance, so that no pause is cut short.
		err = waitFor(s.ctx, s.cfg.Timeout, name+": every task to run after the balance", func() bool {
			return s.rec.progressedSince(balancedAt, s.taskIDs())
		})
	}
	w := Window{Event: name, Start: t0, Balanced: balancedAt, Baseline: s.cfg.Steady}
	w.End = s.now()
	if err == nil {
		s.pause(s.cfg.Steady - s.cfg.Settle) // the next event's baseline
	}
	s.rec.Sample()
	rec := s.rec.Snapshot()
	ef := Analyze(rec, w, isStateful)
	pr, perr := predict(scenarioInput{policy: string(s.policy), event: name, cfg: s.cfg, before: s.before, action: act, rec: rec, w: w},
		&ef, s.cfg.SimScenarios)
	ef.Predicted = pr
	s.run.Events = append(s.run.Events, ef)
	s.logf("  balanced after %.2fs; %d moved, longest handover %v, unmoved pause x%.2f, replayed %d",
		ef.TimeToBalance.Seconds(), ef.Moved, ef.HandoverMax.Round(time.Millisecond), ef.UnmovedPause, ef.ReplayedSum)
	if err == nil {
		err = perr
	}
	return err
}

// isStateful: wordcount's subtopology 1 counts in a store.
func isStateful(task string) bool { return strings.HasPrefix(task, "1_") }

func (s *script) now() time.Duration { return time.Since(s.rec.start) }

func (s *script) pause(d time.Duration) {
	if d <= 0 {
		return
	}
	select {
	case <-s.ctx.Done():
	case <-time.After(d):
	}
}

func (s *script) waitBalanced(what string, live ...*instance) error {
	_, err := s.balancedSince(what, live...)
	return err
}

// balancedSince waits until the live instances have been balanced for
// Settle without a break, and returns when that began.
func (s *script) balancedSince(what string, live ...*instance) (time.Duration, error) {
	var since time.Duration = -1
	err := waitFor(s.ctx, s.cfg.Timeout, what, func() bool {
		now := s.now()
		if !balanced(s.cfg.Partitions, live...) {
			since = -1
			return false
		}
		if since < 0 {
			since = now
		}
		return now-since >= s.cfg.Settle
	})
	if err != nil {
		return 0, err
	}
	return since, nil
}

// balanced reports whether the live instances run every task of a
// partitions-wide wordcount, each its share of stateful and stateless
// tasks (within one), with no learner left.
func balanced(partitions int32, live ...*instance) bool {
	sts := make([]baton.Status, 0, len(live))
	for _, in := range live {
		if !in.running() {
			return false
		}
		sts = append(sts, in.app.Status())
	}
	return Balanced(partitions, sts...)
}

// Balanced reports whether the instances whose statuses are given run
// every task of a partitions-wide wordcount (tasks 0_p stateless, 1_p
// stateful), each its share of stateful and of stateless tasks (within
// one), with no learner left.
func Balanced(partitions int32, sts ...baton.Status) bool {
	if len(sts) == 0 {
		return false
	}
	owner := map[string]bool{}
	n := int32(len(sts))
	lo, hi := partitions/n, (partitions+n-1)/n
	for _, st := range sts {
		var stateful, stateless int32
		for _, t := range st.Tasks {
			switch t.Role {
			case "learner":
				return false
			case "active":
				if owner[t.ID] {
					return false
				}
				owner[t.ID] = true
				if isStateful(t.ID) {
					stateful++
				} else {
					stateless++
				}
			}
		}
		if stateful < lo || stateful > hi || stateless < lo || stateless > hi {
			return false
		}
	}
	return len(owner) == int(2*partitions)
}

// warmStandbys counts standby tasks within the acceptable lag.
func warmStandbys(acceptable int64, live ...*instance) int {
	n := 0
	for _, in := range live {
		for _, t := range in.app.Status().Tasks {
			if t.Role == "standby" && t.Lag <= acceptable {
				n++
			}
		}
	}
	return n
}

// throughput turns a recording into records/s per instance per bucket.
func throughput(r Recording, bucket time.Duration) map[string][]float64 {
	out := map[string][]float64{}
	var end time.Duration
	for _, p := range r.Progress {
		end = max(end, p.At)
	}
	n := int(end/bucket) + 1
	for _, p := range r.Progress {
		s := out[p.Instance]
		if s == nil {
			s = make([]float64, n)
			out[p.Instance] = s
		}
		s[p.At/bucket] += float64(p.N) / bucket.Seconds()
	}
	return out
}

package bench

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/baton-streams/baton"
)

// HeartbeatConfig sets up `bench heartbeat`.
type HeartbeatConfig struct {
	Intervals  []time.Duration `json:"intervals_ns"`
	Keys       int             `json:"keys"`
	Rate       int             `json:"rate"`
	Partitions int32           `json:"partitions"`
	// Steady is the window over which requests are counted before the
	// scale-out (at least 3 heartbeat intervals are used).
	Steady  time.Duration `json:"steady_ns"`
	Settle  time.Duration `json:"settle_ns"`
	Timeout time.Duration `json:"timeout_ns"`
	Log     io.Writer     `json:"-"`
}

// DefaultHeartbeatConfig compares four intervals around baton's default.
func DefaultHeartbeatConfig() HeartbeatConfig {
	return HeartbeatConfig{Intervals: []time.Duration{50 * time.Millisecond, 200 * time.Millisecond, time.Second, 3 * time.Second},
		Keys: 100_000, Rate: 1000, Partitions: 6, Steady: 5 * time.Second, Settle: 2 * time.Second, Timeout: 3 * time.Minute}
}

// SmokeHeartbeatConfig is a tiny run for tests and CI.
func SmokeHeartbeatConfig() HeartbeatConfig {
	return HeartbeatConfig{Intervals: []time.Duration{100 * time.Millisecond, 500 * time.Millisecond},
		Keys: 2000, Rate: 200, Partitions: 4, Steady: time.Second, Settle: 500 * time.Millisecond, Timeout: time.Minute}
}

// HeartbeatResult is one scale-out per heartbeat interval.
type HeartbeatResult struct {
	Config HeartbeatConfig `json:"config"`
	Runs   []HeartbeatRun  `json:"runs"`
}

// HeartbeatRun is the figures at one interval.
type HeartbeatRun struct {
	Interval time.Duration `json:"interval_ns"`
	// HeartbeatsPS and CoordinatorPS are requests per second per instance
	// in steady state (coordinator requests: heartbeats, joins, syncs,
	// offset commits and fetches, coordinator look-ups).
	HeartbeatsPS  float64      `json:"heartbeats_per_s"`
	CoordinatorPS float64      `json:"coordinator_requests_per_s"`
	Out           EventFigures `json:"out"`
}

// RunHeartbeat scales a group out from 2 to 3 instances once per
// heartbeat interval, each time as a new application on one cluster.
func RunHeartbeat(ctx context.Context, cfg HeartbeatConfig) (*HeartbeatResult, error) {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	res := &HeartbeatResult{Config: cfg}
	e, err := newPrefilledEnv(ctx, nil, cfg.Partitions, cfg.Keys)
	if err != nil {
		return nil, err
	}
	defer e.close()
	f := e.startFlow(cfg.Rate, cfg.Keys)
	defer f.stop()
	for i, hb := range cfg.Intervals {
		run, err := heartbeatRun(ctx, e, f, cfg, "hb"+strconv.Itoa(i), hb)
		if err != nil {
			return res, fmt.Errorf("bench: heartbeat %v: %w", hb, err)
		}
		fmt.Fprintf(cfg.Log, "heartbeat %v: %.1f heartbeats/s, %.1f coordinator requests/s per instance; handover max %v\n",
			hb, run.HeartbeatsPS, run.CoordinatorPS, run.Out.HandoverMax)
		res.Runs = append(res.Runs, run)
	}
	return res, nil
}

func heartbeatRun(ctx context.Context, e *env, f *flow, cfg HeartbeatConfig, appID string, hb time.Duration) (HeartbeatRun, error) {
	run := HeartbeatRun{Interval: hb}
	rec := NewRecorder(5 * time.Millisecond)
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go rec.Run(rctx)
	s := &script{ctx: ctx, cfg: ScaleConfig{Partitions: cfg.Partitions, Settle: cfg.Settle, Timeout: cfg.Timeout}, rec: rec}
	start := func(id string) (*instance, error) {
		in, err := e.start(instanceConfig{appID: appID, id: id, listener: rec.Listen, countReqs: true,
			// Baton wants a session of at least 3 intervals: keep the
			// default 6s unless the interval needs more.
			opts: []baton.Option{baton.WithHeartbeatInterval(hb), baton.WithSessionTimeout(max(6*time.Second, 3*hb))}})
		if err != nil {
			return nil, err
		}
		rec.Watch(in.id, in.app)
		return in, nil
	}
	var insts []*instance
	defer func() {
		for _, in := range insts {
			in.kill()
		}
	}()
	for _, id := range []string{"a", "b"} {
		in, err := start(id)
		if err != nil {
			return run, err
		}
		insts = append(insts, in)
	}
	if err := s.waitBalanced("a and b to share the work", insts...); err != nil {
		return run, err
	}
	// A new application reads the input from its start: catch up first.
	backlog := int64(cfg.Keys) + f.produced.Load()
	if err := waitFor(ctx, cfg.Timeout, "the backlog to be processed", func() bool {
		return rec.total("0_") >= backlog
	}); err != nil {
		return run, err
	}
	steady := max(cfg.Steady, 3*hb)
	var hb0, co0 int64
	for _, in := range insts {
		hb0 += in.reqs.heartbeats.Load()
		co0 += in.reqs.coordinator.Load()
	}
	s.pause(steady)
	var hb1, co1 int64
	for _, in := range insts {
		hb1 += in.reqs.heartbeats.Load()
		co1 += in.reqs.coordinator.Load()
	}
	per := steady.Seconds() * float64(len(insts))
	run.HeartbeatsPS, run.CoordinatorPS = float64(hb1-hb0)/per, float64(co1-co0)/per

	t0 := s.now()
	c, err := start("c")
	if err != nil {
		return run, err
	}
	insts = append(insts, c)
	balancedAt, err := s.balancedSince("c to take its share", insts...)
	if err != nil {
		return run, err
	}
	rec.Sample()
	run.Out = Analyze(rec.Snapshot(), Window{Event: EventOut, Start: t0, Balanced: balancedAt, End: s.now(), Baseline: steady}, isStateful)
	return run, nil
}

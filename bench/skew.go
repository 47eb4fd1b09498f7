package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/internal/tick"
	"github.com/baton-streams/baton/topology"
)

// The variants of `bench skew`.
const (
	// SkewLoads: the instances measure and report their tasks' loads
	// (baton's default), and ask for a rebalance when they change.
	SkewLoads = "loads"
	// SkewCounts: the instances report no loads (WithLoadStep(0)): the
	// leader weighs every task 1 and balances task counts.
	SkewCounts = "counts"
)

// SkewVariants are the variants in the order a run measures them.
var SkewVariants = []string{SkewLoads, SkewCounts}

// SkewConfig sets up `bench skew`. Zero fields take the defaults of
// DefaultSkewConfig.
type SkewConfig struct {
	Variants   []string `json:"variants"`
	Partitions int32    `json:"partitions"` // input partitions: 2 tasks each
	Instances  int      `json:"instances"`  // one worker each
	// Rate is each input partition's lines/s; partition 0 gets Hot times
	// as many.
	Rate int     `json:"rate"`
	Hot  float64 `json:"hot"`
	// Cost is the time the line-splitting processor (subtopology 0)
	// takes per line; it sleeps, so it holds a worker without using a
	// core, as a call to a slow service would.
	Cost time.Duration `json:"cost_ns"`
	// Interval is the instances' WithLoadRebalanceInterval.
	Interval time.Duration `json:"interval_ns"`
	// Warm is the time from the group's first balance to the window
	// before; Window the length of each window. The window after starts
	// two intervals after the first balance plus Warm, past the
	// rebalance the loads ask for and the one reporting the moved tasks.
	Warm    time.Duration `json:"warm_ns"`
	Window  time.Duration `json:"window_ns"`
	Timeout time.Duration `json:"timeout_ns"`
	// Brokers, if set, is a cluster to run on instead of a fresh embedded
	// one per variant (topic names and application ids unique to the run).
	Brokers []string `json:"brokers,omitempty"`
	// Log, if set, receives a line per step.
	Log io.Writer `json:"-"`
}

// DefaultSkewConfig is the full-size run: 12 partitions over 3 instances,
// 5 lines/s a partition and 25 on partition 0, 10 ms a line to split: a
// cold splitting task sleeps 5% of a worker, the hot one 25%. The sleep
// outweighs the per-record CPU, so that no instance saturates on a loaded
// 2-core machine (at 20 lines/s and 4 ms the hot partition's instance did).
func DefaultSkewConfig() SkewConfig {
	return SkewConfig{Variants: SkewVariants, Partitions: 12, Instances: 3, Rate: 5, Hot: 5, Cost: 10 * time.Millisecond,
		Interval: 60 * time.Second, Warm: 15 * time.Second, Window: 40 * time.Second, Timeout: 2 * time.Minute}
}

// SmokeSkewConfig is a short run for trying the command: the windows
// and the interval are short, so the loads measured are rough.
func SmokeSkewConfig() SkewConfig {
	c := DefaultSkewConfig()
	c.Partitions, c.Interval, c.Warm, c.Window = 6, 35*time.Second, 5*time.Second, 10*time.Second
	return c
}

func (c SkewConfig) withDefaults() SkewConfig {
	d := DefaultSkewConfig()
	if len(c.Variants) == 0 {
		c.Variants = d.Variants
	}
	orDefault(&c.Partitions, d.Partitions)
	orDefault(&c.Instances, d.Instances)
	orDefault(&c.Rate, d.Rate)
	if c.Hot <= 0 {
		c.Hot = d.Hot
	}
	orDefault(&c.Cost, d.Cost)
	orDefault(&c.Interval, d.Interval)
	orDefault(&c.Warm, d.Warm)
	orDefault(&c.Window, d.Window)
	orDefault(&c.Timeout, d.Timeout)
	if c.Log == nil {
		c.Log = io.Discard
	}
	return c
}

// SkewResult is the output of RunSkew: one run per variant.
type SkewResult struct {
	Config SkewConfig    `json:"config"`
	Runs   []SkewVariant `json:"runs"`
}

// SkewVariant is one variant's run.
type SkewVariant struct {
	Variant string     `json:"variant"`
	Before  SkewWindow `json:"before"`
	After   SkewWindow `json:"after"`
	// Rounds and Revoked count the rebalance rounds and the tasks revoked
	// from the group's first balance to the end of the window after.
	Rounds  int `json:"rounds"`
	Revoked int `json:"revoked"`
	// Placement is each instance's active tasks at the end; Loads the
	// loads of the leader's last plan.
	Placement map[string][]string `json:"placement"`
	Loads     map[string]float64  `json:"loads"`
	Error     string              `json:"error,omitempty"`
}

// SkewWindow is what a window measured. From and To are since the
// group's first balance.
type SkewWindow struct {
	From time.Duration `json:"from_ns"`
	To   time.Duration `json:"to_ns"`
	// Busy is each instance's busy share of its worker over the window
	// (baton_worker_busy_seconds_total); Ratio the busiest over the mean.
	Busy  map[string]float64 `json:"busy"`
	Ratio float64            `json:"ratio"`
	// Hot and Cold are the end-to-end latencies of the outputs of the
	// hot partition's words and of the other partitions' words: from the
	// input record's timestamp to the output's arrival at a consumer.
	Hot  LatencyFigures `json:"hot"`
	Cold LatencyFigures `json:"cold"`
}

// LatencyFigures summarise a set of latencies.
type LatencyFigures struct {
	N   int           `json:"n"`
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
}

// OutputSample is one output record's arrival: when, the input partition
// its word came from, and its latency.
type OutputSample struct {
	At        time.Time
	Partition int32
	Latency   time.Duration
}

// BusyReading is each instance's busy seconds so far, read at At.
type BusyReading struct {
	At   time.Time
	Busy map[string]float64
}

// SkewWord is the word a skew line carries for input partition p: the
// output keyed by it tells which partition its input came from.
func SkewWord(p int32, n int) string { return "p" + strconv.Itoa(int(p)) + "w" + strconv.Itoa(n%10) }

// skewPartition returns the input partition of a SkewWord, or -1.
func skewPartition(word string) int32 {
	rest, ok := strings.CutPrefix(word, "p")
	if !ok {
		return -1
	}
	i := strings.IndexByte(rest, 'w')
	if i <= 0 {
		return -1
	}
	p, err := strconv.Atoi(rest[:i])
	if err != nil {
		return -1
	}
	return int32(p)
}

// Latencies returns the figures of ls (sorted in place).
func Latencies(ls []time.Duration) LatencyFigures {
	if len(ls) == 0 {
		return LatencyFigures{}
	}
	slices.Sort(ls)
	rank := func(q int) time.Duration { return ls[max(0, (len(ls)*q+99)/100-1)] }
	return LatencyFigures{N: len(ls), P50: rank(50), P99: rank(99), Max: ls[len(ls)-1]}
}

// SkewFigures works out a window's figures from the busy readings at its
// start and end and the output samples: the samples that arrived within
// [start.At, end.At) count, those of partition hot as hot.
func SkewFigures(start, end BusyReading, samples []OutputSample, hot int32) SkewWindow {
	w := SkewWindow{Busy: map[string]float64{}}
	span := end.At.Sub(start.At).Seconds()
	var sum, most float64
	for id, b := range end.Busy {
		share := 0.0
		if span > 0 {
			share = (b - start.Busy[id]) / span
		}
		w.Busy[id] = share
		sum += share
		most = max(most, share)
	}
	if sum > 0 {
		w.Ratio = most / (sum / float64(len(w.Busy)))
	}
	var h, c []time.Duration
	for _, s := range samples {
		if s.At.Before(start.At) || !s.At.Before(end.At) {
			continue
		}
		if s.Partition == hot {
			h = append(h, s.Latency)
		} else {
			c = append(c, s.Latency)
		}
	}
	w.Hot, w.Cold = Latencies(h), Latencies(c)
	return w
}

// RunSkew runs the skew script once per variant, each on a fresh cluster
// (or on Brokers under names unique to the variant).
func RunSkew(ctx context.Context, cfg SkewConfig) (*SkewResult, error) {
	cfg = cfg.withDefaults()
	res := &SkewResult{Config: cfg}
	var first error
	for _, v := range cfg.Variants {
		fmt.Fprintf(cfg.Log, "== %s\n", v)
		run, err := runSkewVariant(ctx, cfg, v)
		if err != nil {
			run.Error = err.Error()
			fmt.Fprintf(cfg.Log, "   %s failed: %v\n", v, err)
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

// costlySplit is wordcount whose line splitting takes cost per line.
func costlySplit(cost time.Duration) func(appID, input, output string) (*topology.Topology, error) {
	return func(appID, input, output string) (*topology.Topology, error) {
		b := topology.NewBuilder(appID)
		lines := topology.FromTopic(b, input, topology.Bytes, topology.String)
		words := topology.FlatMapValues(lines, func(line string) []string {
			time.Sleep(cost)
			return strings.Fields(line)
		})
		byWord := topology.GroupBy(words, func(_ []byte, word string) string { return word }, topology.String, "words")
		topology.Count(byWord, "counts").ToStream().To(output)
		return b.Build()
	}
}

// skewRun is one variant's run in progress.
type skewRun struct {
	cfg   SkewConfig
	e     *env
	start time.Time
	logw  io.Writer

	mu      sync.Mutex
	samples []OutputSample
	rounds  []time.Time // rebalance rounds led
	revoked []time.Time
	insts   []*instance
	regs    map[string]*prometheus.Registry
}

func (r *skewRun) logf(format string, args ...any) {
	fmt.Fprintf(r.logw, "%7.1fs  %s\n", time.Since(r.start).Seconds(), fmt.Sprintf(format, args...))
}

func (r *skewRun) listen(e baton.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch e.Kind {
	case baton.EventLeader:
		r.rounds = append(r.rounds, e.Time)
	case baton.EventRevoked:
		r.revoked = append(r.revoked, e.Time)
	}
}

// busy reads each instance's busy seconds.
func (r *skewRun) busy() (BusyReading, error) {
	out := BusyReading{At: time.Now(), Busy: map[string]float64{}}
	for id, reg := range r.regs {
		mfs, err := reg.Gather()
		if err != nil {
			return out, err
		}
		for _, mf := range mfs {
			if mf.GetName() != "baton_worker_busy_seconds_total" {
				continue
			}
			for _, m := range mf.GetMetric() {
				out.Busy[id] += m.GetCounter().GetValue()
			}
		}
	}
	return out, nil
}

// produce writes, every 20 ms, the lines due on each partition: Rate a
// second, Hot times as many on partition 0. A line is its partition's
// word and a common one, stamped with the time it is written.
func (r *skewRun) produce(ctx context.Context, cl *kgo.Client) error {
	due := make([]float64, r.cfg.Partitions)
	n := make([]int, r.cfg.Partitions)
	last := time.Now()
	return tick.Every(ctx, 20*time.Millisecond, func() error {
		now := time.Now()
		dt := now.Sub(last).Seconds()
		last = now
		var recs []*kgo.Record
		for p := range r.cfg.Partitions {
			rate := float64(r.cfg.Rate)
			if p == 0 {
				rate *= r.cfg.Hot
			}
			due[p] += rate * dt
			for ; due[p] >= 1; due[p]-- {
				line := SkewWord(p, n[p]) + " " + vocab[n[p]%len(vocab)]
				recs = append(recs, &kgo.Record{Topic: r.e.input, Partition: p, Key: []byte(strconv.Itoa(n[p])), Value: []byte(line), Timestamp: now})
				n[p]++
			}
		}
		if len(recs) == 0 {
			return nil
		}
		return cl.ProduceSync(ctx, recs...).FirstErr()
	})
}

// consume reads the output from its start and keeps each skew word's
// arrival.
func (r *skewRun) consume(ctx context.Context, cl *kgo.Client) {
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		at := time.Now()
		fs.EachRecord(func(rec *kgo.Record) {
			p := skewPartition(string(rec.Key))
			if p < 0 {
				return
			}
			r.mu.Lock()
			r.samples = append(r.samples, OutputSample{At: at, Partition: p, Latency: at.Sub(rec.Timestamp)})
			r.mu.Unlock()
		})
	}
}

// balanced reports whether every instance runs its even share of the
// active tasks and no task is a learner.
func (r *skewRun) balanced() bool {
	total := 0
	for _, in := range r.insts {
		st := in.app.Status()
		n := 0
		for _, t := range st.Tasks {
			switch t.Role {
			case "active":
				n++
			case "learner":
				return false
			}
		}
		if n < int(2*r.cfg.Partitions)/len(r.insts) {
			return false
		}
		total += n
	}
	return total == int(2*r.cfg.Partitions)
}

func runSkewVariant(ctx context.Context, cfg SkewConfig, variant string) (SkewVariant, error) {
	out := SkewVariant{Variant: variant}
	if variant != SkewLoads && variant != SkewCounts {
		return out, fmt.Errorf("bench skew: unknown variant %q", variant)
	}
	e, err := newEnvOn(ctx, cfg.Brokers, cfg.Partitions)
	if err != nil {
		return out, err
	}
	defer e.close()
	r := &skewRun{cfg: cfg, e: e, start: time.Now(), logw: cfg.Log, regs: map[string]*prometheus.Registry{}}

	prod, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(2*time.Millisecond))
	if err != nil {
		return out, err
	}
	defer prod.Close()
	cons, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.ConsumeTopics(e.output),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return out, err
	}
	defer cons.Close()
	bg, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var prodErr error
	wg.Add(2)
	go func() { defer wg.Done(); r.consume(bg, cons) }()
	go func() {
		defer wg.Done()
		if err := r.produce(bg, prod); err != nil && bg.Err() == nil {
			prodErr = err
			r.logf("producing: %v", err)
		}
	}()
	defer func() { stop(); wg.Wait() }()

	appID := "skew-" + variant + e.suffix
	for i := range cfg.Instances {
		id := fmt.Sprintf("i%d", i+1)
		reg := prometheus.NewRegistry()
		r.regs[id] = reg
		opts := []baton.Option{baton.WithMetrics(reg), baton.WithLoadRebalanceInterval(cfg.Interval)}
		if variant == SkewCounts {
			opts = append(opts, baton.WithLoadStep(0))
		}
		in, err := e.start(instanceConfig{appID: appID, id: id, opts: opts, listener: r.listen, build: costlySplit(cfg.Cost)})
		if err != nil {
			return out, err
		}
		r.insts = append(r.insts, in)
	}
	r.logf("%d instances started", cfg.Instances)
	if err := waitFor(ctx, cfg.Timeout, "the group to balance its tasks", r.balanced); err != nil {
		return out, err
	}
	balancedAt := time.Now()
	r.logf("balanced")

	window := func(from time.Duration) (SkewWindow, error) {
		if err := sleepCtx(ctx, time.Until(balancedAt.Add(from))); err != nil {
			return SkewWindow{}, err
		}
		b0, err := r.busy()
		if err != nil {
			return SkewWindow{}, err
		}
		if err := sleepCtx(ctx, cfg.Window); err != nil {
			return SkewWindow{}, err
		}
		b1, err := r.busy()
		if err != nil {
			return SkewWindow{}, err
		}
		// Outputs of the window's records may arrive up to a second
		// after it; those arriving later count as late in the next
		// window, not lost here.
		r.mu.Lock()
		samples := slices.Clone(r.samples)
		r.mu.Unlock()
		w := SkewFigures(b0, b1, samples, 0)
		w.From, w.To = b0.At.Sub(balancedAt), b1.At.Sub(balancedAt)
		r.logf("window %v..%v: busy %v, ratio %.2f, hot p99 %v, cold p99 %v", w.From.Round(time.Second), w.To.Round(time.Second),
			roundMap(w.Busy), w.Ratio, w.Hot.P99.Round(time.Millisecond), w.Cold.P99.Round(time.Millisecond))
		return w, nil
	}
	if out.Before, err = window(cfg.Warm); err != nil {
		return out, err
	}
	if out.After, err = window(2*cfg.Interval + cfg.Warm); err != nil {
		return out, err
	}
	r.mu.Lock()
	for _, t := range r.rounds {
		if t.After(balancedAt) {
			out.Rounds++
		}
	}
	for _, t := range r.revoked {
		if t.After(balancedAt) {
			out.Revoked++
		}
	}
	r.mu.Unlock()
	out.Placement = map[string][]string{}
	for _, in := range r.insts {
		st := in.app.Status()
		for _, t := range st.Tasks {
			if t.Role == "active" {
				out.Placement[in.id] = append(out.Placement[in.id], t.ID)
			}
		}
		if st.Plan != nil && st.Leader {
			out.Loads = st.Plan.Loads
		}
	}
	return out, prodErr
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func roundMap(m map[string]float64) string {
	var parts []string
	for _, id := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %.2f", id, m[id]))
	}
	return strings.Join(parts, ", ")
}

// PrintSkew writes the figures of a run as a table.
func PrintSkew(w io.Writer, res *SkewResult) error {
	c := res.Config
	fmt.Fprintf(w, "skew: %d partitions over %d instances of 1 worker; %d lines/s a partition, partition 0 at %gx; splitting %v a line; load rebalance interval %v\n",
		c.Partitions, c.Instances, c.Rate, c.Hot, c.Cost, c.Interval)
	var errs []error
	for _, v := range res.Runs {
		if v.Error != "" {
			fmt.Fprintf(w, "%s: failed: %s\n", v.Variant, v.Error)
			errs = append(errs, errors.New(v.Error))
			continue
		}
		for _, x := range []struct {
			name string
			w    SkewWindow
		}{{"before", v.Before}, {"after", v.After}} {
			fmt.Fprintf(w, "%-6s %-6s %3.0fs-%3.0fs  busy %s  busiest/mean %.2f  hot p50 %v p99 %v max %v (n %d)  cold p50 %v p99 %v (n %d)\n",
				v.Variant, x.name, x.w.From.Seconds(), x.w.To.Seconds(), roundMap(x.w.Busy), x.w.Ratio,
				ms(x.w.Hot.P50), ms(x.w.Hot.P99), ms(x.w.Hot.Max), x.w.Hot.N, ms(x.w.Cold.P50), ms(x.w.Cold.P99), x.w.Cold.N)
		}
		fmt.Fprintf(w, "%-6s rounds %d, tasks revoked %d after the first balance\n", v.Variant, v.Rounds, v.Revoked)
		for _, id := range slices.Sorted(maps.Keys(v.Placement)) {
			ts := slices.Sorted(slices.Values(v.Placement[id]))
			var load float64
			for _, t := range ts {
				load += v.Loads[t]
			}
			fmt.Fprintf(w, "%-6s   %s: %s (planned load %.2f)\n", v.Variant, id, strings.Join(ts, " "), load)
		}
	}
	return errors.Join(errs...)
}

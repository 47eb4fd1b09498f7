package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton"
)

// ThroughputConfig sets up `bench throughput`.
type ThroughputConfig struct {
	Lines int `json:"lines"` // input lines, 3 words each
	// Keys is how many distinct words the third word of each line takes
	// in turn ("k0", "k1", ...): the state the counts hold grows to
	// min(Lines, Keys) of them besides the common words.
	Keys       int           `json:"keys"`
	Partitions int32         `json:"partitions"`
	Workers    []int         `json:"workers"`
	Guarantees []string      `json:"guarantees"` // at-least-once, exactly-once
	Timeout    time.Duration `json:"timeout_ns"`
	Log        io.Writer     `json:"-"`
}

// DefaultThroughputConfig processes 300,000 lines (900,000 words).
func DefaultThroughputConfig() ThroughputConfig {
	return ThroughputConfig{Lines: 300_000, Keys: 50_000, Partitions: 8, Workers: []int{1, 2, 4}, Guarantees: bothGuarantees(), Timeout: 5 * time.Minute}
}

func bothGuarantees() []string {
	return []string{baton.AtLeastOnce.String(), baton.ExactlyOnce.String()}
}

// SmokeThroughputConfig is a tiny run for tests and CI.
func SmokeThroughputConfig() ThroughputConfig {
	return ThroughputConfig{Lines: 5_000, Keys: 50_000, Partitions: 4, Workers: []int{1, 2}, Guarantees: bothGuarantees(), Timeout: time.Minute}
}

// ThroughputResult compares one wordcount instance with a plain consumer
// counting words in memory, on the same input.
type ThroughputResult struct {
	Config ThroughputConfig `json:"config"`
	// Plain is the kgo consumer: lines/s from its first record to its
	// last, splitting and counting in a map.
	Plain Rate   `json:"plain"`
	Baton []Rate `json:"baton"` // one per guarantee and worker count
}

// Rate is one reader's run over the whole input.
type Rate struct {
	Guarantee string        `json:"guarantee,omitempty"`
	Workers   int           `json:"workers,omitempty"`
	Lines     int64         `json:"lines"`
	Elapsed   time.Duration `json:"elapsed_ns"`
	LinesPS   float64       `json:"lines_per_s"`
	RecsPS    float64       `json:"records_per_s,omitempty"` // lines + words processed by the App's tasks
	VsPlain   float64       `json:"vs_plain,omitempty"`
	Verified  bool          `json:"verified"`
	// StartRSS and PeakRSS are the process's resident set size when the
	// run started and its peak during the run (0 if not measured; the
	// embedded cluster's log is in the same process).
	StartRSS int64 `json:"start_rss_bytes,omitempty"`
	PeakRSS  int64 `json:"peak_rss_bytes,omitempty"`
}

// RunThroughput produces the input once, then reads it with a plain
// consumer and with a fresh wordcount application per worker count.
func RunThroughput(ctx context.Context, cfg ThroughputConfig) (*ThroughputResult, error) {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	res := &ThroughputResult{Config: cfg}
	e, err := newEnv(ctx, cfg.Partitions)
	if err != nil {
		return nil, err
	}
	defer e.close()
	want, err := produceLines(ctx, e, cfg.Lines, cfg.Keys)
	if err != nil {
		return nil, err
	}
	res.Plain, err = plainCount(ctx, e, int64(cfg.Lines), want, cfg.Timeout)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Log, "plain consumer: %.0f lines/s\n", res.Plain.LinesPS)
	guarantees := cfg.Guarantees
	if len(guarantees) == 0 {
		guarantees = []string{baton.AtLeastOnce.String()}
	}
	for _, gname := range guarantees {
		g, err := baton.ParseGuarantee(gname)
		if err != nil {
			return nil, err
		}
		for _, w := range cfg.Workers {
			rate, err := batonRate(ctx, e, cfg, g, w, res.Plain)
			if err != nil {
				return nil, err
			}
			res.Baton = append(res.Baton, rate)
		}
	}
	return res, nil
}

// batonRate counts the input with a fresh wordcount application.
func batonRate(ctx context.Context, e *env, cfg ThroughputConfig, g baton.Guarantee, w int, plain Rate) (Rate, error) {
	words := int64(3 * cfg.Lines)
	rec := NewRecorder(10 * time.Millisecond)
	runtime.GC()
	rssErr := resetPeakRSS()
	startRSS, _ := rss()
	in, err := e.start(instanceConfig{appID: "tp-" + g.String() + "-" + strconv.Itoa(w), id: "a",
		opts: []baton.Option{baton.WithWorkers(w), baton.WithGuarantee(g)}})
	if err != nil {
		return Rate{}, err
	}
	rec.Watch(in.id, in.app)
	rctx, stop := context.WithCancel(ctx)
	go rec.Run(rctx)
	err = waitFor(ctx, cfg.Timeout, "wordcount to count every word", func() bool { return rec.total("1_") >= words })
	stop()
	peak, _ := peakRSS()
	now, _ := rss()
	peak = max(peak, now, startRSS) // the kernel updates the peak lazily
	in.kill()
	if err != nil {
		return Rate{}, err
	}
	r := rec.Snapshot()
	var first, last time.Duration = -1, 0
	var n int64
	for _, p := range r.Progress {
		if first < 0 || p.At < first {
			first = p.At
		}
		last = max(last, p.At)
		n += p.N
	}
	rate := Rate{Guarantee: g.String(), Workers: w, Lines: int64(cfg.Lines), Elapsed: last - first, Verified: rec.total("0_") == int64(cfg.Lines) && rec.total("1_") == words}
	if rssErr == nil {
		rate.StartRSS = startRSS
		rate.PeakRSS = peak
	}
	if rate.Elapsed > 0 {
		rate.LinesPS = float64(cfg.Lines) / rate.Elapsed.Seconds()
		rate.RecsPS = float64(n) / rate.Elapsed.Seconds()
	}
	if plain.LinesPS > 0 {
		rate.VsPlain = rate.LinesPS / plain.LinesPS
	}
	fmt.Fprintf(cfg.Log, "baton, %s, %d workers: %.0f lines/s\n", g, w, rate.LinesPS)
	return rate, nil
}

// produceLines writes n lines of three words, the third one of keys
// distinct words, and returns the word counts.
func produceLines(ctx context.Context, e *env, n, keys int) (map[string]int64, error) {
	want := map[string]int64{}
	const chunk = 20000
	for lo := 0; lo < n; lo += chunk {
		var recs []*kgo.Record
		for i := lo; i < min(lo+chunk, n); i++ {
			line := []string{vocab[i%len(vocab)], vocab[(i*7)%len(vocab)], "k" + strconv.Itoa(i%keys)}
			for _, w := range line {
				want[w]++
			}
			recs = append(recs, &kgo.Record{Topic: e.input, Key: []byte(strconv.Itoa(i)), Value: []byte(strings.Join(line, " "))})
		}
		if err := e.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return nil, fmt.Errorf("bench: producing input: %w", err)
		}
	}
	return want, nil
}

// plainCount is the baseline: one kgo consumer that splits lines and
// counts words in a map, nothing durable.
func plainCount(ctx context.Context, e *env, lines int64, want map[string]int64, timeout time.Duration) (Rate, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.ConsumeTopics(e.input),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return Rate{}, err
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	counts := map[string]int64{}
	var n int64
	var start time.Time
	for n < lines {
		f := cl.PollFetches(rctx)
		if rctx.Err() != nil {
			return Rate{}, fmt.Errorf("%w: plain consumer read %d of %d lines", ErrTimeout, n, lines)
		}
		if start.IsZero() && f.NumRecords() > 0 {
			start = time.Now()
		}
		f.EachRecord(func(r *kgo.Record) {
			for _, w := range strings.Fields(string(r.Value)) {
				counts[w]++
			}
			n++
		})
	}
	el := time.Since(start)
	ok := len(counts) == len(want)
	for w, c := range want {
		ok = ok && counts[w] == c
	}
	r := Rate{Lines: n, Elapsed: el, Verified: ok}
	if el > 0 {
		r.LinesPS = float64(n) / el.Seconds()
	}
	return r, nil
}

package bench

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/topology"
)

// RestoreConfig sets up `bench restore`.
type RestoreConfig struct {
	Keys       int           `json:"keys"` // changelog records to restore
	Partitions int32         `json:"partitions"`
	Timeout    time.Duration `json:"timeout_ns"`
	// Brokers, if set, is a cluster to run on instead of an embedded one
	// (topics and group get names unique to the run).
	Brokers []string  `json:"brokers,omitempty"`
	Log     io.Writer `json:"-"`
	// Profile, if set, receives a CPU profile of the cold restore alone:
	// from the cold instance's start to its last task restored.
	Profile io.Writer `json:"-"`
}

// DefaultRestoreConfig restores a million records.
func DefaultRestoreConfig() RestoreConfig {
	return RestoreConfig{Keys: 1_000_000, Partitions: 6, Timeout: 3 * time.Minute}
}

// SmokeRestoreConfig is a tiny run for tests and CI.
func SmokeRestoreConfig() RestoreConfig {
	return RestoreConfig{Keys: 20_000, Partitions: 4, Timeout: time.Minute}
}

// RestoreResult compares the App's cold restore with a plain read of the
// same changelog from the same cluster.
type RestoreResult struct {
	Config RestoreConfig `json:"config"`
	// Changelog is the records in the changelog; Restored what the App's
	// tasks restored (EventRestored.Replayed summed) in RestoreTime: from the
	// first cold assignment to the last task restored.
	Changelog   int64         `json:"changelog_records"`
	Restored    int64         `json:"restored_records"`
	RestoreTime time.Duration `json:"restore_ns"`
	RestoreRate float64       `json:"restore_rate"`
	// RawTime is the quicker of two plain reads of the whole changelog
	// (one before the restore, one after); RawRate its records/s.
	RawTime time.Duration `json:"raw_read_ns"`
	RawRate float64       `json:"raw_rate"`
	// Ratio is RestoreRate / RawRate; the goal is at least 0.8.
	Ratio float64 `json:"ratio"`
	// RestoreCPU is the CPU the process used from the cold instance's
	// start to its last task restored (an embedded cluster's share
	// included); PeakRSS the process's peak resident set size in that
	// time and StartRSS its resident set size at the start (0 if they
	// could not be read): their difference is what the restore added.
	RestoreCPU time.Duration `json:"restore_cpu_ns"`
	PeakRSS    int64         `json:"peak_rss_bytes"`
	StartRSS   int64         `json:"start_rss_bytes"`
	// Tasks is each stateful task's restore.
	Tasks []TaskRestore `json:"tasks"`
}

// TaskRestore is one task's cold restore.
type TaskRestore struct {
	Task     string        `json:"task"`
	Records  int64         `json:"records"`
	Duration time.Duration `json:"duration_ns"`
}

// RunRestore fills a wordcount changelog with cfg.Keys records through an
// App, then times a cold instance restoring all of it and a plain kgo
// consumer reading all of it.
func RunRestore(ctx context.Context, cfg RestoreConfig) (*RestoreResult, error) {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	res := &RestoreResult{Config: cfg}
	e, err := newPrefilledEnv(ctx, cfg.Brokers, cfg.Partitions, cfg.Keys)
	if err != nil {
		return nil, err
	}
	defer e.close()
	appID := "restore" + e.suffix
	changelog := topology.ChangelogTopic(appID, "counts")
	fill, err := e.start(instanceConfig{appID: appID, id: "fill"})
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, cfg.Timeout, "the changelog to be written", func() bool {
		n, err := endOffsets(ctx, e.cl, changelog)
		return err == nil && n >= int64(cfg.Keys)
	}); err != nil {
		return nil, err
	}
	fill.drain()
	if err := fill.wait(cfg.Timeout); err != nil {
		return nil, err
	}
	if res.Changelog, err = endOffsets(ctx, e.cl, changelog); err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Log, "changelog %s holds %d records\n", changelog, res.Changelog)

	raw1, err := rawRead(ctx, e.brokers, changelog, res.Changelog, cfg.Timeout)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Log, "raw read: %v\n", raw1)

	var mu sync.Mutex
	assigned := map[string]baton.Event{}
	restored := map[string]baton.Event{}
	listen := func(ev baton.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case ev.Kind == baton.EventAssigned && isStateful(ev.Task):
			assigned[ev.Task] = ev
		case ev.Kind == baton.EventRestored && isStateful(ev.Task):
			restored[ev.Task] = ev
		}
	}
	if cfg.Profile != nil {
		if err := pprof.StartCPUProfile(cfg.Profile); err != nil {
			return nil, fmt.Errorf("restore profile: %w", err)
		}
	}
	runtime.GC()
	rssErr := resetPeakRSS()
	res.StartRSS, _ = rss()
	cpu0 := cpuTime()
	cold, err := e.start(instanceConfig{appID: appID, id: "cold", listener: listen})
	if err != nil {
		if cfg.Profile != nil {
			pprof.StopCPUProfile()
		}
		return nil, err
	}
	err = waitFor(ctx, cfg.Timeout, "every task to be restored", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(restored) == int(cfg.Partitions)
	})
	res.RestoreCPU = cpuTime() - cpu0
	if rssErr == nil {
		// The kernel updates the peak lazily: it can lag a size read
		// directly.
		peak, _ := peakRSS()
		now, _ := rss()
		res.PeakRSS = max(peak, now, res.StartRSS)
	}
	if cfg.Profile != nil {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return nil, err
	}
	cold.kill()
	var first, last time.Time
	for task, a := range assigned {
		r := restored[task]
		if first.IsZero() || a.Time.Before(first) {
			first = a.Time
		}
		if r.Time.After(last) {
			last = r.Time
		}
		res.Restored += r.Replayed
		res.Tasks = append(res.Tasks, TaskRestore{Task: task, Records: r.Replayed, Duration: r.Time.Sub(a.Time)})
	}
	slices.SortFunc(res.Tasks, func(a, b TaskRestore) int { return strings.Compare(a.Task, b.Task) })
	res.RestoreTime = last.Sub(first)
	fmt.Fprintf(cfg.Log, "cold restore of %d records: %v\n", res.Restored, res.RestoreTime)

	raw2, err := rawRead(ctx, e.brokers, changelog, res.Changelog, cfg.Timeout)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(cfg.Log, "raw read again: %v\n", raw2)
	res.RawTime = min(raw1, raw2)
	if res.RestoreTime > 0 {
		res.RestoreRate = float64(res.Restored) / res.RestoreTime.Seconds()
	}
	if res.RawTime > 0 {
		res.RawRate = float64(res.Changelog) / res.RawTime.Seconds()
	}
	if res.RawRate > 0 {
		res.Ratio = res.RestoreRate / res.RawRate
	}
	return res, nil
}

// endOffsets sums a topic's end offsets.
func endOffsets(ctx context.Context, cl *kgo.Client, topic string) (int64, error) {
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	if err := ends.Error(); err != nil {
		return 0, err
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n, nil
}

// rawRead times a plain consumer reading want records of topic from the
// start, as the App's restore client would fetch them (same fetch wait).
func rawRead(ctx context.Context, brokers []string, topic string, want int64, timeout time.Duration) (time.Duration, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(50*time.Millisecond))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	var n int64
	for n < want {
		f := cl.PollFetches(rctx)
		if rctx.Err() != nil {
			return 0, fmt.Errorf("%w reading %s: %d of %d records", ErrTimeout, topic, n, want)
		}
		n += int64(f.NumRecords())
	}
	return time.Since(start), nil
}

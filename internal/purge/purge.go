// Package purge deletes the records of repartition topics that the group
// has committed. A Purger runs one goroutine of its own (Start to Close);
// the commit paths only hand it offsets (Committed), which never blocks.
package purge

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Purger deletes the records of repartition topics that the group has
// committed, as Kafka Streams does: repartition topics keep records
// forever (retention.ms=-1), so without it they grow without bound.
//
// Commits hand it their offsets through committed, which only records
// them and never blocks, so the commit paths do no I/O for it. Its own goroutine sends one DeleteRecords request at a time,
// at most once per interval, with a timeout, and only for partitions whose
// Committed offset moved since the last purge. A failed purge is logged
// and retried with the next commit's offsets; it never stops the App.
type Purger struct {
	topics   map[string]bool // repartition topics the App reads
	interval time.Duration
	timeout  time.Duration
	log      *slog.Logger

	mu      sync.Mutex
	pending map[string]map[int32]int64 // Committed offsets not purged yet
	started bool

	kick   chan struct{} // cap 1: offsets are pending
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	// Owned by the goroutine.
	purged   map[string]map[int32]int64
	lastWarn time.Time
}

// New returns nil (a Purger that does nothing) when the topology has
// no repartition topics.
func New(topics []string, interval time.Duration, log *slog.Logger) *Purger {
	if len(topics) == 0 {
		return nil
	}
	p := &Purger{topics: map[string]bool{}, interval: interval, timeout: 10 * time.Second, log: log,
		pending: map[string]map[int32]int64{}, kick: make(chan struct{}, 1), done: make(chan struct{}),
		purged: map[string]map[int32]int64{}}
	for _, t := range topics {
		p.topics[t] = true
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p
}

// Start runs the purger's goroutine, which sends each request with the
// client admin returns then (the App's clients are replaced when its
// member starts again).
func (p *Purger) Start(admin func() *kadm.Client) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.started = true
	p.mu.Unlock()
	go p.run(admin)
}

// Close stops the goroutine, cancelling a request in flight, and waits
// for it.
func (p *Purger) Close() {
	if p == nil {
		return
	}
	p.cancel()
	p.mu.Lock()
	started := p.started
	p.mu.Unlock()
	if started {
		<-p.done
	}
}

// Committed records the offsets of a commit that succeeded (err == nil);
// the repartition partitions among them are purged up to those offsets.
func (p *Purger) Committed(offsets map[string]map[int32]kgo.EpochOffset, err error) {
	if p == nil || err != nil {
		return
	}
	added := false
	p.mu.Lock()
	for topic, parts := range offsets {
		if !p.topics[topic] {
			continue
		}
		for part, eo := range parts {
			if eo.Offset <= 0 {
				continue
			}
			if p.pending[topic] == nil {
				p.pending[topic] = map[int32]int64{}
			}
			if eo.Offset > p.pending[topic][part] {
				p.pending[topic][part] = eo.Offset
				added = true
			}
		}
	}
	p.mu.Unlock()
	if added {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}

// take returns the pending offsets that are beyond what was purged.
func (p *Purger) take() kadm.Offsets {
	p.mu.Lock()
	pending := p.pending
	p.pending = map[string]map[int32]int64{}
	p.mu.Unlock()
	out := kadm.Offsets{}
	for topic, parts := range pending {
		for part, off := range parts {
			if off > p.purged[topic][part] {
				out.Add(kadm.Offset{Topic: topic, Partition: part, At: off, LeaderEpoch: -1})
			}
		}
	}
	return out
}

func (p *Purger) run(admin func() *kadm.Client) {
	defer close(p.done)
	var last time.Time
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-p.kick:
		}
		if wait := p.interval - time.Since(last); !last.IsZero() && wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-p.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		offsets := p.take()
		if len(offsets) == 0 {
			continue
		}
		last = time.Now()
		p.purge(admin(), offsets)
	}
}

func (p *Purger) purge(admin *kadm.Client, offsets kadm.Offsets) {
	ctx, cancel := context.WithTimeout(p.ctx, p.timeout)
	defer cancel()
	resps, err := admin.DeleteRecords(ctx, offsets)
	if err != nil {
		if p.ctx.Err() == nil {
			p.warn("purging repartition topics; retrying after the next commit", "err", err)
		}
		return
	}
	var failed []error
	purged := 0
	resps.Each(func(r kadm.DeleteRecordsResponse) {
		if r.Err != nil {
			failed = append(failed, r.Err)
			return
		}
		if p.purged[r.Topic] == nil {
			p.purged[r.Topic] = map[int32]int64{}
		}
		if o, ok := offsets.Lookup(r.Topic, r.Partition); ok {
			p.purged[r.Topic][r.Partition] = o.At
		}
		purged++
	})
	if len(failed) > 0 {
		p.warn("purging repartition partitions; retrying after the next commit", "failed", len(failed), "err", failed[0])
	}
	p.log.Debug("purged repartition topics", "partitions", purged)
}

// warn logs at warn level at most once a minute, at debug otherwise: a
// cluster that refuses DeleteRecords would repeat the same line every
// interval.
func (p *Purger) warn(msg string, args ...any) {
	if time.Since(p.lastWarn) >= time.Minute {
		p.lastWarn = time.Now()
		p.log.Warn(msg, args...)
		return
	}
	p.log.Debug(msg, args...)
}

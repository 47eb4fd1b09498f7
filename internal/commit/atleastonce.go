package commit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/baton-streams/baton/instance"
	"github.com/baton-streams/baton/internal/taskstore"
	"github.com/baton-streams/baton/internal/work"
)

// acks counts produced records not yet acknowledged, by epoch: a commit
// cuts an epoch and waits until every record of it and of the epochs
// before is acknowledged, while processing goes on in the next. Workers
// and produce callbacks count with atomics only; cut runs on the loop and
// wait on the commit path's goroutine.
type acks struct {
	cur atomic.Pointer[epoch]
}

// epoch is one commit's share of the produced records.
type epoch struct {
	id     uint64
	n      atomic.Int64
	sealed atomic.Bool
	zero   chan struct{} // closed once sealed with nothing in flight
	once   sync.Once
	prev   *epoch // the epoch before, until a wait saw it complete
}

func newAcks() *acks {
	k := &acks{}
	k.cur.Store(&epoch{zero: make(chan struct{})})
	return k
}

// add counts a record in the current epoch.
func (k *acks) add() *epoch {
	for {
		e := k.cur.Load()
		e.n.Add(1)
		if k.cur.Load() == e {
			return e
		}
		k.done(e) // cut meanwhile: count it in the next
	}
}

// done uncounts an acknowledged record.
func (k *acks) done(e *epoch) {
	if e.n.Add(-1) == 0 {
		e.check()
	}
}

func (e *epoch) check() {
	if e.sealed.Load() && e.n.Load() == 0 {
		e.once.Do(func() { close(e.zero) })
	}
}

// cut ends the current epoch and returns it.
func (k *acks) cut() *epoch {
	old := k.cur.Load()
	k.cur.Store(&epoch{id: old.id + 1, zero: make(chan struct{}), prev: old})
	old.sealed.Store(true)
	old.check()
	return old
}

// wait returns once no record of epoch e or before is in flight. Waits
// run in the order of their epochs.
func (k *acks) wait(ctx context.Context, e *epoch) error {
	for x := e; x != nil; x = x.prev {
		select {
		case <-x.zero:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	e.prev = nil // every epoch before is done: let them go
	return nil
}

// AtLeastOnce commits input offsets after the changelog and output writes
// they depend on are acknowledged. Commits are pipelined: Begin seals each
// store's pending writes with the epoch it cuts and returns; processing
// goes on while the committer waits for the epoch's acknowledgements and
// commits the offsets; Done then hands the loop the sealed writes to apply
// to the stores at the acknowledged changelog offsets (Write).
type AtLeastOnce struct {
	env  *Env
	acks *acks
	jobs chan aloJob
	// Loop only: the commits begun and not done, and when the oldest of
	// them began.
	begun []time.Time
}

type aloJob struct {
	seq     int
	epoch   *epoch
	offsets map[string]map[int32]kgo.EpochOffset
}

// NewAtLeastOnce returns the at-least-once committer of env's membership.
func NewAtLeastOnce(env *Env) *AtLeastOnce {
	return &AtLeastOnce{env: env, acks: newAcks(), jobs: make(chan aloJob, 64)}
}

// Open has nothing to ready.
func (c *AtLeastOnce) Open() error { return nil }

// Serve waits for each commit's acknowledgements and commits its offsets.
func (c *AtLeastOnce) Serve(ctx context.Context, out chan<- Result) { serve(ctx, c.jobs, out, c.work) }

// Processed needs no counting: a commit's work is its sealed writes and
// its offsets.
func (c *AtLeastOnce) Processed(int) {}

// serve is a committer's goroutine: it carries out the committer's jobs
// in order, each with work, and hands each result to the loop on out,
// until ctx ends.
func serve[J any](ctx context.Context, jobs <-chan J, out chan<- Result, work func(context.Context, J) Result) {
	for {
		var j J
		select {
		case <-ctx.Done():
			return
		case j = <-jobs:
		}
		r := work(ctx, j)
		select {
		case out <- r:
		case <-ctx.Done():
			return
		}
	}
}

// work waits for the acknowledgements of the records of j's epoch, then
// commits its input offsets.
func (c *AtLeastOnce) work(ctx context.Context, j aloJob) Result {
	a := c.env
	start := time.Now()
	r := Result{Seq: j.seq, Epoch: j.epoch.id}
	if a.OnCommitWork != nil && len(j.offsets) > 0 {
		a.OnCommitWork()
	}
	wctx, cancel := a.whileConfirmed(ctx, 30*time.Second)
	r.Err = a.gaveUp(wctx, c.acks.wait(wctx, j.epoch))
	cancel()
	if r.Err == nil && len(j.offsets) > 0 {
		cctx, cancel := a.whileConfirmed(ctx, 10*time.Second)
		a.Client.CommitOffsetsSync(cctx, j.offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			r.Err = offsetCommitErr(resp, err)
		})
		r.Err = a.gaveUp(cctx, r.Err)
		cancel()
		a.Purger.Committed(j.offsets, r.Err)
		r.Committed = r.Err == nil
	}
	a.Metrics.CommitSeconds.Observe(time.Since(start).Seconds())
	return r
}

func (c *AtLeastOnce) Produce(r *kgo.Record, promise func(*kgo.Record, error)) {
	e := c.acks.add()
	c.env.Client.Produce(c.env.Ctx, r, func(r *kgo.Record, err error) {
		promise(r, err)
		c.acks.done(e)
	})
}

func (c *AtLeastOnce) Begin(seq int, tasks []*work.Task, _ bool) {
	epoch := c.acks.cut()
	for _, t := range tasks {
		for _, s := range t.Stores {
			s.Seal(epoch.id)
		}
	}
	c.begun = append(c.begun, time.Now())
	c.jobs <- aloJob{seq: seq, epoch: epoch, offsets: inputOffsets(tasks)}
}

func (c *AtLeastOnce) Exclusive() bool {
	return len(c.begun) > 0 && time.Since(c.begun[0]) > c.env.CommitInterval
}

func (c *AtLeastOnce) Done(r Result) (*Write, instance.CommitDone) {
	if len(c.begun) > 0 {
		c.begun = c.begun[1:]
	}
	w := newWrite(r.Seq, r.Err)
	if r.Err != nil && !r.Committed && (errors.Is(r.Err, context.Canceled) || errors.Is(r.Err, context.DeadlineExceeded)) {
		return nil, w.CD // the acknowledgements never came: nothing is durable
	}
	// The writes of the commit's epoch and of those before, acknowledged.
	upTo := func(e taskstore.Sealed) bool { return e.Epoch <= r.Epoch }
	for _, t := range c.env.Tasks() {
		for _, s := range t.Stores {
			w.take(t, s, upTo)
		}
	}
	if len(w.parts) == 0 {
		return nil, w.CD
	}
	return w, w.CD
}

// lost lets the commits in flight go on: their offsets are of work whose
// writes are acknowledged, so committing them, even for partitions that
// are someone else's now, loses nothing (it can only make their next
// owner process again what it already did); not committing them makes
// every member that gets its partitions back process again what it did.
func (c *AtLeastOnce) Lost() int { return 0 }

func (c *AtLeastOnce) Abort() {}

// inputOffsets are the next input offsets to commit for tasks, by topic
// and partition.
func inputOffsets(tasks []*work.Task) map[string]map[int32]kgo.EpochOffset {
	offsets := map[string]map[int32]kgo.EpochOffset{}
	for _, t := range tasks {
		for topic, eo := range t.Offsets {
			if offsets[topic] == nil {
				offsets[topic] = map[int32]kgo.EpochOffset{}
			}
			offsets[topic][t.Part] = eo
		}
	}
	return offsets
}

func offsetCommitErr(resp *kmsg.OffsetCommitResponse, err error) error {
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if e := kerr.ErrorForCode(p.ErrorCode); e != nil {
				return fmt.Errorf("committing %s[%d]: %w", t.Topic, p.Partition, e)
			}
		}
	}
	return nil
}

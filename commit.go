package baton

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

// committer makes processed work durable. There are two: at-least-once
// (atLeastOnce) and transactional (transactional). Each owns its own
// bookkeeping and no task state: the loop calls every method but
// produce, which workers call while processing. A commit runs on the
// committer's own goroutine (serve) and reports back on the loop's
// commits channel; done, on the loop, turns that report into the core's
// CommitDone and the store writes the commit made durable. When a
// transaction aborted, the loop rolls its tasks back (shell.rollBack).
type committer interface {
	// produce sends a record the processing of a task wrote.
	produce(r *kgo.Record, promise func(*kgo.Record, error))
	// begin starts commit seq of the tasks' work (final: a revoke or the
	// end waits for it).
	begin(seq int, tasks []*work.Task, final bool)
	// exclusive reports whether processing must wait: a transaction is
	// committing (every record processed belongs to the open one), or
	// commits fall behind (processing may run one commit interval ahead
	// of what is durable, no more).
	exclusive() bool
	// done finishes a commit on the loop. It returns the store writes
	// the commit made durable, to write off the loop (the core hears of
	// the commit once they are written), or nil and the CommitDone to
	// step at once.
	done(r commitResult) (*commitWrite, instance.CommitDone)
	// lost: the member's partitions were lost; nothing open may commit.
	// It returns the seq of a commit whose result the rebalance callback
	// must wait for (0: none): until it is done the member must not
	// rejoin, or an open transaction could commit under the new
	// generation work another member has redone.
	lost() int
	// abort gives up what is not committed, when Run fails.
	abort()
}

// commitResult is a commit's outcome, from the committer's goroutine.
type commitResult struct {
	seq   int
	epoch uint64
	err   error
	// Transactions: the transaction committed (its writes apply to the
	// stores), or was rolled back (aborted: the input rewinds).
	committed bool
	aborted   bool
}

// errUnconfirmed ends a commit once the group has not confirmed this
// member for a session timeout (App.confirmation): the group may have
// expelled it and handed its tasks to other members, so the commit is
// moot, and waiting for it would only hold up what comes next (a revoke
// answered, a rejoin).
var errUnconfirmed = errors.New("baton: commit given up: the group has not confirmed this member for a session timeout")

// confirmEvery is how often a commit checks that the group still
// confirms its member.
const confirmEvery = 100 * time.Millisecond

// whileConfirmed returns a context for one step of a commit: it ends with
// parent, after limit, or once the group has not confirmed this member
// for a session timeout, with errUnconfirmed as its cause. A commit
// never waits longer than its member can stay in the group.
func (a *App) whileConfirmed(parent context.Context, limit time.Duration) (context.Context, context.CancelFunc) {
	ctx, giveUp := context.WithCancelCause(parent)
	tctx, cancel := context.WithTimeout(ctx, limit)
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		tk := time.NewTicker(confirmEvery)
		defer tk.Stop()
		for now := time.Now(); ; {
			if _, unconfirmed := a.confirmation(now); unconfirmed {
				giveUp(errUnconfirmed)
				return
			}
			select {
			case <-tctx.Done():
				return
			case now = <-tk.C:
			}
		}
	}()
	return tctx, func() {
		cancel()
		giveUp(context.Canceled)
		<-watching
	}
}

// gaveUp returns err, saying so and counting it when the commit was given
// up because its member was unconfirmed (whileConfirmed).
func (a *App) gaveUp(ctx context.Context, err error) error {
	if err == nil || !errors.Is(context.Cause(ctx), errUnconfirmed) || errors.Is(err, errUnconfirmed) {
		return err
	}
	a.metrics.CommitsGivenUp.Inc()
	return fmt.Errorf("%w: %w", errUnconfirmed, err)
}

// finalSeq is the sequence number of the final commit (never the core's).
const finalSeq = -1

// finalCommit commits the tasks' work and waits for it, at the end of a
// membership, finishing the commits before it on the way.
func (s *shell) finalCommit(ctx context.Context, tasks []*work.Task) error {
	s.a.commit.begin(finalSeq, tasks, true)
	for {
		select {
		case r := <-s.a.ch.commits:
			// A write it starts ends before the stores close.
			_, cd := s.takeResult(r)
			if r.seq == finalSeq {
				return r.err
			}
			s.core.Step(cd) // its effects are moot: the loop is ending
			s.core.Ready()
		case <-ctx.Done():
			return fmt.Errorf("baton: final commit: %w", ctx.Err())
		}
	}
}

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

// atLeastOnce commits input offsets after the changelog and output writes
// they depend on are acknowledged. Commits are pipelined: begin seals each
// store's pending writes with the epoch it cuts and returns; processing
// goes on while the committer waits for the epoch's acknowledgements and
// commits the offsets; done then applies the sealed writes to the stores
// at the acknowledged changelog offsets.
type atLeastOnce struct {
	a    *App
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

func newAtLeastOnce(a *App) *atLeastOnce {
	c := &atLeastOnce{a: a, acks: newAcks(), jobs: make(chan aloJob, 64)}
	return c
}

// serve is a committer's goroutine: it carries out the committer's jobs
// in order, each with work, and hands each result to the loop on out,
// until ctx ends.
func serve[J any](ctx context.Context, jobs <-chan J, out chan<- commitResult, work func(context.Context, J) commitResult) {
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
func (c *atLeastOnce) work(ctx context.Context, j aloJob) commitResult {
	a := c.a
	start := time.Now()
	r := commitResult{seq: j.seq, epoch: j.epoch.id}
	if a.cfg.onCommitWork != nil && len(j.offsets) > 0 {
		a.cfg.onCommitWork()
	}
	wctx, cancel := a.whileConfirmed(ctx, 30*time.Second)
	r.err = a.gaveUp(wctx, c.acks.wait(wctx, j.epoch))
	cancel()
	if r.err == nil && len(j.offsets) > 0 {
		cctx, cancel := a.whileConfirmed(ctx, 10*time.Second)
		a.group.CommitOffsetsSync(cctx, j.offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			r.err = offsetCommitErr(resp, err)
		})
		r.err = a.gaveUp(cctx, r.err)
		cancel()
		a.purger.Committed(j.offsets, r.err)
		r.committed = r.err == nil
	}
	a.metrics.CommitSeconds.Observe(time.Since(start).Seconds())
	return r
}

func (c *atLeastOnce) produce(r *kgo.Record, promise func(*kgo.Record, error)) {
	e := c.acks.add()
	c.a.group.Produce(c.a.runCtx, r, func(r *kgo.Record, err error) {
		promise(r, err)
		c.acks.done(e)
	})
}

func (c *atLeastOnce) begin(seq int, tasks []*work.Task, _ bool) {
	epoch := c.acks.cut()
	for _, t := range tasks {
		for _, s := range t.Stores {
			s.Seal(epoch.id)
		}
	}
	c.begun = append(c.begun, time.Now())
	c.jobs <- aloJob{seq: seq, epoch: epoch, offsets: inputOffsets(tasks)}
}

func (c *atLeastOnce) exclusive() bool {
	return len(c.begun) > 0 && time.Since(c.begun[0]) > c.a.cfg.commitInterval
}

func (c *atLeastOnce) done(r commitResult) (*commitWrite, instance.CommitDone) {
	if len(c.begun) > 0 {
		c.begun = c.begun[1:]
	}
	w := newCommitWrite(r.seq, r.err)
	if r.err != nil && !r.committed && (errors.Is(r.err, context.Canceled) || errors.Is(r.err, context.DeadlineExceeded)) {
		return nil, w.cd // the acknowledgements never came: nothing is durable
	}
	// The writes of the commit's epoch and of those before, acknowledged.
	upTo := func(e taskstore.Sealed) bool { return e.Epoch <= r.epoch }
	for _, t := range c.a.tasks {
		for _, s := range t.Stores {
			w.take(t, s, upTo)
		}
	}
	if len(w.parts) == 0 {
		return nil, w.cd
	}
	return w, w.cd
}

// lost lets the commits in flight go on: their offsets are of work whose
// writes are acknowledged, so committing them, even for partitions that
// are someone else's now, loses nothing (it can only make their next
// owner process again what it already did); not committing them makes
// every member that gets its partitions back process again what it did.
func (c *atLeastOnce) lost() int { return 0 }

func (c *atLeastOnce) abort() {}

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

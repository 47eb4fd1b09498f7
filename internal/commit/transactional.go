package commit

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/baton-streams/baton/instance"
	"github.com/baton-streams/baton/internal/taskstore"
	"github.com/baton-streams/baton/internal/work"
)

// Transactional writes changelog and output records and commits input
// offsets in one Kafka transaction per commit. Records processed belong to
// the open transaction, so processing waits while one commits
// (Exclusive). A transaction that fails is aborted: the active tasks roll
// back to the last commit and the loop rewinds their input.
type Transactional struct {
	env  *Env
	jobs chan txnJob
	// inflight: commits begun and not done (loop only).
	inflight int
	// produced and processed count the open transaction's records;
	// aborts counts the aborts begun, so a record's callback knows
	// whether its transaction was aborted since it was produced.
	produced, processed atomic.Int64
	aborts              atomic.Uint64
	// offsetsAdded: the group's offsets are in the open transaction
	// (committer goroutine only).
	offsetsAdded bool
	// lostSession: the partitions were lost while a transaction was
	// open; the committer aborts instead of committing until the abort
	// queued by Lost is done. lostSeq counts those aborts, whose seqs are
	// below FinalSeq (never the core's).
	lostSession atomic.Bool
	lostSeq     int
	// fault is planted by tests (plant).
	fault atomic.Pointer[Fault]
}

// Fault changes one transaction with work in it, the next one after
// skip more have committed: it aborts with abort instead of committing,
// or it commits and reports lost, an outcome lost on the way. A lost
// outcome waits for a transaction that produced records.
type Fault struct {
	Skip        int
	Abort, Lost error
}

// Plant makes f the fault of a transaction to come (tests).
func (c *Transactional) Plant(f Fault) { c.fault.Store(&f) }

// takeFault counts a transaction with work against the planted fault's
// skip, and returns the fault if it is this transaction's.
func (c *Transactional) takeFault() *Fault {
	f := c.fault.Load()
	switch {
	case f == nil:
		return nil
	case f.Skip > 0:
		c.fault.CompareAndSwap(f, &Fault{Skip: f.Skip - 1, Abort: f.Abort, Lost: f.Lost})
		return nil
	case c.fault.CompareAndSwap(f, nil):
		return f
	}
	return nil
}

type txnJob struct {
	seq     int
	final   bool
	abort   error // abort the open transaction with this cause
	skip    bool  // nothing to commit: answered in turn, after the jobs before it
	offsets map[string]map[int32]kgo.EpochOffset
}

// NewTransactional returns the exactly-once committer of env's membership.
func NewTransactional(env *Env) *Transactional {
	return &Transactional{env: env, jobs: make(chan txnJob, 64)}
}

// Open begins the first transaction.
func (c *Transactional) Open() error { return c.beginTxn() }

// Serve commits each transaction and begins the next.
func (c *Transactional) Serve(ctx context.Context, out chan<- Result) {
	serve(ctx, c.jobs, out, c.commit)
}

// Processed counts records processed into the open transaction.
func (c *Transactional) Processed(n int) { c.processed.Add(int64(n)) }

// produce sends a record in the open transaction. A record of a
// transaction being aborted may fail: dropped unsent (kgo.ErrAborting), or
// rejected once the abort fenced the producer's old epoch
// (INVALID_PRODUCER_EPOCH). Such a failure is not reported to promise:
// the record's work is thrown away with the transaction, and processing
// rewinds past it.
func (c *Transactional) Produce(r *kgo.Record, promise func(*kgo.Record, error)) {
	c.produced.Add(1)
	aborts := c.aborts.Load()
	c.env.Client.Produce(c.env.Ctx, r, func(r *kgo.Record, err error) {
		if err != nil && c.aborts.Load() != aborts {
			return
		}
		promise(r, err)
	})
}

func (c *Transactional) Begin(seq int, _ []*work.Task, final bool) {
	c.inflight++
	if c.env.Rewinding() {
		// Rolled back and not rewound yet: nothing to commit.
		c.jobs <- txnJob{seq: seq, skip: true}
		return
	}
	// Every active task's work is in the transaction.
	c.jobs <- txnJob{seq: seq, final: final, offsets: inputOffsets(c.env.active())}
}

func (c *Transactional) Exclusive() bool { return c.inflight > 0 }

func (c *Transactional) Done(r Result) (*Write, instance.CommitDone) {
	c.inflight--
	w := newWrite(r.Seq, r.Err)
	switch {
	case r.Committed:
		// The transaction's writes, sealed at the changelogs' ends it
		// committed, go to the stores.
		all := func(taskstore.Sealed) bool { return true }
		for _, t := range c.env.active() {
			for _, s := range t.Stores {
				s.SealAt(0, s.Acked.Load())
				w.take(t, s, all)
			}
		}
	}
	if len(w.parts) == 0 {
		return nil, w.CD
	}
	return w, w.CD
}

func (c *Transactional) Lost() int {
	if c.inflight == 0 && c.produced.Load() == 0 && c.processed.Load() == 0 {
		return 0
	}
	// A commit in flight must not go through: it aborts at its next step.
	c.lostSession.Store(true)
	c.inflight++
	c.lostSeq++
	seq := FinalSeq - c.lostSeq
	c.jobs <- txnJob{seq: seq, abort: errLostSession}
	return seq
}

var errLostSession = errors.New("baton: this member's partitions were lost (session expired)")

func (c *Transactional) Abort() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.env.Client.EndTransaction(ctx, kgo.TryAbort); err != nil {
		c.env.Log.Warn("aborting the transaction", "err", err)
	}
}

// beginTxn starts the next transaction.
func (c *Transactional) beginTxn() error {
	c.offsetsAdded = false
	c.produced.Store(0)
	c.processed.Store(0)
	if err := c.env.Client.BeginTransaction(); err != nil {
		return fmt.Errorf("baton: beginning a transaction: %w", err)
	}
	return nil
}

// errTxnRetry means the transaction's offsets could not be committed for
// now (the group is rebalancing, the coordinator is moving): the
// transaction stays open and the next commit tries again.
var errTxnRetry = errors.New("baton: transaction commit postponed")

// commit commits the open transaction and begins the next one, on the
// committer's goroutine while processing waits. In order: wait for every
// produced record, add the input offsets to the transaction, end it with
// a commit. When final (a revoke, the end) it retries a postponed commit
// until ctx ends; otherwise a postponed commit leaves the transaction
// open for the next. Any other failure aborts the transaction.
func (c *Transactional) commit(ctx context.Context, j txnJob) Result {
	a := c.env
	r := Result{Seq: j.seq}
	if j.skip {
		return r
	}
	if j.abort != nil {
		r = c.abortTxn(r, j.abort)
		if errors.Is(j.abort, errLostSession) {
			c.lostSession.Store(false)
		}
		return r
	}
	if c.lostSession.Load() {
		return c.abortTxn(r, errLostSession)
	}
	if c.produced.Load() == 0 && c.processed.Load() == 0 {
		return r // nothing in this transaction
	}
	fault := c.takeFault()
	if fault != nil && fault.Abort != nil {
		return c.abortTxn(r, fault.Abort)
	}
	if a.OnCommitWork != nil {
		a.OnCommitWork()
	}
	start := time.Now()
	cctx, cancel := a.whileConfirmed(ctx, 10*time.Second)
	defer cancel()
	// abort aborts after a step that failed, saying when the commit was
	// given up for an unconfirmed member.
	abort := func(err error) Result { return c.abortTxn(r, a.gaveUp(cctx, err)) }
	if err := a.Client.Flush(cctx); err != nil {
		return abort(fmt.Errorf("baton: flushing produced records: %w", err))
	}
	if ctx.Err() != nil {
		return Result{Seq: j.seq, Err: ctx.Err()}
	}
	if c.lostSession.Load() {
		return c.abortTxn(r, errLostSession)
	}
	if c.produced.Load() == 0 {
		if fault != nil {
			c.fault.CompareAndSwap(nil, fault)
		}
		return c.commitOffsetsOnly(cctx, r, j, start, abort)
	}
	for {
		if c.lostSession.Load() {
			return c.abortTxn(r, errLostSession)
		}
		err := c.commitTxnOffsets(cctx, j.offsets)
		if err == nil {
			break
		}
		if !errors.Is(err, errTxnRetry) {
			return abort(err)
		}
		if !j.final {
			r.Err = err
			return r // tried again at the next commit
		}
		select {
		case <-cctx.Done():
			return abort(fmt.Errorf("%w: %v", err, cctx.Err()))
		case <-time.After(50 * time.Millisecond):
		}
	}
	if c.lostSession.Load() {
		return c.abortTxn(r, errLostSession)
	}
	if err := a.Client.EndTransaction(cctx, kgo.TryCommit); err != nil {
		return abort(fmt.Errorf("baton: committing the transaction: %w", err))
	}
	if fault != nil && fault.Lost != nil {
		return c.abortTxn(r, fmt.Errorf("baton: committing the transaction: %w", fault.Lost))
	}
	a.Metrics.Transactions.WithLabelValues("committed").Inc()
	a.Purger.Committed(j.offsets, nil)
	if err := c.beginTxn(); err != nil {
		a.Fail(err)
		r.Err = err
		return r
	}
	a.Metrics.CommitSeconds.Observe(time.Since(start).Seconds())
	r.Committed = true
	return r
}

// commitOffsetsOnly commits a transaction that wrote nothing: no
// transaction began in the cluster, and the input offsets alone are the
// commit.
func (c *Transactional) commitOffsetsOnly(cctx context.Context, r Result, j txnJob, start time.Time, abort func(error) Result) Result {
	a := c.env
	if err := a.Client.EndTransaction(cctx, kgo.TryCommit); err != nil {
		return abort(fmt.Errorf("baton: ending an empty transaction: %w", err))
	}
	if len(j.offsets) > 0 {
		a.Client.CommitOffsetsSync(cctx, j.offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			r.Err = offsetCommitErr(resp, err)
		})
	}
	if err := c.beginTxn(); err != nil {
		a.Fail(err)
		r.Err = err
		return r
	}
	if r.Err != nil {
		r.Aborted = true
		r.Err = a.gaveUp(cctx, fmt.Errorf("baton: committing offsets: %w", r.Err))
		return r
	}
	a.Purger.Committed(j.offsets, nil)
	a.Metrics.CommitSeconds.Observe(time.Since(start).Seconds())
	r.Committed = true
	return r
}

// ErrAbortUnresolved: an exactly-once abort did not complete within the
// abort timeout. Run then joins again with a new client.
var ErrAbortUnresolved = errors.New("baton: the transaction's abort did not complete")

// abortTxn aborts the open transaction after cause and begins the next;
// the loop rolls the active tasks back when it gets the result.
func (c *Transactional) abortTxn(r Result, cause error) Result {
	a := c.env
	a.Log.Warn("aborting the transaction; processing again from the last commit", "err", cause)
	a.Metrics.Transactions.WithLabelValues("aborted").Inc()
	c.aborts.Add(1)
	r.Aborted, r.Err = true, cause
	ctx, cancel := context.WithTimeout(a.Ctx, a.AbortTimeout)
	defer cancel()
	bctx, bcancel := context.WithTimeout(ctx, a.AbortTimeout/3)
	if err := a.Client.AbortBufferedRecords(bctx); err != nil {
		a.Log.Warn("dropping unsent records", "err", err)
	}
	bcancel()
	// An abort whose outcome is unknown (the cluster went away) is tried
	// again: the client then fences the old transaction by bumping the
	// producer epoch. An instance told to leave at once stops trying; the
	// cluster aborts the transaction at its timeout. One that is still
	// not done after the abort timeout (the transaction coordinator out
	// of reach that long: brokers dying one after another) closes its
	// tasks and joins again with a new client (ErrAbortUnresolved), whose
	// producer, with the same Transactional id, ends the transaction as
	// it starts.
	for {
		err := a.Client.EndTransaction(ctx, kgo.TryAbort)
		if err == nil {
			break
		}
		a.Log.Warn("aborting the transaction; trying again", "err", err)
		select {
		case <-a.LeaveNow:
			a.Fail(fmt.Errorf("baton: aborting the transaction: %w (after %v)", err, cause))
		case <-ctx.Done():
			a.Fail(fmt.Errorf("%w within %v: %w (after %v)", ErrAbortUnresolved, a.AbortTimeout, err, cause))
		case <-time.After(200 * time.Millisecond):
			continue
		}
		return r
	}
	if err := c.beginTxn(); err != nil {
		a.Fail(err)
	}
	return r
}

// commitTxnOffsets adds the input offsets to the open transaction. The
// request carries the member's generation, so an instance the group has
// expelled cannot commit (its transaction aborts).
func (c *Transactional) commitTxnOffsets(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset) error {
	a := c.env
	if len(offsets) == 0 {
		return nil
	}
	id, epoch, err := a.Client.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("baton: Transactional producer id: %w", err)
	}
	if !c.offsetsAdded {
		add := kmsg.NewPtrAddOffsetsToTxnRequest()
		add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = a.TransactionalID, id, epoch, a.Group
		resp, err := add.RequestWith(ctx, a.Client)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err != nil {
			return txnErr("adding offsets to the transaction", err)
		}
		c.offsetsAdded = true
	}
	memberID, generation := a.Client.GroupMetadata()
	if txnMember := a.TxnMember.Load(); txnMember != "" && memberID != txnMember {
		// The group expelled this member (say, it was stuck past the
		// rebalance timeout) and it joined again under a new id: another
		// member may have processed these records meanwhile. The new
		// generation would let the commit through; abort instead.
		old := txnMember
		a.TxnMember.Store(memberID)
		return fmt.Errorf("baton: the member was expelled from the group while the transaction was open (member id %s, now %s)", old, memberID)
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = a.TransactionalID, a.Group, id, epoch
	req.MemberID, req.Generation = memberID, generation
	for topic, parts := range offsets {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = topic
		for p, eo := range parts {
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, eo.Offset, eo.Epoch
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, a.Client)
	if err != nil {
		return txnErr("committing offsets in the transaction", err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if e := kerr.ErrorForCode(p.ErrorCode); e != nil {
				return txnErr(fmt.Sprintf("committing %s[%d] in the transaction", t.Topic, p.Partition), e)
			}
		}
	}
	return nil
}

// txnErr wraps errTxnRetry around errors after which the same transaction
// can still commit. A stale generation is one of them: the group moved to
// a new generation while this member held records (the client joins in
// the background), and the next attempt carries the new one. A member the
// group expelled never gets a matching generation: it loses its
// partitions (onLost aborts) or the cluster aborts the transaction at its
// timeout, so fencing holds.
func txnErr(what string, err error) error {
	switch {
	case errors.Is(err, kerr.IllegalGeneration), errors.Is(err, kerr.StaleMemberEpoch),
		errors.Is(err, kerr.RebalanceInProgress), errors.Is(err, kerr.CoordinatorLoadInProgress),
		errors.Is(err, kerr.CoordinatorNotAvailable), errors.Is(err, kerr.NotCoordinator),
		errors.Is(err, kerr.ConcurrentTransactions):
		return fmt.Errorf("%w: %s: %v", errTxnRetry, what, err)
	}
	return fmt.Errorf("baton: %s: %w", what, err)
}

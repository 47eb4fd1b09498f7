package baton

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/baton-streams/baton/instance"
	"github.com/baton-streams/baton/internal/taskstore"
	"github.com/baton-streams/baton/internal/topics"
	"github.com/baton-streams/baton/internal/work"
)

// Guarantee is what an App promises about records it processes when an
// instance dies.
type Guarantee int

const (
	// AtLeastOnce commits input offsets only after the changelog and
	// output writes they depend on are acknowledged: nothing is lost, and
	// after a crash the records since the last commit are processed again
	// (counts can be high). The default.
	AtLeastOnce Guarantee = iota
	// ExactlyOnce writes changelog and output records and commits input
	// offsets in one Kafka transaction per commit interval: after a crash
	// the unfinished transaction is aborted and its records are processed
	// again from the state of the last committed one. Changelogs are read
	// (restores, standbys, learners) and input is consumed read_committed.
	ExactlyOnce
)

// String returns the name ParseGuarantee accepts.
func (g Guarantee) String() string {
	switch g {
	case AtLeastOnce:
		return "at-least-once"
	case ExactlyOnce:
		return "exactly-once"
	}
	return fmt.Sprintf("Guarantee(%d)", int(g))
}

// ParseGuarantee parses "at-least-once" or "exactly-once".
func ParseGuarantee(s string) (Guarantee, error) {
	switch s {
	case "at-least-once":
		return AtLeastOnce, nil
	case "exactly-once":
		return ExactlyOnce, nil
	}
	return 0, fmt.Errorf("unknown guarantee %q (want at-least-once or exactly-once)", s)
}

// WithGuarantee sets the processing guarantee. Default AtLeastOnce.
func WithGuarantee(g Guarantee) Option { return func(c *config) { c.guarantee = g } }

// WithTransactionTimeout sets, under ExactlyOnce, how long the cluster lets
// a transaction stay open before it aborts it. It bounds how long a
// crashed instance's unfinished transaction holds up readers of its
// changelogs and output. Default 10s; it must exceed the commit interval.
func WithTransactionTimeout(d time.Duration) Option {
	return func(c *config) { c.txnTimeout = d }
}

func (a *App) exactlyOnce() bool { return a.cfg.guarantee == ExactlyOnce }

// transactionalID is the instance's transactional id: unique per instance.
// Zombies (an instance the group expelled that still runs) are fenced by
// the group generation its offset commits carry (KIP-447).
func (a *App) transactionalID() string { return a.cfg.appID + "-" + a.cfg.instanceID }

// txnClientOpts are the group client's options under ExactlyOnce.
func (a *App) txnClientOpts() []kgo.Opt {
	// TxnOffsetCommit v6 names topics by id; baton sends it itself (see
	// commitTxnOffsets) and names topics by name, which v5 does. v5 is
	// also the lowest the client accepts for transaction version 2
	// (KIP-890 part 2, Kafka 4's default): with it the client uses Produce
	// v12+ without AddPartitionsToTxn and EndTxn v5, which bumps the
	// producer epoch at every transaction (commitTxnOffsets asks for the
	// current one). baton's own AddOffsetsToTxn is still accepted.
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(int16(kmsg.TxnOffsetCommit), 5)
	return []kgo.Opt{
		kgo.TransactionalID(a.transactionalID()),
		kgo.TransactionTimeout(a.cfg.txnTimeout),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.MaxVersions(versions),
	}
}

// restoreClientOpts are the changelog reader's options under either
// guarantee: only committed data, and the transaction markers too, so a
// checkpoint moves past the marker that ends a changelog. A changelog
// written under exactly-once and read by a group that runs at-least-once
// now (or the other way) still ends with a marker: a reader that did not
// see it would stay one record behind for good, and a restoring active
// would never run.
func (a *App) restoreClientOpts() []kgo.Opt {
	return []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords()}
}

// transactional writes changelog and output records and commits input
// offsets in one Kafka transaction per commit. Records processed belong to
// the open transaction, so processing waits while one commits
// (exclusive). A transaction that fails is aborted: the active tasks roll
// back to the last commit and the loop rewinds their input (rewindInput).
type transactional struct {
	a    *App
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
	// queued by lost is done. lostSeq counts those aborts, whose seqs are
	// below finalSeq (never the core's).
	lostSession atomic.Bool
	lostSeq     int
	// fault is planted by tests (plant).
	fault atomic.Pointer[txnFault]
}

// txnFault changes one transaction with work in it, the next one after
// skip more have committed: it aborts with abort instead of committing,
// or it commits and reports lost, an outcome lost on the way. A lost
// outcome waits for a transaction that produced records.
type txnFault struct {
	skip        int
	abort, lost error
}

// plant makes f the fault of a transaction to come (tests).
func (c *transactional) plant(f txnFault) { c.fault.Store(&f) }

// takeFault counts a transaction with work against the planted fault's
// skip, and returns the fault if it is this transaction's.
func (c *transactional) takeFault() *txnFault {
	f := c.fault.Load()
	switch {
	case f == nil:
		return nil
	case f.skip > 0:
		c.fault.CompareAndSwap(f, &txnFault{skip: f.skip - 1, abort: f.abort, lost: f.lost})
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

func newTransactional(a *App) *transactional {
	return &transactional{a: a, jobs: make(chan txnJob, 64)}
}

// produce sends a record in the open transaction. A record of a
// transaction being aborted may fail: dropped unsent (kgo.ErrAborting), or
// rejected once the abort fenced the producer's old epoch
// (INVALID_PRODUCER_EPOCH). Such a failure is not reported to promise:
// the record's work is thrown away with the transaction, and processing
// rewinds past it.
func (c *transactional) produce(r *kgo.Record, promise func(*kgo.Record, error)) {
	c.produced.Add(1)
	aborts := c.aborts.Load()
	c.a.group.Produce(c.a.runCtx, r, func(r *kgo.Record, err error) {
		if err != nil && c.aborts.Load() != aborts {
			return
		}
		promise(r, err)
	})
}

func (c *transactional) begin(seq int, _ []*work.Task, final bool) {
	c.inflight++
	if c.a.shell != nil && (c.a.shell.rewind || c.a.shell.rewinding) {
		// Rolled back and not rewound yet: nothing to commit.
		c.jobs <- txnJob{seq: seq, skip: true}
		return
	}
	// Every active task's work is in the transaction.
	c.jobs <- txnJob{seq: seq, final: final, offsets: inputOffsets(c.a.activeTasks())}
}

func (c *transactional) exclusive() bool { return c.inflight > 0 }

func (c *transactional) done(r commitResult) (*commitWrite, instance.CommitDone) {
	c.inflight--
	w := newCommitWrite(r.seq, r.err)
	switch {
	case r.committed:
		// The transaction's writes, sealed at the changelogs' ends it
		// committed, go to the stores.
		all := func(taskstore.Sealed) bool { return true }
		for _, t := range c.a.activeTasks() {
			for _, s := range t.Stores {
				s.SealAt(0, s.Acked.Load())
				w.take(t, s, all)
			}
		}
	}
	if len(w.parts) == 0 {
		return nil, w.cd
	}
	return w, w.cd
}

func (c *transactional) lost() int {
	if c.inflight == 0 && c.produced.Load() == 0 && c.processed.Load() == 0 {
		return 0
	}
	// A commit in flight must not go through: it aborts at its next step.
	c.lostSession.Store(true)
	c.inflight++
	c.lostSeq++
	seq := finalSeq - c.lostSeq
	c.jobs <- txnJob{seq: seq, abort: errLostSession}
	return seq
}

var errLostSession = errors.New("baton: this member's partitions were lost (session expired)")

func (c *transactional) abort() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.a.group.EndTransaction(ctx, kgo.TryAbort); err != nil {
		c.a.log.Warn("aborting the transaction", "err", err)
	}
}

// beginTxn starts the next transaction.
func (c *transactional) beginTxn() error {
	c.offsetsAdded = false
	c.produced.Store(0)
	c.processed.Store(0)
	if err := c.a.group.BeginTransaction(); err != nil {
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
func (c *transactional) commit(ctx context.Context, j txnJob) commitResult {
	a := c.a
	r := commitResult{seq: j.seq}
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
	if fault != nil && fault.abort != nil {
		return c.abortTxn(r, fault.abort)
	}
	if a.cfg.onCommitWork != nil {
		a.cfg.onCommitWork()
	}
	start := time.Now()
	cctx, cancel := a.whileConfirmed(ctx, 10*time.Second)
	defer cancel()
	// abort aborts after a step that failed, saying when the commit was
	// given up for an unconfirmed member.
	abort := func(err error) commitResult { return c.abortTxn(r, a.gaveUp(cctx, err)) }
	if err := a.group.Flush(cctx); err != nil {
		return abort(fmt.Errorf("baton: flushing produced records: %w", err))
	}
	if ctx.Err() != nil {
		return commitResult{seq: j.seq, err: ctx.Err()}
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
			r.err = err
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
	if err := a.group.EndTransaction(cctx, kgo.TryCommit); err != nil {
		return abort(fmt.Errorf("baton: committing the transaction: %w", err))
	}
	if fault != nil && fault.lost != nil {
		return c.abortTxn(r, fmt.Errorf("baton: committing the transaction: %w", fault.lost))
	}
	a.metrics.Transactions.WithLabelValues("committed").Inc()
	a.purger.Committed(j.offsets, nil)
	if err := c.beginTxn(); err != nil {
		a.fail(err)
		r.err = err
		return r
	}
	a.metrics.CommitSeconds.Observe(time.Since(start).Seconds())
	r.committed = true
	return r
}

// commitOffsetsOnly commits a transaction that wrote nothing: no
// transaction began in the cluster, and the input offsets alone are the
// commit.
func (c *transactional) commitOffsetsOnly(cctx context.Context, r commitResult, j txnJob, start time.Time, abort func(error) commitResult) commitResult {
	a := c.a
	if err := a.group.EndTransaction(cctx, kgo.TryCommit); err != nil {
		return abort(fmt.Errorf("baton: ending an empty transaction: %w", err))
	}
	if len(j.offsets) > 0 {
		a.group.CommitOffsetsSync(cctx, j.offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			r.err = offsetCommitErr(resp, err)
		})
	}
	if err := c.beginTxn(); err != nil {
		a.fail(err)
		r.err = err
		return r
	}
	if r.err != nil {
		r.aborted = true
		r.err = a.gaveUp(cctx, fmt.Errorf("baton: committing offsets: %w", r.err))
		return r
	}
	a.purger.Committed(j.offsets, nil)
	a.metrics.CommitSeconds.Observe(time.Since(start).Seconds())
	r.committed = true
	return r
}

// errAbortUnresolved: an exactly-once abort did not complete within the
// abort timeout. Run then joins again with a new client.
var errAbortUnresolved = errors.New("baton: the transaction's abort did not complete")

// abortTxn aborts the open transaction after cause and begins the next;
// the loop rolls the active tasks back when it gets the result.
func (c *transactional) abortTxn(r commitResult, cause error) commitResult {
	a := c.a
	a.log.Warn("aborting the transaction; processing again from the last commit", "err", cause)
	a.metrics.Transactions.WithLabelValues("aborted").Inc()
	c.aborts.Add(1)
	r.aborted, r.err = true, cause
	ctx, cancel := context.WithTimeout(a.runCtx, a.cfg.abortTimeout)
	defer cancel()
	bctx, bcancel := context.WithTimeout(ctx, a.cfg.abortTimeout/3)
	if err := a.group.AbortBufferedRecords(bctx); err != nil {
		a.log.Warn("dropping unsent records", "err", err)
	}
	bcancel()
	// An abort whose outcome is unknown (the cluster went away) is tried
	// again: the client then fences the old transaction by bumping the
	// producer epoch. An instance told to leave at once stops trying; the
	// cluster aborts the transaction at its timeout. One that is still
	// not done after the abort timeout (the transaction coordinator out
	// of reach that long: brokers dying one after another) closes its
	// tasks and joins again with a new client (errAbortUnresolved), whose
	// producer, with the same transactional id, ends the transaction as
	// it starts.
	for {
		err := a.group.EndTransaction(ctx, kgo.TryAbort)
		if err == nil {
			break
		}
		a.log.Warn("aborting the transaction; trying again", "err", err)
		select {
		case <-a.leaveNow:
			a.fail(fmt.Errorf("baton: aborting the transaction: %w (after %v)", err, cause))
		case <-ctx.Done():
			a.fail(fmt.Errorf("%w within %v: %w (after %v)", errAbortUnresolved, a.cfg.abortTimeout, err, cause))
		case <-time.After(200 * time.Millisecond):
			continue
		}
		return r
	}
	if err := c.beginTxn(); err != nil {
		a.fail(err)
	}
	return r
}

// commitTxnOffsets adds the input offsets to the open transaction. The
// request carries the member's generation, so an instance the group has
// expelled cannot commit (its transaction aborts).
func (c *transactional) commitTxnOffsets(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset) error {
	a := c.a
	if len(offsets) == 0 {
		return nil
	}
	id, epoch, err := a.group.ProducerID(ctx)
	if err != nil {
		return fmt.Errorf("baton: transactional producer id: %w", err)
	}
	if !c.offsetsAdded {
		add := kmsg.NewPtrAddOffsetsToTxnRequest()
		add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = a.transactionalID(), id, epoch, a.cfg.appID
		resp, err := add.RequestWith(ctx, a.group)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		if err != nil {
			return txnErr("adding offsets to the transaction", err)
		}
		c.offsetsAdded = true
	}
	memberID, generation := a.group.GroupMetadata()
	if txnMember := a.txnMember.Load(); txnMember != "" && memberID != txnMember {
		// The group expelled this member (say, it was stuck past the
		// rebalance timeout) and it joined again under a new id: another
		// member may have processed these records meanwhile. The new
		// generation would let the commit through; abort instead.
		old := txnMember
		a.txnMember.Store(memberID)
		return fmt.Errorf("baton: the member was expelled from the group while the transaction was open (member id %s, now %s)", old, memberID)
	}
	req := kmsg.NewPtrTxnOffsetCommitRequest()
	req.TransactionalID, req.Group, req.ProducerID, req.ProducerEpoch = a.transactionalID(), a.cfg.appID, id, epoch
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
	resp, err := req.RequestWith(ctx, a.group)
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

// storeOfTask is a store of an active task, as the catch-ups after an
// aborted transaction find it by changelog partition.
type storeOfTask struct {
	t *work.Task
	s *taskstore.Store
}

// catchUpStores applies to the stores of active tasks what their
// changelogs hold, committed, beyond the stores' checkpoints. It runs
// while the loop waits for the rewind: no worker processes and rebalances
// are blocked, so the stores are its to write.
func (a *App) catchUpStores(ctx context.Context, tasks []*work.Task) error {
	byPart := map[string]map[int32]storeOfTask{}
	var changelogs []string
	for _, t := range tasks {
		for _, s := range t.Stores {
			if s.Source {
				continue // it follows the input's commits: catchUpSources
			}
			if byPart[s.Changelog] == nil {
				byPart[s.Changelog] = map[int32]storeOfTask{}
				changelogs = append(changelogs, s.Changelog)
			}
			byPart[s.Changelog][t.Part] = storeOfTask{t, s}
		}
	}
	if len(changelogs) == 0 {
		return nil
	}
	// The rolled-back transaction's writes end before inDoubt. Its
	// outcome shows in the changelog once the last stable offset passes
	// them: on Apache Kafka the markers are written after EndTxn returns,
	// so until then a committed transaction is not readable yet.
	var ends kadm.ListedOffsets
	for {
		var err error
		ends, err = a.admin.ListCommittedOffsets(ctx, changelogs...)
		if err != nil {
			return fmt.Errorf("baton: changelog ends to catch up: %w", err)
		}
		pending := ""
		for topic, parts := range byPart {
			for p, c := range parts {
				if o, ok := ends.Lookup(topic, p); c.s.InDoubt > 0 && (!ok || o.Err != nil || o.Offset <= c.s.InDoubt) {
					pending = fmt.Sprintf("%s[%d]", topic, p)
				}
			}
		}
		if pending == "" {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("baton: waiting for the outcome of the rolled-back transaction in %s: %w", pending, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	for _, parts := range byPart {
		for _, c := range parts {
			c.s.InDoubt = 0
		}
	}
	upTo := map[topics.Partition]int64{}
	for topic, parts := range byPart {
		for p := range parts {
			if o, ok := ends.Lookup(topic, p); ok && o.Err == nil {
				upTo[topics.Partition{Topic: topic, Part: p}] = o.Offset
			}
		}
	}
	return a.applyUpTo(ctx, tasks, upTo, "a committed transaction")
}

// catchUpSources brings the stores whose changelog is an input topic (a
// table's) up to the input's committed offsets, set: a transaction with
// an unknown outcome that did commit moved the input past what the
// stores hold.
func (a *App) catchUpSources(ctx context.Context, tasks []*work.Task, set map[string]map[int32]kgo.EpochOffset) error {
	upTo := map[topics.Partition]int64{}
	for _, t := range tasks {
		for _, s := range t.Stores {
			if eo, ok := set[s.Changelog][t.Part]; ok && s.Source {
				upTo[topics.Partition{Topic: s.Changelog, Part: t.Part}] = eo.Offset
			}
		}
	}
	return a.applyUpTo(ctx, tasks, upTo, "the committed input")
}

// applyUpTo reads, for each store of tasks whose changelog partition is in
// upTo, the changelog from the store's checkpoint to that offset
// (excluded) and applies it. It runs while no worker processes.
func (a *App) applyUpTo(ctx context.Context, tasks []*work.Task, upTo map[topics.Partition]int64, what string) error {
	byPart := map[string]map[int32]storeOfTask{}
	from := map[string]map[int32]kgo.Offset{}
	behind := map[string]map[int32]int64{}
	for _, t := range tasks {
		for _, s := range t.Stores {
			end, ok := upTo[topics.Partition{Topic: s.Changelog, Part: t.Part}]
			if !ok || end <= s.Checkpoint {
				continue
			}
			if from[s.Changelog] == nil {
				byPart[s.Changelog], from[s.Changelog], behind[s.Changelog] = map[int32]storeOfTask{}, map[int32]kgo.Offset{}, map[int32]int64{}
			}
			byPart[s.Changelog][t.Part] = storeOfTask{t, s}
			from[s.Changelog][t.Part] = kgo.NewOffset().At(s.Checkpoint)
			behind[s.Changelog][t.Part] = end
		}
	}
	if len(from) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(a.cfg.brokers...), kgo.ConsumePartitions(from),
		kgo.FetchMaxWait(50 * time.Millisecond)}, a.cfg.kgoOpts...), a.restoreClientOpts()...)...)
	if err != nil {
		return fmt.Errorf("baton: changelog reader to catch up: %w", err)
	}
	defer cl.Close()
	left := 0
	for _, parts := range behind {
		left += len(parts)
	}
	for left > 0 {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("baton: catching stores up with their changelogs: %w", err)
		}
		var ferr error
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			c, ok := byPart[fp.Topic][fp.Partition]
			end, want := behind[fp.Topic][fp.Partition]
			if !ok || !want || len(fp.Records) == 0 || ferr != nil {
				return
			}
			from := c.s.Checkpoint
			recs := fp.Records
			if i := slices.IndexFunc(recs, func(r *kgo.Record) bool { return r.Offset >= end }); i >= 0 {
				recs = recs[:i]
			}
			data := 0 // the committed records among them; the rest are markers
			for _, r := range recs {
				if r.Offset >= from && !r.Attrs.IsControl() {
					data++
				}
			}
			if a.cfg.onCatchUp != nil {
				a.cfg.onCatchUp(ctx)
			}
			if _, err := c.s.ApplyChangelog(recs); err != nil {
				ferr = fmt.Errorf("baton: task %s store %s: catching up: %w", c.t.ID, c.s.Name, err)
				return
			}
			next := c.s.Checkpoint
			if len(recs) < len(fp.Records) {
				next = end // the records left are past it
			}
			a.log.Info("store caught up with "+what, "task", c.t.ID, "store", c.s.Name, "from", from, "to", next, "records", data)
			if next >= end {
				delete(behind[fp.Topic], fp.Partition)
				left--
			}
		})
		if ferr != nil {
			return ferr
		}
	}
	return nil
}

// rewindInput sets the input position of every active task back to its
// last committed offset (the start of the partition when it has none). It runs
// while the loop holds rebalances blocked after a poll, as SetOffsets
// requires, and processes nothing.
func (a *App) rewindInput(ctx context.Context, tasks []*work.Task) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	parts := map[string][]int32{}
	for _, t := range tasks {
		for _, src := range t.Sub.Sources {
			parts[src] = append(parts[src], t.Part)
		}
	}
	if len(parts) == 0 {
		return nil
	}
	// A transaction whose commit had an unknown outcome (the cluster went
	// away during EndTxn) may have committed after all. Its offsets are
	// then committed, and its changelog writes are in the changelogs but
	// not in the stores: bring the stores up to their changelogs, and read
	// offsets only once no transactional commit is pending.
	if err := a.catchUpStores(ctx, tasks); err != nil {
		return err
	}
	var topics []string
	for t := range parts {
		topics = append(topics, t)
	}
	starts, err := a.admin.ListStartOffsets(ctx, topics...)
	if err != nil {
		return fmt.Errorf("baton: reading start offsets to rewind: %w", err)
	}
	set, err := rewindTargets(ctx, a.admin, a.cfg.appID, parts, starts)
	if err != nil {
		return err
	}
	if err := a.catchUpSources(ctx, tasks, set); err != nil {
		return err
	}
	a.group.SetOffsets(set)
	var to []string
	for topic, ps := range set {
		for p, eo := range ps {
			to = append(to, fmt.Sprintf("%s[%d]@%d", topic, p, eo.Offset))
		}
	}
	slices.Sort(to)
	a.log.Info("input rewound to the last commit", "partitions", len(to), "to", strings.Join(to, " "))
	return nil
}

// rewindTargets reads group's stable committed offsets and decides with
// rewindOffsets where each input partition of parts goes. A partition whose
// committed offset cannot be read yet (its group coordinator answers
// UNSTABLE_OFFSET_COMMIT while a transaction holding offsets for it is
// still open or its markers are being written) is asked again every
// 100 ms until ctx ends: taking it for "no commit" would process the
// whole partition again into stores that hold its effects.
func rewindTargets(ctx context.Context, adm *kadm.Client, group string, parts map[string][]int32, starts kadm.ListedOffsets) (map[string]map[int32]kgo.EpochOffset, error) {
	for {
		committed, err := adm.FetchOffsets(kadm.RequireStable(ctx), group)
		if err != nil {
			err = fmt.Errorf("baton: reading committed offsets to rewind: %w", err)
		} else {
			var set map[string]map[int32]kgo.EpochOffset
			if set, err = rewindOffsets(parts, committed, starts); err == nil {
				return set, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// rewindOffsets decides where each input partition of parts goes after an
// abort: its committed offset, or the start of the partition when the
// group has committed none for it. A partition whose committed offset
// or start could not be read is an error: the caller asks again.
func rewindOffsets(parts map[string][]int32, committed kadm.OffsetResponses, starts kadm.ListedOffsets) (map[string]map[int32]kgo.EpochOffset, error) {
	set := map[string]map[int32]kgo.EpochOffset{}
	for topic, ps := range parts {
		set[topic] = map[int32]kgo.EpochOffset{}
		for _, p := range ps {
			c, ok := committed.Lookup(topic, p)
			if ok && c.Err != nil {
				return nil, fmt.Errorf("baton: committed offset of %s[%d] to rewind to: %w", topic, p, c.Err)
			}
			if ok && c.At >= 0 {
				set[topic][p] = kgo.EpochOffset{Epoch: -1, Offset: c.At}
				continue
			}
			s, ok := starts.Lookup(topic, p)
			switch {
			case !ok:
				return nil, fmt.Errorf("baton: start offset of %s[%d] to rewind to: missing from the answer", topic, p)
			case s.Err != nil:
				return nil, fmt.Errorf("baton: start offset of %s[%d] to rewind to: %w", topic, p, s.Err)
			}
			set[topic][p] = kgo.EpochOffset{Epoch: -1, Offset: s.Offset}
		}
	}
	return set, nil
}

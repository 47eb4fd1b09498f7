package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/baton-streams/baton/assign"
	"github.com/baton-streams/baton/instance"
	"github.com/baton-streams/baton/internal/commit"
	"github.com/baton-streams/baton/internal/errs"
	"github.com/baton-streams/baton/internal/global"
	"github.com/baton-streams/baton/internal/load"
	"github.com/baton-streams/baton/internal/metrics"
	"github.com/baton-streams/baton/internal/purge"
	"github.com/baton-streams/baton/member"
	"github.com/baton-streams/baton/protocol"
	"github.com/baton-streams/baton/state"
	"github.com/baton-streams/baton/topology"
)

// Errors of Run that package baton exports under the same names.
var (
	ErrConfig          = errs.ErrConfig
	ErrRunning         = errors.New("baton: App.Run called twice")
	ErrInstanceIDInUse = errors.New("baton: instance id in use by another instance")
)

// errStopped is the run context's cause once Run returns.
var errStopped = errors.New("baton: stopped")

// App runs one instance of a topology (baton.App): one consumer-group
// member whose workers run the tasks the group's leader assigns it.
type App struct {
	cfg  Config
	top  *topology.Topology
	log  *slog.Logger
	subs map[int]topology.Subtopology
	// bySource maps an input topic to the subtopology reading it.
	bySource map[string]int
	// byChangelog maps a changelog topic to its store (subtopology, name).
	byChangelog map[string]storeRef

	// Written by Run before the loop starts, then read-only.
	unlock  func() error
	metrics *metrics.Set
	purger  *purge.Purger  // deletes committed records of repartition topics
	globals *global.Stores // the global stores (internal/global)

	// The group membership in progress: Run replaces it, never resets
	// it, when a fence or an unresolved abort makes the instance join the
	// group again (membership.go).
	*membership

	// closedTotals sums, per task, the counters of its openings by this
	// App that are closed (forgetTask), across memberships. Written by
	// the loop.
	closedTotals map[string]TaskTotals

	// Written by the loop, read by any goroutine.
	snapshot atomic.Pointer[instance.Snapshot]   // what Subscription reports
	view     atomic.Pointer[statusView]          // what Status reports
	readable atomic.Pointer[map[string]readCopy] // what queries read (publishReadable)
	leaving  atomic.Bool
	// inputs: each active task's input lag and rate; workerRate: the
	// workers' records per busy second (float64 bits); desired: the
	// recommendation, on the leader only. Written at each read of the
	// input (input.go).
	inputs     atomic.Pointer[map[string]InputLag]
	workerRate atomic.Uint64
	desired    atomic.Pointer[AutoscaleStatus]
	// restored counts the records restored into any store, every role,
	// and yielded the nanoseconds warm restores waited for busy active
	// tasks, both since Run began (the loop adds); restoreRate is
	// restored's growth per second at the last read of the input
	// (float64 bits).
	restored, yielded atomic.Int64
	restoreRate       atomic.Uint64
	// loadMeter measures the active tasks' loads (owned by the loop,
	// load.go); measured is what it measured at the last read of the
	// input, and reported what the instance last reported to the group
	// (written on the group goroutine).
	loadMeter load.Meter
	measured  atomic.Pointer[map[string]float64]
	reported  atomic.Pointer[map[string]float64]
	// reportedAt is when the instance last reported its loads (unix
	// nanos, group goroutine); loadAskedAt when the loop last asked for a
	// rebalance for them (askForLoads).
	reportedAt  atomic.Int64
	loadAskedAt time.Time

	// Written by any goroutine.
	partsMu    sync.Mutex // guards topicParts only; never held across I/O
	topicParts map[string]int32
	leaveNow   chan struct{} // closed by Leave
	// txnMember is the member id under which the tasks were assigned: a
	// transaction must not commit under another (see commitTxnOffsets).
	// Set at assignment (group goroutine) and by the commit path once it
	// saw the member change.
	txnMember atomic.Value // string

	// Written by the group goroutine (kgo's callbacks and hooks), in unix
	// nanoseconds: the last heartbeat answered, the last assignment and
	// the last group session error (Status.Unconfirmed).
	heardAt, assignedAt, groupErrAt atomic.Int64

	// Written by the group goroutine (kgo's callbacks).
	assignment atomic.Pointer[protocol.Assignment]
	wake       chan struct{} // a new assignment arrived
	ledGen     atomic.Int32
	joinedAt   atomic.Int64 // unix nanos of the last join, for the rebalance log line
	// fetchedAt: unix nanos of the last fetch of the committed offsets of
	// a session's partitions (kgo fetches them after the assignment and
	// before it fetches records); the loop holds rejoins until it (rejoin).
	fetchedAt atomic.Int64
	// polledAt: unix nanos of the last poll's answer (Status.PolledAt),
	// written by the loop.
	polledAt  atomic.Int64
	pollAsked atomic.Int64 // unix nanos of the last poll asked for
	// sentLags: the lags of the last subscription, written where kgo's
	// group goroutine asks for it (Subscription) and cleared at Run's
	// start; the loop hands them to the core with the assignment.
	sentLags    atomic.Pointer[map[string]int64]
	lastPlan    atomic.Pointer[PlanStatus]
	plansMu     sync.Mutex // guards plans only
	plans       []PlanStatus
	groupClient atomic.Pointer[kgo.Client]
	adminClient atomic.Pointer[kadm.Client] // a.admin, for the purger
	running     atomic.Bool                 // Run was called
}

type storeRef struct {
	sub  int
	name string
}

// New prepares an App of top with cfg, which package baton has checked.
// Nothing is contacted until Run.
func New(top *topology.Topology, cfg Config) (*App, error) {
	a := &App{cfg: cfg, top: top, log: cfg.Logger.With("instance", cfg.InstanceID),
		subs: map[int]topology.Subtopology{}, bySource: map[string]int{}, byChangelog: map[string]storeRef{},
		closedTotals: map[string]TaskTotals{}, topicParts: map[string]int32{},
		wake: make(chan struct{}, 1), leaveNow: make(chan struct{})}
	a.loadMeter.Smoothing, a.loadMeter.Settle = cfg.LoadSmoothing, cfg.LoadSettle
	a.txnMember.Store("")
	stateful := false
	for _, s := range top.Subtopologies() {
		a.subs[s.ID] = s
		for _, t := range s.Sources {
			if other, dup := a.bySource[t]; dup {
				return nil, fmt.Errorf("%w: topic %q is read by subtopologies %d and %d", ErrConfig, t, other, s.ID)
			}
			a.bySource[t] = s.ID
		}
		for _, st := range s.Stores {
			a.byChangelog[st.Changelog] = storeRef{sub: s.ID, name: st.Name}
			stateful = true
		}
	}
	var repartition []string
	for _, s := range top.Subtopologies() {
		for _, t := range s.Sources {
			if slices.Contains(s.Repartition, t) {
				repartition = append(repartition, t)
			}
		}
	}
	a.purger = purge.New(repartition, cfg.PurgeInterval, a.log)
	a.metrics = metrics.New(cfg.Registerer, cfg.AppID, cfg.InstanceID)
	var err error
	if a.globals, err = global.New(top.GlobalStores(), global.Config{AppID: cfg.AppID, InstanceID: cfg.InstanceID, Brokers: cfg.Brokers,
		ClientOpts: cfg.KgoOpts, StateDir: cfg.StateDir, Memory: cfg.MemoryState, StoreOpts: cfg.StoreOpts, Registerer: cfg.Registerer, Log: a.log}); err != nil {
		return nil, err
	}
	if stateful && cfg.StateDir == "" && !cfg.MemoryState {
		return nil, fmt.Errorf("%w: state dir: required for a stateful topology", ErrConfig)
	}
	a.snapshot.Store(&instance.Snapshot{Lags: map[string]int64{}})
	a.membership = newMembership(a)
	return a, nil
}

// InstanceID returns the instance's id.
func (a *App) InstanceID() string { return a.cfg.InstanceID }

// Leave makes a draining App leave at once, without waiting for its tasks
// to move (the second SIGTERM).
func (a *App) Leave() {
	select {
	case <-a.leaveNow:
	default:
		close(a.leaveNow)
	}
}

func (a *App) emit(e Event) {
	if a.cfg.Listener == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	e.Instance = a.cfg.InstanceID
	a.cfg.Listener(e)
}

// fail stops the instance with err (the first error wins): the loop
// aborts, and every I/O call derived from the run context ends.
func (a *App) fail(err error) { a.cancel(err) }

// produce sends a record a task's processing wrote, through the commit
// path.
func (a *App) produce(r *kgo.Record, promise func(*kgo.Record, error)) { a.commit.Produce(r, promise) }

// Run is baton.App.Run, documented there: it joins the group, processes
// until ctx ends, then drains or stops for a restart. Every goroutine it
// starts has stopped when it returns.
func (a *App) Run(ctx context.Context) (err error) {
	if !a.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	// One block cache for every task store of this run: each open store
	// holds a reference, and this one goes when Run returns.
	cache := pebble.NewCache(a.cfg.BlockCache)
	defer cache.Unref()
	a.cfg.StoreOpts = append([]state.Option{state.WithBlockCache(cache)}, a.cfg.StoreOpts...)
	if err := a.open(); err != nil {
		return err
	}
	defer a.close()
	if err := a.prepareTopics(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while waiting for topics
		}
		return err
	}
	if err := a.globals.Start(ctx, a.admin); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while reading the global stores
		}
		return err
	}
	defer a.globals.Stop()
	a.purger.Start(func() *kadm.Client { return a.adminClient.Load() })
	defer a.purger.Close()
	for {
		err := a.member(ctx)
		switch {
		case ctx.Err() != nil:
			return err
		case Fenced(err):
			if taken := a.instanceIDTaken(ctx, err); taken != nil {
				a.log.Error("stopping", "err", taken)
				return taken
			}
			// Another producer with this instance's transactional id
			// took over (the brokers bumped its epoch while an outcome
			// was lost, a broker restart): this client can no longer
			// write. Kafka Streams closes its tasks and rejoins with a
			// new producer; so does this.
			a.log.Warn("the transactional producer was fenced; closing the tasks and joining again with a new client", "err", err)
		case errors.Is(err, commit.ErrAbortUnresolved):
			// The new client's producer ends the open transaction
			// (committed if its commit had got through, else aborted)
			// before it writes; the tasks restore what was committed.
			a.log.Warn("closing the tasks and joining again with a new client, which ends the open transaction", "err", err)
		default:
			return err
		}
		a.metrics.MemberRestarts.Inc()
		a.close()
		a.rejoin()
		if err := a.open(); err != nil {
			return err
		}
	}
}

// rejoins reports whether Run answers err by closing the tasks and
// joining the group again with new clients.
func rejoins(err error) bool { return Fenced(err) || errors.Is(err, commit.ErrAbortUnresolved) }

// Fenced reports whether err says the transactional producer was Fenced.
// Apache Kafka with transactions v2 answers the Fenced producer's EndTxn
// with INVALID_TXN_STATE, after which the client refuses every
// transaction; kfake answers PRODUCER_FENCED or INVALID_PRODUCER_EPOCH.
func Fenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.InvalidTxnState)
}

// instanceIDTaken returns ErrInstanceIDInUse when this static member's
// transactional producer was fenced (fence) and the group holds its
// instance id under another member: another instance started with the
// same id, and its producer, with the same transactional id, fenced this
// one. Joining again with a new client would take the id back from it
// and fence it in turn. Such an instance fences the producer as it
// starts and joins the group just after, so the group is watched for up
// to a session timeout (the time the group gives a static member to come
// back) while this member's old client still holds its place; if no
// other member takes the id meanwhile, or the group cannot be described,
// the instance joins again, as for any other fence.
func (a *App) instanceIDTaken(ctx context.Context, fence error) error {
	if !a.cfg.StaticMember {
		return nil
	}
	self := a.memberID()
	deadline := time.Now().Add(a.cfg.Session)
	for {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		groups, err := a.admin.DescribeGroups(dctx, a.cfg.AppID)
		cancel()
		if err == nil {
			err = groups.Error()
		}
		if err != nil {
			a.log.Warn("describing the group after the producer was fenced", "err", err)
		} else {
			for _, m := range groups[a.cfg.AppID].Members {
				if m.InstanceID != nil && *m.InstanceID == a.cfg.InstanceID && m.MemberID != self {
					return instanceIDInUse(a.cfg, fmt.Errorf("member %s holds it (%s %s) while this one is %q; %w", m.MemberID, m.ClientID, m.ClientHost, self, fence))
				}
			}
		}
		if !time.Now().Before(deadline) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// member runs the group member until the loop ends.
func (a *App) member(ctx context.Context) error {
	// The committer is waited for by close, after the clients close: a
	// request it waits on without a context (a transaction's begin,
	// which may first ask for a producer id) ends only then.
	if err := a.commit.Open(); err != nil {
		return err
	}
	c, ctx2, out := a.commit, a.runCtx, a.ch.commits
	a.committing.Go(func() { c.Serve(ctx2, out) })
	// Deferred before the cancel, so they run after it: the one-answer
	// goroutines end on it, and so does a worker's produce that waits for
	// buffer space.
	defer a.oneShots.Wait()
	a.startWorkers()
	defer a.stopWorkers()
	defer a.cancel(errStopped)
	runCtx, stop := a.runCtx, a.cancel
	a.oneShots.Go(func() { a.globals.Watch(runCtx, stop) })
	a.group.AddConsumeTopics(a.sourceTopics()...)
	return a.loop(ctx)
}

// rejoin replaces the membership that ended with a new one, and publishes
// that it has nothing yet: what is on disk is read again by open.
func (a *App) rejoin() {
	a.membership = newMembership(a)
	a.snapshot.Store(&instance.Snapshot{Lags: map[string]int64{}})
	a.storeView(nil) // closedTotals stay: the totals only grow
	a.leaving.Store(false)
	a.inputs.Store(nil)
	a.workerRate.Store(0)
	a.restoreRate.Store(0)
	a.desired.Store(nil)
	a.assignment.Store(nil)
	select {
	case <-a.wake:
	default:
	}
	a.ledGen.Store(0)
	a.sentLags.Store(nil)
	a.txnMember.Store("")
	a.heardAt.Store(0)
	a.assignedAt.Store(0)
	a.fetchedAt.Store(0)
	a.joinedAt.Store(0)
	a.groupErrAt.Store(0)
}

func (a *App) open() error {
	if !a.cfg.MemoryState && a.cfg.StateDir != "" {
		if err := os.MkdirAll(a.cfg.StateDir, 0o755); err != nil {
			return fmt.Errorf("baton: state dir %s: %w", a.cfg.StateDir, err)
		}
		unlock, err := state.LockDir(a.cfg.StateDir)
		if err != nil {
			return err
		}
		a.unlock = unlock
		local, err := state.ListLocal(a.cfg.StateDir, a.cfg.StoreOpts...)
		if err != nil {
			a.log.Warn("listing state left on disk; reporting none", "dir", a.cfg.StateDir, "err", err)
		}
		for id, stores := range local {
			a.diskCP[id] = stores
		}
	}
	bal := member.NewBalancer(member.Config{
		Subtopologies: a.memberSubtopologies(),
		Assign:        assign.Config{Standbys: a.cfg.Standbys, MaxLearners: a.cfg.MaxLearners, AcceptableLag: a.cfg.AcceptableLag},
		Policy:        a.cfg.Policy,
		Self:          (*self)(a),
		Logger:        a.log,
		Loads:         a.reportLoads,
		Version:       a.cfg.ProtocolVersion,
	})
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(a.cfg.Brokers...),
		kgo.ConsumerGroup(a.cfg.AppID),
		kgo.Balancers(bal),
		kgo.DisableAutoCommit(),
		kgo.HeartbeatInterval(a.cfg.Heartbeat),
		kgo.SessionTimeout(a.cfg.Session),
		kgo.RebalanceTimeout(a.cfg.Rebalance),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
		// A produce that must be retried after a metadata refresh waits
		// for the refresh, and kgo refreshes at most once per
		// MetadataMinAge (5 s by default). On Apache Kafka with
		// transactions v2 (KIP-890), the first produce after a commit gets
		// CONCURRENT_TRANSACTIONS until the commit markers are written and
		// is retried that way: right after a rebalance (which refreshes
		// metadata) a commit then waited about 5 s, holding the member
		// past its rebalance timeout. Leader changes are retried the same
		// way. Java clients back off 100 ms.
		kgo.MetadataMinAge(250 * time.Millisecond),
		kgo.OnPartitionsAssigned(a.onAssigned),
		kgo.OnPartitionsRevoked(a.onRevoked),
		kgo.OnPartitionsLost(a.onLost),
		kgo.OnOffsetsFetched(a.onOffsetsFetched),
		kgo.WithHooks((*groupHook)(a)),
	}, a.cfg.KgoOpts...)
	if a.cfg.StaticMember {
		opts = append(opts, kgo.InstanceID(a.cfg.InstanceID))
	}
	if a.exactlyOnce() {
		opts = append(opts, a.txnClientOpts()...)
	}
	group, err := kgo.NewClient(opts...)
	if err != nil {
		a.releaseLock()
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	// The restore client does not skip: records it was to read that are
	// gone (OffsetOutOfRange) make the loop rebuild the store.
	restore, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(a.cfg.Brokers...),
		kgo.FetchMaxWait(50 * time.Millisecond),
	}, append(a.cfg.KgoOpts, append(a.restoreClientOpts(), kgo.ConsumeResetOffset(kgo.NoResetOffset()))...)...)...)
	if err != nil {
		group.Close()
		a.releaseLock()
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	a.group, a.restore, a.admin, a.closed = group, restore, kadm.NewClient(group), false
	a.commit = a.newCommitter()
	a.groupClient.Store(group)
	a.adminClient.Store(a.admin)
	return nil
}

// groupHook receives the errors that end a group session. Most are
// retried by the client (it joins again); those every join would get
// again stop the App (fatalGroupError).
type groupHook App

func (h *groupHook) OnGroupManageError(err error) {
	a := (*App)(h)
	a.groupErrAt.Store(time.Now().UnixNano())
	if ferr := fatalGroupError(err, a.cfg); ferr != nil {
		a.fail(ferr)
	}
}

// OnBrokerRead notes every heartbeat the group coordinator answered: the
// group still counts this member in (an answer that says otherwise ends
// the session, which OnGroupManageError sees).
func (h *groupHook) OnBrokerRead(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == int16(kmsg.Heartbeat) && err == nil {
		(*App)(h).heardAt.Store(time.Now().UnixNano())
	}
}

func (a *App) releaseLock() {
	if a.unlock != nil {
		if err := a.unlock(); err != nil {
			a.log.Warn("releasing the state dir lock", "err", err)
		}
		a.unlock = nil
	}
}

func (a *App) close() {
	if a.closed {
		return
	}
	a.closed = true
	if a.ch.done != nil && a.group != nil {
		a.stopPolling()
	}
	a.cancel(errStopped)
	a.closeAll()
	a.restore.Close()
	a.group.Close()
	a.committing.Wait()
	a.closers.Wait() // every store closed before the directory lock goes
	a.releaseLock()
}

func (a *App) memberSubtopologies() []member.Subtopology {
	var out []member.Subtopology
	for _, s := range a.top.Subtopologies() {
		out = append(out, member.Subtopology{ID: s.ID, Sources: s.Sources, Stateful: s.Stateful()})
	}
	return out
}

func (a *App) sourceTopics() []string {
	var out []string
	for t := range a.bySource {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// partitionsOf returns the partition count of topic, asking the cluster
// when it is not known yet (a sink created by someone else).
func (a *App) partitionsOf(topic string) (int32, error) {
	a.partsMu.Lock()
	n, ok := a.topicParts[topic]
	a.partsMu.Unlock()
	if ok && n > 0 {
		return n, nil
	}
	ctx, cancel := context.WithTimeout(a.runCtx, 5*time.Second)
	defer cancel()
	d, err := a.admin.ListTopics(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("baton: metadata of topic %s: %w", topic, err)
	}
	td, ok := d[topic]
	if !ok || td.Err != nil || len(td.Partitions) == 0 {
		return 0, fmt.Errorf("baton: topic %s does not exist; create it before sending to it", topic)
	}
	n = int32(len(td.Partitions))
	a.partsMu.Lock()
	a.topicParts[topic] = n
	a.partsMu.Unlock()
	return n, nil
}

// Metrics returns the App's metrics (tests and tools read them).
func (a *App) Metrics() *metrics.Set { return a.metrics }

// Committer returns the committer of the membership in progress (tests
// plant faults in it).
func (a *App) Committer() commit.Committer { return a.commit }

// TransactionalID returns the instance's transactional id under
// exactly-once.
func (a *App) TransactionalID() string { return a.transactionalID() }

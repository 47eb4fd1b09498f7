package baton

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/assign"
	"github.com/baton-streams/baton/member"
	"github.com/baton-streams/baton/protocol"
	"github.com/baton-streams/baton/state"
	"github.com/baton-streams/baton/topology"
)

// Errors returned by Run.
var (
	ErrBrokers = errors.New("baton: brokers unreachable")
	ErrRunning = errors.New("baton: App.Run called twice")
)

// App runs one instance of a topology: one consumer-group member whose
// workers run the tasks the group's leader assigns it.
type App struct {
	cfg  config
	top  *topology.Topology
	log  *slog.Logger
	subs map[int]topology.Subtopology
	// bySource maps an input topic to the subtopology reading it.
	bySource map[string]int
	// byChangelog maps a changelog topic to its store (subtopology, name).
	byChangelog map[string]storeRef

	group   *kgo.Client // group member, producer, committer
	restore *kgo.Client // changelog reader for standbys, learners, restores
	admin   *kadm.Client
	unlock  func() error
	metrics *metrics
	purger  *purger // deletes committed records of repartition topics

	// mu guards tasks and the restore bookkeeping. The run loop holds it
	// while it changes them; rebalance callbacks take it. It is never held
	// while blocked on a poll.
	mu    sync.Mutex
	tasks map[string]*task
	// topicParts caches partition counts of topics records are sent to.
	topicParts map[string]int32
	diskLag    map[string]int64 // task -> lag of state on disk (not open)
	// diskCP is the checkpoint of every store left on disk, per task: read
	// once at start, then kept as stores close, so lags need no disk scan.
	diskCP  map[string]map[string]int64
	closing map[string]chan struct{} // task -> closed when its stores' background close ends
	closers sync.WaitGroup

	assignment atomic.Pointer[protocol.Assignment]
	wake       chan struct{} // a new assignment arrived
	snapshot   atomic.Pointer[subSnapshot]
	leaving    atomic.Bool
	leaveNow   chan struct{}
	ledGen     atomic.Int32
	joinedAt   atomic.Int64 // unix nanos of the last join, for the rebalance log line
	lastPlan   atomic.Pointer[PlanStatus]
	plansMu    sync.Mutex // guards plans only; never held with mu
	plans      []PlanStatus
	fatal      chan error
	running    atomic.Bool
	rejoin     atomic.Bool // a learner became ready: rejoin after this iteration
	workers    []*worker
	// backlog holds polled records of active tasks still restoring.
	backlog map[string][]*kgo.Record
	// Exactly-once: records produced and processed in the open
	// transaction, whether its offsets were added, and whether the loop
	// must rewind the input after an abort; txnAborts counts the aborts
	// begun, so a record's callback knows whether its transaction was
	// aborted since it was produced.
	txnProduced     atomic.Int64
	txnProcessed    atomic.Int64
	txnOffsetsAdded bool
	rewind          atomic.Bool
	// lostCommit, when set (tests), makes the next transaction commit
	// report this error after it committed: an outcome lost on the way.
	lostCommit atomic.Pointer[error]
	txnAborts  atomic.Uint64
	// txnMember is the member id under which the tasks were assigned: a
	// transaction must not commit under another (see commitTxnOffsets).
	txnMember string
	// view is the task list Status reads; groupClient is a.group for
	// readers that must not take mu.
	view        atomic.Pointer[[]taskView]
	groupClient atomic.Pointer[kgo.Client]
}

type storeRef struct {
	sub  int
	name string
}

// subSnapshot is what Subscription reports; the loop replaces it whenever
// roles or lags change, so the group goroutine never waits for a lock.
type subSnapshot struct {
	standby, learner []string
	lags             map[string]int64
}

// New checks the options and prepares an App. Nothing is contacted until
// Run.
func New(top *topology.Topology, opts ...Option) (*App, error) {
	cfg := defaults()
	for _, o := range opts {
		o(&cfg)
	}
	if top == nil {
		return nil, fmt.Errorf("%w: topology: nil", ErrConfig)
	}
	if cfg.appID == "" {
		cfg.appID = top.AppID()
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	a := &App{cfg: cfg, top: top, log: cfg.logger.With("instance", cfg.instanceID),
		subs: map[int]topology.Subtopology{}, bySource: map[string]int{}, byChangelog: map[string]storeRef{},
		tasks: map[string]*task{}, topicParts: map[string]int32{}, diskLag: map[string]int64{}, closing: map[string]chan struct{}{}, diskCP: map[string]map[string]int64{}, backlog: map[string][]*kgo.Record{},
		wake: make(chan struct{}, 1), leaveNow: make(chan struct{}), fatal: make(chan error, 1)}
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
	a.purger = newPurger(repartition, cfg.purgeInterval, a.log)
	if stateful && cfg.stateDir == "" && !cfg.memoryState {
		return nil, fmt.Errorf("%w: state dir: required for a stateful topology", ErrConfig)
	}
	a.metrics = newMetrics(cfg.registerer, cfg.appID, cfg.instanceID)
	a.snapshot.Store(&subSnapshot{lags: map[string]int64{}})
	return a, nil
}

// InstanceID returns the instance's id.
func (a *App) InstanceID() string { return a.cfg.instanceID }

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
	if a.cfg.listener == nil {
		return
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	e.Instance = a.cfg.instanceID
	a.cfg.listener(e)
}

func (a *App) fail(err error) {
	select {
	case a.fatal <- err:
	default:
	}
}

// Run joins the group and processes until ctx is done, then drains: the
// instance marks itself leaving, waits (up to the drain timeout, or until
// Leave) for its active tasks to move to warm copies, commits, leaves the
// group and returns nil; with StopForRestart it commits and returns
// without leaving. It returns an error if the brokers cannot be reached
// within 10 s, if the state directory is locked, if the brokers refuse
// the session timeout, or if processing fails. Run may be called once.
func (a *App) Run(ctx context.Context) (err error) {
	if !a.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
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
	a.purger.start(a.admin)
	defer a.purger.close()
	if a.exactlyOnce() {
		if err := a.beginTxn(); err != nil {
			return err
		}
	}
	a.startWorkers()
	defer a.stopWorkers()
	a.group.AddConsumeTopics(a.sourceTopics()...)
	a.refreshLags(ctx)
	return a.loop(ctx)
}

func (a *App) open() error {
	if !a.cfg.memoryState && a.cfg.stateDir != "" {
		if err := os.MkdirAll(a.cfg.stateDir, 0o755); err != nil {
			return fmt.Errorf("baton: state dir %s: %w", a.cfg.stateDir, err)
		}
		unlock, err := state.LockDir(a.cfg.stateDir)
		if err != nil {
			return err
		}
		a.unlock = unlock
		local, err := state.ListLocal(a.cfg.stateDir)
		if err != nil {
			a.log.Warn("listing state left on disk; reporting none", "dir", a.cfg.stateDir, "err", err)
		}
		for id, stores := range local {
			a.diskCP[id] = stores
		}
	}
	bal := member.NewBalancer(member.Config{
		Subtopologies: a.memberSubtopologies(),
		Assign:        assign.Config{Standbys: a.cfg.standbys, MaxLearners: a.cfg.maxLearners, AcceptableLag: a.cfg.acceptableLag},
		Policy:        a.cfg.policy,
		Self:          (*self)(a),
		Logger:        a.log,
	})
	opts := append([]kgo.Opt{
		kgo.SeedBrokers(a.cfg.brokers...),
		kgo.ConsumerGroup(a.cfg.appID),
		kgo.Balancers(bal),
		kgo.BlockRebalanceOnPoll(),
		kgo.DisableAutoCommit(),
		kgo.HeartbeatInterval(a.cfg.heartbeat),
		kgo.SessionTimeout(a.cfg.session),
		kgo.RebalanceTimeout(a.cfg.rebalance),
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
		kgo.WithHooks((*groupHook)(a)),
	}, a.cfg.kgoOpts...)
	if a.cfg.staticMember {
		opts = append(opts, kgo.InstanceID(a.cfg.instanceID))
	}
	if a.exactlyOnce() {
		opts = append(opts, a.txnClientOpts()...)
	}
	group, err := kgo.NewClient(opts...)
	if err != nil {
		a.releaseLock()
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	restore, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(a.cfg.brokers...),
		kgo.FetchMaxWait(50 * time.Millisecond),
	}, append(a.cfg.kgoOpts, a.restoreClientOpts()...)...)...)
	if err != nil {
		group.Close()
		a.releaseLock()
		return fmt.Errorf("%w: %v", ErrConfig, err)
	}
	a.group, a.restore, a.admin = group, restore, kadm.NewClient(group)
	a.groupClient.Store(group)
	return nil
}

// groupHook receives the errors that end a group session. Most are
// retried by the client (it joins again); those every join would get
// again stop the App (fatalGroupError).
type groupHook App

func (h *groupHook) OnGroupManageError(err error) {
	a := (*App)(h)
	if ferr := fatalGroupError(err, a.cfg.session, a.cfg.policy); ferr != nil {
		a.fail(ferr)
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
	a.mu.Lock()
	for _, t := range a.tasks {
		a.closeTaskLocked(t)
	}
	a.publishSnapshotLocked()
	a.mu.Unlock()
	a.restore.Close()
	a.group.Close()
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

func joinComma(s []string) string { return strings.Join(s, ",") }

// partitionsOf returns the partition count of topic, asking the cluster
// when it is not known yet (a sink created by someone else).
func (a *App) partitionsOf(topic string) (int32, error) {
	a.mu.Lock()
	n, ok := a.topicParts[topic]
	a.mu.Unlock()
	if ok && n > 0 {
		return n, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
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
	a.mu.Lock()
	a.topicParts[topic] = n
	a.mu.Unlock()
	return n, nil
}

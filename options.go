package baton

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/assign"
	"github.com/baton-streams/baton/autoscale"
	"github.com/baton-streams/baton/internal/errs"
	"github.com/baton-streams/baton/internal/work"
	"github.com/baton-streams/baton/state"
)

// ErrConfig is wrapped by every error New returns for invalid options.
var ErrConfig = errs.ErrConfig

// Option configures an App.
type Option func(*config)

type config struct {
	brokers        []string
	appID          string
	stateDir       string
	memoryState    bool
	storeOpts      []state.Option
	blockCache     int64
	workers        int
	standbys       int
	maxLearners    int
	acceptableLag  int64
	heartbeat      time.Duration
	session        time.Duration
	rebalance      time.Duration
	commitInterval time.Duration
	drainTimeout   time.Duration
	policy         assign.Policy
	rack           string
	instanceID     string
	staticMember   bool // instanceID was given: it is also the group.instance.id
	stopMode       StopMode
	endpoint       string
	kgoOpts        []kgo.Opt
	logger         *slog.Logger
	registerer     prometheus.Registerer
	listener       Listener
	sinkConfigs    map[string]*string // non-nil: create missing sink topics with these configs
	optErr         error              // an option that could not be applied
	badRecords     BadRecordPolicy
	guarantee      Guarantee
	txnTimeout     time.Duration
	// abortTimeout bounds an exactly-once abort (30 s): one not done by
	// then is settled by joining again with a new client.
	abortTimeout time.Duration
	// Internal topics: replication factor and min.insync.replicas (the
	// defaults depend on the cluster's size), and how often repartition
	// topics are purged.
	replicationFactor int
	replicationSet    bool
	minISR            int
	minISRSet         bool
	purgeInterval     time.Duration
	autoscale         autoscale.Config
	// inputEvery is how often the input partitions' offsets are read for
	// the input lag and rates (docs/autoscaling.md).
	inputEvery time.Duration
	// onStart, when set, sees each task on the loop as it starts
	// processing: at once when it has nothing to restore, else once its
	// restore is done and written. Its stores hold what it restored and
	// nothing it processed. Tests compare those stores with their
	// changelogs through it.
	onStart func(*work.Task)
	// onCatchUp, when set, is called by the catch-up after an aborted
	// transaction with its context, before it writes a fetch into a
	// store. Tests hold the catch-up there.
	onCatchUp func(context.Context)
	// onTurn, when set, is called after every turn of the loop with the
	// turn and how long it took (tests: which turns are long).
	onTurn func(turn func(), took time.Duration)
	// onOneShot, when set, is called first by every goroutine the loop
	// starts for one answer (offsets to read), with the membership's
	// context. Tests hold such a goroutine there.
	onOneShot func(context.Context)
	// onRestoreWrite, when set, is called off the loop before each
	// restored chunk is written. Tests make the writes slow with it.
	onRestoreWrite func()
	// onCommitWork, when set, is called on the committer's goroutine as
	// a commit that has work to make durable starts. Tests cut the
	// link there, so that the commit hangs.
	onCommitWork func()
	// onCommitWrite, when set, is called off the loop before a commit's
	// store writes. Tests make the writes slow with it.
	onCommitWrite func()
}

// The defaults of WithHeartbeatInterval, WithSessionTimeout and
// WithCommitInterval.
const (
	DefaultHeartbeatInterval = 200 * time.Millisecond
	DefaultSessionTimeout    = 6 * time.Second
	DefaultCommitInterval    = 200 * time.Millisecond
)

func defaults() config {
	host, _ := os.Hostname()
	return config{
		workers:        1,
		maxLearners:    assign.DefaultMaxLearners,
		acceptableLag:  assign.DefaultAcceptableLag,
		heartbeat:      DefaultHeartbeatInterval,
		session:        DefaultSessionTimeout,
		rebalance:      10 * time.Second,
		commitInterval: DefaultCommitInterval,
		drainTimeout:   60 * time.Second,
		policy:         assign.Smooth,
		instanceID:     fmt.Sprintf("%s-%d-%04x", host, os.Getpid(), time.Now().UnixNano()&0xffff),
		logger:         slog.Default(),
		txnTimeout:     10 * time.Second,
		abortTimeout:   30 * time.Second,
		purgeInterval:  DefaultPurgeInterval,
		autoscale:      autoscale.DefaultConfig(),
		inputEvery:     DefaultInputLagInterval,
		blockCache:     DefaultBlockCache,
	}
}

// WithBrokers sets the seed brokers (host:port). Required.
func WithBrokers(brokers ...string) Option { return func(c *config) { c.brokers = brokers } }

// WithAppID sets the application id: the consumer group id and the prefix
// of internal topics. Required.
func WithAppID(id string) Option { return func(c *config) { c.appID = id } }

// WithStateDir sets the directory for local state (Pebble). Required for
// stateful topologies unless WithMemoryState is given. Created if missing;
// locked while the App runs.
func WithStateDir(dir string) Option { return func(c *config) { c.stateDir = dir } }

// DefaultBlockCache is the size of the Pebble block cache an App's stores
// share unless WithBlockCache sets another.
const DefaultBlockCache = 256 << 20

// WithBlockCache sets the size in bytes of the Pebble block cache that
// all of the App's task stores share (docs/memory.md). It holds the
// stores' recently read blocks: with large state, a store read for keys
// it lacks (every new key of an aggregation) reads its tables' index and
// data blocks, from the cache or from the operating system. Default
// DefaultBlockCache.
func WithBlockCache(bytes int64) Option { return func(c *config) { c.blockCache = bytes } }

// WithStoreOptions passes options to every Pebble store the App opens,
// for example state.WithPebbleOptions to size memtables
// (state.DefaultMemTableSize says what a store holds by default), or
// state.WithSyncWrites. The task stores share one block cache
// (WithBlockCache).
func WithStoreOptions(opts ...state.Option) Option {
	return func(c *config) { c.storeOpts = append(c.storeOpts, opts...) }
}

// WithMemoryState keeps state in memory instead of on disk: every start
// restores from the changelogs. For tests and demos.
func WithMemoryState() Option { return func(c *config) { c.memoryState = true } }

// WithWorkers sets the number of worker goroutines, the instance's
// capacity. Default 1.
func WithWorkers(n int) Option { return func(c *config) { c.workers = n } }

// WithStandbys sets the standby replicas per stateful task. Default 0.
func WithStandbys(n int) Option { return func(c *config) { c.standbys = n } }

// WithMaxLearners sets the most learner tasks in the group at once.
// Default 2.
func WithMaxLearners(n int) Option { return func(c *config) { c.maxLearners = n } }

// WithAcceptableLag sets the lag (records) within which a copy of a task's
// state counts as caught up. Default 10000.
func WithAcceptableLag(n int64) Option { return func(c *config) { c.acceptableLag = n } }

// WithHeartbeatInterval sets the group heartbeat interval, which bounds how
// fast members notice a rebalance. Default 200ms (Kafka's is 3s).
func WithHeartbeatInterval(d time.Duration) Option { return func(c *config) { c.heartbeat = d } }

// WithSessionTimeout sets the group session timeout: how long a crashed
// instance holds its tasks before the group notices. Default 6s.
func WithSessionTimeout(d time.Duration) Option { return func(c *config) { c.session = d } }

// WithRebalanceTimeout sets how long a rebalance waits for every member to
// rejoin; a member that died during a rebalance holds the group that long.
// Default 10s.
func WithRebalanceTimeout(d time.Duration) Option { return func(c *config) { c.rebalance = d } }

// WithCommitInterval sets how often processed input is committed (after
// the changelog writes it depends on are acknowledged). Default 200ms.
func WithCommitInterval(d time.Duration) Option { return func(c *config) { c.commitInterval = d } }

// WithDrainTimeout bounds a graceful stop: how long the instance waits for
// its tasks to move to warm copies before it leaves anyway. Default 60s.
func WithDrainTimeout(d time.Duration) Option { return func(c *config) { c.drainTimeout = d } }

// WithPolicy sets the assignment policy the leader uses. Default smooth.
// Every instance of a group must run the same policy: the instance joins
// with the policy's own group protocol (member.ProtocolName), and Run
// returns an ErrConfig if the group already runs another.
func WithPolicy(p assign.Policy) Option { return func(c *config) { c.policy = p } }

// WithRack sets the instance's rack; standbys prefer other racks.
func WithRack(rack string) Option { return func(c *config) { c.rack = rack } }

// WithInstanceID names the instance (default: host-pid-random). It must
// be unique in the group. A given id is also the member's
// group.instance.id (static membership, KIP-345): an instance that
// restarts with the same id within the session timeout gets its tasks
// back without a rebalance, and under ExactlyOnce its transactional id
// fences its predecessor's open transaction at once. Two running
// instances must not share an id: the group keeps the one that joined
// last, and Run of the other returns ErrInstanceIDInUse.
func WithInstanceID(id string) Option {
	return func(c *config) { c.instanceID, c.staticMember = id, true }
}

// StopMode is what an App does when the context given to Run ends.
type StopMode int

const (
	// StopDrain moves the instance's tasks to warm copies elsewhere, then
	// leaves the group (up to the drain timeout). The default.
	StopDrain StopMode = iota
	// StopForRestart commits what was processed, closes the stores and
	// stops without leaving the group: the group keeps the instance's
	// tasks for it until the session timeout, and the instance restarted
	// with the same instance id and state dir within it resumes them
	// with nothing moved. It requires WithInstanceID.
	StopForRestart
)

// String returns the name ParseStopMode accepts.
func (m StopMode) String() string {
	switch m {
	case StopDrain:
		return "drain"
	case StopForRestart:
		return "restart"
	}
	return fmt.Sprintf("StopMode(%d)", int(m))
}

// ParseStopMode parses "drain" or "restart".
func ParseStopMode(s string) (StopMode, error) {
	switch s {
	case "drain":
		return StopDrain, nil
	case "restart":
		return StopForRestart, nil
	}
	return 0, fmt.Errorf("unknown stop mode %q (want drain or restart)", s)
}

// WithStopMode sets what the App does when Run's context ends. Default
// StopDrain.
func WithStopMode(m StopMode) Option { return func(c *config) { c.stopMode = m } }

// WithEndpoint sets the host:port other members can reach this instance's
// HTTP server at; it travels in the subscription.
func WithEndpoint(addr string) Option { return func(c *config) { c.endpoint = addr } }

// WithKafkaOptions passes options to every franz-go client the App makes
// (TLS, SASL, timeouts). Group and consumer options are set by baton.
func WithKafkaOptions(opts ...kgo.Opt) Option {
	return func(c *config) { c.kgoOpts = append(c.kgoOpts, opts...) }
}

// WithLogger sets the logger. Default slog.Default().
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithMetrics registers the App's Prometheus metrics with r.
func WithMetrics(r prometheus.Registerer) Option { return func(c *config) { c.registerer = r } }

// WithListener receives the App's events (rebalances, handovers, learner
// progress) as they happen. Calls are made from the App's goroutines and
// must not block.
func WithListener(l Listener) Option { return func(c *config) { c.listener = l } }

// WithCreateSinks makes the App create output topics that are missing,
// with the partition count of the subtopology writing them and the given
// topic configs (e.g. {"cleanup.policy": "compact"}), the replication
// factor of WithReplicationFactor and, unless configs set it, the
// min.insync.replicas of WithMinInSyncReplicas. By default a missing
// output topic is an error at the first record sent to it.
func WithCreateSinks(configs map[string]string) Option {
	return func(c *config) {
		c.sinkConfigs = map[string]*string{}
		for k, v := range configs {
			c.sinkConfigs[k] = &v
		}
	}
}

// WithReplicationFactor sets the replication factor of the topics baton
// creates: changelogs, repartition topics, and output topics with
// WithCreateSinks. Default: 3, or the number of brokers in the cluster if
// fewer. Must be >= 1 and at most the number of brokers.
func WithReplicationFactor(n int) Option {
	return func(c *config) { c.replicationFactor, c.replicationSet = n, true }
}

// WithMinInSyncReplicas sets min.insync.replicas of the topics baton
// creates (see WithReplicationFactor): how many replicas must have a
// record before the write succeeds. Default: 2, or replication factor - 1
// if that is less, and at least 1 (a replication factor of 3 gives 2, of 2
// or 1 gives 1). Must be >= 1 and at most the replication factor.
func WithMinInSyncReplicas(n int) Option {
	return func(c *config) { c.minISR, c.minISRSet = n, true }
}

// DefaultPurgeInterval is how often, at most, baton purges repartition
// topics by default (Kafka Streams' repartition.purge.interval.ms).
const DefaultPurgeInterval = 30 * time.Second

// WithRepartitionPurgeInterval sets how often, at most, the instance
// deletes the records of repartition topics it has committed (a
// DeleteRecords request up to each committed offset, sent in the
// background after a successful commit). 0 purges after every commit.
// Default 30s.
func WithRepartitionPurgeInterval(d time.Duration) Option {
	return func(c *config) { c.purgeInterval = d }
}

// DefaultInputLagInterval is how often an instance reads the end offsets
// of its input partitions to measure input lag and input rates.
const DefaultInputLagInterval = 3 * time.Second

// WithAutoscale sets the rule by which the group's leader recommends how
// many instances the group should run (baton_desired_instances, the
// autoscale field of Status; see docs/autoscaling.md). Default:
// autoscale.DefaultConfig(). An invalid config makes New return an error
// wrapping ErrConfig that names the field.
func WithAutoscale(cfg autoscale.Config) Option { return func(c *config) { c.autoscale = cfg } }

func (c *config) validate() error {
	if c.optErr != nil {
		return c.optErr
	}
	bad := func(option, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrConfig, option, fmt.Sprintf(format, args...))
	}
	switch {
	case len(c.brokers) == 0:
		return bad("brokers", "at least one broker is required")
	case c.blockCache < 0:
		return bad("block cache", "want a size of 0 bytes or more, got %d", c.blockCache)
	case c.autoscale.Validate() != nil:
		return fmt.Errorf("%w: autoscale: %w", ErrConfig, c.autoscale.Validate())
	case c.inputEvery <= 0:
		return bad("input lag interval", "must be > 0, got %v", c.inputEvery)
	case c.appID == "":
		return bad("app id", "required")
	case c.workers < 1:
		return bad("workers", "must be >= 1, got %d", c.workers)
	case c.standbys < 0:
		return bad("standbys", "must be >= 0, got %d", c.standbys)
	case c.maxLearners < 1:
		return bad("max learners", "must be >= 1, got %d", c.maxLearners)
	case c.acceptableLag < 0:
		return bad("acceptable lag", "must be >= 0, got %d", c.acceptableLag)
	case c.heartbeat <= 0:
		return bad("heartbeat interval", "must be > 0, got %v", c.heartbeat)
	case c.session < 3*c.heartbeat:
		return bad("session timeout", "must be at least 3 heartbeat intervals, got %v", c.session)
	case c.rebalance < c.heartbeat:
		return bad("rebalance timeout", "must be at least the heartbeat interval, got %v", c.rebalance)
	case c.commitInterval <= 0:
		return bad("commit interval", "must be > 0, got %v", c.commitInterval)
	case c.drainTimeout < 0:
		return bad("drain timeout", "must be >= 0, got %v", c.drainTimeout)
	case c.instanceID == "":
		return bad("instance id", "must not be empty")
	case c.stopMode != StopDrain && c.stopMode != StopForRestart:
		return bad("stop mode", "unknown %v", c.stopMode)
	case c.stopMode == StopForRestart && !c.staticMember:
		return bad("stop mode", "restart requires an instance id (WithInstanceID): the restarted instance must be the same group member")
	case c.replicationSet && (c.replicationFactor < 1 || c.replicationFactor > 32767):
		return bad("replication factor", "must be between 1 and the number of brokers, got %d", c.replicationFactor)
	case c.minISRSet && c.minISR < 1:
		return bad("min in-sync replicas", "must be >= 1, got %d", c.minISR)
	case c.minISRSet && c.replicationSet && c.minISR > c.replicationFactor:
		return bad("min in-sync replicas", "must not exceed the replication factor (%d), got %d", c.replicationFactor, c.minISR)
	case c.purgeInterval < 0:
		return bad("repartition purge interval", "must be >= 0, got %v", c.purgeInterval)
	case c.guarantee != AtLeastOnce && c.guarantee != ExactlyOnce:
		return bad("guarantee", "unknown %v", c.guarantee)
	case c.guarantee == ExactlyOnce && c.txnTimeout <= c.commitInterval:
		return bad("transaction timeout", "must exceed the commit interval (%v), got %v", c.commitInterval, c.txnTimeout)
	}
	if _, err := assign.ParsePolicy(string(c.policy)); err != nil {
		return bad("policy", "%v", err)
	}
	for _, b := range c.brokers {
		if b == "" {
			return bad("brokers", "empty broker address")
		}
	}
	return nil
}

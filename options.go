package baton

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/assign"
	"github.com/baton-streams/baton/autoscale"
	"github.com/baton-streams/baton/internal/engine"
	"github.com/baton-streams/baton/internal/errs"
	"github.com/baton-streams/baton/internal/govern"
	"github.com/baton-streams/baton/internal/load"
	"github.com/baton-streams/baton/state"
)

// ErrConfig is wrapped by every error New returns for invalid options.
var ErrConfig = errs.ErrConfig

// Option configures an App.
type Option func(*config)

// config is what the options write: the runtime's configuration.
type config = engine.Config

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
		Workers:        1,
		MaxLearners:    assign.DefaultMaxLearners,
		AcceptableLag:  assign.DefaultAcceptableLag,
		Heartbeat:      DefaultHeartbeatInterval,
		Session:        DefaultSessionTimeout,
		Rebalance:      10 * time.Second,
		CommitInterval: DefaultCommitInterval,
		DrainTimeout:   60 * time.Second,
		Policy:         assign.Smooth,
		InstanceID:     fmt.Sprintf("%s-%d-%04x", host, os.Getpid(), time.Now().UnixNano()&0xffff),
		Logger:         slog.Default(),
		TxnTimeout:     10 * time.Second,
		AbortTimeout:   30 * time.Second,
		PurgeInterval:  DefaultPurgeInterval,
		Autoscale:      autoscale.DefaultConfig(),
		InputEvery:     DefaultInputLagInterval,
		LoadStep:       DefaultLoadStep,
		LoadRebalance:  DefaultLoadRebalanceInterval,
		BlockCache:     DefaultBlockCache,
		RestorePolicy:  govern.Policy{Share: DefaultRestoreShare, Window: govern.DefaultPolicy.Window, Catchup: govern.DefaultPolicy.Catchup},
	}
}

// WithBrokers sets the seed brokers (host:port). Required.
func WithBrokers(brokers ...string) Option { return func(c *config) { c.Brokers = brokers } }

// WithAppID sets the application id: the consumer group id and the prefix
// of internal topics. Required.
func WithAppID(id string) Option { return func(c *config) { c.AppID = id } }

// WithStateDir sets the directory for local state (Pebble). Required for
// stateful topologies unless WithMemoryState is given. Created if missing;
// locked while the App runs.
func WithStateDir(dir string) Option { return func(c *config) { c.StateDir = dir } }

// DefaultBlockCache is the size of the Pebble block cache an App's stores
// share unless WithBlockCache sets another.
const DefaultBlockCache = 256 << 20

// WithBlockCache sets the size in bytes of the Pebble block cache that
// all of the App's task stores share (docs/memory.md). It holds the
// stores' recently read blocks: with large state, a store read for keys
// it lacks (every new key of an aggregation) reads its tables' index and
// data blocks, from the cache or from the operating system. Default
// DefaultBlockCache.
func WithBlockCache(bytes int64) Option { return func(c *config) { c.BlockCache = bytes } }

// WithStoreOptions passes options to every Pebble store the App opens,
// for example state.WithPebbleOptions to size memtables
// (state.DefaultMemTableSize says what a store holds by default), or
// state.WithSyncWrites. The task stores share one block cache
// (WithBlockCache).
func WithStoreOptions(opts ...state.Option) Option {
	return func(c *config) { c.StoreOpts = append(c.StoreOpts, opts...) }
}

// WithMemoryState keeps state in memory instead of on disk: every start
// restores from the changelogs. For tests and demos.
func WithMemoryState() Option { return func(c *config) { c.MemoryState = true } }

// WithWorkers sets the number of worker goroutines, the instance's
// capacity. Default 1.
func WithWorkers(n int) Option { return func(c *config) { c.Workers = n } }

// WithStandbys sets the standby replicas per stateful task. Default 0.
func WithStandbys(n int) Option { return func(c *config) { c.Standbys = n } }

// WithMaxLearners sets the most learner tasks in the group at once.
// Default 2.
func WithMaxLearners(n int) Option { return func(c *config) { c.MaxLearners = n } }

// WithAcceptableLag sets the lag (records) within which a copy of a task's
// state counts as caught up. Default 10000.
func WithAcceptableLag(n int64) Option { return func(c *config) { c.AcceptableLag = n } }

// WithHeartbeatInterval sets the group heartbeat interval, which bounds how
// fast members notice a rebalance. Default 200ms (Kafka's is 3s).
func WithHeartbeatInterval(d time.Duration) Option { return func(c *config) { c.Heartbeat = d } }

// WithSessionTimeout sets the group session timeout: how long a crashed
// instance holds its tasks before the group notices. Default 6s.
func WithSessionTimeout(d time.Duration) Option { return func(c *config) { c.Session = d } }

// WithRebalanceTimeout sets how long a rebalance waits for every member to
// rejoin; a member that died during a rebalance holds the group that long.
// Default 10s.
func WithRebalanceTimeout(d time.Duration) Option { return func(c *config) { c.Rebalance = d } }

// WithCommitInterval sets how often processed input is committed (after
// the changelog writes it depends on are acknowledged). Default 200ms.
func WithCommitInterval(d time.Duration) Option { return func(c *config) { c.CommitInterval = d } }

// WithDrainTimeout bounds a graceful stop: how long the instance waits for
// its tasks to move to warm copies before it leaves anyway. Default 60s.
func WithDrainTimeout(d time.Duration) Option { return func(c *config) { c.DrainTimeout = d } }

// WithPolicy sets the assignment policy the leader uses. Default smooth.
// Every instance of a group must run the same policy: the instance joins
// with the policy's own group protocol (member.ProtocolName), and Run
// returns an ErrConfig if the group already runs another.
func WithPolicy(p assign.Policy) Option { return func(c *config) { c.Policy = p } }

// WithRack sets the instance's rack; standbys prefer other racks.
func WithRack(rack string) Option { return func(c *config) { c.Rack = rack } }

// WithInstanceID names the instance (default: host-pid-random). It must
// be unique in the group. A given id is also the member's
// group.instance.id (static membership, KIP-345): an instance that
// restarts with the same id within the session timeout gets its tasks
// back without a rebalance, and under ExactlyOnce its transactional id
// fences its predecessor's open transaction at once. Two running
// instances must not share an id: the group keeps the one that joined
// last, and Run of the other returns ErrInstanceIDInUse.
func WithInstanceID(id string) Option {
	return func(c *config) { c.InstanceID, c.StaticMember = id, true }
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
func WithStopMode(m StopMode) Option {
	return func(c *config) {
		if m != StopDrain && m != StopForRestart {
			c.OptErr = fmt.Errorf("%w: stop mode: unknown %v", ErrConfig, m)
		}
		c.StopForRestart = m == StopForRestart
	}
}

// WithEndpoint sets the host:port other members can reach this instance's
// HTTP server at; it travels in the subscription.
func WithEndpoint(addr string) Option { return func(c *config) { c.Endpoint = addr } }

// WithKafkaOptions passes options to every franz-go client the App makes
// (TLS, SASL, timeouts). Group and consumer options are set by baton.
func WithKafkaOptions(opts ...kgo.Opt) Option {
	return func(c *config) { c.KgoOpts = append(c.KgoOpts, opts...) }
}

// WithLogger sets the logger. Default slog.Default().
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.Logger = l } }

// WithMetrics registers the App's Prometheus metrics with r.
func WithMetrics(r prometheus.Registerer) Option { return func(c *config) { c.Registerer = r } }

// WithListener receives the App's events (rebalances, handovers, learner
// progress) as they happen. Calls are made from the App's goroutines and
// must not block.
func WithListener(l Listener) Option {
	return func(c *config) {
		c.Listener = nil
		if l != nil {
			c.Listener = func(e engine.Event) { l(publicEvent(e)) }
		}
	}
}

// WithCreateSinks makes the App create output topics that are missing,
// with the partition count of the subtopology writing them and the given
// topic configs (e.g. {"cleanup.policy": "compact"}), the replication
// factor of WithReplicationFactor and, unless configs set it, the
// min.insync.replicas of WithMinInSyncReplicas. By default a missing
// output topic is an error at the first record sent to it.
func WithCreateSinks(configs map[string]string) Option {
	return func(c *config) {
		c.SinkConfigs = map[string]*string{}
		for k, v := range configs {
			c.SinkConfigs[k] = &v
		}
	}
}

// WithReplicationFactor sets the replication factor of the topics baton
// creates: changelogs, repartition topics, and output topics with
// WithCreateSinks. Default: 3, or the number of brokers in the cluster if
// fewer. Must be >= 1 and at most the number of brokers.
func WithReplicationFactor(n int) Option {
	return func(c *config) { c.ReplicationFactor, c.ReplicationSet = n, true }
}

// WithMinInSyncReplicas sets min.insync.replicas of the topics baton
// creates (see WithReplicationFactor): how many replicas must have a
// record before the write succeeds. Default: 2, or replication factor - 1
// if that is less, and at least 1 (a replication factor of 3 gives 2, of 2
// or 1 gives 1). Must be >= 1 and at most the replication factor.
func WithMinInSyncReplicas(n int) Option {
	return func(c *config) { c.MinISR, c.MinISRSet = n, true }
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
	return func(c *config) { c.PurgeInterval = d }
}

// DefaultInputLagInterval is how often an instance reads the end offsets
// of its input partitions to measure input lag and input rates.
const DefaultInputLagInterval = 3 * time.Second

// DefaultRestoreShare is WithRestoreShare's default.
const DefaultRestoreShare = 0.5

// WithRestoreShare sets the part of the time, in (0, 1], that standbys
// and learners may spend writing what they restore while active tasks
// in this process have records to process: after each restored chunk
// they wait long enough to leave the rest to the actives (every App of
// the process counts, since they share its cores). With actives idle for
// a second, restores run at full speed; a restoring active task is never
// held back. A warm copy that did not gain on its changelog over two
// seconds while yielding (its changelog grows faster than its share lets
// it restore) and is further behind than the acceptable lag restores at
// full speed until it is within it, so yielding never starves it. A
// learner's restore thus takes at most about 1/share times as long as on
// an idle group when its share outpaces its changelog, and two seconds
// more than at full speed when it does not. 1 never yields. Default
// DefaultRestoreShare; the time yielded is
// baton_restore_yielded_seconds_total.
func WithRestoreShare(share float64) Option {
	return func(c *config) { c.RestorePolicy.Share = share }
}

// DefaultLoadStep is WithLoadStep's default: 5% of a worker.
const DefaultLoadStep = 0.05

// WithLoadStep sets the step, in shares of one worker's time in [0, 1],
// of the loads an instance reports to the group for its active tasks
// (docs/assign.md, "Loads"). Each task's measured load (busy time per
// second, smoothed over minutes) is reported as a whole number of steps,
// at least one, and a report changes only once the measured load is a
// full step away from it: the leader plans on the same figures while
// loads waver, so that a stable group stays as it is, and a task moves
// for load only when its difference is worth a move. Tasks lighter than
// half a step all weigh one step, so that a lightly loaded group is
// balanced on task counts. A step of 0 reports no loads: the leader
// weighs the instance's tasks as it weighs tasks nobody reports (every
// task 1 when no instance reports), and the instance never asks for a
// rebalance for its loads. Default DefaultLoadStep.
func WithLoadStep(step float64) Option { return func(c *config) { c.LoadStep = step } }

// DefaultLoadRebalanceInterval is WithLoadRebalanceInterval's default.
const DefaultLoadRebalanceInterval = load.DefaultAskEvery

// WithLoadRebalanceInterval sets how long after its last join an
// instance may ask the group for a rebalance because the loads it would
// report changed (docs/assign.md, "Loads"). Loads reach the leader only
// in the subscriptions of a join: once every active task of the instance
// is measured and the figure to report for one of them differs from the
// one reported at the last join (a full step away, or never reported),
// the instance asks for a rebalance, at most once in this interval.
// Steady loads bring no rebalance. Default
// DefaultLoadRebalanceInterval; at least a second.
func WithLoadRebalanceInterval(d time.Duration) Option {
	return func(c *config) { c.LoadRebalance = d }
}

// WithAutoscale sets the rule by which the group's leader recommends how
// many instances the group should run (baton_desired_instances, the
// autoscale field of Status; see docs/autoscaling.md). Default:
// autoscale.DefaultConfig(). An invalid config makes New return an error
// wrapping ErrConfig that names the field.
func WithAutoscale(cfg autoscale.Config) Option { return func(c *config) { c.Autoscale = cfg } }

func validate(c *config) error {
	if c.OptErr != nil {
		return c.OptErr
	}
	bad := func(option, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrConfig, option, fmt.Sprintf(format, args...))
	}
	switch {
	case len(c.Brokers) == 0:
		return bad("brokers", "at least one broker is required")
	case c.BlockCache < 0:
		return bad("block cache", "want a size of 0 bytes or more, got %d", c.BlockCache)
	case c.Autoscale.Validate() != nil:
		return fmt.Errorf("%w: autoscale: %w", ErrConfig, c.Autoscale.Validate())
	case !(c.RestorePolicy.Share > 0 && c.RestorePolicy.Share <= 1):
		return bad("restore share", "want more than 0 and at most 1, got %v", c.RestorePolicy.Share)
	case !(c.LoadStep >= 0 && c.LoadStep <= 1):
		return bad("load step", "want at least 0 and at most 1, got %v", c.LoadStep)
	case c.LoadRebalance < time.Second:
		return bad("load rebalance interval", "want at least 1s, got %v", c.LoadRebalance)
	case c.InputEvery <= 0:
		return bad("input lag interval", "must be > 0, got %v", c.InputEvery)
	case c.AppID == "":
		return bad("app id", "required")
	case c.Workers < 1:
		return bad("workers", "must be >= 1, got %d", c.Workers)
	case c.Standbys < 0:
		return bad("standbys", "must be >= 0, got %d", c.Standbys)
	case c.MaxLearners < 1:
		return bad("max learners", "must be >= 1, got %d", c.MaxLearners)
	case c.AcceptableLag < 0:
		return bad("acceptable lag", "must be >= 0, got %d", c.AcceptableLag)
	case c.Heartbeat <= 0:
		return bad("heartbeat interval", "must be > 0, got %v", c.Heartbeat)
	case c.Session < 3*c.Heartbeat:
		return bad("session timeout", "must be at least 3 heartbeat intervals, got %v", c.Session)
	case c.Rebalance < c.Heartbeat:
		return bad("rebalance timeout", "must be at least the heartbeat interval, got %v", c.Rebalance)
	case c.CommitInterval <= 0:
		return bad("commit interval", "must be > 0, got %v", c.CommitInterval)
	case c.DrainTimeout < 0:
		return bad("drain timeout", "must be >= 0, got %v", c.DrainTimeout)
	case c.InstanceID == "":
		return bad("instance id", "must not be empty")
	case c.StopForRestart && !c.StaticMember:
		return bad("stop mode", "restart requires an instance id (WithInstanceID): the restarted instance must be the same group member")
	case c.ReplicationSet && (c.ReplicationFactor < 1 || c.ReplicationFactor > 32767):
		return bad("replication factor", "must be between 1 and the number of brokers, got %d", c.ReplicationFactor)
	case c.MinISRSet && c.MinISR < 1:
		return bad("min in-sync replicas", "must be >= 1, got %d", c.MinISR)
	case c.MinISRSet && c.ReplicationSet && c.MinISR > c.ReplicationFactor:
		return bad("min in-sync replicas", "must not exceed the replication factor (%d), got %d", c.ReplicationFactor, c.MinISR)
	case c.PurgeInterval < 0:
		return bad("repartition purge interval", "must be >= 0, got %v", c.PurgeInterval)
	case c.ExactlyOnce && c.TxnTimeout <= c.CommitInterval:
		return bad("transaction timeout", "must exceed the commit interval (%v), got %v", c.CommitInterval, c.TxnTimeout)
	}
	if _, err := assign.ParsePolicy(string(c.Policy)); err != nil {
		return bad("policy", "%v", err)
	}
	for _, b := range c.Brokers {
		if b == "" {
			return bad("brokers", "empty broker address")
		}
	}
	return nil
}

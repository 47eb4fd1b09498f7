package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/assign"
	"github.com/baton-streams/baton/autoscale"
	"github.com/baton-streams/baton/internal/govern"
	"github.com/baton-streams/baton/internal/work"
	"github.com/baton-streams/baton/state"
)

// Config is an App's configuration: the package baton's options write it
// and check it (baton.New), and the runtime only reads it. The root
// package documents each field's option and default.
type Config struct {
	Brokers        []string
	AppID          string
	StateDir       string
	MemoryState    bool
	StoreOpts      []state.Option
	BlockCache     int64
	Workers        int
	Standbys       int
	MaxLearners    int
	AcceptableLag  int64
	Heartbeat      time.Duration
	Session        time.Duration
	Rebalance      time.Duration
	CommitInterval time.Duration
	DrainTimeout   time.Duration
	Policy         assign.Policy
	Rack           string
	InstanceID     string
	StaticMember   bool // instanceID was given: it is also the group.instance.id
	// StopForRestart: when Run's context ends, commit and stop without
	// leaving the group (baton.StopForRestart); otherwise drain.
	StopForRestart bool
	Endpoint       string
	KgoOpts        []kgo.Opt
	Logger         *slog.Logger
	Registerer     prometheus.Registerer
	Listener       func(Event)
	SinkConfigs    map[string]*string // non-nil: create missing sink topics with these configs
	OptErr         error              // an option that could not be applied
	BadRecords     BadRecords
	// ProcessingErrors is the policy for records whose processors fail
	// (ProcessorErrors overrides it per processor node).
	ProcessingErrors BadRecords
	ProcessorErrors  map[string]BadRecords
	ExactlyOnce      bool // baton.ExactlyOnce; otherwise at-least-once
	// RestorePolicy paces warm copies' restores while active tasks are
	// busy (baton.WithRestoreShare).
	RestorePolicy govern.Policy
	TxnTimeout    time.Duration
	// AbortTimeout bounds an exactly-once abort (30 s): one not done by
	// then is settled by joining again with a new client.
	AbortTimeout time.Duration
	// Internal topics: replication factor and min.insync.replicas (the
	// defaults depend on the cluster's size), and how often repartition
	// topics are purged.
	ReplicationFactor int
	ReplicationSet    bool
	MinISR            int
	MinISRSet         bool
	PurgeInterval     time.Duration
	Autoscale         autoscale.Config
	// InputEvery is how often the input partitions' offsets are read for
	// the input lag and rates (docs/autoscaling.md).
	InputEvery time.Duration
	// LoadStep is the step of the loads the instance reports to the
	// group, in shares of a worker (baton.WithLoadStep); zero reports
	// none.
	LoadStep float64
	// LoadRebalance is the least time between the instance's last join
	// and a rebalance it asks for because its loads changed
	// (baton.WithLoadRebalanceInterval, load.Ask).
	LoadRebalance time.Duration
	// LoadSmoothing and LoadSettle are the load meter's time constant
	// and how long it watches a task before reporting it; zero is
	// internal/load's default. Tests shorten them.
	LoadSmoothing, LoadSettle time.Duration
	// ProtocolVersion, when not zero, makes the instance speak that
	// protocol version as a member of an older release would
	// (member.Config.Version). Tests of a rolling upgrade set it.
	ProtocolVersion int16
	// OnStart, when set, sees each task on the loop as it starts
	// processing: at once when it has nothing to restore, else once its
	// restore is done and written. Its stores hold what it restored and
	// nothing it processed. Tests compare those stores with their
	// changelogs through it.
	OnStart func(*work.Task)
	// OnCatchUp, when set, is called by the catch-up after an aborted
	// transaction with its context, before it writes a fetch into a
	// store. Tests hold the catch-up there.
	OnCatchUp func(context.Context)
	// OnTurn, when set, is called after every turn of the loop with the
	// turn and how long it took (tests: which turns are long).
	OnTurn func(turn func(), took time.Duration)
	// OnOneShot, when set, is called first by every goroutine the loop
	// starts for one answer (offsets to read), with the membership's
	// context. Tests hold such a goroutine there.
	OnOneShot func(context.Context)
	// OnRestoreWrite, when set, is called off the loop before each
	// restored chunk is written. Tests make the writes slow with it.
	OnRestoreWrite func()
	// OnCommitWork, when set, is called on the committer's goroutine as
	// a commit that has work to make durable starts. Tests cut the
	// link there, so that the commit hangs.
	OnCommitWork func()
	// OnCommitWrite, when set, is called off the loop before a commit's
	// store writes. Tests make the writes slow with it.
	OnCommitWrite func()
}

package assign

import (
	"errors"
	"fmt"
	"strings"
)

// TaskID names a task: "<subtopology>_<partition>", e.g. "1_3".
type TaskID string

// Config holds the group-wide settings the assignor reads.
type Config struct {
	// Standbys is the number of standby replicas wanted per stateful
	// task (Kafka Streams' num.standby.replicas). Default 0.
	Standbys int `json:"standbys"`
	// MaxLearners is the most learner tasks that may exist in the whole
	// group at once. Default 2; at least 1.
	MaxLearners int `json:"max_learners"`
	// AcceptableLag is the largest lag, in records behind the changelog
	// end, at which a local copy counts as caught up. Default 10000.
	AcceptableLag int64 `json:"acceptable_lag"`
	// SeparateBuckets balances the stateless tasks against their own
	// shares in every round. Left false (the default), a round whose
	// plan warms stateful tasks for a balance move gives the stateless
	// tasks the shares that balance each instance's total active load,
	// so a new instance carries stateless tasks in place of the stateful
	// ones it is still restoring (docs/assign.md, "Stand-ins").
	SeparateBuckets bool `json:"separate_buckets"`
}

// Defaults used by DefaultConfig and by Decode for fields left out.
const (
	DefaultStandbys      = 0
	DefaultMaxLearners   = 2
	DefaultAcceptableLag = 10000
)

// DefaultConfig returns the configuration with every field at its default.
func DefaultConfig() Config {
	return Config{Standbys: DefaultStandbys, MaxLearners: DefaultMaxLearners, AcceptableLag: DefaultAcceptableLag}
}

// Task describes one task of the topology.
type Task struct {
	ID TaskID
	// Stateful tasks have state to restore; only they get learners and
	// standbys.
	Stateful bool
	// Load is the task's relative cost, > 0. Tasks of equal load are
	// balanced by count.
	Load float64
}

// Instance is one group member as its subscription describes it.
type Instance struct {
	ID string
	// Capacity is the number of workers, at least 1. An instance's share
	// of work is proportional to it.
	Capacity int
	// Rack is optional; standbys prefer racks other than their active's.
	Rack string
	// Leaving marks an instance that asked to go: it gets nothing new and
	// its tasks are moved off it.
	Leaving bool
	// Active, Standby and Learner are the tasks the instance owns now.
	Active  []TaskID
	Standby []TaskID
	Learner []TaskID
	// Lag is, for every stateful task the instance has local state for,
	// how many records that state is behind the changelog's end. A task
	// that is missing has no local state.
	Lag map[TaskID]int64
}

// State is everything the assignor knows: the config, the tasks and the
// live instances. It is the leader's view assembled from subscriptions.
type State struct {
	Config    Config
	Tasks     []Task
	Instances []Instance
}

// InstancePlan is what one instance is told to do.
type InstancePlan struct {
	ID      string   `json:"id"`
	Active  []TaskID `json:"active"`
	Standby []TaskID `json:"standby"`
	Learner []TaskID `json:"learner"`
	// Revoked lists tasks the instance owned as active and must give up
	// now; they are assigned in the follow-up round.
	Revoked []TaskID `json:"revoked"`
}

// Plan is the assignor's output: one entry per input instance in id order,
// every list sorted in byte order.
type Plan struct {
	Instances []InstancePlan `json:"instances"`
	// Followup is true when another rebalance is needed right away; it is
	// always true when some task was revoked.
	Followup bool `json:"followup"`
	// Reasons says why each learner was placed, task revoked or orphan
	// assigned, in the order the assignor decided them. Not part of the
	// JSON plan.
	Reasons []Reason `json:"-"`
}

// Instance returns the plan for the instance with the given id, and false
// if the plan has none.
func (p Plan) Instance(id string) (InstancePlan, bool) {
	for _, ip := range p.Instances {
		if ip.ID == id {
			return ip, true
		}
	}
	return InstancePlan{}, false
}

// ReasonKind classifies a Reason.
type ReasonKind string

// The kinds of decision the assignor explains.
const (
	ReasonOrphan      ReasonKind = "orphan"       // an orphaned task was given an owner
	ReasonLearner     ReasonKind = "learner"      // a learner was placed
	ReasonRevoke      ReasonKind = "revoke"       // an active task was revoked to move
	ReasonDropLearner ReasonKind = "drop-learner" // a learner was removed
	ReasonStandby     ReasonKind = "standby"      // a standby was placed
)

// Reason explains one decision.
type Reason struct {
	Kind     ReasonKind
	Task     TaskID
	Instance string // the instance the decision is about (new owner, learner host, revoker)
	Why      string
}

func (r Reason) String() string {
	return fmt.Sprintf("%-12s %-10s %-10s %s", r.Kind, r.Task, r.Instance, r.Why)
}

// Policy selects the assignment algorithm.
type Policy string

// The policies. Smooth is the product; the other two are baselines.
const (
	// Smooth is the learner-based incremental algorithm of the seed.
	Smooth Policy = "smooth"
	// Cooperative is sticky with two-phase moves but no learners: a
	// stateful task is handed over cold (KIP-429 without learners).
	Cooperative Policy = "cooperative"
	// Eager is stop-the-world: every task is revoked and dealt again from
	// scratch, without learners.
	Eager Policy = "eager"
)

// Policies lists every policy, in the order benchmarks show them.
var Policies = []Policy{Smooth, Cooperative, Eager}

// ParsePolicy returns the policy with the given name.
func ParsePolicy(name string) (Policy, error) {
	for _, p := range Policies {
		if string(p) == name {
			return p, nil
		}
	}
	names := make([]string, len(Policies))
	for i, p := range Policies {
		names[i] = string(p)
	}
	return "", fmt.Errorf("%w: %q (want one of %s)", ErrUnknownPolicy, name, strings.Join(names, ", "))
}

// Errors returned by the package. Validation errors wrap ErrInvalidState.
var (
	ErrInvalidState  = errors.New("assign: invalid state")
	ErrUnknownPolicy = errors.New("assign: unknown policy")
)

// FieldError is a validation error that names the offending field with a
// JSON path such as "instances[2].capacity".
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Unwrap makes errors.Is(err, ErrInvalidState) true.
func (e *FieldError) Unwrap() error { return ErrInvalidState }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

package sim

import (
	"fmt"
	"strings"

	"github.com/baton-streams/baton/assign"
)

// Policy is an assignment algorithm together with the member behaviour that
// goes with it: when members rejoin, whether the world stops, how an
// instance leaves.
type Policy struct {
	Name string
	// Assign computes a plan. It must be pure and deterministic. probe
	// asks for a probing rebalance (Kafka Streams') Timing.Probing after
	// the round, unless another round comes first.
	Assign func(assign.State) (plan assign.Plan, probe bool, err error)
	// ProcessOrder: the engine lists State.Instances in process order
	// (InstanceSpec.ProcessKey, compared as Kafka Streams compares process
	// ids) rather than in the order the instances came, and Assign reads
	// that order.
	ProcessOrder bool
	// SettledStart, when set, places the tasks of the scenario's deal
	// (TaskSpec.Dealt) where a group settled under the policy runs
	// them, instead of in the deal's blocks. Given the group at time 0
	// with nothing assigned (the instances in the order Assign sees
	// them), it returns that assignment; the dealt tasks take their
	// actives and standbys from it, and every other task stays where
	// the scenario put it. It must be pure and deterministic.
	SettledStart func(assign.State) (assign.Plan, error)
	// RejoinOnReady: a member rejoins as soon as one of its learners is
	// caught up (baton's smooth scaling).
	RejoinOnReady bool
	// StopTheWorld: every member stops processing all its tasks when it
	// notices a rebalance, until the round's plan is applied (eager).
	StopTheWorld bool
	// Drain: a leaving instance marks itself leaving and stays until the
	// plan leaves it no active task. Without it, it leaves at once.
	Drain bool
	// UnitLoads: every task counts with load 1.
	UnitLoads bool
	// Checks selects the guarantees that CheckPlan verifies every round.
	Checks Checks
	// ThreadBalance: the policy balances as Kafka Streams does, moving a
	// task between two clients only while that lowers the skew of their
	// tasks per thread, which with unequal capacities can leave a client
	// outside its share (the balance the model measures). Such a run
	// converges when it settles (nothing unavailable, no learner, no
	// probing rebalance to come), balanced or not.
	ThreadBalance bool
}

// Checks is a set of guarantees of docs/assign.md that can be verified on
// a single round.
type Checks uint

// The checkable guarantees, numbered as in docs/assign.md.
const (
	CheckOneOwner     Checks = 1 << iota // 1
	CheckOneRole                         // 2
	CheckCooperative                     // 3
	CheckWarmHandover                    // 4
	CheckOrphans                         // 5
	CheckStateless                       // 6
	CheckLearners                        // 7
	CheckStandbys                        // 8
	CheckLeaving                         // 9

	CheckBasic Checks = CheckOneOwner | CheckOneRole
	CheckAll   Checks = 1<<9 - 1
)

// PolicyNames lists the built-in policies in the order comparisons show them.
var PolicyNames = []string{"smooth", "probing", "cooperative", "eager"}

func assignWith(p assign.Policy) func(assign.State) (assign.Plan, bool, error) {
	return func(s assign.State) (assign.Plan, bool, error) {
		plan, err := assign.Assign(s, p)
		return plan, false, err
	}
}

// ParsePolicy returns the built-in policy with the given name.
//
//   - smooth, cooperative, eager: assign's policies; leaving instances drain.
//   - probing: an emulation of Kafka Streams' HighAvailabilityTaskAssignor
//     on the classic, cooperative protocol (kstreams.go): every task has
//     load 1, the clients are ordered by process, at most
//     config.max_learners warm-ups per round (Kafka Streams'
//     max.warmup.replicas, default 2 like baton's max_learners), a
//     caught-up warm-up is acted on only at the next rebalance (a probing
//     rebalance comes timing.probing, default 10m, after a round that
//     scheduled movements), and a leaving instance leaves at once (Kafka
//     Streams has no drain). The tasks a scenario leaves to the deal start
//     on Kafka Streams' target for the instances at time 0, where a
//     group settled under it runs them.
func ParsePolicy(name string) (Policy, error) {
	switch name {
	case "smooth":
		return Policy{Name: name, Assign: assignWith(assign.Smooth), RejoinOnReady: true, Drain: true, Checks: CheckAll}, nil
	case "cooperative":
		return Policy{Name: name, Assign: assignWith(assign.Cooperative), Drain: true,
			Checks: CheckOneOwner | CheckOneRole | CheckCooperative | CheckStateless | CheckLeaving}, nil
	case "eager":
		return Policy{Name: name, Assign: assignWith(assign.Eager), StopTheWorld: true, Drain: true, Checks: CheckOneRole}, nil
	case "probing":
		// What Kafka Streams' assignor guarantees of docs/assign.md's
		// single-round items: one owner, one role, two-phase moves (the
		// cooperative protocol), no standby or warm-up of a stateless
		// task, at most the configured standbys. Not 4: an active goes
		// to the most caught-up client even when none is within
		// acceptable lag (an owner still restoring). Not 5: an orphan
		// goes to the least loaded caught-up client, not to a learner
		// as warm. Not 7: warm-ups are placed again every round, so one
		// not yet caught up is dropped when the target moves or another
		// movement, earlier in task order, takes the budget. Not 9:
		// nothing drains.
		return Policy{Name: name, Assign: assignKStreams, ProcessOrder: true, SettledStart: settledKStreams, UnitLoads: true, ThreadBalance: true,
			Checks: CheckOneOwner | CheckOneRole | CheckCooperative | CheckStateless | CheckStandbys}, nil
	}
	return Policy{}, fmt.Errorf("sim: unknown policy %q (want one of %s)", name, strings.Join(PolicyNames, ", "))
}

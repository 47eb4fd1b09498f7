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
	// Assign computes a plan. It must be pure and deterministic.
	Assign func(assign.State) (assign.Plan, error)
	// RejoinOnReady: a member rejoins as soon as one of its learners is
	// caught up (baton's smooth scaling).
	RejoinOnReady bool
	// Probing: while learners exist, a rebalance is scheduled this long
	// after every round (Kafka Streams' probing rebalance); 0 for none.
	// The scenario's timing sets the interval.
	Probing bool
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
}

// Checks is a set of guarantees of spec/assign.md that can be verified on
// a single round.
type Checks uint

// The checkable guarantees, numbered as in spec/assign.md.
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

func assignWith(p assign.Policy) func(assign.State) (assign.Plan, error) {
	return func(s assign.State) (assign.Plan, error) { return assign.Assign(s, p) }
}

// ParsePolicy returns the built-in policy with the given name.
//
//   - smooth, cooperative, eager: assign's policies; leaving instances drain.
//   - probing: an emulation of Kafka Streams' HighAvailabilityTaskAssignor
//     built on assign's smooth policy: every task has load 1, at most
//     config.max_learners warm-ups (Kafka Streams' max.warmup.replicas,
//     default 2 like baton's max_learners), a caught-up warm-up is acted on
//     only at the next rebalance (a probing rebalance is scheduled every
//     timing.probing, default 10m, while warm-ups exist), and a leaving
//     instance leaves at once (Kafka Streams has no drain).
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
		return Policy{Name: name, Assign: assignWith(assign.Smooth), Probing: true, UnitLoads: true,
			Checks: CheckAll &^ CheckLeaving}, nil
	}
	return Policy{}, fmt.Errorf("sim: unknown policy %q (want one of %s)", name, strings.Join(PolicyNames, ", "))
}

// Package lifecycle is the life of one task on one instance as a pure
// state machine: Step takes the task's state and an event and returns the
// next state and the effects the runtime must carry out, in order. No I/O,
// no clock; package instance steps it for each of its tasks, and the
// runtime (internal/engine) performs the effects.
//
// The states:
//
//	Closed       the instance does not hold the task (state may be on disk)
//	Replicating  a standby or learner: stores open, reading the changelog
//	Restoring    active, but its state is behind the changelog: input paused
//	Running      active and processing
//
// The promises the tests check: a standby or learner that becomes active
// keeps its open stores (no OpenStores effect: nothing is reopened or read
// again, only the remaining changelog tail); a task never processes before
// its state is caught up (input is paused while Restoring, and never left
// paused once the task is closed).
//
// Commits are not a task's own: package instance commits the running
// tasks of a revoke together, before it steps them with Revoke, and never
// commits a lost task (its partitions already belong to someone else).
package lifecycle

import "fmt"

// Role is what the assignment asks of the task here.
type Role int

// Roles.
const (
	// None: the assignment does not name the task here. The instance may
	// still have state for it on disk; that is not a role.
	None Role = iota
	Active
	Standby
	Learner
)

var roleNames = [...]string{"none", "active", "standby", "learner"}

func (r Role) String() string {
	return roleNames[r]
}

// ParseRole returns the role whose String is s.
func ParseRole(s string) (Role, error) {
	for r, name := range roleNames {
		if s == name {
			return Role(r), nil
		}
	}
	return None, fmt.Errorf("lifecycle: unknown role %q (want none, active, standby or learner)", s)
}

// MarshalText writes the role's name, so that a Role is "active" in JSON.
func (r Role) MarshalText() ([]byte, error) {
	if r < 0 || int(r) >= len(roleNames) {
		return nil, fmt.Errorf("lifecycle: no role %d", int(r))
	}
	return []byte(roleNames[r]), nil
}

// UnmarshalText reads a role's name, as ParseRole does.
func (r *Role) UnmarshalText(b []byte) error {
	v, err := ParseRole(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// Phase is where the task is in its life.
type Phase int

// Phases.
const (
	Closed Phase = iota
	Replicating
	Restoring
	Running
)

func (p Phase) String() string {
	return [...]string{"closed", "replicating", "restoring", "running"}[p]
}

// State is a task's lifecycle state.
type State struct {
	Role  Role
	Phase Phase
	// Ready says a learner is within the acceptable lag. Readiness can be
	// lost (FellBehind: the owner wrote faster than the learner read) and
	// regained (CaughtUp again), and each time it is regained the learner
	// asks for a rebalance: the leader reads its lag at the join, so a
	// readiness lost before that read must be reported again.
	Ready bool
}

// Event is something that happened to the task.
type Event int

// Events.
const (
	// AssignActive: the task's partitions were assigned here.
	AssignActive Event = iota
	// AssignStandby and AssignLearner: the assignment names the task in
	// that role.
	AssignStandby
	AssignLearner
	// Unassign: the assignment no longer names the standby or learner.
	Unassign
	// Revoke: the active's partitions are revoked (cooperative handover).
	Revoke
	// Lose: the active's partitions were lost (session expired).
	Lose
	// CaughtUp: the stores reached the changelog end (within the
	// acceptable lag for a learner).
	CaughtUp
	// FellBehind: a ready learner's lag rose past the acceptable lag.
	FellBehind
)

func (e Event) String() string {
	return [...]string{"assign-active", "assign-standby", "assign-learner", "unassign", "revoke", "lose", "caught-up", "fell-behind"}[e]
}

// Effect is an action for the runtime.
type Effect int

// Effects, in the order Step returns them when several apply.
const (
	// OpenStores opens the task's stores (from disk if state is there).
	OpenStores Effect = iota
	// StartReading makes the restore consumer read the changelogs from the
	// stores' checkpoints; StopReading ends that.
	StartReading
	StopReading
	// PauseInput and ResumeInput pause and resume the task's input
	// partitions.
	PauseInput
	ResumeInput
	// StartProcessor creates the task's processor.
	StartProcessor
	// CloseStores closes the stores, leaving state on disk.
	CloseStores
	// ReportReady asks for a rebalance: a learner is caught up.
	ReportReady
)

func (e Effect) String() string {
	return [...]string{"open-stores", "start-reading", "stop-reading", "pause-input", "resume-input",
		"start-processor", "close-stores", "report-ready"}[e]
}

// Step returns the next state and the effects for event ev on a task in
// state s. stateful says whether the task has stores. An active task
// whose state may be behind its changelog goes through Restoring, input
// paused, until CaughtUp: a closed task opening its stores, and also a
// standby or learner that becomes active, since the end offsets it was
// caught up against may not hold the old owner's last writes (the
// instance reads the ends again and sends CaughtUp once the stores reach
// them, at once when they already do). An event that does not apply to
// the state is an error naming both, and leaves the state unchanged.
func Step(s State, ev Event, stateful bool) (State, []Effect, error) {
	bad := func() (State, []Effect, error) {
		return s, nil, fmt.Errorf("lifecycle: event %s does not apply to a %s task that is %s", ev, s.Role, s.Phase)
	}
	switch ev {
	case AssignActive:
		switch {
		case s.Phase == Closed && !stateful:
			return State{Role: Active, Phase: Running}, []Effect{StartProcessor}, nil
		case s.Phase == Closed:
			return State{Role: Active, Phase: Restoring}, []Effect{OpenStores, StartProcessor, PauseInput, StartReading}, nil
		case s.Phase == Replicating:
			// A warm promotion: the stores stay open and only the tail
			// past them is read, with input paused.
			return State{Role: Active, Phase: Restoring}, []Effect{StartProcessor, PauseInput}, nil
		}
		return bad()
	case AssignStandby, AssignLearner:
		role := Standby
		if ev == AssignLearner {
			role = Learner
		}
		switch {
		case !stateful:
			return bad()
		case s.Phase == Closed:
			return State{Role: role, Phase: Replicating}, []Effect{OpenStores, StartReading}, nil
		case s.Phase == Replicating:
			// Standby <-> learner: same work. Readiness is a learner's.
			return State{Role: role, Phase: Replicating, Ready: s.Ready && role == Learner}, nil, nil
		}
		return bad()
	case Unassign:
		if s.Phase != Replicating {
			return bad()
		}
		return State{Role: None, Phase: Closed}, []Effect{StopReading, CloseStores}, nil
	case Revoke, Lose:
		var fx []Effect
		switch s.Phase {
		case Running:
			// Committed already, if revoked (see the package doc).
		case Restoring:
			// Nothing processed: nothing to commit. Input was paused: resume
			// it, or the partitions stay paused if the task comes back.
			fx = append(fx, StopReading, ResumeInput)
		default:
			return bad()
		}
		if stateful {
			fx = append(fx, CloseStores)
		}
		return State{Role: None, Phase: Closed}, fx, nil
	case CaughtUp:
		switch {
		case s.Phase == Restoring:
			return State{Role: Active, Phase: Running}, []Effect{StopReading, ResumeInput}, nil
		case s.Phase == Replicating && s.Role == Learner && !s.Ready:
			s.Ready = true
			return s, []Effect{ReportReady}, nil
		case s.Phase == Replicating:
			return s, nil, nil
		}
		return bad()
	case FellBehind:
		if s.Phase != Replicating {
			return bad()
		}
		s.Ready = false
		return s, nil, nil
	}
	return bad()
}

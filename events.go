package baton

import (
	"time"
)

// EventKind classifies an Event.
type EventKind string

// The events an App reports to its Listener.
const (
	// EventRebalance: a rebalance round ended for this instance.
	EventRebalance EventKind = "rebalance"
	// EventAssigned: a task became active here (Detail says if it was warm).
	EventAssigned EventKind = "assigned"
	// EventRevoked: an active task was committed and given up.
	EventRevoked EventKind = "revoked"
	// EventLost: an active task was given up without a commit (the
	// session expired, the group expelled this instance): its work since
	// the last commit is its next owner's to do again.
	EventLost EventKind = "lost"
	// EventLearner: a learner started restoring here.
	EventLearner EventKind = "learner"
	// EventStandby: a standby started replicating here.
	EventStandby EventKind = "standby"
	// EventLearnerReady: a learner caught up; the instance rejoins.
	EventLearnerReady EventKind = "learner-ready"
	// EventPaused: an active task's input was paused until its state is
	// restored (it became active cold, or its warm copy still had a tail
	// to read); EventRestored follows when it runs.
	EventPaused EventKind = "paused"
	// EventRestored: an active task finished restoring and runs.
	EventRestored EventKind = "restored"
	// EventFirstRecord: the first record a newly active task processed.
	EventFirstRecord EventKind = "first-record"
	// EventLastRecord: the last record a task processed before its revoke.
	EventLastRecord EventKind = "last-record"
	// EventProgress: periodic restore progress of a learner or standby.
	EventProgress EventKind = "progress"
	// EventLeaving: the instance asked to leave and is draining.
	EventLeaving EventKind = "leaving"
	// EventLeader: this instance computed a plan as group leader.
	EventLeader EventKind = "leader"
	// EventStoreRebuilt: the records a store was to restore next were
	// gone from its changelog (retention or DeleteRecords passed them), so
	// the store was wiped and restores again from the changelog's start
	// (Detail names the store).
	EventStoreRebuilt EventKind = "store-rebuilt"
)

// Event is one thing that happened in an App.
type Event struct {
	Time       time.Time
	Kind       EventKind
	Instance   string
	Task       string
	Generation int32
	// Lag is records behind the changelog end (learner, standby, restore).
	Lag int64
	// Replayed is the records an active task restored after it became
	// active (EventRestored): work on the critical path.
	Replayed int64
	// Record is the input record's timestamp for first/last-record events.
	Record time.Time
	Detail string
}

// Listener receives events; it must not block.
type Listener func(Event)

// Status is a snapshot of an instance, as served on /status.
type Status struct {
	AppID      string       `json:"app_id"`
	Instance   string       `json:"instance"`
	Generation int32        `json:"generation"`
	Leader     bool         `json:"leader"`
	Workers    int          `json:"workers"`
	Leaving    bool         `json:"leaving"`
	Tasks      []TaskStatus `json:"tasks"`
	// Plan is the last plan this instance computed as leader, if any.
	Plan *PlanStatus `json:"plan,omitempty"`
	// Plans are the recent plans this instance computed as leader, oldest
	// first (at most 20): a timeline misses none of the quick rounds of a
	// handover.
	Plans []PlanStatus `json:"plans,omitempty"`
}

// TaskStatus is one task's line in Status.
type TaskStatus struct {
	ID        string `json:"id"`
	Role      string `json:"role"`
	Lag       int64  `json:"lag"`
	Processed int64  `json:"processed"`
	// Restored counts changelog records restored into the task's stores
	// while it was active on this instance (restoration that holds its
	// processing up), not what it read as a standby or learner. Like
	// Processed it starts at 0 when the task is opened here and restarts
	// when it is closed and opened again.
	Restored int64 `json:"restored"`
}

// PlanStatus is the leader's last plan with its explanation.
type PlanStatus struct {
	Generation int32                       `json:"generation"`
	Instances  []PlanInstance              `json:"instances"`
	Reasons    []string                    `json:"reasons"`
	Followup   bool                        `json:"followup"`
	Lags       map[string]map[string]int64 `json:"lags"`
}

// PlanInstance is one instance in a PlanStatus.
type PlanInstance struct {
	ID      string   `json:"id"`
	Leaving bool     `json:"leaving"`
	Active  []string `json:"active"`
	Standby []string `json:"standby"`
	Learner []string `json:"learner"`
	Revoked []string `json:"revoked"`
}

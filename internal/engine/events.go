package engine

import (
	"time"
)

// The App's events and status in the runtime's own types, one for one
// with package baton's (which documents every kind and field and converts
// these for its users): the runtime cannot import the package above it.

type EventKind string

const (
	EventRebalance    EventKind = "rebalance"
	EventAssigned     EventKind = "assigned"
	EventRevoked      EventKind = "revoked"
	EventLost         EventKind = "lost"
	EventLearner      EventKind = "learner"
	EventStandby      EventKind = "standby"
	EventLearnerReady EventKind = "learner-ready"
	EventPaused       EventKind = "paused"
	EventRestored     EventKind = "restored"
	EventFirstRecord  EventKind = "first-record"
	EventLastRecord   EventKind = "last-record"
	EventProgress     EventKind = "progress"
	EventLeaving      EventKind = "leaving"
	EventLeader       EventKind = "leader"
	EventStoreRebuilt EventKind = "store-rebuilt"
)

type Event struct {
	Time       time.Time
	Kind       EventKind
	Instance   string
	Task       string
	Generation int32
	Lag        int64
	Replayed   int64
	Record     time.Time
	Detail     string
}

type Status struct {
	AppID        string
	Instance     string
	Generation   int32
	Leader       bool
	Workers      int
	Leaving      bool
	Unconfirmed  bool
	ConfirmedAt  time.Time
	PolledAt     time.Time
	Polling      bool
	Tasks        []TaskStatus
	Totals       map[string]TaskTotals
	Plan         *PlanStatus
	Plans        []PlanStatus
	WorkerRate   float64
	Autoscale    *AutoscaleStatus
	GlobalStores []GlobalStoreStatus
	Restore      RestoreStatus
}

type RestoreStatus struct {
	Records        int64
	Rate           float64
	YieldedSeconds float64
}

type InputLag struct {
	Records int64
	Seconds float64
	Rate    float64
}

type AutoscaleStatus struct {
	DesiredInstances   int
	Needed             int
	Reason             string
	Time               time.Time
	Instances          int
	WorkersPerInstance int
	InputRate          float64
	WorkerRate         float64
	Lag                int64
	LagDraining        bool
	Moves              int
}

type TaskTotals struct {
	Processed int64
	Restored  int64
}

type TaskStatus struct {
	ID          string
	Role        string
	Lag         int64
	Processed   int64
	Restored    int64
	Waiting     int64
	Input       *InputLag
	Unconfirmed bool
	Load        float64
	// LoadReported is the load last reported to the group; 0 if none.
	LoadReported float64
}

type PlanStatus struct {
	Generation int32
	Instances  []PlanInstance
	Reasons    []string
	Followup   bool
	Lags       map[string]map[string]int64
	Loads      map[string]float64
}

type PlanInstance struct {
	ID      string
	Leaving bool
	Active  []string
	Standby []string
	Learner []string
	Revoked []string
}

type GlobalStoreStatus struct {
	Name  string
	Topic string
	Ready bool
	Lag   int64
	Read  int64
}

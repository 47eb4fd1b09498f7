package baton

import (
	"time"

	"github.com/baton-streams/baton/internal/engine"
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
	// session expired, the group expelled this instance, or the commit
	// of a revoked task failed): its work since the last commit is its
	// next owner's to do again.
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
	AppID      string `json:"app_id"`
	Instance   string `json:"instance"`
	Generation int32  `json:"generation"`
	Leader     bool   `json:"leader"`
	Workers    int    `json:"workers"`
	Leaving    bool   `json:"leaving"`
	// Unconfirmed says the group has not confirmed this member lately:
	// no heartbeat was answered for a session timeout, or the group
	// session failed (its partitions were lost, a heartbeat or join
	// error) since the last answered heartbeat or assignment. Its active tasks may already run on another instance,
	// and it will learn so when it reaches the group again. ConfirmedAt
	// is the last answered heartbeat or assignment (zero before the
	// first).
	Unconfirmed bool      `json:"unconfirmed,omitempty"`
	ConfirmedAt time.Time `json:"confirmed_at"`
	// PolledAt is when the last poll of the input came back, with
	// records or without (zero before the first), and Polling says a
	// poll was asked for since and is under way (a poll waits up to
	// 100 ms for records). A task whose records stopped coming while
	// polls were under way waits for the fetch (the brokers, the
	// client); one while none was asked for, for this instance's loop.
	PolledAt time.Time    `json:"polled_at"`
	Polling  bool         `json:"polling"`
	Tasks    []TaskStatus `json:"tasks"`
	// Totals are each task's counters summed over every time it was
	// open on this instance (this App), the closed times included:
	// unlike TaskStatus's, they only grow. A task that never processed
	// or restored anything here is missing.
	Totals map[string]TaskTotals `json:"totals"`
	// Plan is the last plan this instance computed as leader, if any.
	Plan *PlanStatus `json:"plan,omitempty"`
	// Plans are the recent plans this instance computed as leader, oldest
	// first (at most 20): a timeline misses none of the quick rounds of a
	// handover.
	Plans []PlanStatus `json:"plans,omitempty"`
	// WorkerRate is the records one worker of this instance processed
	// per second of busy time (time spent processing, not waiting for
	// input) over the last 30s, all workers together: the rate a fully
	// busy worker sustains. 0 until the workers processed something.
	WorkerRate float64 `json:"worker_rate"`
	// Autoscale is the group's recommended size with the figures it was
	// worked out from. Only the group's leader computes it (it alone
	// knows the members); nil on the other instances and until the
	// leader has read the input twice (a rate takes two reads).
	Autoscale *AutoscaleStatus `json:"autoscale,omitempty"`
	// GlobalStores are the instance's global stores
	// (topology.FromGlobalTopic), in the order the topology made them.
	GlobalStores []GlobalStoreStatus `json:"global_stores,omitempty"`
	// Restore is what this instance's stores restored from their
	// changelogs and how long its standbys' and learners' restores gave
	// way to busy active tasks.
	Restore RestoreStatus `json:"restore"`
}

// RestoreStatus is an instance's restores: what they read, how fast, and
// how long the restore governor held warm copies back (WithRestoreShare).
type RestoreStatus struct {
	// Records is the changelog records restored into this instance's
	// stores since it started, in every role: active tasks restoring
	// before they process, standbys and learners.
	Records int64 `json:"records"`
	// Rate is Records' growth per second over the last 30 s, as of the
	// instance's last read of its input's offsets (every few seconds).
	Rate float64 `json:"rate"`
	// YieldedSeconds is how long, in all, standbys' and learners'
	// restores waited because active tasks of the process had records
	// to process; the metric baton_restore_yielded_seconds_total counts
	// the same. Active tasks' restores never wait.
	YieldedSeconds float64 `json:"yielded_seconds"`
}

// InputLag is how far an active task is behind its input, and how fast
// its input arrives, as of the last read of its input partitions' end
// offsets (every few seconds).
type InputLag struct {
	// Records is, summed over the task's input partitions, the end offset
	// minus the task's position (the next offset it processes) as the read
	// began.
	Records int64 `json:"records"`
	// Seconds is 0 when Records is 0; otherwise the time of the read
	// minus the timestamp of the last record the task processed, or,
	// before it processed one since it became active here, minus the time
	// it became active.
	Seconds float64 `json:"seconds"`
	// Rate is the records per second arriving on the task's input
	// partitions, from their end offsets over the last 30s.
	Rate float64 `json:"rate"`
}

// AutoscaleStatus is the leader's recommendation for the group's size
// (package autoscale) and the observation it came from.
type AutoscaleStatus struct {
	// DesiredInstances is the number of instances the group should run:
	// a target, equal to Instances when the rule holds.
	DesiredInstances int `json:"desired_instances"`
	// Needed is what the latest observation alone calls for, before the
	// rule's windows confirm it.
	Needed int    `json:"needed"`
	Reason string `json:"reason"`
	// Time is when the observation was made.
	Time time.Time `json:"time"`
	// Instances is the members of the leader's last plan that are not
	// leaving (a draining instance is on its way out).
	Instances          int `json:"instances"`
	WorkersPerInstance int `json:"workers_per_instance"`
	// InputRate is the records per second arriving on all the group's
	// input partitions over the last 30s.
	InputRate float64 `json:"input_rate"`
	// WorkerRate is the leader's own Status.WorkerRate: the leader's
	// workers stand for every instance's.
	WorkerRate float64 `json:"worker_rate"`
	// Lag is the group's input lag: over all its input partitions, the
	// end offset minus the group's committed offset (or minus the
	// partition's start when nothing is committed). LagDraining says it
	// is lower than at the previous observation.
	Lag         int64 `json:"lag"`
	LagDraining bool  `json:"lag_draining"`
	// Moves is the learners and revoked tasks of the leader's last plan.
	Moves int `json:"moves"`
}

// TaskTotals are a task's counters in Status.Totals.
type TaskTotals struct {
	Processed int64 `json:"processed"`
	Restored  int64 `json:"restored"`
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
	// Waiting is, for an active task, how many records this instance
	// polled for it that wait to be processed (as counted after the last
	// poll or processing turn): records waiting while the task makes no
	// progress wait for the processor, none waiting means none came.
	Waiting int64 `json:"waiting,omitempty"`
	// Input is the task's input lag and rate, for an active task once
	// its input partitions' end offsets were read; nil otherwise.
	Input *InputLag `json:"input,omitempty"`
	// Unconfirmed marks an active task of an unconfirmed member
	// (Status.Unconfirmed): the group may have given it to another
	// instance already.
	Unconfirmed bool `json:"unconfirmed,omitempty"`
	// Load is the share of one worker's time the task's processing took
	// recently, smoothed over minutes (0.25 is a quarter of a worker),
	// for an active task measured here for 30s; for any other task, the
	// mean of the loads measured here of its subtopology's tasks, else of
	// all tasks measured here, else 1 (docs/assign.md, "Loads").
	Load float64 `json:"load"`
	// LoadReported is, for an active task, the load the instance reported
	// to the group at its last join: Load in steps of WithLoadStep, with
	// hysteresis. 0 when it reported none (not measured yet, or
	// WithLoadStep(0)).
	LoadReported float64 `json:"load_reported,omitempty"`
}

// PlanStatus is the leader's last plan with its explanation.
type PlanStatus struct {
	Generation int32                       `json:"generation"`
	Instances  []PlanInstance              `json:"instances"`
	Reasons    []string                    `json:"reasons"`
	Followup   bool                        `json:"followup"`
	Lags       map[string]map[string]int64 `json:"lags"`
	// Loads is the load of every task the leader planned with: what the
	// members reported for the tasks they run, and its estimate for the
	// others (docs/assign.md, "Loads").
	Loads map[string]float64 `json:"loads,omitempty"`
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

// GlobalStoreStatus is one global store as Status reports it.
type GlobalStoreStatus struct {
	Name  string `json:"name"`
	Topic string `json:"topic"`
	// Ready is true once the store has read its topic up to the end
	// offsets listed when Run started; no task processes before.
	Ready bool `json:"ready"`
	// Lag is the records of the topic the store has not read: each
	// partition's end offset, as last fetched, minus the store's offset,
	// summed over the partitions.
	Lag int64 `json:"lag"`
	// Read is the records this Run applied to the store (tombstones
	// included, transaction markers not).
	Read int64 `json:"read"`
}

// publicEvent is the runtime's event e as the API reports it.
func publicEvent(e engine.Event) Event {
	return Event{Time: e.Time, Kind: EventKind(e.Kind), Instance: e.Instance, Task: e.Task, Generation: e.Generation,
		Lag: e.Lag, Replayed: e.Replayed, Record: e.Record, Detail: e.Detail}
}

// publicStatus is the runtime's status s as the API reports it. The
// types of both have the same fields, which the conversions check.
func publicStatus(s engine.Status) Status {
	st := Status{AppID: s.AppID, Instance: s.Instance, Generation: s.Generation, Leader: s.Leader, Workers: s.Workers,
		Leaving: s.Leaving, Unconfirmed: s.Unconfirmed, ConfirmedAt: s.ConfirmedAt, PolledAt: s.PolledAt, Polling: s.Polling, WorkerRate: s.WorkerRate,
		Tasks: make([]TaskStatus, 0, len(s.Tasks))}
	for _, t := range s.Tasks {
		ts := TaskStatus{ID: t.ID, Role: t.Role, Lag: t.Lag, Processed: t.Processed, Restored: t.Restored, Waiting: t.Waiting, Unconfirmed: t.Unconfirmed,
			Load: t.Load, LoadReported: t.LoadReported}
		if t.Input != nil {
			in := InputLag(*t.Input)
			ts.Input = &in
		}
		st.Tasks = append(st.Tasks, ts)
	}
	if s.Totals != nil {
		st.Totals = make(map[string]TaskTotals, len(s.Totals))
		for id, c := range s.Totals {
			st.Totals[id] = TaskTotals(c)
		}
	}
	if s.Plan != nil {
		p := publicPlan(*s.Plan)
		st.Plan = &p
	}
	for _, p := range s.Plans {
		st.Plans = append(st.Plans, publicPlan(p))
	}
	if s.Autoscale != nil {
		as := AutoscaleStatus(*s.Autoscale)
		st.Autoscale = &as
	}
	for _, g := range s.GlobalStores {
		st.GlobalStores = append(st.GlobalStores, GlobalStoreStatus(g))
	}
	st.Restore = RestoreStatus(s.Restore)
	return st
}

func publicPlan(p engine.PlanStatus) PlanStatus {
	out := PlanStatus{Generation: p.Generation, Reasons: p.Reasons, Followup: p.Followup, Lags: p.Lags, Loads: p.Loads}
	if p.Instances != nil {
		out.Instances = make([]PlanInstance, 0, len(p.Instances))
	}
	for _, in := range p.Instances {
		out.Instances = append(out.Instances, PlanInstance(in))
	}
	return out
}

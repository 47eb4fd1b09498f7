package instance

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/baton-streams/baton/lifecycle"
)

// Input is something that happened to the instance.
type Input interface{ input() }

// Assignment is the group's assignment for this member: its standbys and
// learners (actives arrive as Assigned, with their partitions).
type Assignment struct {
	Active, Standby, Learner []string
	// Followup: the plan revoked tasks this round to assign them in the
	// next.
	Followup bool
	// Generation of the assignment, and the last generation this member
	// led (0: never).
	Generation, LedGeneration int32
	// Subscribed is the lag of each task as this member's subscription
	// for the round reported it (UnknownLag, or absent, when it reported
	// none); nil when the subscription is not known.
	Subscribed map[string]int64
}

// Assigned: the partitions of these tasks were assigned to this member.
// Request is answered (a Reply effect) once they are started.
type Assigned struct {
	Tasks   []string
	Request int
}

// Revoked: the partitions of these tasks are revoked. Request is answered
// once their work is committed and they are closed.
type Revoked struct {
	Tasks   []string
	Request int
}

// Lost: the partitions of these tasks were lost (the session expired).
type Lost struct {
	Tasks   []string
	Request int
	// Abort, when not 0, is the committer's abort of the transaction
	// open at the loss (exactly-once): the answer waits until it is done
	// (Aborted), so that the tasks' next owners find it ended.
	Abort int
}

// Aborted: the committer's abort Seq, asked for at a loss (Lost.Abort),
// is done.
type Aborted struct {
	Seq int
}

// Opened: a task's stores were opened (OpenStores), with each store's
// checkpoint and the changelog end offsets read after the open (a store
// missing from Ends: its end could not be read). Err says the open
// failed.
type Opened struct {
	Task        string
	Checkpoints map[string]int64
	Ends        map[string]int64
	Err         string
}

// Progress: changelog records were applied to a restoring store, up to
// Checkpoint; End is the changelog's end offset the fetch reported (-1:
// none).
type Progress struct {
	Task, Store     string
	Checkpoint, End int64
}

// Ends: changelog end offsets read for a ReadEnds effect with Seq; Failed
// lists the stores whose end could not be read.
type Ends struct {
	Seq    int
	Ends   map[Key]int64
	Failed []Key
}

// CommitDone: the commit with Seq finished; Err is empty when it succeeded.
// Checkpoints are the stores' checkpoints after it.
type CommitDone struct {
	Seq         int
	Err         string
	Checkpoints map[string]map[string]int64
}

// Tick: time passed (one tick).
type Tick struct{}

// Stop: the instance was asked to stop: drain and leave, or, with
// Restart, stop without leaving the group (a static member's restart).
type Stop struct{ Restart bool }

// LeaveNow: a draining instance leaves at once.
type LeaveNow struct{}

// Led: this member led a round. AllLeaving: every instance in the plan is
// leaving, so no task can move. FollowupWithoutMoves: the plan needs a
// follow-up round that no revoke triggers.
type Led struct {
	AllLeaving, FollowupWithoutMoves bool
}

// RolledBack: an aborted transaction's work was rolled back (exactly-once:
// the active tasks' pending writes and offsets are gone). Their input
// must go back to the last commit before more is processed or committed.
type RolledBack struct{}

// Polled: a poll of the input came back.
type Polled struct{}

// Rewound: the rewind (Rewind) ended; Err, when not empty, says it failed
// and is tried again.
type Rewound struct{ Err string }

func (Assignment) input() {}
func (Assigned) input()   {}
func (Revoked) input()    {}
func (Lost) input()       {}
func (Aborted) input()    {}
func (Opened) input()     {}
func (Progress) input()   {}
func (Ends) input()       {}
func (CommitDone) input() {}
func (Tick) input()       {}
func (Stop) input()       {}
func (LeaveNow) input()   {}
func (Led) input()        {}
func (RolledBack) input() {}
func (Polled) input()     {}
func (Rewound) input()    {}

// Effect is an action for the runtime: one of the types below. String
// renders it for traces and logs.
type Effect interface {
	effect()
	String() string
}

// OpenStores opens Task's stores; the runtime answers with Opened.
type OpenStores struct{ Task string }

// CloseStores closes Task's stores, leaving its state on disk.
type CloseStores struct{ Task string }

// Forget: Task is no longer here. Its stores are closed (a CloseStores
// came first) or it had none; the runtime drops its half of the task,
// keeping its totals.
type Forget struct{ Task string }

// StartRestore makes the changelog reader read Task's changelogs from
// Checkpoints (by store); the runtime reports what it applies as
// Progress.
type StartRestore struct {
	Task        string
	Checkpoints map[string]int64
}

// StopRestore ends a StartRestore.
type StopRestore struct{ Task string }

// PauseInput pauses Task's input.
type PauseInput struct{ Task string }

// ResumeInput resumes Task's input.
type ResumeInput struct{ Task string }

// StartProcessor creates Task's processor: it runs once Running says so.
type StartProcessor struct{ Task string }

// Commit makes the work of Tasks durable (Final: a revoke or the end
// waits for it); the runtime answers with CommitDone{Seq}.
type Commit struct {
	Seq   int
	Tasks []string
	Final bool
}

// ReadEnds reads the changelog end offsets of Tasks' stores; the runtime
// answers with Ends{Seq}.
type ReadEnds struct {
	Seq   int
	Tasks []string
}

// Rejoin asks the group for a rebalance, for the reason Why.
type Rejoin struct{ Why string }

// Reply answers the rebalance callback waiting on Request.
type Reply struct{ Request int }

// Publish replaces what the subscription and status report.
type Publish struct{ Snapshot *Snapshot }

// Leave commits and leaves the group: the drain is over.
type Leave struct{}

// StopForRestart commits and stops without leaving the group.
type StopForRestart struct{}

// Fail stops the instance with the error Err.
type Fail struct{ Err string }

// Notify is a Note for logs, metrics and listeners.
type Notify struct{ Note Note }

// Poll asks for the input.
type Poll struct{}

// Rewind sets the active tasks' input back to the last commit: the
// records of the poll that just came back are dropped (they follow work
// that is gone), and the rewind starts once the stores' writes under way
// are done; the runtime answers with Rewound.
type Rewind struct{}

func (Poll) effect()           {}
func (Rewind) effect()         {}
func (OpenStores) effect()     {}
func (CloseStores) effect()    {}
func (Forget) effect()         {}
func (StartRestore) effect()   {}
func (StopRestore) effect()    {}
func (PauseInput) effect()     {}
func (ResumeInput) effect()    {}
func (StartProcessor) effect() {}
func (Commit) effect()         {}
func (ReadEnds) effect()       {}
func (Rejoin) effect()         {}
func (Reply) effect()          {}
func (Publish) effect()        {}
func (Leave) effect()          {}
func (StopForRestart) effect() {}
func (Fail) effect()           {}
func (Notify) effect()         {}

func (e OpenStores) String() string     { return "open-stores " + e.Task }
func (e CloseStores) String() string    { return "close-stores " + e.Task }
func (e Forget) String() string         { return "forget " + e.Task }
func (e StopRestore) String() string    { return "stop-restore " + e.Task }
func (e PauseInput) String() string     { return "pause-input " + e.Task }
func (e ResumeInput) String() string    { return "resume-input " + e.Task }
func (e StartProcessor) String() string { return "start-processor " + e.Task }
func (e Rejoin) String() string         { return "rejoin (" + e.Why + ")" }
func (e Reply) String() string          { return fmt.Sprintf("reply req=%d", e.Request) }
func (e Publish) String() string        { return "publish " + e.Snapshot.String() }
func (Leave) String() string            { return "leave" }
func (StopForRestart) String() string   { return "stop-for-restart" }
func (e Fail) String() string           { return "fail (" + e.Err + ")" }
func (Poll) String() string             { return "poll" }
func (Rewind) String() string           { return "rewind" }

func (e StartRestore) String() string {
	var b strings.Builder
	b.WriteString("start-restore " + e.Task)
	for _, s := range slices.Sorted(maps.Keys(e.Checkpoints)) {
		fmt.Fprintf(&b, " %s@%d", s, e.Checkpoints[s])
	}
	return b.String()
}

func (e Commit) String() string {
	s := withTasks("commit", e.Tasks) + fmt.Sprintf(" seq=%d", e.Seq)
	if e.Final {
		s += " final"
	}
	return s
}

func (e ReadEnds) String() string {
	return withTasks("read-ends", e.Tasks) + fmt.Sprintf(" seq=%d", e.Seq)
}

func withTasks(s string, tasks []string) string {
	if len(tasks) > 0 {
		s += " " + strings.Join(tasks, ",")
	}
	return s
}

func (e Notify) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "note %s", e.Note.Kind)
	if e.Note.Task != "" {
		fmt.Fprintf(&b, " %s", e.Note.Task)
	}
	if e.Note.Lag == UnknownLag {
		b.WriteString(" lag=?")
	} else if e.Note.Lag != 0 {
		fmt.Fprintf(&b, " lag=%d", e.Note.Lag)
	}
	if e.Note.Count != 0 {
		fmt.Fprintf(&b, " count=%d", e.Note.Count)
	}
	if e.Note.Detail != "" {
		fmt.Fprintf(&b, " (%s)", e.Note.Detail)
	}
	return b.String()
}

// NoteKind is the kind of a Note.
type NoteKind int

// Notes.
const (
	NoteStandby NoteKind = iota
	NoteLearner
	NoteLearnerReady
	NoteFellBehind
	NoteAssigned
	NoteRestored
	NoteRevoked
	NoteLost
	NoteCommitFailed
	NoteCannotStart
	NoteEndUnknown
	NoteLeaving
	NoteLeaveEarly
)

func (k NoteKind) String() string {
	return [...]string{"standby", "learner", "learner-ready", "fell-behind", "assigned", "restored", "revoked", "lost",
		"commit-failed", "cannot-start", "end-unknown", "leaving", "leave-early"}[k]
}

// Note is something worth telling: the runtime logs it, counts it and
// emits it to listeners.
type Note struct {
	Kind   NoteKind
	Task   string
	Lag    int64
	Count  int
	Detail string
}

// Snapshot is what the instance reports: the subscription's standbys,
// learners and lags, and every task with its role and lag.
type Snapshot struct {
	Standby, Learner []string
	Lags             map[string]int64
	Tasks            []TaskView
	Leaving          bool
}

// TaskView is one task as reported.
type TaskView struct {
	ID    string
	State lifecycle.State
	Lag   int64 // 0 for stateless tasks
}

func (c *Core) snapshot() *Snapshot {
	s := &Snapshot{Lags: map[string]int64{}, Leaving: c.leaving}
	for id, stores := range c.disk {
		if lag := c.diskLag(id, stores); lag != UnknownLag {
			s.Lags[id] = lag
		}
	}
	for _, id := range slices.Sorted(maps.Keys(c.tasks)) {
		t := c.tasks[id]
		lag := int64(0)
		if t.stateful() {
			lag = c.lag(t)
			s.Lags[id] = lag
		}
		switch t.life.Role {
		case lifecycle.Standby:
			s.Standby = append(s.Standby, id)
		case lifecycle.Learner:
			s.Learner = append(s.Learner, id)
		}
		s.Tasks = append(s.Tasks, TaskView{ID: id, State: t.life, Lag: lag})
	}
	return s
}

func (c *Core) publishIfChanged() {
	s := c.snapshot()
	key := s.String()
	if key == c.published {
		return
	}
	c.published = key
	c.emit(Publish{Snapshot: s})
}

// String is a one-line rendering for traces.
func (s *Snapshot) String() string {
	var b strings.Builder
	for i, t := range s.Tasks {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%s/%s", t.ID, t.State.Role, t.State.Phase)
		if t.State.Ready {
			b.WriteString("/ready")
		}
		if t.Lag == UnknownLag {
			b.WriteString("(lag ?)")
		} else if t.Lag != 0 {
			fmt.Fprintf(&b, "(lag %d)", t.Lag)
		}
	}
	var disk []string
	for _, id := range slices.Sorted(maps.Keys(s.Lags)) {
		if !slices.ContainsFunc(s.Tasks, func(t TaskView) bool { return t.ID == id }) {
			disk = append(disk, fmt.Sprintf("%s(lag %d)", id, s.Lags[id]))
		}
	}
	if len(disk) > 0 {
		fmt.Fprintf(&b, " disk: %s", strings.Join(disk, " "))
	}
	if s.Leaving {
		b.WriteString(" leaving")
	}
	if b.Len() == 0 {
		return "nothing"
	}
	return strings.TrimSpace(b.String())
}

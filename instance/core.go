// Package instance holds the decisions of one baton instance as a pure
// state machine, in the manner of etcd raft's RawNode: the runtime (package
// baton) steps it with what happened (Step) and carries out the effects it
// asks for (Ready), in order. The core owns the lifecycle of every task
// the instance holds (package lifecycle), the lags it reports, when to
// commit, rejoin, drain and leave. It has no goroutines, clock or I/O: time
// arrives as Tick inputs, and every read or write of the cluster or the
// disk is an effect whose result comes back as an input.
//
// A step never blocks and never fails: an input that does not apply (a
// revoke of a task this instance does not run, a store opened for a task
// that was dropped meanwhile) is ignored or reported as a Note.
package instance

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/baton-streams/baton/lifecycle"
)

// UnknownLag is the lag of a task whose changelog end is not known: behind
// by an unknown amount, never caught up.
const UnknownLag = math.MaxInt64

// Config is what the core decides with.
type Config struct {
	// AcceptableLag is how far behind its changelog a learner may be and
	// still be ready to take its task over.
	AcceptableLag int64
	// CommitTicks is the number of ticks between periodic commits;
	// LagTicks between reads of the changelog end offsets; DrainTicks is
	// how many ticks a drain may take before the instance leaves anyway.
	CommitTicks, LagTicks, DrainTicks int
	// Stores names the stores of a task (none: stateless), or returns an
	// error for a task id this instance does not know.
	Stores func(task string) ([]string, error)
}

// Key names one store of one task.
type Key struct {
	Task, Store string
}

// Core is one instance's decisions. The zero value is not usable; see New.
type Core struct {
	cfg   Config
	tasks map[string]*task
	// rejoins are the step's rebalances asked for, emitted after its
	// Publish (Step).
	rejoins []Effect
	// disk holds the checkpoints of state left on disk for tasks not open.
	disk map[string]map[string]int64
	// ends holds the changelog end offsets known, per store.
	ends map[Key]int64

	asg        *Assignment
	ticks      int
	lastCommit int
	lastEnds   int
	endsSeq    int
	commitSeq  int
	// commits in flight: seq -> revoke requests answered when it is done.
	commits map[int][]int
	// aborting holds, per abort of the committer (Lost.Abort), the
	// requests answered once it is done.
	aborting map[int][]int
	// revoking holds tasks revoked and waiting for their commit.
	revoking map[string]int

	// rewind is where the input's way back after a rollback is;
	// rewindAgain: a rollback came while it ran.
	rewind      RewindState
	rewindAgain bool

	leaving    bool
	drainStart int
	left       bool
	allLeaving bool
	fx         []Effect
	published  string // the last Snapshot published, rendered
}

type task struct {
	id     string
	stores []string
	life   lifecycle.State
	cp     map[string]int64 // store -> checkpoint (next changelog offset the store lacks)
	// opening: stores are being opened; the lifecycle effects after
	// OpenStores wait in deferred until they are.
	opening  bool
	deferred []lifecycle.Effect
	// freshFrom: a promoted copy is caught up only against an end offset
	// read after its promotion (endsSeq >= freshFrom).
	freshFrom int
	fresh     bool
}

// New returns a Core with the state found on disk at start: per task, the
// checkpoint of each store.
func New(cfg Config, disk map[string]map[string]int64) *Core {
	c := &Core{cfg: cfg, tasks: map[string]*task{}, disk: map[string]map[string]int64{}, ends: map[Key]int64{},
		commits: map[int][]int{}, aborting: map[int][]int{}, revoking: map[string]int{}}
	for id, stores := range disk {
		c.disk[id] = maps.Clone(stores)
	}
	c.publishIfChanged()
	return c
}

// Ready returns the effects asked for since the last call, in order, and
// forgets them (raft's Ready and Advance in one).
func (c *Core) Ready() []Effect {
	fx := c.fx
	c.fx = nil
	return fx
}

// Running reports whether task is active and processing here: records of
// other tasks are not processed (the runtime drops them).
func (c *Core) Running(id string) bool {
	t, ok := c.tasks[id]
	_, revoking := c.revoking[id]
	return ok && t.life.Phase == lifecycle.Running && !revoking
}

// Active lists the tasks whose input this instance owns, sorted.
func (c *Core) Active() []string {
	var out []string
	for id, t := range c.tasks {
		if t.life.Role == lifecycle.Active {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Role returns a task's lifecycle state here (the zero State if it is not
// held).
func (c *Core) Role(id string) lifecycle.State {
	if t, ok := c.tasks[id]; ok {
		return t.life
	}
	return lifecycle.State{}
}

// RewindState is where an instance's input is on its way back to the
// last commit after a rollback (exactly-once).
type RewindState int

const (
	// RewindNone: no rollback waits for its rewind.
	RewindNone RewindState = iota
	// RewindDue: rolled back; the rewind starts when the next poll comes
	// back. Nothing may be committed.
	RewindDue
	// RewindRunning: the rewind runs. Nothing may be processed or
	// committed, no poll is asked for, and rebalance callbacks wait: the
	// rewind writes the active tasks' stores and sets their offsets.
	RewindRunning
)

func (r RewindState) String() string {
	return [...]string{"none", "due", "running"}[r]
}

// Rewind says where the input's rewind after a rollback is.
func (c *Core) Rewind() RewindState { return c.rewind }

// Step applies one input.
func (c *Core) Step(in Input) {
	switch in := in.(type) {
	case Assignment:
		c.assignment(in)
	case Assigned:
		c.assigned(in.Tasks)
		c.emit(Reply{Request: in.Request})
	case Revoked:
		c.revoked(in)
	case Lost:
		c.lost(in.Tasks)
		if in.Abort != 0 {
			c.aborting[in.Abort] = append(c.aborting[in.Abort], in.Request)
		} else {
			c.emit(Reply{Request: in.Request})
		}
	case Aborted:
		for _, r := range c.aborting[in.Seq] {
			c.emit(Reply{Request: r})
		}
		delete(c.aborting, in.Seq)
	case Opened:
		c.opened(in)
	case Progress:
		c.progress(in)
	case Ends:
		c.endsRead(in)
	case CommitDone:
		c.commitDone(in)
	case Tick:
		c.tick()
	case Stop:
		c.stop(in)
	case LeaveNow:
		if c.leaving && !c.left {
			c.note(Note{Kind: NoteLeaveEarly, Count: len(c.Active()), Detail: "asked to leave now"})
			c.leave()
		}
	case RolledBack:
		// The rewind waits for a poll: records fetched before the
		// rollback must not be processed after it.
		switch c.rewind {
		case RewindNone:
			c.rewind = RewindDue
			c.emit(Poll{})
		case RewindRunning:
			c.rewindAgain = true // it may have read offsets from before
		}
	case Polled:
		if c.rewind != RewindDue {
			return // nothing changes: polls come often
		}
		c.rewind = RewindRunning
		c.emit(Rewind{})
	case Rewound:
		if c.rewind != RewindRunning {
			break
		}
		c.rewind = RewindNone
		if in.Err != "" || c.rewindAgain {
			c.rewind = RewindDue // again after the next poll
		}
		c.rewindAgain = false
		c.emit(Poll{})
	case Led:
		c.allLeaving = in.AllLeaving
		if in.FollowupWithoutMoves {
			// A follow-up round nobody triggers by revoking: ask for it.
			c.rejoin(Rejoin{Why: "follow-up round"})
		}
	default:
		panic(fmt.Sprintf("instance: unknown input %T", in))
	}
	c.progressAll()
	c.publishIfChanged()
	// A rejoin goes after the state it reports: the group reads this
	// member's subscription from the published snapshot as soon as the
	// rejoin starts, so a Publish after it could come too late, and the
	// round would not see the instance leaving or its learner ready.
	c.fx = append(c.fx, c.rejoins...)
	c.rejoins = c.rejoins[:0]
}

func (c *Core) emit(e Effect) { c.fx = append(c.fx, e) }

// rejoin asks for a rebalance once the step's state is published (Step).
func (c *Core) rejoin(r Rejoin) { c.rejoins = append(c.rejoins, r) }

func (c *Core) note(n Note) { c.emit(Notify{Note: n}) }

func (c *Core) newTask(id string) (*task, error) {
	stores, err := c.cfg.Stores(id)
	if err != nil {
		return nil, err
	}
	return &task{id: id, stores: stores, cp: map[string]int64{}}, nil
}

func (t *task) stateful() bool { return len(t.stores) > 0 }

// lag is how far the task's stores are behind their changelogs.
func (c *Core) lag(t *task) int64 {
	var l int64
	for _, s := range t.stores {
		end, ok := c.ends[Key{t.id, s}]
		if !ok || t.opening {
			return UnknownLag
		}
		l = max(l, end-t.cp[s])
	}
	return max(l, 0)
}

// diskLag is the lag of state on disk with checkpoints cps (none: an
// empty store), against the changelog ends known; UnknownLag when an end
// is not known.
func (c *Core) diskLag(id string, cps map[string]int64) int64 {
	stores, err := c.cfg.Stores(id)
	if err != nil {
		return UnknownLag
	}
	var l int64
	for _, s := range stores {
		end, ok := c.ends[Key{id, s}]
		if !ok {
			return UnknownLag
		}
		l = max(l, end-cps[s])
	}
	return max(l, 0)
}

// step moves a task through its lifecycle and emits the effects. Effects
// after OpenStores wait until the stores are open.
func (c *Core) step(t *task, ev lifecycle.Event) error {
	if ev == lifecycle.AssignActive && t.life.Phase == lifecycle.Replicating {
		// A promoted copy is caught up only against an end read after the
		// promotion: the old owner's last writes may not be in the end
		// offsets known now.
		t.freshFrom, t.fresh = c.endsSeq+1, false
		c.endsSeq++
		c.emit(ReadEnds{Seq: c.endsSeq, Tasks: []string{t.id}})
	}
	next, fx, err := lifecycle.Step(t.life, ev, t.stateful())
	if err != nil {
		return fmt.Errorf("task %s: %w", t.id, err)
	}
	t.life = next
	for i, e := range fx {
		if e == lifecycle.OpenStores {
			// The rest waits for the stores, except pausing the input:
			// records must not pile up while they open.
			t.opening = true
			c.emit(OpenStores{Task: t.id})
			for _, d := range fx[i+1:] {
				if d == lifecycle.PauseInput {
					c.lifecycleEffect(t, d)
				} else {
					t.deferred = append(t.deferred, d)
				}
			}
			return nil
		}
		c.lifecycleEffect(t, e)
	}
	return nil
}

func (c *Core) lifecycleEffect(t *task, e lifecycle.Effect) {
	switch e {
	case lifecycle.StartReading:
		c.emit(StartRestore{Task: t.id, Checkpoints: maps.Clone(t.cp)})
	case lifecycle.StopReading:
		c.emit(StopRestore{Task: t.id})
	case lifecycle.PauseInput:
		c.emit(PauseInput{Task: t.id})
	case lifecycle.ResumeInput:
		c.emit(ResumeInput{Task: t.id})
	case lifecycle.StartProcessor:
		c.emit(StartProcessor{Task: t.id})
	case lifecycle.CloseStores:
		c.emit(CloseStores{Task: t.id})
		if !t.opening && t.stateful() {
			c.disk[t.id] = maps.Clone(t.cp)
		}
	case lifecycle.ReportReady:
		c.note(Note{Kind: NoteLearnerReady, Task: t.id, Lag: c.lag(t)})
		c.rejoin(Rejoin{Why: "learner ready"})
	}
}

// assignment: standbys and learners follow the assignment; actives come
// and go with their partitions (Assigned, Revoked, Lost).
func (c *Core) assignment(a Assignment) {
	c.asg = &a
	if a.Generation != 0 && a.Generation != a.LedGeneration {
		c.allLeaving = false
	}
	want := map[string]lifecycle.Event{}
	for _, id := range a.Standby {
		want[id] = lifecycle.AssignStandby
	}
	for _, id := range a.Learner {
		want[id] = lifecycle.AssignLearner
	}
	for _, id := range slices.Sorted(maps.Keys(c.tasks)) {
		t := c.tasks[id]
		if t.life.Role == lifecycle.Active {
			continue
		}
		ev, keep := want[id]
		switch {
		case keep:
			if (ev == lifecycle.AssignLearner) != (t.life.Role == lifecycle.Learner) {
				_ = c.step(t, ev)
			}
		case slices.Contains(a.Active, id):
			// About to be promoted by Assigned: keep it warm.
		case t.life.Role == lifecycle.Learner && a.Followup:
			// Its task may have been revoked for it this round, to be
			// assigned in the follow-up: keep reading the owner's last
			// writes (even if they put it past the acceptable lag for a
			// moment) until the follow-up says.
		default:
			_ = c.step(t, lifecycle.Unassign)
			c.drop(t)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(want)) {
		if _, ok := c.tasks[id]; ok {
			continue
		}
		t, err := c.newTask(id)
		if err == nil {
			t.cp = maps.Clone(c.disk[id])
			if t.cp == nil {
				t.cp = map[string]int64{}
			}
			err = c.step(t, want[id])
		}
		if err != nil {
			c.note(Note{Kind: NoteCannotStart, Task: id, Detail: err.Error()})
			continue
		}
		c.tasks[id] = t
		delete(c.disk, id)
		kind := NoteStandby
		if t.life.Role == lifecycle.Learner {
			kind = NoteLearner
		}
		c.note(Note{Kind: kind, Task: id, Lag: c.lag(t)})
	}
	c.readyAfterSubscribing(a)
}

// readyAfterSubscribing asks for another round when the assignment keeps
// a learner that is ready here but was not when this member's
// subscription for the round was made: the learner's "learner ready"
// rejoin came while that subscription was on its way and was spent on
// the round, which saw the old lag. Without this the learner would wait
// for whatever rebalance came next. A follow-up round is coming anyway,
// and the subscription made for the next round reports the lag that is
// now acceptable, so this asks once per round.
func (c *Core) readyAfterSubscribing(a Assignment) {
	if a.Followup || a.Subscribed == nil {
		return
	}
	for _, id := range a.Learner {
		t, ok := c.tasks[id]
		if !ok || !t.life.Ready {
			continue
		}
		if lag, sent := a.Subscribed[id]; !sent || lag == UnknownLag || lag > c.cfg.AcceptableLag {
			c.rejoin(Rejoin{Why: "learner " + id + " ready after its subscription was sent"})
			return
		}
	}
}

// assigned starts the tasks whose partitions this member now owns.
func (c *Core) assigned(ids []string) {
	for _, id := range sortedUnique(ids) {
		t, held := c.tasks[id]
		if held && t.life.Role == lifecycle.Active {
			continue
		}
		if !held {
			var err error
			if t, err = c.newTask(id); err != nil {
				c.emit(Fail{Err: err.Error()})
				return
			}
			if cp, ok := c.disk[id]; ok {
				t.cp = maps.Clone(cp)
			}
		}
		warm := held && t.stateful()
		if err := c.step(t, lifecycle.AssignActive); err != nil {
			c.emit(Fail{Err: err.Error()})
			return
		}
		c.tasks[id] = t
		delete(c.disk, id)
		how := "cold"
		switch {
		case !t.stateful():
			how = "stateless"
		case warm:
			how = "warm"
		}
		lag := c.lag(t)
		if t.opening {
			lag = c.diskLag(id, t.cp)
		}
		c.note(Note{Kind: NoteAssigned, Task: id, Lag: lag, Detail: how})
	}
}

// revoked commits the running tasks given up, answers the request once
// the commit is done, then closes them: revoked, or lost if the commit
// failed. Tasks not running close at once.
func (c *Core) revoked(r Revoked) {
	var commit []string
	for _, id := range sortedUnique(r.Tasks) {
		t, ok := c.tasks[id]
		if !ok || t.life.Role != lifecycle.Active {
			continue
		}
		if _, already := c.revoking[id]; already {
			continue
		}
		if t.life.Phase == lifecycle.Running {
			commit = append(commit, id)
			continue
		}
		c.close(t, lifecycle.Revoke)
	}
	if len(commit) == 0 {
		c.emit(Reply{Request: r.Request})
		return
	}
	seq := c.startCommit(commit, true)
	for _, id := range commit {
		c.revoking[id] = seq
	}
	c.commits[seq] = append(c.commits[seq], r.Request)
}

// close ends an active task's life here after ev (Revoke or Lose).
func (c *Core) close(t *task, ev lifecycle.Event) {
	if ev == lifecycle.Revoke && t.life.Phase == lifecycle.Running {
		c.note(Note{Kind: NoteRevoked, Task: t.id})
	}
	if err := c.step(t, ev); err != nil {
		c.note(Note{Kind: NoteCannotStart, Task: t.id, Detail: err.Error()})
	}
	if ev == lifecycle.Lose {
		c.note(Note{Kind: NoteLost, Task: t.id})
	}
	c.drop(t)
	delete(c.revoking, t.id)
}

// drop ends a task's life here. The runtime forgets it now, or, while its
// stores are being opened, once the open is back (opened).
func (c *Core) drop(t *task) {
	delete(c.tasks, t.id)
	if !t.opening {
		c.emit(Forget{Task: t.id})
	}
}

// lost drops tasks whose partitions were lost: nothing is committed, the
// new owner replays.
func (c *Core) lost(ids []string) {
	for _, id := range sortedUnique(ids) {
		if t, ok := c.tasks[id]; ok && t.life.Role == lifecycle.Active {
			c.close(t, lifecycle.Lose)
		}
	}
}

// startCommit commits tasks. A periodic commit (not final) restarts the
// commit interval; the final commit of revoked tasks does not, for it
// leaves the tasks that stay uncommitted.
func (c *Core) startCommit(tasks []string, final bool) int {
	c.commitSeq++
	c.commits[c.commitSeq] = nil
	if !final {
		c.lastCommit = c.ticks
	}
	c.emit(Commit{Seq: c.commitSeq, Tasks: tasks, Final: final})
	return c.commitSeq
}

func (c *Core) commitDone(d CommitDone) {
	reqs, ok := c.commits[d.Seq]
	if !ok {
		return
	}
	delete(c.commits, d.Seq)
	if d.Err != "" {
		c.note(Note{Kind: NoteCommitFailed, Detail: d.Err})
	}
	// A revoked task whose final commit failed was given up without a
	// commit: it is lost (its next owner does its work since the last
	// commit again), not revoked.
	ev := lifecycle.Revoke
	if d.Err != "" {
		ev = lifecycle.Lose
	}
	for _, id := range slices.Sorted(maps.Keys(c.revoking)) {
		if c.revoking[id] != d.Seq {
			continue
		}
		for s, cp := range d.Checkpoints[id] {
			c.tasks[id].cp[s] = cp
		}
		c.close(c.tasks[id], ev)
	}
	for id, stores := range d.Checkpoints {
		if t, ok := c.tasks[id]; ok {
			maps.Copy(t.cp, stores)
		}
	}
	for _, r := range reqs {
		c.emit(Reply{Request: r})
	}
}

func (c *Core) opened(o Opened) {
	t, ok := c.tasks[o.Task]
	if !ok {
		// Dropped while opening: close what was opened.
		if o.Err == "" {
			c.emit(CloseStores{Task: o.Task})
		}
		c.emit(Forget{Task: o.Task})
		return
	}
	if !t.opening {
		return
	}
	t.opening = false
	if o.Err != "" {
		if t.life.Role == lifecycle.Active {
			c.emit(Fail{Err: fmt.Sprintf("task %s: opening its stores: %s", t.id, o.Err)})
		} else {
			c.note(Note{Kind: NoteCannotStart, Task: t.id, Detail: o.Err})
		}
		c.drop(t)
		return
	}
	t.cp = maps.Clone(o.Checkpoints)
	if t.cp == nil {
		t.cp = map[string]int64{}
	}
	for s, end := range o.Ends {
		c.ends[Key{t.id, s}] = end
	}
	// The ends were read after the assignment: fresh.
	t.fresh = len(o.Ends) == len(t.stores)
	fx := t.deferred
	t.deferred = nil
	for _, e := range fx {
		c.lifecycleEffect(t, e)
	}
}

func (c *Core) progress(p Progress) {
	t, ok := c.tasks[p.Task]
	if !ok || t.opening {
		return
	}
	t.cp[p.Store] = max(t.cp[p.Store], p.Checkpoint)
	k := Key{p.Task, p.Store}
	if p.End >= 0 {
		c.ends[k] = max(c.ends[k], p.End)
	}
	if e, ok := c.ends[k]; ok && t.cp[p.Store] > e {
		c.ends[k] = t.cp[p.Store]
	}
}

func (c *Core) endsRead(e Ends) {
	for k, end := range e.Ends {
		c.ends[k] = end
	}
	// An end that could not be read stays unknown (or at its last known
	// value, a lower bound): a copy is never taken for caught up on it.
	for _, k := range e.Failed {
		if t, ok := c.tasks[k.Task]; ok && t.life.Phase != lifecycle.Running {
			c.note(Note{Kind: NoteEndUnknown, Task: k.Task, Detail: k.Store})
		}
	}
	for _, t := range c.tasks {
		if !t.fresh && t.freshFrom > 0 && e.Seq >= t.freshFrom && t.readAll(e) {
			t.fresh = true
		}
	}
}

// readAll reports whether e holds an end for every store of t.
func (t *task) readAll(e Ends) bool {
	for _, s := range t.stores {
		if _, ok := e.Ends[Key{t.id, s}]; !ok {
			return false
		}
	}
	return true
}

// progressAll acts on lags: a restored active runs, a learner within the
// acceptable lag is ready, a ready learner that fell behind is not.
func (c *Core) progressAll() {
	for _, id := range slices.Sorted(maps.Keys(c.tasks)) {
		t := c.tasks[id]
		if !t.stateful() || t.opening {
			continue
		}
		lag := c.lag(t)
		switch {
		case t.life.Phase == lifecycle.Restoring && lag == 0 && (t.fresh || t.freshFrom == 0):
			_ = c.step(t, lifecycle.CaughtUp)
			c.note(Note{Kind: NoteRestored, Task: id})
		case t.life.Role == lifecycle.Learner && !t.life.Ready && lag <= c.cfg.AcceptableLag:
			_ = c.step(t, lifecycle.CaughtUp)
		case t.life.Role == lifecycle.Learner && t.life.Ready && lag > c.cfg.AcceptableLag:
			_ = c.step(t, lifecycle.FellBehind)
			c.note(Note{Kind: NoteFellBehind, Task: id, Lag: lag})
		}
	}
}

func (c *Core) tick() {
	c.ticks++
	if c.leaving && !c.left {
		active := len(c.Active())
		timedOut := c.ticks-c.drainStart >= c.cfg.DrainTicks
		if active == 0 || timedOut || c.allLeaving {
			if active > 0 {
				why := "drain timed out"
				if !timedOut {
					why = "every instance is leaving"
				}
				c.note(Note{Kind: NoteLeaveEarly, Count: active, Detail: why})
			}
			c.leave()
			return
		}
	}
	if c.ticks-c.lastCommit >= c.cfg.CommitTicks && len(c.commits) == 0 {
		var running []string
		for _, id := range c.Active() {
			if c.Running(id) {
				running = append(running, id)
			}
		}
		if len(running) > 0 {
			c.startCommit(running, false)
		} else {
			c.lastCommit = c.ticks
		}
	}
	if c.ticks-c.lastEnds >= c.cfg.LagTicks {
		c.lastEnds = c.ticks
		var ids []string
		for id, t := range c.tasks {
			if t.stateful() && t.life.Phase != lifecycle.Running && !t.opening {
				ids = append(ids, id)
			}
		}
		for id := range c.disk {
			ids = append(ids, id)
		}
		if len(ids) > 0 {
			c.endsSeq++
			slices.Sort(ids)
			c.emit(ReadEnds{Seq: c.endsSeq, Tasks: ids})
		}
	}
}

func (c *Core) stop(s Stop) {
	if c.left {
		return
	}
	if s.Restart {
		c.left = true
		c.emit(StopForRestart{})
		return
	}
	if c.leaving {
		return
	}
	c.leaving, c.drainStart = true, c.ticks
	c.note(Note{Kind: NoteLeaving})
	c.rejoin(Rejoin{Why: "leaving"})
}

func (c *Core) leave() {
	c.left = true
	c.emit(Leave{})
}

func sortedUnique(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}

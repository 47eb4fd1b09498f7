package sim

import (
	"container/heap"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/baton-streams/baton/assign"
	"github.com/baton-streams/baton/lifecycle"
)

// Options tune one run.
type Options struct {
	// Detail adds a timeline line per task decision (learner placed,
	// task revoked, active assigned, learner ready, task restored);
	// without it the timeline has events and one line per round.
	Detail bool
	// Reasons appends the assignor's explanation to decision lines.
	Reasons bool
	// Check verifies the policy's guarantees on every round; violations
	// go to Result.Violations.
	Check bool
	// MaxRounds stops a run that rebalances more often than this (a
	// policy that never settles); 0 means 1,000,000.
	MaxRounds int
	// Autoscaler names the scenario's `autoscale` line that drives the
	// group's size (AutoscaleBaton or AutoscaleLag); empty: none, the
	// group's size changes only by the scenario's events.
	Autoscaler string
}

// copyState is one instance's local state for one stateful task. It
// exists while the instance has the state, on disk at least; role is what
// the assignment asks of it, lifecycle.None when the state is only on disk.
type copyState struct {
	task int
	role lifecycle.Role
	// following: caught up and kept current (lag 0); otherwise the copy
	// holds the changelog up to pos.
	following bool
	// signalled: this learner's readiness has been reported.
	signalled bool
	pos       float64
	// behindAt is the copy's position in its instance's behind list, or
	// -1 while it is following.
	behindAt int
	// lag is the copy's entry in its instance's lag map, kept beside it
	// so that a lag that did not move is not written again.
	lag int64
}

type taskState struct {
	idx        int
	spec       TaskSpec
	owner      int // instance holding it active, -1 if none
	processing bool
	suspended  bool    // eager: paused by a rebalance, owner kept
	starting   bool    // its owner can run it; its first record is Timing.Start away
	startGen   int     // the evStart that may end starting
	endBase    float64 // changelog end at endAt
	endAt      time.Duration
	lastOwner  int
	moves      int
	revokedBy  []int // instances that gave it up in a move (for thrash)
	procSince  time.Duration
	activeCopy *copyState // the owner's copy, if stateful
	chasers    []int      // instances restoring a copy of it
}

func (t *taskState) end(now time.Duration) float64 {
	if t.processing {
		return t.endBase + t.spec.Rate*(now-t.endAt).Seconds()
	}
	return t.endBase
}

// setProcessingAt toggles processing at now; callers go through
// engine.setProcessing, which keeps the copies chasing the task in step.
func (t *taskState) setProcessingAt(now time.Duration, on bool) {
	t.endBase = t.end(now)
	t.endAt = now
	t.processing = on
	if on {
		t.procSince = now
	}
}

type instState struct {
	spec     InstanceSpec
	idx      int
	inGroup  bool // a member of the group (until it leaves or is expelled)
	running  bool // the process is up
	leaving  bool
	noticeAt time.Duration // crashed: when the group expels it
	// The member's heartbeats: its client's heartbeat timer starts when
	// it gets its assignment (beatFrom) and fires every heartbeat; with
	// beatEarly, the client also sends one heartbeat Timing.Early after
	// the assignment, from which the timer starts again.
	beatFrom  time.Duration
	beatEarly bool
	// leaveAfterJoin: drained by a plan that also had it give up
	// actives, it rejoins the follow-up round first and leaves once that
	// round's JoinGroup has completed.
	leaveAfterJoin bool
	copies         map[int]*copyState
	restoring      map[int]*copyState // copies with a role that are not following
	// Restore progress is lazy: the copies in restoring hold their
	// position as of syncedAt, and progress at a constant share until
	// the next sync. nextAt caches the first crossing; dirty asks to
	// compute it again.
	syncedAt time.Duration
	nextAt   time.Duration
	dirty    bool
	nRestAct int    // restoring copies that are active
	nActive  [2]int // actives held: [stateless, stateful]
	loadHeld [2]float64

	// The instance's subscription, kept up to date as things change, so
	// that building the leader's input (state) costs what changed since
	// the last round rather than O(tasks).
	lag      map[assign.TaskID]int64 // every copy's lag; state refreshes those of behind
	behind   []*copyState            // copies that are not following: their lag moves
	actives  []int                   // tasks held active, in no order
	active   []assign.TaskID         // actives in byte order; nil when stale
	standby  []assign.TaskID         // standby copies in byte order
	learner  []assign.TaskID         // learner copies in byte order
	rolesOld bool                    // standby and learner are stale
}

type eventKind uint8

const (
	evScenario eventKind = iota
	evRoundApply
	evEagerPause
	evCrashNotice
	evReturn
	evProbing
	evLoadStep
	evLoadTick
	evAutoscale
	evStarted
	evStart
)

type event struct {
	at   time.Duration
	seq  int
	kind eventKind
	arg  int // scenario event index, round generation, instance index
	n    int // evEagerPause: the round's number
}

type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// engine is the state of one run. It is driven only by its event queue and
// virtual clock.
type engine struct {
	sc     *Scenario
	pol    Policy
	opt    Options
	now    time.Duration
	tasks  []*taskState
	insts  []*instState
	byID   map[string]int
	taskIx map[assign.TaskID]int
	queue  eventQueue
	seq    int

	round struct {
		active   bool
		gen      int
		n        int
		started  time.Duration
		applyAt  time.Duration
		why      []string
		pending  bool
		pendWhy  []string
		pendSelf []int // members of the pending triggers that rejoin at once
		// rejoin is when each member sends JoinGroup, by instance index
		// (-1: not in the round); joined when JoinGroup completes.
		rejoin    []time.Duration
		joined    time.Duration
		stopWorld bool
	}
	probingGen int

	mark    [3][]int      // applyRound's task sets, by role from lifecycle.Active, by stamp
	rank    []int         // task index -> position in byte order of ids
	stTasks []assign.Task // the assignor's task list, in byte order
	stamp   int
	buckets struct {
		done                      bool
		n                         [2]int
		loadSum, loadMax, loadMin [2]float64
	}

	unavailable int
	// unavailableStateful counts the stateful tasks among unavailable.
	unavailableStateful int
	learners            int
	offBalance          int
	balanced            bool
	balancedAt          time.Duration
	// offStateful counts the stateful actives off their members' shares
	// (part of offBalance); a stateful task without an owner is counted
	// in unavailableStateful. shares says the group ran its stateful
	// shares (none off, none unavailable) at some instant from the first
	// event on, sharesAt the first such instant.
	offStateful int
	shares      bool
	sharesAt    time.Duration
	// underTotal counts the members below their share of all tasks, both
	// buckets together; totalShare says none was at some instant from
	// the first event on, totalShareAt the first such instant.
	underTotal   int
	totalShare   bool
	totalShareAt time.Duration
	firstEvent   time.Duration

	res *Result
	err error

	nRunning int        // processes up
	load     *loadModel // nil without load
	scaler   *scaler    // nil without an autoscaler

	// onState, when set (by tests), sees every leader input state builds.
	onState func(assign.State)
}

// RunText parses a scenario's text (name names it in errors) and runs it
// under the built-in policy named policy, with default options.
func RunText(name, text, policy string) (*Result, error) {
	sc, err := ParseString(name, text)
	if err != nil {
		return nil, err
	}
	pol, err := ParsePolicy(policy)
	if err != nil {
		return nil, err
	}
	return Run(sc, pol, Options{})
}

// Run simulates the scenario under the policy. The run is deterministic:
// the same scenario, policy and options give the same Result.
func Run(sc *Scenario, pol Policy, opt Options) (*Result, error) {
	e, err := newEngine(sc, pol, opt)
	if err != nil {
		return nil, err
	}
	if opt.Autoscaler != "" {
		if e.load == nil {
			return nil, fmt.Errorf("sim: %s: autoscale %s needs a load (a `load` line)", sc.Name, opt.Autoscaler)
		}
		if err := e.newScaler(opt.Autoscaler); err != nil {
			return nil, err
		}
	}
	e.loop()
	if e.err != nil {
		return e.res, e.err
	}
	e.finish()
	return e.res, nil
}

func newEngine(sc *Scenario, pol Policy, opt Options) (*engine, error) {
	if opt.MaxRounds == 0 {
		opt.MaxRounds = 1000000
	}
	e := &engine{sc: sc, pol: pol, opt: opt, byID: map[string]int{}, taskIx: map[assign.TaskID]int{}, firstEvent: -1}
	e.res = &Result{Policy: pol.Name, Scenario: sc.Name}
	for i, ts := range sc.Tasks {
		t := &taskState{idx: i, spec: ts, owner: -1, lastOwner: -1, endBase: ts.State}
		if pol.UnitLoads {
			t.spec.Load = 1
		}
		e.tasks = append(e.tasks, t)
		e.taskIx[ts.ID] = i
	}
	e.indexTasks()
	specs := sc.Instances
	if pol.SettledStart != nil {
		var err error
		if specs, err = e.settledStart(); err != nil {
			return nil, err
		}
	}
	for _, is := range specs {
		in := e.addInstance(is)
		// Its next heartbeat after time 0 is at Beat (by default a
		// heartbeat after 0, as if it got its assignment at 0).
		beat := is.Beat
		if beat <= 0 {
			beat = sc.Timing.Heartbeat
		}
		in.beatFrom = beat - sc.Timing.Heartbeat
		for _, id := range is.Active {
			ti := e.taskIx[id]
			t := e.tasks[ti]
			e.setOwner(t, in)
			t.lastOwner = in.idx
			if t.spec.Stateful {
				c := e.copyOf(in, ti)
				e.setFollowing(in, c, true)
				c.role = lifecycle.Active
				t.activeCopy = c
			}
			t.setProcessingAt(0, true)
		}
		for _, id := range is.Standby {
			ti := e.taskIx[id]
			if e.tasks[ti].owner == in.idx {
				return nil, fmt.Errorf("sim: %s: instance %q holds task %q as active and standby", sc.Name, is.ID, id)
			}
			c := e.copyOf(in, ti)
			e.setFollowing(in, c, true)
			c.role = lifecycle.Standby
			in.rolesOld = true
		}
		for _, d := range is.Disk {
			// In no role and not following: its lag grows as its task
			// moves on, like state a move left behind.
			ti := e.taskIx[d.Task]
			c := e.copyOf(in, ti)
			c.pos = math.Max(0, e.tasks[ti].endBase-d.Lag)
		}
	}
	for _, t := range e.tasks {
		if t.owner < 0 {
			return nil, fmt.Errorf("sim: %s: task %q has no owner at time 0", sc.Name, t.spec.ID)
		}
	}
	for i, ev := range sc.Events {
		e.push(ev.At, evScenario, i)
		if e.firstEvent < 0 {
			e.firstEvent = ev.At
		}
	}
	if e.firstEvent < 0 {
		e.firstEvent = 0
	}
	e.recomputeBalance()
	if len(sc.Input) > 0 {
		e.initLoad()
	}
	e.note(0, "start", fmt.Sprintf("%d instances, %d tasks (%d stateful), policy %s", len(e.insts), len(e.tasks), e.countStateful(), pol.Name))
	return e, nil
}

// settledStart is the scenario's instances at time 0 with the tasks of
// the deal (TaskSpec.Dealt) placed by the policy's SettledStart; the
// scenario itself is not changed.
func (e *engine) settledStart() ([]InstanceSpec, error) {
	sc := e.sc
	dealt := map[assign.TaskID]bool{}
	for _, t := range sc.Tasks {
		if t.Dealt {
			dealt[t.ID] = true
		}
	}
	if len(dealt) == 0 {
		return sc.Instances, nil
	}
	order := make([]int, len(sc.Instances))
	for i := range order {
		order[i] = i
	}
	if e.pol.ProcessOrder {
		sortByProcess(order, func(i int) InstanceSpec { return sc.Instances[i] })
	}
	s := assign.State{Config: sc.Config, Tasks: e.stTasks}
	for _, i := range order {
		is := sc.Instances[i]
		s.Instances = append(s.Instances, assign.Instance{ID: is.ID, Capacity: is.Capacity, Rack: is.Rack})
	}
	p, err := e.pol.SettledStart(s)
	if err != nil {
		return nil, fmt.Errorf("sim: %s: the settled start: %w", sc.Name, err)
	}
	byID := make(map[string]assign.InstancePlan, len(p.Instances))
	for _, ip := range p.Instances {
		byID[ip.ID] = ip
	}
	// Each list keeps the scenario's own tasks and takes the dealt
	// ones from the plan.
	merge := func(own, plan []assign.TaskID) []assign.TaskID {
		out := slices.DeleteFunc(slices.Clone(own), func(id assign.TaskID) bool { return dealt[id] })
		for _, id := range plan {
			if dealt[id] {
				out = append(out, id)
			}
		}
		return out
	}
	specs := slices.Clone(sc.Instances)
	for i := range specs {
		ip := byID[specs[i].ID]
		specs[i].Active = merge(specs[i].Active, ip.Active)
		specs[i].Standby = merge(specs[i].Standby, ip.Standby)
	}
	return specs, nil
}

func (e *engine) countStateful() int {
	n := 0
	for _, t := range e.tasks {
		if t.spec.Stateful {
			n++
		}
	}
	return n
}

func (e *engine) addInstance(is InstanceSpec) *instState {
	in := &instState{spec: is, idx: len(e.insts), inGroup: true, running: true,
		copies: map[int]*copyState{}, restoring: map[int]*copyState{}, lag: map[assign.TaskID]int64{}}
	e.insts = append(e.insts, in)
	e.byID[is.ID] = in.idx
	e.nRunning++
	return in
}

func (e *engine) copyOf(in *instState, ti int) *copyState {
	c := in.copies[ti]
	if c == nil {
		c = &copyState{task: ti, behindAt: len(in.behind)}
		in.copies[ti] = c
		in.behind = append(in.behind, c)
		in.lag[e.tasks[ti].spec.ID] = 0 // set by state
	}
	return c
}

// setFollowing marks a copy as following its task's changelog end (lag 0)
// or not (its lag is refreshed by state).
func (e *engine) setFollowing(in *instState, c *copyState, on bool) {
	if c.following == on {
		return
	}
	c.following = on
	if on {
		last := in.behind[len(in.behind)-1]
		in.behind[c.behindAt] = last
		last.behindAt = c.behindAt
		in.behind = in.behind[:len(in.behind)-1]
		c.behindAt = -1
		in.lag[e.tasks[c.task].spec.ID] = 0
		c.lag = 0
		return
	}
	c.behindAt = len(in.behind)
	in.behind = append(in.behind, c)
}

func (e *engine) push(at time.Duration, k eventKind, arg int) {
	e.seq++
	heap.Push(&e.queue, event{at: at, seq: e.seq, kind: k, arg: arg})
}

func (e *engine) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

// loop advances virtual time from one interesting instant to the next: a
// queued event or a copy reaching a lag threshold.
func (e *engine) loop() {
	for e.err == nil {
		next := e.sc.Limit
		if len(e.queue) > 0 && e.queue[0].at < next {
			next = e.queue[0].at
		}
		if c, ok := e.nextCrossing(); ok && c < next {
			next = c
		}
		if e.quiet() {
			break
		}
		e.advance(next)
		if e.load != nil {
			e.observeLoad()
		}
		e.crossings()
		for len(e.queue) > 0 && e.queue[0].at <= e.now && e.err == nil {
			ev := heap.Pop(&e.queue).(event)
			e.handle(ev)
		}
		e.updateBalanced()
		// Counted once the instant is over: a plan takes revoked tasks
		// off before it starts the new owners at the same instant, and
		// tasks unavailable for no time are not unavailable at once.
		e.res.MaxUnavailable = max(e.res.MaxUnavailable, e.unavailable)
		e.res.MaxUnavailableStateful = max(e.res.MaxUnavailableStateful, e.unavailableStateful)
		if e.load != nil {
			e.loadShares()
		}
		if e.now >= e.sc.Limit {
			break
		}
	}
}

// quiet: nothing can change any more. Standbys still catching up change no
// metric, so they do not keep the run going.
func (e *engine) quiet() bool {
	if e.round.active || e.unavailable > 0 || e.learners > 0 {
		return false
	}
	for _, ev := range e.queue {
		switch {
		case ev.kind == evProbing && ev.arg != e.probingGen:
		case ev.kind == evRoundApply || ev.kind == evEagerPause:
		default:
			return false
		}
	}
	return e.now >= e.firstEvent
}

func (e *engine) signalReady(in *instState, c *copyState) {
	c.signalled = true
	t := e.tasks[c.task]
	e.detail("ready", fmt.Sprintf("%s learner %s caught up (lag %d)", in.spec.ID, t.spec.ID, lagInt(t.end(e.now)-c.pos)))
	if e.pol.RejoinOnReady && in.inGroup {
		e.trigger(fmt.Sprintf("%s ready for %s", in.spec.ID, t.spec.ID), in)
	}
}

func lagInt(l float64) int64 {
	if l <= eps {
		return 0
	}
	return int64(math.Ceil(l - eps))
}

func (e *engine) setUnavailable(t *taskState, delta int) {
	e.unavailable += delta
	if t.spec.Stateful {
		e.unavailableStateful += delta
	}
	e.res.sample(e.now, e.unavailable, e.offBalance)
}

func (e *engine) handle(ev event) {
	switch ev.kind {
	case evScenario:
		e.scenarioEvent(e.sc.Events[ev.arg])
	case evRoundApply:
		if ev.arg == e.round.gen && e.round.active {
			e.applyRound()
		}
	case evEagerPause:
		if ev.n == e.round.n && e.round.active {
			e.pauseMember(e.insts[ev.arg])
		}
	case evCrashNotice:
		in := e.insts[ev.arg]
		if in.inGroup && !in.running {
			e.removeMember(in)
			e.note(e.now, "expelled", fmt.Sprintf("%s: session timed out", in.spec.ID))
			if !e.round.active {
				e.trigger(in.spec.ID+" expelled", nil)
			}
		}
	case evReturn:
		in := e.insts[ev.arg]
		in.running, in.inGroup = true, true
		e.nRunning++
		in.syncedAt = e.now
		e.note(e.now, "return", fmt.Sprintf("%s back with %d task states on disk", in.spec.ID, len(in.copies)))
		e.trigger(in.spec.ID+" returned", in)
	case evProbing:
		if ev.arg == e.probingGen {
			e.trigger("probing rebalance", nil)
		}
	case evLoadStep, evLoadTick:
		e.loadEvent(ev)
	case evAutoscale:
		e.evaluate()
	case evStarted:
		e.started(ev.arg)
	case evStart:
		if t := e.tasks[ev.arg]; t.starting && t.startGen == ev.n {
			t.starting = false
			e.setProcessing(t, true)
			e.setUnavailable(t, -1)
		}
	}
}

func (e *engine) scenarioEvent(ev Event) {
	switch ev.Kind {
	case EventJoin:
		e.join(ev.Instance)
		return
	}
	in := e.insts[e.byID[ev.Instance.ID]]
	if !in.running || !in.inGroup {
		e.note(e.now, string(ev.Kind), fmt.Sprintf("%s is not running: ignored", in.spec.ID))
		return
	}
	switch ev.Kind {
	case EventCrash:
		e.note(e.now, "crash", in.spec.ID)
		e.stopInstance(in, true)
		// The broker expels it a session timeout after the last
		// heartbeat it received.
		in.noticeAt = e.lastBeat(in, e.now) + e.sc.Timing.Session
		e.push(in.noticeAt, evCrashNotice, in.idx)
		// A round in progress waits for the dead member until it is
		// expelled.
		if e.round.active {
			e.schedule()
		}
	case EventLeave:
		e.leave(in)
	case EventRestart:
		e.note(e.now, "restart", fmt.Sprintf("%s stops for %v", in.spec.ID, ev.Down))
		e.stopInstance(in, false)
		e.removeMember(in)
		e.trigger(in.spec.ID+" left", nil)
		e.push(e.now+ev.Down, evReturn, in.idx)
	case EventCapacity:
		e.note(e.now, "capacity", fmt.Sprintf("%s capacity %d -> %d", in.spec.ID, in.spec.Capacity, ev.Capacity))
		in.spec.Capacity = ev.Capacity
		if e.load != nil {
			e.load.dirty = true
		}
		e.recomputeBalance()
		e.trigger(in.spec.ID+" capacity changed", in)
	case EventSlow:
		e.note(e.now, "slow", fmt.Sprintf("%s restore rate %g/s -> %g/s", in.spec.ID, in.spec.Restore, ev.Restore))
		e.sync(in)
		in.spec.Restore = ev.Restore
		in.dirty = true
	}
}

// join adds an instance to the group.
func (e *engine) join(spec InstanceSpec) {
	in := e.addInstance(spec)
	e.note(e.now, "join", fmt.Sprintf("%s (capacity %d, restore %g/s)", in.spec.ID, in.spec.Capacity, in.spec.Restore))
	e.recomputeBalance()
	e.trigger(in.spec.ID+" joined", in)
}

// leave takes an instance out of the group the way the policy does.
func (e *engine) leave(in *instState) {
	if e.pol.Drain {
		e.drain(in)
	} else {
		e.leaveNow(in)
	}
}

// drain marks an instance leaving: it goes once its plan leaves it no
// active.
func (e *engine) drain(in *instState) {
	in.leaving = true
	e.note(e.now, "leave", fmt.Sprintf("%s drains", in.spec.ID))
	e.recomputeBalance()
	e.trigger(in.spec.ID+" leaving", in)
	e.leaveIfDrained(in)
}

// leaveNow stops an instance, which leaves the group at once; its tasks
// restore wherever they go.
func (e *engine) leaveNow(in *instState) {
	e.note(e.now, "leave", fmt.Sprintf("%s stops and leaves the group", in.spec.ID))
	e.stopInstance(in, false)
	e.removeMember(in)
	e.trigger(in.spec.ID+" left", nil)
}

// stopInstance stops a process. A crash loses its state (it never comes
// back) and the input processed since the last commit; a clean stop
// commits and keeps its state on disk.
func (e *engine) stopInstance(in *instState, crash bool) {
	e.sync(in)
	for ti := range e.tasks {
		t := e.tasks[ti]
		if t.owner != in.idx {
			continue
		}
		if crash && t.processing {
			since := e.now - e.now%e.sc.Timing.Commit
			if t.procSince > since {
				since = t.procSince
			}
			e.res.Reprocessed += t.spec.Rate * (e.now - since).Seconds()
		}
		e.dropActive(in, t, false)
	}
	for _, c := range in.copies {
		e.setRole(in, c, lifecycle.None)
	}
	in.running = false
	e.nRunning--
	if crash {
		clear(in.copies)
		clear(in.lag)
		in.behind = nil
		in.rolesOld = true
	}
	e.recomputeBalance()
}

// dropActive takes task t off in: it stops processing and its state stays
// on disk. revoked: the plan moved it (rather than its owner stopping).
func (e *engine) dropActive(in *instState, t *taskState, revoked bool) {
	if t.processing {
		e.setProcessing(t, false)
		e.setUnavailable(t, 1)
	}
	t.suspended = false
	e.cancelStart(t)
	if c := t.activeCopy; c != nil {
		e.setRole(in, c, lifecycle.None)
		t.activeCopy = nil
	}
	if revoked {
		t.revokedBy = append(t.revokedBy, in.idx)
	} else {
		// Its owner went away: going back to an earlier owner is then
		// recovery, not thrashing.
		t.revokedBy = nil
	}
	e.clearOwner(t)
}

// setRole changes what a copy is for, keeping the learner count and the
// set of restoring copies right.
func (e *engine) setRole(in *instState, c *copyState, r lifecycle.Role) {
	e.sync(in)
	if c.role == lifecycle.Learner {
		e.learners--
	}
	if r == lifecycle.Learner {
		e.learners++
	}
	if _, ok := in.restoring[c.task]; ok && (c.role == lifecycle.Active) != (r == lifecycle.Active) {
		// the copy changes class: leave and enter again below
		e.stopRestoring(in, c)
	}
	if r != lifecycle.Learner {
		c.signalled = false
	}
	if c.role == lifecycle.Standby || c.role == lifecycle.Learner || r == lifecycle.Standby || r == lifecycle.Learner {
		in.rolesOld = true
	}
	c.role = r
	if r == lifecycle.None {
		if c.following {
			c.pos = e.tasks[c.task].end(e.now)
			e.setFollowing(in, c, false)
		}
		e.stopRestoring(in, c)
		return
	}
	if !c.following && in.running {
		e.startRestoring(in, c)
	} else {
		e.stopRestoring(in, c)
	}
}

func bucket(t *taskState) int {
	if t.spec.Stateful {
		return 1
	}
	return 0
}

func (e *engine) setOwner(t *taskState, in *instState) {
	t.owner = in.idx
	in.nActive[bucket(t)]++
	in.loadHeld[bucket(t)] += t.spec.Load
	in.actives = append(in.actives, t.idx)
	in.active = nil
}

func (e *engine) clearOwner(t *taskState) {
	if t.owner < 0 {
		return
	}
	in := e.insts[t.owner]
	in.nActive[bucket(t)]--
	in.loadHeld[bucket(t)] -= t.spec.Load
	k := slices.Index(in.actives, t.idx)
	in.actives[k] = in.actives[len(in.actives)-1]
	in.actives = in.actives[:len(in.actives)-1]
	in.active = nil
	t.owner = -1
}

func (e *engine) removeMember(in *instState) {
	in.inGroup = false
	in.leaving = false
	e.recomputeBalance()
	if e.round.active {
		e.schedule() // the round no longer waits for it
	}
}

func (e *engine) leaveIfDrained(in *instState) {
	if !in.leaving || !in.inGroup || in.nActive[0]+in.nActive[1] > 0 {
		return
	}
	e.note(e.now, "left", fmt.Sprintf("%s drained and left the group", in.spec.ID))
	e.stopInstance(in, false)
	e.removeMember(in)
	e.trigger(in.spec.ID+" left", nil)
}

// trigger asks for a rebalance. by, if not nil, is the member that asks:
// it sends JoinGroup at once; the others notice the rebalance at their
// next heartbeat.
func (e *engine) trigger(why string, by *instState) {
	if r := &e.round; r.active && by != nil && e.now < r.joined && (by.idx >= len(r.rejoin) || r.rejoin[by.idx] < 0 || r.rejoin[by.idx] > e.now) {
		// It has not rejoined yet (or, new, JoinGroup is still open):
		// it rejoins now and this round serves the trigger.
		for len(r.rejoin) <= by.idx {
			r.rejoin = append(r.rejoin, -1)
		}
		r.rejoin[by.idx] = e.now
		e.detail("rebalance", fmt.Sprintf("#%d: %s rejoins at once: %s", r.n, by.spec.ID, why))
		if e.pol.StopTheWorld {
			e.pauseMember(by)
		}
		e.schedule()
		return
	}
	if e.round.active {
		e.round.pending = true
		e.round.pendWhy = append(e.round.pendWhy, why)
		if by != nil {
			e.round.pendSelf = append(e.round.pendSelf, by.idx)
		}
		return
	}
	var self []int
	if by != nil {
		self = []int{by.idx}
	}
	e.startRound([]string{why}, self)
}

// nextBeat is the first heartbeat of in at or after at.
func (e *engine) nextBeat(in *instState, at time.Duration) time.Duration {
	return NextHeartbeat(in.beatFrom, at, e.sc.Timing.Heartbeat, e.early(in))
}

// lastBeat is the last heartbeat of in (or its assignment) at or before
// at: what the broker last heard from it.
func (e *engine) lastBeat(in *instState, at time.Duration) time.Duration {
	hb, from := e.sc.Timing.Heartbeat, in.beatFrom
	if early := e.early(in); early > 0 {
		if at < from+early {
			return from + (at-from)/hb*hb
		}
		from += early
	}
	return from + (at-from)/hb*hb
}

func (e *engine) early(in *instState) time.Duration {
	if in.beatEarly {
		return e.sc.Timing.Early
	}
	return 0
}

// NextHeartbeat is a client's first heartbeat at or after at (and after
// from), when its heartbeat timer started at from (its assignment) and
// fires every hb. early > 0 is the cooperative client's one early
// heartbeat, early after from, which starts the timer again: heartbeats
// at from+hb, from+2hb, ... while before from+early, then from+early,
// from+early+hb, ...
func NextHeartbeat(from, at, hb, early time.Duration) time.Duration {
	if hb <= 0 {
		return max(at, from)
	}
	if early > 0 {
		if at <= from+early {
			k := max(1, ceilDiv(at-from, hb))
			if from+k*hb < from+early {
				return from + k*hb
			}
			return from + early
		}
		from += early
	}
	return from + max(1, ceilDiv(at-from, hb))*hb
}

func ceilDiv(a, b time.Duration) time.Duration {
	if a <= 0 {
		return 0
	}
	return (a + b - 1) / b
}

// startRound starts a rebalance round. The members in self send
// JoinGroup at once; every
// other member at its next heartbeat, when the broker answers it that
// the group is rebalancing. JoinGroup completes join after the last of
// them (or when the broker expels a crashed member that has not come
// back), and the plan is applied sync after that. Under stop-the-world
// each member pauses its tasks when it notices.
func (e *engine) startRound(why []string, self []int) {
	r := &e.round
	r.active, r.pending, r.pendWhy, r.pendSelf = true, false, nil, nil
	r.gen++
	r.n++
	r.started = e.now
	r.why = why
	r.applyAt = -1
	r.rejoin = r.rejoin[:0]
	for _, in := range e.insts {
		notice := time.Duration(-1)
		if in.inGroup && in.running {
			notice = e.now
			if !slices.Contains(self, in.idx) {
				notice = e.nextBeat(in, e.now)
			}
			if e.pol.StopTheWorld {
				e.seq++
				heap.Push(&e.queue, event{at: notice, seq: e.seq, kind: evEagerPause, arg: in.idx, n: r.n})
			}
		}
		r.rejoin = append(r.rejoin, notice)
	}
	e.note(e.now, "rebalance", fmt.Sprintf("#%d starts: %s", r.n, joinWhy(why)))
	e.schedule()
	if r.n > e.opt.MaxRounds {
		e.fail(fmt.Errorf("sim: %s: more than %d rebalances by %v: the policy does not settle", e.sc.Name, e.opt.MaxRounds, fmtTime(e.now)))
	}
}

func joinWhy(why []string) string {
	if len(why) > 3 {
		return fmt.Sprintf("%s, %s and %d more", why[0], why[1], len(why)-2)
	}
	s := ""
	for i, w := range why {
		if i > 0 {
			s += ", "
		}
		s += w
	}
	return s
}

// schedule works out when the round's JoinGroup completes (join after the
// last live member rejoins) and its plan is applied (sync later, and not
// before sync after the broker expels a crashed member), and queues the
// plan when that changed.
func (e *engine) schedule() {
	tm := e.sc.Timing
	r := &e.round
	if r.applyAt >= 0 && e.now >= r.joined {
		return // JoinGroup completed: the round is what it is
	}
	joined := r.started
	for i, at := range r.rejoin {
		if in := e.insts[i]; in.inGroup && in.running && at >= 0 {
			joined = max(joined, at)
		}
	}
	applyAt := joined + tm.Join + tm.Sync
	for _, in := range e.insts {
		if in.inGroup && !in.running {
			applyAt = max(applyAt, in.noticeAt+tm.Sync)
		}
	}
	r.joined = applyAt - tm.Sync
	if applyAt == r.applyAt {
		return
	}
	r.applyAt = applyAt
	r.gen++
	e.push(applyAt, evRoundApply, r.gen)
}

// begin makes an active that its owner can run (its plan applied, its
// state restored) available: Timing.Start later, when its first record
// comes, or at once without a start time. It was counted unavailable.
func (e *engine) begin(t *taskState) {
	if e.sc.Timing.Start <= 0 {
		e.setProcessing(t, true)
		e.setUnavailable(t, -1)
		return
	}
	t.starting = true
	t.startGen++
	e.seq++
	heap.Push(&e.queue, event{at: e.now + e.sc.Timing.Start, seq: e.seq, kind: evStart, arg: t.idx, n: t.startGen})
}

// cancelStart forgets a start under way (its owner gave the task up or
// paused it).
func (e *engine) cancelStart(t *taskState) {
	if t.starting {
		t.starting = false
		t.startGen++
	}
}

// pauseMember: an eager member stops processing all its tasks when it
// notices the rebalance (it revokes everything before it rejoins).
func (e *engine) pauseMember(in *instState) {
	n, stateful := 0, 0
	for _, ti := range in.actives {
		t := e.tasks[ti]
		switch {
		case t.processing:
			e.setProcessing(t, false)
			t.suspended = true
			n++
			if t.spec.Stateful {
				stateful++
			}
		case t.starting:
			// Already counted unavailable; it starts again after the plan.
			e.cancelStart(t)
			t.suspended = true
		}
	}
	if n == 0 {
		return
	}
	e.unavailable += n
	e.unavailableStateful += stateful
	e.res.sample(e.now, e.unavailable, e.offBalance)
	e.detail("pause", fmt.Sprintf("%s stops %d tasks for the rebalance", in.spec.ID, n))
}

// indexTasks ranks the tasks in byte order of their ids and builds the
// assignor's task list in that order (assign then need not sort it).
func (e *engine) indexTasks() {
	order := make([]int, len(e.tasks))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(string(e.tasks[a].spec.ID), string(e.tasks[b].spec.ID)) })
	// Every id the engine hands the assignor is cut from one string, in
	// that order: the assignor reads the ids of all the members' lists on
	// every round, and packed ids share cache lines.
	size := 0
	for _, t := range e.tasks {
		size += len(t.spec.ID)
	}
	var packed strings.Builder
	packed.Grow(size)
	for _, ti := range order {
		packed.WriteString(string(e.tasks[ti].spec.ID))
	}
	all, at := packed.String(), 0
	e.rank = make([]int, len(e.tasks))
	e.stTasks = make([]assign.Task, len(e.tasks))
	for r, ti := range order {
		t := e.tasks[ti]
		n := len(t.spec.ID)
		t.spec.ID = assign.TaskID(all[at : at+n])
		at += n
		e.rank[ti] = r
		e.stTasks[r] = assign.Task{ID: t.spec.ID, Stateful: t.spec.Stateful, Load: t.spec.Load}
	}
}

// state builds the assignor's input from the members, as their
// subscriptions would describe them now. What does not change between
// rounds is kept: the task list, and every member's lists and lag map,
// of which only the lags of copies that are not following are refreshed
// and the lists of members whose roles changed rebuilt. The assignor and
// the checks only read the state; it is good until the next call.
func (e *engine) state() (assign.State, []*instState) {
	s := assign.State{Config: e.sc.Config, Tasks: e.stTasks}
	var members []*instState
	for _, in := range e.insts {
		if in.inGroup && in.running {
			members = append(members, in)
		}
	}
	if e.pol.ProcessOrder {
		sortByProcess(members, func(in *instState) InstanceSpec { return in.spec })
	}
	for _, in := range members {
		e.sync(in)
		for _, c := range in.behind {
			t := e.tasks[c.task]
			if lag := lagInt(t.end(e.now) - c.pos); lag != c.lag {
				in.lag[t.spec.ID] = lag
				c.lag = lag
			}
		}
		if in.active == nil && len(in.actives) > 0 {
			slices.SortFunc(in.actives, func(a, b int) int { return e.rank[a] - e.rank[b] })
			in.active = make([]assign.TaskID, len(in.actives))
			for k, ti := range in.actives {
				in.active[k] = e.tasks[ti].spec.ID
			}
		}
		if in.rolesOld {
			in.standby, in.learner = nil, nil
			for ti, c := range in.copies {
				switch c.role {
				case lifecycle.Standby:
					in.standby = append(in.standby, e.tasks[ti].spec.ID)
				case lifecycle.Learner:
					in.learner = append(in.learner, e.tasks[ti].spec.ID)
				}
			}
			slices.Sort(in.standby)
			slices.Sort(in.learner)
			in.rolesOld = false
		}
		s.Instances = append(s.Instances, assign.Instance{ID: in.spec.ID, Capacity: in.spec.Capacity, Rack: in.spec.Rack, Leaving: in.leaving,
			Active: in.active, Standby: in.standby, Learner: in.learner, Lag: in.lag})
	}
	return s, members
}

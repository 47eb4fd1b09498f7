package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/instance"
	"github.com/baton-streams/baton/internal/commit"
	"github.com/baton-streams/baton/internal/govern"
	"github.com/baton-streams/baton/internal/restore"
	"github.com/baton-streams/baton/internal/taskstore"
	"github.com/baton-streams/baton/internal/work"
	"github.com/baton-streams/baton/lifecycle"
	"github.com/baton-streams/baton/topology"
)

// tickEvery is the core's clock: commits, end-offset reads and drain
// timeouts are counted in ticks.
const tickEvery = 10 * time.Millisecond

// turnBudget bounds the time one dispatch lets the workers process, and
// so how long the loop waits for them: a slow processor holds up neither
// rebalance callbacks nor commits for longer than that (plus one record).
// What a worker has not reached by then goes back to the backlog for the
// next turn. Without a bound a turn lasted a whole poll's records (up to
// 5,000), which at a few ms a record outlasts the rebalance timeout and
// gets the instance expelled; at 100 ms the loop's longest turns were
// that long. 10 ms keeps every turn of the loop near that (measured in
// docs/benchmarks.md) at no cost in throughput that the bench measures.
const turnBudget = 10 * time.Millisecond

// pollMax is the most records one poll of the input returns. A poll is
// asked for only while the backlog holds fewer, so it never holds more
// than two polls' worth.
const pollMax = 5000

// ready is a channel that is always ready to receive from.
var ready = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// restorePollMax bounds the changelog records applied in one go on the
// loop, so the active tasks' records are not held up behind a restore.
const restorePollMax = 10000

// request is a rebalance callback waiting for the loop: the loop steps the
// core with in and closes done once the core answers it.
type request struct {
	in   func(id int) instance.Input
	done chan struct{}
}

// shell carries out the core's effects. It runs on one goroutine, the
// loop, which owns the core and every task; kgo's rebalance callbacks post
// requests to it and wait for the answer, and background work (polls,
// store opens and closes, commits, end-offset reads) reports back to it
// over channels. No lock is held across I/O.
type shell struct {
	a    *App
	core *instance.Core
	// waiting holds the callbacks waiting for a Reply, by request id.
	waiting map[int]chan struct{}
	nextReq int

	polling bool   // a poll of the input is outstanding
	bootGen uint64 // counts the tasks' table bootstraps (tables.go)
	// behind: the last dispatch ran out of its turn with records left in
	// the backlog; the loop dispatches again between other work.
	behind bool
	// restorer reads the changelogs; sessions numbers its starts.
	restorer *restore.Restorer
	sessions uint64
	// applying is the restored chunk being written off the loop, if any.
	applying *applyJob
	// paced, while set, holds back the next restored chunk: the warm
	// copies' restores yield to busy active tasks (govern). Closed
	// (fires) when the pause is over.
	paced <-chan time.Time
	// catchup and warmLag keep the pacing from starving a warm copy
	// (govern.Catchup): warmLag is each warm store's lag (task/store)
	// after its last restored chunk.
	catchup govern.Catchup
	warmLag map[string]int64
	// rejoinWhy is a rejoin held until the group's round settles
	// (rejoin), rejoinCheck when to look again; forcedAt is when the loop
	// last forced a rebalance (unix nanos).
	rejoinWhy   string
	rejoinCheck <-chan time.Time
	forcedAt    int64
	// writing are the commits' store writes under way, oldest first;
	// writeTail is done of the last store write started off the loop
	// (a commit's or a restored chunk's), which the next one waits for.
	writing   []*commit.Write
	writeTail <-chan struct{}
	// stopRewinding, while a rewind runs, cancels it and waits for it to
	// end: it writes the stores, so they close only after it.
	stopRewinding func()
	// stopped: the core said Leave, StopForRestart or Fail.
	stopped error
	exit    bool
	// input: the input lag and rates measured so far (input.go).
	input inputState
}

// Channels the loop reads, written by the App's background goroutines.
type loopChans struct {
	requests chan request
	polls    chan kgo.Fetches
	restores chan restore.Chunk
	applied  chan *applyJob
	opened   chan openResult
	ends     chan instance.Ends
	commits  chan commit.Result
	written  chan *commit.Write
	rewound  chan error
	// led signals that the leader planned a round; ledLast holds its
	// Led. A plan made before the loop took the last one replaces it
	// (the newer plan decides), so none is ever dropped for want of room.
	led     chan struct{}
	ledLast *atomic.Pointer[instance.Led]
	inputs  chan inputRead
	// tableEnds: the table ends a task activated reads (tables.go).
	tableEnds chan tableEnds
	pollReq   chan struct{}
	// done is closed when the loop returns: callbacks stop waiting.
	done      chan struct{}
	closeOnce *sync.Once
}

func (c loopChans) close() { c.closeOnce.Do(func() { close(c.done) }) }

// openResult is an open of a task's stores, done off the loop (openAsync).
type openResult struct {
	t      *work.Task
	in     instance.Opened
	stores map[string]*taskstore.Store // nil when in.Err says why not
}

func newLoopChans() loopChans {
	return loopChans{requests: make(chan request), polls: make(chan kgo.Fetches), restores: make(chan restore.Chunk), applied: make(chan *applyJob, 1),
		opened: make(chan openResult), ends: make(chan instance.Ends, 4), commits: make(chan commit.Result, 4), written: make(chan *commit.Write),
		rewound: make(chan error, 1), led: make(chan struct{}, 1), ledLast: &atomic.Pointer[instance.Led]{}, inputs: make(chan inputRead, 1), pollReq: make(chan struct{}, 1),
		tableEnds: make(chan tableEnds, 4),
		done:      make(chan struct{}), closeOnce: &sync.Once{}}
}

// post hands a callback's input to the loop and waits for its answer,
// unless the loop is gone.
func (a *App) post(in func(id int) instance.Input) {
	r := request{in: in, done: make(chan struct{})}
	select {
	case a.ch.requests <- r:
	case <-a.ch.done:
		return
	}
	select {
	case <-r.done:
	case <-a.ch.done:
	}
}

// loop is the membership's control thread: the one goroutine that steps
// the instance core and owns the membership's tasks. Each turn waits for
// one thing to happen (next) and handles it; a turn never waits on disk
// or the network, and its time is observed (baton_loop_turn_seconds).
func (a *App) loop(ctx context.Context) error {
	defer a.ch.close()
	s := a.startShell()
	tick := time.NewTicker(tickEvery)
	defer tick.Stop()
	inputTick := time.NewTicker(a.cfg.InputEvery)
	defer inputTick.Stop()
	w := wakeups{tick: tick.C, input: inputTick.C, user: ctx.Done()}
	for !s.exit {
		turn := s.next(&w)
		if turn == nil {
			return a.abort(context.Cause(a.runCtx))
		}
		woke := time.Now()
		turn()
		took := time.Since(woke)
		a.metrics.LoopTurn.Observe(took.Seconds())
		if a.cfg.OnTurn != nil {
			a.cfg.OnTurn(turn, took)
		}
	}
	return s.stopped
}

// startShell makes the loop's shell and its core, and starts the
// membership's pollers (the group's input and the restorer).
func (a *App) startShell() *shell {
	s := &shell{a: a, waiting: map[int]chan struct{}{}, input: newInputState()}
	a.shell = s
	s.core = instance.New(instance.Config{
		AcceptableLag: a.cfg.AcceptableLag,
		CommitTicks:   max(1, int(a.cfg.CommitInterval/tickEvery)),
		LagTicks:      int(time.Second / tickEvery),
		DrainTicks:    max(1, int(a.cfg.DrainTimeout/tickEvery)),
		Stores:        a.storesOf,
	}, a.diskCP)
	s.apply(s.core.Ready())
	s.restorer = restore.New(a.restore, a.ch.restores, restorePollMax)
	a.pollers.Add(2)
	go a.poller(a.group, a.ch.pollReq, a.ch.polls, pollMax, 100*time.Millisecond)
	go func() {
		defer a.pollers.Done()
		s.restorer.Run(a.runCtx, a.ch.done)
	}()
	s.requestPoll()
	return s
}

// wakeups are the loop's timers and the user's stop (nil once taken).
type wakeups struct {
	tick, input <-chan time.Time
	user        <-chan struct{}
}

// next waits for the next thing the loop must handle and returns the turn
// that handles it, or nil once the member's run context is done.
func (s *shell) next(w *wakeups) func() {
	a := s.a
	// While the input rewinds, rebalance callbacks wait: the rewind
	// writes the active tasks' stores and sets their offsets.
	requests := a.ch.requests
	if s.rewinding() {
		requests = nil
	}
	// Records left from the last turn are dispatched again between other
	// work, but not while dispatch would return at once (a commit holds
	// processing, or the input rewinds): the loop would spin. A finished
	// commit dispatches again itself; after a rewind this case does.
	var more chan struct{}
	if s.behind && !s.held() {
		more = ready
	}
	// One restored chunk is written at a time, and none while the input
	// rewinds: the rewind's catch-up writes the stores of every active
	// task, restoring ones included.
	restores := a.ch.restores
	if s.applying != nil || s.rewinding() {
		restores = nil
	}
	paced := s.paced
	if paced != nil && s.activeRestoring() {
		s.paced, paced = nil, nil // an active task waits for its restore: no pause
	}
	if paced != nil {
		restores = nil
	}
	select {
	case <-more:
		return func() {
			s.dispatch()
			s.pollIfCaughtUp()
		}
	case <-a.runCtx.Done():
		return nil
	case <-w.user:
		w.user = nil
		return func() { s.step(instance.Stop{Restart: a.cfg.StopForRestart}) }
	case <-a.leaveNow:
		return func() { s.step(instance.LeaveNow{}) }
	case r := <-requests:
		return func() { s.request(r) }
	case <-a.wake:
		return s.assigned
	case <-a.ch.led:
		return func() {
			if l := a.ch.ledLast.Swap(nil); l != nil {
				s.step(*l)
			}
		}
	case f := <-a.ch.polls:
		return func() { s.polled(f) }
	case c := <-restores:
		return func() { s.restored(c) }
	case <-paced:
		return func() { s.paced = nil }
	case <-s.rejoinCheck:
		return func() {
			why := s.rejoinWhy
			s.rejoinCheck, s.rejoinWhy = nil, ""
			s.rejoin(why)
		}
	case j := <-a.ch.applied:
		return func() { s.applied(j) }
	case o := <-a.ch.opened:
		return func() { s.storesOpened(o) }
	case e := <-a.ch.ends:
		return func() {
			s.limits(e)
			s.step(e)
		}
	case r := <-a.ch.commits:
		return func() { s.committed(r) }
	case wr := <-a.ch.written:
		return func() { s.written(wr) }
	case err := <-a.ch.rewound:
		return func() { s.rewoundDone(err) }
	case <-w.tick:
		return func() {
			s.step(instance.Tick{})
			if s.booting() {
				s.dispatch() // a task may have stopped waiting for its tables
			}
		}
	case <-w.input:
		return s.readInput
	case r := <-a.ch.inputs:
		return func() { s.inputRead(r) }
	case r := <-a.ch.tableEnds:
		return func() { s.tableEndsRead(r) }
	}
}

// request steps a rebalance callback's input; the core answers it with a
// Reply. Records polled before the callback are taken first: the
// callback may revoke their tasks.
func (s *shell) request(r request) {
	select {
	case f := <-s.a.ch.polls:
		s.polled(f)
	default:
	}
	s.nextReq++
	s.waiting[s.nextReq] = r.done
	s.step(r.in(s.nextReq))
}

// assigned steps the group's latest assignment for this member.
func (s *shell) assigned() {
	a := s.a
	asg := a.assignment.Load()
	if asg == nil {
		return
	}
	_, gen := a.group.GroupMetadata()
	in := instance.Assignment{Active: asg.Active, Standby: asg.Standby, Learner: asg.Learner, Followup: asg.Followup,
		Generation: gen, LedGeneration: a.ledGen.Load()}
	if sent := a.sentLags.Load(); sent != nil {
		in.Subscribed = *sent
	}
	s.step(in)
}

func (s *shell) step(in instance.Input) {
	s.core.Step(in)
	s.apply(s.core.Ready())
}

// rewinding reports whether the input rewinds (instance.RewindRunning):
// nothing is processed, no poll is asked for and rebalance callbacks wait.
func (s *shell) rewinding() bool { return s.core.Rewind() == instance.RewindRunning }

func (s *shell) requestPoll() {
	if s.polling || s.rewinding() {
		return
	}
	s.polling = true
	s.a.pollAsked.Store(time.Now().UnixNano())
	s.a.ch.pollReq <- struct{}{}
}

// poller polls cl each time it is asked and hands the records over,
// until the loop is gone.
func (a *App) poller(cl *kgo.Client, req <-chan struct{}, out chan<- kgo.Fetches, maxRecs int, wait time.Duration) {
	defer a.pollers.Done()
	ctx := a.runCtx
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.ch.done:
			return
		case <-req:
		}
		pctx, cancel := context.WithTimeout(ctx, wait)
		f := cl.PollRecords(pctx, maxRecs)
		cancel()
		select {
		case out <- f:
		case <-ctx.Done():
			return
		case <-a.ch.done:
			return
		}
	}
}

// stopPolling ends the pollers once the loop is gone.
func (a *App) stopPolling() {
	a.ch.close()
	a.pollers.Wait()
}

// polled takes a poll's records: those of running tasks go to the
// backlog, the next poll starts, and the workers process.
func (s *shell) polled(f kgo.Fetches) {
	a := s.a
	s.polling = false
	a.polledAt.Store(time.Now().UnixNano())
	if f.IsClientClosed() {
		a.fail(errors.New("baton: client closed"))
		return
	}
	f.EachError(func(topic string, p int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			a.log.Warn("fetch error", "topic", topic, "partition", p, "err", err)
		}
	})
	if s.step(instance.Polled{}); s.rewinding() {
		// The transaction aborted: what was polled follows work that is
		// gone (instance.Rewind).
		return
	}
	f.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 {
			s.fetchedEmpty(p)
			return
		}
		if sub, ok := a.bySource[p.Topic]; ok {
			id := topology.TaskID(sub, p.Partition)
			a.backlog[id] = append(a.backlog[id], p.Records...)
		}
	})
	// The next poll runs while the workers process, unless commits fall
	// behind (committed polls again) or the backlog is full; then it is
	// asked for once the workers have worked the backlog down.
	s.pollIfCaughtUp()
	s.dispatch()
	s.pollIfCaughtUp()
	s.countWaiting()
}

// countWaiting publishes how many polled records wait for each task
// (work.Task.Waiting).
func (s *shell) countWaiting() {
	for id, t := range s.a.tasks {
		t.Waiting.Store(int64(len(s.a.backlog[id])))
	}
}

// pollIfCaughtUp asks for more input unless the backlog already holds a
// poll's worth or commits are behind. A task that just became active
// gets its first records from the next poll, so the backlog must not
// have to be worked off first.
func (s *shell) pollIfCaughtUp() {
	if s.a.commit.Exclusive() {
		return
	}
	n := 0
	for id, recs := range s.a.backlog {
		if t := s.a.tasks[id]; t == nil || t.Boot == nil {
			n += len(recs) // records waiting for a task's tables do not count
		}
	}
	if n < pollMax {
		s.requestPoll()
	}
}

// punctuateEvery is how often the runtime punctuates the timers of each
// active task with timers: the wall-clock timers fire that late at most
// (plus a turn).
const punctuateEvery = 100 * time.Millisecond

// dispatch hands each running task its backlog on its worker and waits
// for one turn (turnBudget): records a worker did not reach go back to
// the backlog, and s.behind says so. Records of a task still restoring
// wait; those of tasks not active here are dropped (their next owner
// reads them again). Under exactly-once nothing is processed while a
// transaction commits. A running task with timers not punctuated for
// punctuateEvery is punctuated after its records, on its worker.
func (s *shell) dispatch() {
	a := s.a
	if s.held() {
		return
	}
	s.behind = false
	per := make([][]*work.Batch, len(a.workers))
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	now := time.Now()
	deadline := now.Add(turnBudget)
	byTask := map[string]*work.Batch{}
	held := map[string][]*kgo.Record{} // records waiting for their task's tables
	busy := false
	defer func() {
		if busy {
			govern.Process.Busy(now)
		}
	}()
	for id, recs := range a.backlog {
		st := s.core.Role(id)
		if st.Role != lifecycle.Active {
			delete(a.backlog, id)
			continue
		}
		t, ok := a.tasks[id]
		if !ok || !s.core.Running(id) || t.Proc == nil {
			continue
		}
		run, wait := s.split(t, recs)
		if len(wait) > 0 {
			held[id] = wait
		}
		if len(run) == 0 {
			continue
		}
		delete(a.backlog, id)
		busy = true
		wg.Add(1)
		b := &work.Batch{Task: t, Recs: run, Deadline: deadline, Done: &wg, Err: &failed}
		byTask[id] = b
		per[t.Worker] = append(per[t.Worker], b)
	}
	for id, t := range a.tasks {
		if !t.Sub.Timers || now.Sub(t.Punctuated) < punctuateEvery || t.Proc == nil ||
			s.core.Role(id).Role != lifecycle.Active || !s.core.Running(id) {
			continue
		}
		t.Punctuated = now
		if b := byTask[id]; b != nil {
			b.Punctuate = now
			continue
		}
		wg.Add(1)
		per[t.Worker] = append(per[t.Worker], &work.Batch{Task: t, Punctuate: now, Deadline: deadline, Done: &wg, Err: &failed})
	}
	for w, bs := range per {
		if len(bs) > 0 {
			a.workers[w].In <- bs
		}
	}
	wg.Wait()
	for _, bs := range per {
		for _, b := range bs {
			left := b.Recs[b.N:]
			if len(left) > 0 {
				s.behind = true
			}
			if w := held[b.Task.ID]; len(w) > 0 || len(left) > 0 {
				// A table's records before those that waited for it.
				a.backlog[b.Task.ID] = append(slices.Clip(left), w...)
				if len(left) == 0 && s.bootDone(b.Task) {
					s.behind = true // the waiting records may go now
				}
			}
		}
	}
	s.countWaiting()
	if e := failed.Load(); e != nil {
		a.fail(*e)
	}
}

func (s *shell) activeTasks() []*work.Task { return s.a.activeTasks() }

// activeTasks lists the tasks with a processor, by id.
func (a *App) activeTasks() []*work.Task {
	var out []*work.Task
	for _, t := range a.tasks {
		if t.Active {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (s *shell) tasksOf(ids []string) []*work.Task {
	var out []*work.Task
	for _, id := range ids {
		if t, ok := s.a.tasks[id]; ok {
			out = append(out, t)
		}
	}
	return out
}

// apply carries out the core's effects, in order.
func (s *shell) apply(fx []instance.Effect) {
	a := s.a
	for _, e := range fx {
		switch e := e.(type) {
		case instance.OpenStores:
			t := a.runtimeTask(e.Task)
			a.openAsync(t)
		case instance.CloseStores:
			if t, ok := a.tasks[e.Task]; ok {
				a.closeTask(t)
			}
		case instance.Forget:
			a.forgetTask(e.Task)
		case instance.StartRestore:
			s.startRestore(a.tasks[e.Task], e.Checkpoints)
		case instance.StopRestore:
			s.stopRestore(a.tasks[e.Task])
		case instance.PauseInput:
			a.group.PauseFetchPartitions(a.sourcePartitions(a.runtimeTask(e.Task)))
			a.emit(Event{Kind: EventPaused, Task: e.Task})
		case instance.ResumeInput:
			s.awaitApply(e.Task) // it processes from now on
			a.group.ResumeFetchPartitions(a.sourcePartitions(a.runtimeTask(e.Task)))
			if r := s.core.Role(e.Task); r.Role == lifecycle.Active && r.Phase == lifecycle.Running {
				s.processing(a.tasks[e.Task]) // its restore is done
			}
		case instance.StartProcessor:
			s.startProcessor(e.Task)
		case instance.Commit:
			a.commit.Begin(e.Seq, s.tasksOf(e.Tasks), e.Final)
		case instance.ReadEnds:
			a.readEndsAsync(e.Seq, e.Tasks)
		case instance.Rejoin:
			s.rejoin(e.Why)
		case instance.Reply:
			s.reply(e.Request)
		case instance.Publish:
			a.publish(e.Snapshot)
		case instance.Leave:
			s.stopped, s.exit = a.leave(s.activeTasks()), true
		case instance.StopForRestart:
			s.stopped, s.exit = a.stopForRestart(s.activeTasks()), true
		case instance.Poll:
			s.requestPoll()
		case instance.Rewind:
			// The rewind writes the active tasks' stores.
			s.awaitApply("")
			s.awaitWrites()
			s.startRewind()
		case instance.Fail:
			a.fail(errors.New("baton: " + e.Err))
		case instance.Notify:
			a.notify(e.Note)
		default:
			a.fail(fmt.Errorf("baton: the instance core emitted an effect the shell does not know: %T", e))
		}
	}
}

// startProcessor makes task id's processor; it processes once its
// restore is done (at once after a warm promotion).
func (s *shell) startProcessor(id string) {
	a := s.a
	if s.core.Role(id).Phase == lifecycle.Running {
		s.awaitApply(id) // a warm promotion: it processes at once
	}
	t := a.runtimeTask(id)
	t.AssignedAt, t.First, t.Replayed, t.Punctuated = time.Now(), false, 0, time.Time{}
	t.Worker = a.pinWorker()
	t.Proc = t.Sub.NewProcessor(t.ID, t.Part)
	t.Ctx = work.NewContext(s, t)
	t.Active = true
	if s.core.Role(id).Phase == lifecycle.Running {
		s.processing(t) // nothing to restore first
	}
	s.startTableBoot(t)
}

// processing: task t starts processing now, its stores holding what it
// restored and nothing it processed (config.onStart sees it then).
func (s *shell) processing(t *work.Task) {
	if t != nil && s.a.cfg.OnStart != nil {
		s.a.cfg.OnStart(t)
	}
}

// runtimeTask returns the task's runtime half, making it if needed.
func (a *App) runtimeTask(id string) *work.Task {
	if t, ok := a.tasks[id]; ok {
		return t
	}
	sub, part, _ := topology.ParseTaskID(id)
	t := &work.Task{ID: id, Sub: a.subs[sub], Part: part, Stores: map[string]*taskstore.Store{}, Offsets: map[string]kgo.EpochOffset{}}
	a.tasks[id] = t
	return t
}

// storesOf names a task's stores, for the core.
func (a *App) storesOf(id string) ([]string, error) {
	subID, _, err := topology.ParseTaskID(id)
	sub, known := a.subs[subID]
	if err != nil || !known {
		return nil, fmt.Errorf("unknown task %q", id)
	}
	var out []string
	for _, st := range sub.Stores {
		out = append(out, st.Name)
	}
	return out, nil
}

func (s *shell) storesOpened(o openResult) {
	a := s.a
	delete(a.openingTasks, o.t.ID)
	if next, ok := a.reopen[o.t.ID]; ok {
		// The core asked for the stores again while this open ran (the
		// task was dropped and assigned again): this result is stale.
		// Close what it opened; the newer open waits for that close, and
		// its answer is the one the core gets.
		delete(a.reopen, o.t.ID)
		if o.in.Err == "" {
			o.t.Stores = o.stores
			a.closeTask(o.t)
		}
		a.openAsync(next)
		return
	}
	if t, ok := a.tasks[o.t.ID]; !ok || t != o.t {
		// Not the task's runtime half any more: close what was opened.
		if o.in.Err == "" {
			o.t.Stores = o.stores
			a.closeTask(o.t)
		}
		return
	}
	// The core says what to do with the stores of a task it dropped
	// while they opened: close them, and forget the task.
	t := o.t
	if o.in.Err == "" {
		t.Stores = o.stores
		for name, st := range o.stores {
			o.in.Checkpoints[name] = st.Checkpoint
		}
	}
	s.step(o.in)
}

// openAsync opens a task's stores in the background (a large Pebble store
// takes a while), after any close of them still running, and reads their
// changelogs' start and end offsets; the result comes back as Opened, and
// the stores are the loop's from then on.
func (a *App) openAsync(t *work.Task) {
	if a.openingTasks[t.ID] {
		a.reopen[t.ID] = t
		return
	}
	prev := a.closing[t.ID]
	a.openingTasks[t.ID] = true
	ctx, ch := a.runCtx, a.ch // this member's, as in oneShot
	a.closers.Add(1)          // Run waits for it before the state dir lock goes
	go func() {
		defer a.closers.Done()
		if prev != nil {
			<-prev
		}
		stores, ends, err := a.openStores(ctx, t.ID, t.Part, t.Sub.Stores)
		in := instance.Opened{Task: t.ID, Checkpoints: map[string]int64{}, Ends: ends}
		if err != nil {
			in.Err = err.Error()
		}
		select {
		case ch.opened <- openResult{t: t, in: in, stores: stores}:
		case <-ch.done:
			for _, s := range stores {
				if err := s.State.Close(); err != nil {
					a.log.Warn("closing store", "task", t.ID, "store", s.Name, "err", err)
				}
			}
		}
	}()
}

func (s *shell) reply(request int) {
	if done, ok := s.waiting[request]; ok {
		close(done)
		delete(s.waiting, request)
	}
}

// committed finishes a commit and tells the core.
func (s *shell) committed(r commit.Result) {
	writing, cd := s.takeResult(r)
	switch {
	case writing: // the core hears of it once written
	case r.Seq > 0:
		s.step(cd)
	case r.Seq < commit.FinalSeq: // an abort the core asked for at a loss
		s.step(instance.Aborted{Seq: r.Seq})
	}
	// Processing may have waited for the commit.
	s.dispatch()
	s.pollIfCaughtUp()
}

// takeResult takes a commit's result to the committer and the stores: an
// aborted transaction's writes are rolled back, and the writes a commit
// made durable start to be written (in the background, in order). It says
// whether a write started.
func (s *shell) takeResult(r commit.Result) (writing bool, cd instance.CommitDone) {
	w, cd := s.a.commit.Done(r)
	if r.Aborted {
		s.rollBack()
	}
	if w != nil {
		s.startWrite(w)
	}
	return w != nil, cd
}

// finalCommit commits the tasks' work and waits for it, at the end of a
// membership, finishing the commits before it on the way.
func (s *shell) finalCommit(ctx context.Context, tasks []*work.Task) error {
	s.a.commit.Begin(commit.FinalSeq, tasks, true)
	for {
		select {
		case r := <-s.a.ch.commits:
			// A write it starts ends before the stores close.
			_, cd := s.takeResult(r)
			if r.Seq == commit.FinalSeq {
				return r.Err
			}
			s.core.Step(cd) // its effects are moot: the loop is ending
			s.core.Ready()
		case <-ctx.Done():
			return fmt.Errorf("baton: final commit: %w", ctx.Err())
		}
	}
}

// planned hands the leader's plan of a round to the loop (see led).
func (c loopChans) planned(l instance.Led) {
	c.ledLast.Store(&l)
	select {
	case c.led <- struct{}{}:
	default: // a signal is pending: the loop takes this Led with it
	}
}

// settleMax bounds how long a rejoin waits for a session's offset fetch:
// a session with no new partitions fetches none. rejoinRecheck is how
// often a held rejoin looks again.
const (
	settleMax     = 300 * time.Millisecond
	rejoinRecheck = 20 * time.Millisecond
)

// rejoin asks the group for a rebalance (instance.Rejoin), unless that
// would cut short the round before it. kgo fetches a session's committed
// offsets after the assignment, and only then fetches the records of the
// partitions it assigned; a rebalance forced before that offset fetch
// ends cancels it, and those partitions wait for a later session's fetch.
// Learners that become ready one after another ask for rounds that
// follow each other that way: on the embedded cluster, the partitions a
// new instance was given waited 0.5 s through two further rounds. So a
// rejoin asked for while a round is under way (joined but not yet
// assigned), or before the session's offsets are fetched (at most
// settleMax after its assignment), waits for that, and the asks made
// while it waits become one rebalance. A held rejoin waits at most a
// rebalance timeout for a round under way.
func (s *shell) rejoin(why string) {
	a := s.a
	now := time.Now().UnixNano()
	if !roundSettled(now, max(a.joinedAt.Load(), s.forcedAt), a.assignedAt.Load(), a.fetchedAt.Load(), a.cfg.Rebalance) {
		if s.rejoinWhy == "" {
			s.rejoinCheck = time.After(rejoinRecheck)
			s.rejoinWhy = why
		} else if !strings.Contains(s.rejoinWhy, why) {
			s.rejoinWhy += "; " + why
		}
		return
	}
	a.log.Info("rejoining the group", "why", why)
	s.forcedAt = now
	a.group.ForceRebalance()
}

// roundSettled reports whether a rebalance forced at now would cut no
// round short (rejoin), given when this member last joined or forced a
// rebalance, was last assigned, and last fetched its session's offsets
// (unix nanos; 0: never): no round is under way (or one has been for a
// rebalance timeout), and the session's offsets are fetched (or
// settleMax passed since its assignment).
func roundSettled(now, joined, assigned, fetched int64, rebalance time.Duration) bool {
	if joined > assigned {
		return now-joined >= rebalance.Nanoseconds()
	}
	return fetched >= assigned || now-assigned >= settleMax.Nanoseconds()
}

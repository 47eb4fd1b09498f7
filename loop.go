package baton

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/baton-streams/baton/assign"
	"github.com/baton-streams/baton/lifecycle"
	"github.com/baton-streams/baton/member"
	"github.com/baton-streams/baton/protocol"
	"github.com/baton-streams/baton/state"
	"github.com/baton-streams/baton/topology"
)

// loop is the App's control thread: it reconciles standbys and learners
// with the latest assignment, feeds changelog records to restoring stores,
// polls input and hands it to the workers, commits, and drains on exit.
func (a *App) loop(ctx context.Context) error {
	var drainStart time.Time
	lastCommit, lastLags := time.Now(), time.Now()
	for {
		select {
		case err := <-a.fatal:
			return a.abort(err)
		default:
		}
		if ctx.Err() != nil && a.cfg.stopMode == StopForRestart {
			return a.stopForRestart()
		}
		if ctx.Err() != nil && !a.leaving.Load() {
			drainStart = time.Now()
			a.startLeaving()
		}
		if a.leaving.Load() {
			left := a.activeCount()
			timedOut := time.Since(drainStart) > a.cfg.drainTimeout
			forced := false
			select {
			case <-a.leaveNow:
				forced = true
			default:
			}
			if left == 0 || timedOut || forced || a.nobodyToTakeOver() {
				if left > 0 {
					a.log.Warn("leaving before every task moved", "active", left, "timed_out", timedOut)
				}
				return a.leave()
			}
		}
		a.reconcile()
		wait := 100 * time.Millisecond
		if a.restoreStep() {
			wait = 2 * time.Millisecond // restoring: do not let an idle input slow it
		}

		pctx, cancel := context.WithTimeout(context.Background(), wait)
		fetches := a.group.PollRecords(pctx, 5000)
		cancel()
		if fetches.IsClientClosed() {
			return errors.New("baton: client closed")
		}
		fetches.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				a.log.Warn("fetch error", "topic", topic, "partition", p, "err", err)
			}
		})
		if a.rewind.Swap(false) {
			// The transaction aborted: what was polled follows work that
			// is gone. Read again from the last commit.
			rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := a.rewindInput(rctx)
			rcancel()
			if err != nil {
				a.log.Warn("rewinding input; trying again", "err", err)
				a.rewind.Store(true)
			}
			a.group.AllowRebalance()
			continue
		}
		if err := a.dispatch(fetches); err != nil {
			a.group.AllowRebalance()
			return a.abort(err)
		}
		if time.Since(lastCommit) >= a.cfg.commitInterval {
			lastCommit = time.Now()
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			a.mu.Lock()
			err := a.commitAsyncLocked(cctx, a.activeTasksLocked())
			a.mu.Unlock()
			cancel()
			if err != nil {
				a.log.Warn("commit failed; retrying at the next interval", "err", err)
			}
		}
		a.group.AllowRebalance()
		if time.Since(lastLags) >= time.Second {
			lastLags = time.Now()
			a.refreshLags(context.Background())
		}
		if a.rejoin.Swap(false) {
			a.log.Info("learner ready: rejoining the group")
			a.group.ForceRebalance()
		}
	}
}

// abort stops after an error without committing anything more.
func (a *App) abort(err error) error {
	a.mu.Lock()
	if a.exactlyOnce() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if aerr := a.group.EndTransaction(ctx, kgo.TryAbort); aerr != nil {
			a.log.Warn("aborting the transaction", "err", aerr)
		}
		cancel()
	}
	for _, t := range a.tasks {
		a.closeTaskLocked(t)
		delete(a.tasks, t.id)
	}
	a.publishSnapshotLocked()
	a.mu.Unlock()
	a.log.Error("stopping", "err", err)
	return err
}

func (a *App) startLeaving() {
	a.leaving.Store(true)
	a.publishSnapshot()
	a.log.Info("draining: asking the group to move this instance's tasks", "timeout", a.cfg.drainTimeout)
	a.emit(Event{Kind: EventLeaving})
	a.group.ForceRebalance()
}

// leave commits everything and leaves the group, within 10 s in all.
func (a *App) leave() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a.mu.Lock()
	err := a.commitLocked(ctx, a.activeTasksLocked())
	a.mu.Unlock()
	if err != nil {
		a.log.Warn("final commit", "err", err)
	}
	if err := a.group.LeaveGroupContext(ctx); err != nil {
		a.log.Warn("leaving the group", "err", err)
	}
	if a.cfg.staticMember {
		// The client does not leave for a static member (it expects it
		// back): a drained instance leaves by its instance id, so the
		// group does not wait a session timeout to rebalance.
		resp, err := a.admin.LeaveGroup(ctx, kadm.LeaveGroup(a.cfg.appID).InstanceIDs(a.cfg.instanceID).Reason("baton: drained"))
		if err == nil {
			err = resp.Error()
		}
		if err != nil && !errors.Is(err, kerr.UnknownMemberID) { // the client left already
			a.log.Warn("leaving the group", "err", err)
		}
	}
	a.log.Info("left the group")
	return nil
}

// stopForRestart commits what was processed and closes the tasks without
// leaving the group: the group keeps this static member's tasks for it
// until the session timeout.
func (a *App) stopForRestart() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.commitLocked(ctx, a.activeTasksLocked()); err != nil {
		a.log.Warn("final commit before the restart", "err", err)
	}
	for _, t := range a.tasks {
		a.closeTaskLocked(t)
		delete(a.tasks, t.id)
	}
	a.publishSnapshotLocked()
	a.log.Info("stopped for a restart: still a member of the group until the session timeout", "session_timeout", a.cfg.session)
	return nil
}

// nobodyToTakeOver reports whether this instance led the current
// generation and every instance in its plan is leaving: no task can move.
func (a *App) nobodyToTakeOver() bool {
	_, gen := a.group.GroupMetadata()
	p := a.lastPlan.Load()
	if p == nil || p.Generation != gen || a.ledGen.Load() != gen {
		return false
	}
	for _, in := range p.Instances {
		if !in.Leaving {
			return false
		}
	}
	return true
}

func (a *App) activeCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.activeTasksLocked())
}

func (a *App) activeTasksLocked() []*task {
	var out []*task
	for _, t := range a.tasks {
		if t.role == roleActive {
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// dispatch hands each active task its records on its worker and waits.
// Records of a task still restoring wait in the backlog.
func (a *App) dispatch(fetches kgo.Fetches) error {
	a.mu.Lock()
	backlog := a.backlog
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		if len(p.Records) == 0 {
			return
		}
		sub, ok := a.bySource[p.Topic]
		if !ok {
			return
		}
		id := topology.TaskID(sub, p.Partition)
		backlog[id] = append(backlog[id], p.Records...)
	})
	per := make([][]batch, len(a.workers))
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	for id, recs := range backlog {
		t, ok := a.tasks[id]
		if !ok || t.role != roleActive {
			delete(backlog, id) // revoked: the next owner reads them again
			continue
		}
		if !t.running() {
			continue
		}
		delete(backlog, id)
		wg.Add(1)
		per[t.worker] = append(per[t.worker], batch{t: t, recs: recs, done: &wg, err: &failed})
	}
	a.mu.Unlock()
	for w, bs := range per {
		if len(bs) > 0 {
			a.workers[w].in <- bs
		}
	}
	wg.Wait()
	if e := failed.Load(); e != nil {
		return *e
	}
	return nil
}

// commitLocked makes the processed work of tasks durable, in order: wait
// for every produced record (changelog, repartition, output) to be
// acknowledged, apply each store's pending writes with the acknowledged
// changelog offset, then commit the input offsets and wait for the
// commit. Revokes and leaving use it.
func (a *App) commitLocked(ctx context.Context, tasks []*task) error {
	if a.exactlyOnce() {
		return a.commitTxnLocked(ctx, true)
	}
	start := time.Now()
	offsets, err := a.durableLocked(ctx, tasks)
	if err != nil || len(offsets) == 0 {
		return err
	}
	var commitErr error
	a.group.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = commitResult(resp, err)
	})
	a.purger.committed(offsets, commitErr)
	a.metrics.commitSeconds.Observe(time.Since(start).Seconds())
	return commitErr
}

// commitAsyncLocked is commitLocked whose offset commit does not wait: a
// periodic commit during a rebalance would otherwise stall every task
// until the rebalance ends. The client orders commits, so a later
// commit (a revoke's) waits for this one.
func (a *App) commitAsyncLocked(ctx context.Context, tasks []*task) error {
	if a.exactlyOnce() {
		if err := a.commitTxnLocked(ctx, false); !errors.Is(err, errTxnRetry) {
			return err
		}
		return nil // tried again at the next interval
	}
	start := time.Now()
	offsets, err := a.durableLocked(ctx, tasks)
	if err != nil || len(offsets) == 0 {
		return err
	}
	a.group.CommitOffsets(context.Background(), offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		a.purger.committed(offsets, commitResult(resp, err))
		if err := commitResult(resp, err); err != nil {
			a.log.Debug("periodic commit failed; the next one retries", "err", err)
		}
		a.metrics.commitSeconds.Observe(time.Since(start).Seconds())
	})
	return nil
}

func commitResult(resp *kmsg.OffsetCommitResponse, err error) error {
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if e := kerr.ErrorForCode(p.ErrorCode); e != nil {
				return fmt.Errorf("committing %s[%d]: %w", t.Topic, p.Partition, e)
			}
		}
	}
	return nil
}

// durableLocked flushes produced records and applies the tasks' pending
// store writes at the acknowledged changelog offsets; it returns the input
// offsets that are now safe to commit.
func (a *App) durableLocked(ctx context.Context, tasks []*task) (map[string]map[int32]kgo.EpochOffset, error) {
	offsets := inputOffsets(tasks)
	dirty := false
	for _, t := range tasks {
		for _, s := range t.stores {
			dirty = dirty || len(s.pending) > 0
		}
	}
	if len(offsets) == 0 && !dirty {
		return nil, nil
	}
	if err := a.group.Flush(ctx); err != nil {
		return nil, fmt.Errorf("baton: flushing produced records: %w", err)
	}
	select {
	case err := <-a.fatal:
		a.fail(err) // keep it for the loop
		return nil, err
	default:
	}
	if err := a.applyPendingLocked(tasks); err != nil {
		return nil, err
	}
	return offsets, nil
}

// inputOffsets are the next input offsets to commit for tasks, by topic
// and partition.
func inputOffsets(tasks []*task) map[string]map[int32]kgo.EpochOffset {
	offsets := map[string]map[int32]kgo.EpochOffset{}
	for _, t := range tasks {
		for topic, eo := range t.offsets {
			if offsets[topic] == nil {
				offsets[topic] = map[int32]kgo.EpochOffset{}
			}
			offsets[topic][t.part] = eo
		}
	}
	return offsets
}

// applyPendingLocked applies each store's pending writes with the
// acknowledged changelog offset as its checkpoint.
func (a *App) applyPendingLocked(tasks []*task) error {
	for _, t := range tasks {
		for _, s := range t.stores {
			if len(s.pending) == 0 {
				continue
			}
			b := &state.Batch{}
			for k, w := range s.pending {
				if w.value == nil {
					b.Delete([]byte(k))
				} else {
					b.Put([]byte(k), w.value)
				}
			}
			cp := s.acked.Load()
			if err := s.st.Apply(b, cp); err != nil {
				return fmt.Errorf("baton: task %s store %s: applying at changelog offset %d: %w", t.id, s.name, cp, err)
			}
			s.checkpoint, s.end = cp, max(s.end, cp)
			clear(s.pending)
		}
	}
	return nil
}

// reconcile opens and closes standbys and learners to match the latest
// assignment. Actives come and go through the rebalance callbacks.
func (a *App) reconcile() {
	select {
	case <-a.wake:
	default:
		return
	}
	asg := a.assignment.Load()
	if asg == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	want := map[string]lifecycle.Event{}
	for _, id := range asg.Standby {
		want[id] = lifecycle.AssignStandby
	}
	for _, id := range asg.Learner {
		want[id] = lifecycle.AssignLearner
	}
	for id, t := range a.tasks {
		if t.life.Role == lifecycle.Active {
			continue
		}
		ev, keep := want[id]
		switch {
		case keep:
			if (ev == lifecycle.AssignLearner) != (t.life.Role == lifecycle.Learner) {
				a.stepLocked(t, ev)
				t.ready = false
			}
		case slices.Contains(asg.Active, id):
			// About to be promoted by the assigned callback: keep it warm.
		case t.life.Role == lifecycle.Learner && t.ready && asg.Followup:
			// Its task was revoked for it this round and is assigned in the
			// follow-up: keep replicating the owner's last writes.
		default:
			a.stepLocked(t, lifecycle.Unassign)
			delete(a.tasks, id)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(want)) {
		if _, ok := a.tasks[id]; ok {
			continue
		}
		t, err := a.newTask(id)
		if err == nil {
			err = a.stepLocked(t, want[id])
		}
		if err != nil {
			a.log.Warn("cannot start task", "task", id, "role", want[id], "err", err)
			continue
		}
		a.tasks[id] = t
		kind := EventStandby
		if t.life.Role == lifecycle.Learner {
			kind = EventLearner
		}
		a.emit(Event{Kind: kind, Task: id, Lag: t.lag.Load()})
		a.log.Info("warming a copy", "task", id, "role", t.role, "lag", t.lag.Load())
	}
	a.publishSnapshotLocked()
}

// newTask makes a closed task.
func (a *App) newTask(id string) (*task, error) {
	subID, part, perr := topology.ParseTaskID(id)
	ok := perr == nil
	sub, known := a.subs[subID]
	if !ok || !known {
		return nil, fmt.Errorf("baton: unknown task %q", id)
	}
	return &task{id: id, sub: sub, part: part, stores: map[string]*taskStore{}, offsets: map[string]kgo.EpochOffset{}}, nil
}

// stepLocked moves a task through its lifecycle and carries out the
// effects, except Commit, which callers batch before (see onRevoked).
func (a *App) stepLocked(t *task, ev lifecycle.Event) error {
	next, fx, err := lifecycle.Step(t.life, ev, t.stateful(), taskLag(t) == 0)
	if err != nil {
		return fmt.Errorf("baton: task %s: %w", t.id, err)
	}
	for _, e := range fx {
		switch e {
		case lifecycle.OpenStores:
			if err := a.openStoresLocked(t); err != nil {
				return err
			}
		case lifecycle.StartReading:
			a.startRestoringLocked(t)
		case lifecycle.StopReading:
			a.stopRestoringLocked(t)
		case lifecycle.PauseInput:
			a.group.PauseFetchPartitions(a.sourcePartitions(t))
		case lifecycle.ResumeInput:
			a.group.ResumeFetchPartitions(a.sourcePartitions(t))
		case lifecycle.StartProcessor:
			t.assignedAt, t.first, t.replayed = time.Now(), false, 0
			t.worker = a.pinWorkerLocked()
			t.proc = t.sub.NewProcessor(t.id, t.part)
			t.ctx = &taskContext{a: a, t: t}
		case lifecycle.CloseStores:
			a.closeTaskLocked(t)
		case lifecycle.ReportReady:
			t.ready = true
			a.rejoin.Store(true)
		case lifecycle.Commit:
		}
	}
	t.life = next
	t.role = roleName(next.Role)
	return nil
}

func roleName(r lifecycle.Role) string {
	switch r {
	case lifecycle.Active:
		return roleActive
	case lifecycle.Standby:
		return roleStandby
	case lifecycle.Learner:
		return roleLearner
	}
	return ""
}

// openStoresLocked opens a task's stores and reads their checkpoints.
func (a *App) openStoresLocked(t *task) error {
	id := t.id
	a.waitClosedLocked(id)
	for _, spec := range t.sub.Stores {
		var st state.Store
		var err error
		if a.cfg.memoryState {
			st = state.NewMemory(spec.Name)
		} else {
			st, err = state.OpenOrWipe(a.cfg.stateDir, id, spec.Name, a.log)
			if err != nil {
				a.closeTaskLocked(t)
				return err
			}
		}
		s := &taskStore{name: spec.Name, changelog: spec.Changelog, st: st, pending: map[string]pendingWrite{}}
		cp, has, err := st.Checkpoint()
		if err != nil {
			st.Close()
			a.closeTaskLocked(t)
			return fmt.Errorf("baton: task %s store %s: reading checkpoint: %w", id, spec.Name, err)
		}
		if has {
			s.checkpoint = cp
		}
		s.acked.Store(s.checkpoint)
		t.stores[spec.Name] = s
	}
	a.updateEndsLocked(t)
	delete(a.diskLag, id)
	delete(a.diskCP, id)
	return nil
}

// updateEndsLocked learns the changelog end offsets of a task's stores.
func (a *App) updateEndsLocked(t *task) {
	if !t.stateful() {
		return
	}
	topics := make([]string, 0, len(t.stores))
	for _, s := range t.stores {
		topics = append(topics, s.changelog)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ends, err := a.admin.ListEndOffsets(ctx, topics...)
	if err != nil {
		a.log.Warn("listing changelog end offsets", "task", t.id, "err", err)
		return
	}
	starts, err := a.admin.ListStartOffsets(ctx, topics...)
	if err != nil {
		a.log.Warn("listing changelog start offsets", "task", t.id, "err", err)
	}
	for _, s := range t.stores {
		o, ok := starts.Lookup(s.changelog, t.part)
		if err == nil && ok && o.Err == nil && s.checkpoint > 0 && s.checkpoint < o.Offset {
			// Records the store lacks are gone from the changelog: what it
			// holds cannot be brought up to date. Start over from the start.
			a.log.Warn("local state is behind its changelog's start; wiping it and restoring", "task", t.id, "store", s.name,
				"checkpoint", s.checkpoint, "changelog_start", o.Offset)
			if werr := s.st.Wipe(); werr != nil {
				a.log.Warn("wiping store", "task", t.id, "err", werr)
			}
			s.checkpoint = 0
			s.acked.Store(0)
		}
	}
	for _, s := range t.stores {
		if o, ok := ends.Lookup(s.changelog, t.part); ok && o.Err == nil {
			s.end, s.endKnown = max(s.end, o.Offset), true
			if s.checkpoint > s.end {
				// The changelog was recreated or truncated: start over.
				a.log.Warn("local state is ahead of its changelog; wiping it", "task", t.id, "store", s.name, "checkpoint", s.checkpoint, "end", s.end)
				if err := s.st.Wipe(); err != nil {
					a.log.Warn("wiping store", "task", t.id, "err", err)
				}
				s.checkpoint = 0
				s.acked.Store(0)
			}
		}
	}
	t.lag.Store(taskLag(t))
}

func taskLag(t *task) int64 {
	var l int64
	for _, s := range t.stores {
		l = max(l, s.lag())
	}
	return l
}

// startRestoringLocked makes the restore client read a task's changelogs
// from its stores' checkpoints.
func (a *App) startRestoringLocked(t *task) {
	parts := map[string]map[int32]kgo.Offset{}
	for _, s := range t.stores {
		parts[s.changelog] = map[int32]kgo.Offset{t.part: kgo.NewOffset().At(s.checkpoint)}
	}
	if len(parts) > 0 {
		a.restore.AddConsumePartitions(parts)
	}
}

func (a *App) stopRestoringLocked(t *task) {
	parts := map[string][]int32{}
	for _, s := range t.stores {
		parts[s.changelog] = []int32{t.part}
	}
	if len(parts) > 0 {
		a.restore.RemoveConsumePartitions(parts)
	}
}

// closeTaskLocked closes a task's stores in the background: closing a
// large Pebble store flushes it, which must not pause the other tasks.
// Opening the task's stores again waits for the close (see
// waitClosedLocked); Run waits for every close before it returns.
func (a *App) closeTaskLocked(t *task) {
	if len(t.stores) == 0 {
		return
	}
	stores := t.stores
	t.stores = map[string]*taskStore{}
	done := make(chan struct{})
	if prev, ok := a.closing[t.id]; ok {
		<-prev // one close at a time per task
	}
	a.closing[t.id] = done
	a.closers.Add(1)
	for _, s := range stores {
		if !a.cfg.memoryState {
			a.diskLag[t.id] = max(a.diskLag[t.id], s.lag())
			if a.diskCP[t.id] == nil {
				a.diskCP[t.id] = map[string]int64{}
			}
			a.diskCP[t.id][s.name] = s.checkpoint
		}
	}
	go func() {
		defer a.closers.Done()
		defer close(done)
		for name, s := range stores {
			if err := s.st.Close(); err != nil {
				a.log.Warn("closing store", "task", t.id, "store", name, "err", err)
			}
		}
	}()
}

// waitClosedLocked waits until a background close of the task's stores,
// if any, has finished.
func (a *App) waitClosedLocked(id string) {
	if done, ok := a.closing[id]; ok {
		<-done
		delete(a.closing, id)
	}
}

// restoreStep reads changelog records into the stores of standbys,
// learners and restoring actives. It reports whether any task is still
// behind its changelog.
func (a *App) restoreStep() bool {
	a.mu.Lock()
	restoring := 0
	for _, t := range a.tasks {
		if t.stateful() && !t.running() {
			restoring++
		}
	}
	a.mu.Unlock()
	if restoring == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	fetches := a.restore.PollRecords(ctx, 50000)
	cancel()
	a.mu.Lock()
	defer a.mu.Unlock()
	fetches.EachPartition(func(p kgo.FetchTopicPartition) {
		ref, ok := a.byChangelog[p.Topic]
		if !ok {
			return
		}
		t, ok := a.tasks[topology.TaskID(ref.sub, p.Partition)]
		if !ok || t.running() {
			return
		}
		s := t.stores[ref.name]
		if s == nil {
			return
		}
		if p.Err == nil {
			s.end, s.endKnown = max(s.end, p.HighWatermark), true
		}
		n, err := s.applyChangelog(p.Records)
		if err != nil {
			a.fail(fmt.Errorf("baton: task %s store %s: restoring: %w", t.id, s.name, err))
			return
		}
		if n == 0 {
			return
		}
		a.metrics.restored.WithLabelValues(t.id).Add(float64(n))
		if t.role == roleActive {
			t.replayed += n
		}
	})
	a.progressLocked()
	for _, t := range a.tasks {
		if t.stateful() && taskLag(t) > 0 {
			return true
		}
	}
	return false
}

// progressLocked updates lags and acts on them: a restored active starts,
// a caught-up learner asks for a rebalance.
func (a *App) progressLocked() {
	changed := false
	for _, t := range a.tasks {
		if !t.stateful() {
			continue
		}
		lag := taskLag(t)
		t.lag.Store(lag)
		a.metrics.lag.WithLabelValues(t.id, t.role).Set(float64(lag))
		switch {
		case t.life.Phase == lifecycle.Restoring && lag == 0:
			if err := a.stepLocked(t, lifecycle.CaughtUp); err != nil {
				a.fail(err)
				return
			}
			a.log.Info("restored; processing", "task", t.id, "replayed", t.replayed, "took", time.Since(t.assignedAt).Round(time.Millisecond))
			a.emit(Event{Kind: EventRestored, Task: t.id, Replayed: t.replayed})
			a.metrics.replayed.Add(float64(t.replayed))
			changed = true
		case t.life.Role == lifecycle.Learner && !t.ready && lag <= a.cfg.acceptableLag:
			if err := a.stepLocked(t, lifecycle.CaughtUp); err != nil {
				a.fail(err)
				return
			}
			a.log.Info("learner ready", "task", t.id, "lag", lag)
			a.emit(Event{Kind: EventLearnerReady, Task: t.id, Lag: lag})
			changed = true
		}
	}
	if changed {
		a.publishSnapshotLocked()
	}
}

func (a *App) sourcePartitions(t *task) map[string][]int32 {
	out := map[string][]int32{}
	for _, s := range t.sub.Sources {
		out[s] = []int32{t.part}
	}
	return out
}

// refreshLags reads changelog end offsets for every task with local state
// (open or on disk) and republishes the lags the subscription reports.
func (a *App) refreshLags(ctx context.Context) {
	a.mu.Lock()
	var topics []string
	for c := range a.byChangelog {
		topics = append(topics, c)
	}
	a.mu.Unlock()
	if len(topics) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	ends, err := a.admin.ListEndOffsets(cctx, topics...)
	if err != nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	local := a.diskCP
	for _, t := range a.tasks {
		for _, s := range t.stores {
			if o, ok := ends.Lookup(s.changelog, t.part); ok && o.Err == nil && !t.running() {
				s.end, s.endKnown = max(s.end, o.Offset), true
			}
		}
	}
	clear(a.diskLag)
	for id, stores := range local {
		if _, open := a.tasks[id]; open {
			continue
		}
		sub, part, perr := topology.ParseTaskID(id)
		ok := perr == nil
		if _, known := a.subs[sub]; !ok || !known {
			continue
		}
		lag := int64(0)
		for _, spec := range a.subs[sub].Stores {
			cp, has := stores[spec.Name]
			o, ok := ends.Lookup(spec.Changelog, part)
			if !has || !ok || o.Err != nil {
				lag = -1
				break
			}
			lag = max(lag, o.Offset-cp)
		}
		if lag >= 0 {
			a.diskLag[id] = lag
		}
	}
	a.progressLocked()
	a.publishSnapshotLocked()
}

// publishSnapshot replaces what Subscription reports.
func (a *App) publishSnapshot() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.publishSnapshotLocked()
}

func (a *App) publishSnapshotLocked() {
	snap := &subSnapshot{lags: map[string]int64{}}
	for id, l := range a.diskLag {
		snap.lags[id] = max(l, 0)
	}
	for _, t := range a.tasks {
		if t.stateful() {
			snap.lags[t.id] = t.lag.Load()
		}
		switch t.role {
		case roleStandby:
			snap.standby = append(snap.standby, t.id)
		case roleLearner:
			snap.learner = append(snap.learner, t.id)
		}
	}
	a.snapshot.Store(snap)
	view := make([]taskView, 0, len(a.tasks))
	a.metrics.lag.Reset() // series of tasks gone from here disappear
	a.metrics.learners.Set(float64(len(snap.learner)))
	for _, t := range a.tasks {
		view = append(view, taskView{t: t, role: t.role})
		lag := int64(0)
		if t.stateful() {
			lag = t.lag.Load()
		}
		a.metrics.lag.WithLabelValues(t.id, t.role).Set(float64(lag))
	}
	a.view.Store(&view)
}

// self is the App as the balancer sees it.
type self App

func (s *self) Subscription(owned map[string][]int32) protocol.Subscription {
	a := (*App)(s)
	a.joinedAt.Store(time.Now().UnixNano()) // a join starts: time the round
	snap := a.snapshot.Load()
	sub := protocol.Subscription{InstanceID: a.cfg.instanceID, Endpoint: a.cfg.endpoint, Rack: a.cfg.rack,
		Capacity: int32(a.cfg.workers), Leaving: a.leaving.Load(), Lags: map[string]int64{}}
	// A task is active when every source partition of it is owned.
	count := map[string]int{}
	for topic, parts := range owned {
		sid, ok := a.bySource[topic]
		if !ok {
			continue
		}
		for _, p := range parts {
			count[topology.TaskID(sid, p)]++
		}
	}
	active := map[string]bool{}
	for id, n := range count {
		sid, _, _ := topology.ParseTaskID(id)
		if n == len(a.subs[sid].Sources) {
			sub.Active = append(sub.Active, id)
			active[id] = true
		}
	}
	for _, id := range snap.standby {
		if !active[id] {
			sub.Standby = append(sub.Standby, id)
		}
	}
	for _, id := range snap.learner {
		if !active[id] {
			sub.Learner = append(sub.Learner, id)
		}
	}
	for id, l := range snap.lags {
		sub.Lags[id] = l
	}
	return sub
}

func (s *self) Assigned(asg protocol.Assignment) {
	a := (*App)(s)
	a.assignment.Store(&asg)
	select {
	case a.wake <- struct{}{}:
	default:
	}
	_, gen := a.group.GroupMetadata()
	a.metrics.rebalances.Inc()
	took := time.Duration(0)
	if at := a.joinedAt.Load(); at > 0 {
		took = time.Since(time.Unix(0, at))
	}
	a.metrics.rebalance.Observe(took.Seconds())
	a.metrics.generation.Set(float64(gen))
	a.log.Info("rebalance", "generation", gen, "active", len(asg.Active), "standby", len(asg.Standby),
		"learners", len(asg.Learner), "revoked", len(asg.Revoked), "followup", asg.Followup, "took", took.Round(time.Millisecond))
	a.emit(Event{Kind: EventRebalance, Generation: gen,
		Detail: fmt.Sprintf("active=%v standby=%v learner=%v revoked=%v", asg.Active, asg.Standby, asg.Learner, asg.Revoked)})
}

func (s *self) Led(generation int32, st assign.State, plan assign.Plan) {
	a := (*App)(s)
	a.ledGen.Store(generation)
	ps := &PlanStatus{Generation: generation, Followup: plan.Followup, Lags: map[string]map[string]int64{}}
	leaving := map[string]bool{}
	for _, in := range st.Instances {
		leaving[in.ID] = in.Leaving
		lags := map[string]int64{}
		for id, l := range in.Lag {
			lags[string(id)] = l
		}
		ps.Lags[member.InstanceOf(in.ID)] = lags
	}
	for _, ip := range plan.Instances {
		ps.Instances = append(ps.Instances, PlanInstance{ID: member.InstanceOf(ip.ID), Leaving: leaving[ip.ID],
			Active: strs(ip.Active), Standby: strs(ip.Standby), Learner: strs(ip.Learner), Revoked: strs(ip.Revoked)})
	}
	// Reasons name instances by their assignor keys (id#member); show ids.
	var names []string
	for _, in := range st.Instances {
		names = append(names, in.ID, member.InstanceOf(in.ID))
	}
	short := strings.NewReplacer(names...)
	for _, r := range plan.Reasons {
		ps.Reasons = append(ps.Reasons, fmt.Sprintf("%s %s on %s: %s", r.Kind, r.Task, member.InstanceOf(r.Instance), short.Replace(r.Why)))
	}
	a.lastPlan.Store(ps)
	a.plansMu.Lock()
	a.plans = append(a.plans, *ps)
	if len(a.plans) > 20 {
		a.plans = a.plans[len(a.plans)-20:]
	}
	a.plansMu.Unlock()
	moved, learners := 0, 0
	for _, ip := range plan.Instances {
		moved += len(ip.Revoked)
		learners += len(ip.Learner)
	}
	if plan.Followup && moved == 0 {
		// A follow-up nobody triggers by revoking: the leader asks for it.
		a.rejoin.Store(true)
	}
	a.log.Info("rebalance planned as leader", "generation", generation, "instances", len(plan.Instances), "revoked", moved, "learners", learners, "followup", plan.Followup)
	a.emit(Event{Kind: EventLeader, Generation: generation, Detail: fmt.Sprintf("revoked=%d learners=%d followup=%v", moved, learners, plan.Followup)})
}

func strs(ids []assign.TaskID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = string(id)
	}
	return out
}

// onAssigned starts the tasks whose partitions this member now owns.
func (a *App) onAssigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.txnMember, _ = a.group.GroupMetadata()
	ids := map[string]bool{}
	for topic, parts := range assigned {
		if sid, ok := a.bySource[topic]; ok {
			for _, p := range parts {
				ids[topology.TaskID(sid, p)] = true
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		t, held := a.tasks[id]
		if held && t.life.Role == lifecycle.Active {
			continue
		}
		if !held {
			var err error
			if t, err = a.newTask(id); err != nil {
				a.fail(err)
				return
			}
		}
		warm := held && t.stateful()
		if warm {
			a.updateEndsLocked(t)
		}
		if err := a.stepLocked(t, lifecycle.AssignActive); err != nil {
			a.fail(err)
			return
		}
		a.tasks[id] = t
		lag := taskLag(t)
		how := "cold"
		switch {
		case !t.stateful():
			how = "stateless"
		case warm && lag <= a.cfg.acceptableLag:
			how = "warm"
		case lag == 0:
			how = "caught up"
		}
		a.log.Info("task assigned", "task", id, "state", how, "lag", lag)
		a.emit(Event{Kind: EventAssigned, Task: id, Lag: lag, Detail: how})
		if t.life.Phase == lifecycle.Restoring && lag == 0 {
			if err := a.stepLocked(t, lifecycle.CaughtUp); err != nil {
				a.fail(err)
				return
			}
		}
	}
	a.publishSnapshotLocked()
}

// onRevoked commits the tasks this member gives up, then closes them.
func (a *App) onRevoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var gone []*task
	for topic, parts := range revoked {
		sid, ok := a.bySource[topic]
		if !ok {
			continue
		}
		for _, p := range parts {
			if t, ok := a.tasks[topology.TaskID(sid, p)]; ok && t.role == roleActive && !slices.Contains(gone, t) {
				gone = append(gone, t)
			}
		}
	}
	if len(gone) == 0 {
		return
	}
	var commit []*task
	for _, t := range gone {
		if _, fx, err := lifecycle.Step(t.life, lifecycle.Revoke, t.stateful(), false); err == nil && slices.Contains(fx, lifecycle.Commit) {
			commit = append(commit, t)
		}
	}
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.commitLocked(cctx, commit); err != nil {
		a.log.Error("commit before revoke failed; the next owner replays from the last commit", "err", err)
	}
	for _, t := range gone {
		if !t.lastAt.IsZero() {
			a.emit(Event{Time: t.lastAt, Kind: EventLastRecord, Task: t.id, Record: t.lastRecord})
		}
		if err := a.stepLocked(t, lifecycle.Revoke); err != nil {
			a.log.Warn("revoke", "err", err)
		}
		a.emit(Event{Kind: EventRevoked, Task: t.id})
		a.log.Info("task revoked", "task", t.id, "processed", t.processed.Load())
		delete(a.tasks, t.id)
	}
	a.publishSnapshotLocked()
}

// onLost drops tasks whose partitions were lost (session expired):
// nothing is committed, the new owner replays.
func (a *App) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.exactlyOnce() && (a.txnProduced.Load() > 0 || a.txnProcessed.Load() > 0) {
		_ = a.abortTxnLocked(errors.New("baton: this member's partitions were lost (session expired)"))
	}
	for topic, parts := range lost {
		sid, ok := a.bySource[topic]
		if !ok {
			continue
		}
		for _, p := range parts {
			if t, ok := a.tasks[topology.TaskID(sid, p)]; ok && t.life.Role == lifecycle.Active {
				a.log.Warn("task lost", "task", t.id)
				if err := a.stepLocked(t, lifecycle.Lose); err != nil {
					a.log.Warn("lose", "err", err)
				}
				delete(a.tasks, t.id)
			}
		}
	}
	a.publishSnapshotLocked()
}

package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/baton-streams/baton/assign"
	"github.com/baton-streams/baton/instance"
	"github.com/baton-streams/baton/internal/taskstore"
	"github.com/baton-streams/baton/internal/work"
	"github.com/baton-streams/baton/lifecycle"
	"github.com/baton-streams/baton/member"
	"github.com/baton-streams/baton/protocol"
	"github.com/baton-streams/baton/state"
	"github.com/baton-streams/baton/topology"
)

// openStores opens a task's stores and reads their checkpoints, then its
// changelogs' start and end offsets: a store whose checkpoint is before
// the changelog's start (records it lacks are gone) or past its end (the
// changelog was recreated, or the state is another cluster's) is wiped
// to restore from scratch. It runs off the loop, and waits for the end
// of every store with state; the ends of empty stores it could not read
// are missing from the answer.
func (a *App) openStores(ctx context.Context, id string, part int32, specs []topology.StoreSpec) (map[string]*taskstore.Store, map[string]int64, error) {
	stores := map[string]*taskstore.Store{}
	closeAll := func() {
		for _, s := range stores {
			s.State.Close()
		}
	}
	for _, spec := range specs {
		var st state.Store
		var err error
		if a.cfg.MemoryState {
			st = state.NewMemory(spec.Name)
		} else if st, err = state.OpenOrWipe(a.cfg.StateDir, id, spec.Name, a.log, a.cfg.StoreOpts...); err != nil {
			closeAll()
			return nil, nil, err
		}
		s := taskstore.New(spec.Name, spec.Changelog, st, spec.Source)
		cp, has, err := st.Checkpoint()
		if err != nil {
			st.Close()
			closeAll()
			return nil, nil, fmt.Errorf("baton: task %s store %s: reading checkpoint: %w", id, spec.Name, err)
		}
		if has {
			s.Checkpoint = cp
		}
		s.Acked.Store(s.Checkpoint)
		stores[spec.Name] = s
	}
	if len(stores) == 0 {
		return stores, map[string]int64{}, nil
	}
	var topics []string
	for _, s := range stores {
		topics = append(topics, s.Changelog)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ends := map[string]int64{}
	listed, err := a.admin.ListEndOffsets(cctx, topics...)
	if err != nil {
		a.log.Warn("listing changelog end offsets", "task", id, "err", err)
	}
	// A store with state is used only once its changelog's end is known:
	// a checkpoint past it is state of another history (see below), and
	// the restore cannot go on before the changelog's leader answers
	// anyway.
	endKnown := func(s *taskstore.Store) bool {
		o, ok := listed.Lookup(s.Changelog, part)
		return s.Checkpoint == 0 || err == nil && ok && o.Err == nil
	}
	for wait := 250 * time.Millisecond; !allStores(stores, endKnown); wait = min(2*wait, 2*time.Second) {
		if wait == 250*time.Millisecond {
			a.log.Warn("changelog end offset unknown; waiting for it before using the local state", "task", id, "err", endError(stores, listed, err, part))
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		if ctx.Err() != nil {
			break // stopping: the ends stay unknown
		}
		lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
		listed, err = a.admin.ListEndOffsets(lctx, topics...)
		lcancel()
	}
	starts, serr := a.admin.ListStartOffsets(cctx, topics...)
	if serr != nil {
		a.log.Warn("listing changelog start offsets", "task", id, "err", serr)
	}
	for _, s := range stores {
		wipe := func(why string, args ...any) {
			a.log.Warn(why, append([]any{"task", id, "store", s.Name, "checkpoint", s.Checkpoint}, args...)...)
			if werr := s.State.Wipe(); werr != nil {
				a.log.Warn("wiping store", "task", id, "err", werr)
			}
			s.Checkpoint = 0
			s.Acked.Store(0)
		}
		if o, ok := starts.Lookup(s.Changelog, part); serr == nil && ok && o.Err == nil && s.Checkpoint > 0 && s.Checkpoint < o.Offset {
			wipe("local state is behind its changelog's start; wiping it and restoring", "changelog_start", o.Offset)
		}
		o, ok := listed.Lookup(s.Changelog, part)
		if err != nil || !ok || o.Err != nil {
			continue // unknown: the core reads it again
		}
		if s.Checkpoint > o.Offset {
			wipe("local state is ahead of its changelog (its checkpoint is past the changelog's end: state from another cluster, or a changelog deleted and created again); wiping it and restoring", "end", o.Offset)
		}
		ends[s.Name] = o.Offset
	}
	return stores, ends, nil
}

func allStores(stores map[string]*taskstore.Store, ok func(*taskstore.Store) bool) bool {
	for _, s := range stores {
		if !ok(s) {
			return false
		}
	}
	return true
}

// endError is why a listing of changelog end offsets did not give every
// store's end.
func endError(stores map[string]*taskstore.Store, listed kadm.ListedOffsets, err error, part int32) error {
	if err != nil {
		return err
	}
	for _, s := range stores {
		o, ok := listed.Lookup(s.Changelog, part)
		if !ok {
			return fmt.Errorf("%s[%d]: not in the answer", s.Changelog, part)
		}
		if o.Err != nil {
			return fmt.Errorf("%s[%d]: %w", s.Changelog, part, o.Err)
		}
	}
	return nil
}

// closeTask closes a task's stores in the background: closing a large
// Pebble store flushes it, which must not pause the other tasks. Opening
// the task's stores again waits for the close; Run waits for every close
// before it returns.
func (a *App) closeTask(t *work.Task) {
	t.Active, t.Proc = false, nil
	if len(t.Stores) == 0 {
		return
	}
	stores := t.Stores
	t.Stores = map[string]*taskstore.Store{}
	done := make(chan struct{})
	prev := a.closing[t.ID]
	a.closing[t.ID] = done
	var written <-chan struct{} // the store writes started off the loop before
	if a.shell != nil {
		written = a.shell.writeTail
	}
	a.closers.Add(1)
	go func() {
		defer a.closers.Done()
		defer close(done)
		if prev != nil {
			<-prev // one close at a time per task
		}
		if written != nil {
			<-written
		}
		for name, s := range stores {
			if err := s.State.Close(); err != nil {
				a.log.Warn("closing store", "task", t.ID, "store", name, "err", err)
			}
		}
	}()
}

// readEndsAsync reads the changelog end offsets of the tasks' stores off
// the loop; the answer comes back as Ends.
func (a *App) readEndsAsync(seq int, ids []string) {
	keys := map[string]map[int32][]instance.Key{}
	var topics []string
	// A store whose changelog is an input topic ends, for its restore,
	// at the group's committed offset of that input (see taskStore.limit).
	sources := map[string][]int32{}
	for _, id := range ids {
		subID, part, err := topology.ParseTaskID(id)
		if err != nil {
			continue
		}
		for _, st := range a.subs[subID].Stores {
			if st.Source {
				sources[st.Changelog] = append(sources[st.Changelog], part)
			}
			if keys[st.Changelog] == nil {
				keys[st.Changelog] = map[int32][]instance.Key{}
				topics = append(topics, st.Changelog)
			}
			keys[st.Changelog][part] = append(keys[st.Changelog][part], instance.Key{Task: id, Store: st.Name})
		}
	}
	a.oneShot(func(ctx context.Context, ch loopChans) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		out := instance.Ends{Seq: seq, Ends: map[instance.Key]int64{}}
		listed, err := a.admin.ListEndOffsets(ctx, topics...)
		if err == nil && len(sources) > 0 {
			listed, err = a.committedEnds(ctx, sources, listed)
		}
		for topic, parts := range keys {
			for p, ks := range parts {
				o, ok := listed.Lookup(topic, p)
				for _, k := range ks {
					if err == nil && ok && o.Err == nil {
						out.Ends[k] = o.Offset
					} else {
						out.Failed = append(out.Failed, k)
					}
				}
			}
		}
		select {
		case ch.ends <- out:
		case <-ch.done:
		}
	})
}

// committedEnds replaces, in listed, the end of each input partition in
// sources by the group's committed offset of it: where the active task
// processes from, so where a restore of a store whose changelog it is must
// stop. A partition without a commit ends at its start, where the active
// task begins.
func (a *App) committedEnds(ctx context.Context, sources map[string][]int32, listed kadm.ListedOffsets) (kadm.ListedOffsets, error) {
	var topics []string
	for t := range sources {
		topics = append(topics, t)
	}
	if a.cfg.ExactlyOnce {
		ctx = kadm.RequireStable(ctx)
	}
	committed, err := a.admin.FetchOffsets(ctx, a.cfg.AppID)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("reading the committed offsets of %v: %w", topics, err)
	}
	starts, err := a.admin.ListStartOffsets(ctx, topics...)
	if err != nil {
		return nil, err
	}
	for topic, parts := range sources {
		for _, p := range parts {
			end := kadm.ListedOffset{Topic: topic, Partition: p}
			if c, ok := committed.Lookup(topic, p); ok && c.At >= 0 {
				end.Offset = c.At
			} else if s, ok := starts.Lookup(topic, p); ok && s.Err == nil {
				end.Offset = s.Offset
			} else {
				end.Err = fmt.Errorf("no committed offset and no start offset for %s[%d]", topic, p)
			}
			if listed[topic] == nil {
				listed[topic] = map[int32]kadm.ListedOffset{}
			}
			listed[topic][p] = end
		}
	}
	return listed, nil
}

// publish replaces what Subscription, Status and the metrics report.
func (a *App) publish(s *instance.Snapshot) {
	a.snapshot.Store(s)
	a.leaving.Store(s.Leaving)
	view := make([]taskView, 0, len(s.Tasks))
	a.metrics.Lag.Reset() // series of tasks gone from here disappear
	a.metrics.Learners.Set(float64(len(s.Learner)))
	for _, tv := range s.Tasks {
		v := taskView{id: tv.ID, role: tv.State.Role, lag: tv.Lag, restoring: tv.State.Phase == lifecycle.Restoring}
		if t, ok := a.tasks[tv.ID]; ok {
			v.processed, v.restored, v.waiting = &t.Processed, &t.Restored, &t.Waiting
		}
		view = append(view, v)
		a.metrics.Lag.WithLabelValues(tv.ID, tv.State.Role.String()).Set(float64(tv.Lag))
	}
	a.storeView(view)
}

// notify logs a note of the core, counts it and tells the listener.
func (a *App) notify(n instance.Note) {
	t := a.tasks[n.Task]
	switch n.Kind {
	case instance.NoteStandby, instance.NoteLearner:
		kind, role := EventStandby, "standby"
		if n.Kind == instance.NoteLearner {
			kind, role = EventLearner, "learner"
		}
		a.emit(Event{Kind: kind, Task: n.Task, Lag: n.Lag})
		a.log.Info("warming a copy", "task", n.Task, "role", role, "lag", lagText(n.Lag))
	case instance.NoteLearnerReady:
		a.log.Info("learner ready", "task", n.Task, "lag", n.Lag)
		a.emit(Event{Kind: EventLearnerReady, Task: n.Task, Lag: n.Lag})
	case instance.NoteFellBehind:
		a.log.Info("learner fell behind; not ready until it catches up", "task", n.Task, "lag", n.Lag)
	case instance.NoteAssigned:
		a.log.Info("task assigned", "task", n.Task, "state", n.Detail, "lag", lagText(n.Lag))
		a.emit(Event{Kind: EventAssigned, Task: n.Task, Lag: n.Lag, Detail: n.Detail})
	case instance.NoteRestored:
		if t != nil {
			a.log.Info("restored; processing", "task", n.Task, "replayed", t.Replayed, "took", time.Since(t.AssignedAt).Round(time.Millisecond))
			a.emit(Event{Kind: EventRestored, Task: n.Task, Replayed: t.Replayed})
			a.metrics.Replayed.Add(float64(t.Replayed))
		}
	case instance.NoteRevoked:
		if t != nil {
			if !t.LastAt.IsZero() {
				a.emit(Event{Time: t.LastAt, Kind: EventLastRecord, Task: t.ID, Record: t.LastRecord})
			}
			a.log.Info("task revoked", "task", t.ID, "processed", t.Processed.Load())
		}
		a.emit(Event{Kind: EventRevoked, Task: n.Task})
	case instance.NoteLost:
		a.log.Warn("task lost", "task", n.Task)
		a.emit(Event{Kind: EventLost, Task: n.Task})
	case instance.NoteCommitFailed:
		a.log.Warn("commit failed; the next one retries, and a revoked task's next owner replays from the last commit", "err", n.Detail)
	case instance.NoteCannotStart:
		a.log.Warn("cannot start task", "task", n.Task, "err", n.Detail)
	case instance.NoteEndUnknown:
		a.log.Debug("changelog end offset unknown; lag unknown", "task", n.Task, "store", n.Detail)
	case instance.NoteLeaving:
		a.log.Info("draining: asking the group to move this instance's tasks", "timeout", a.cfg.DrainTimeout)
		a.emit(Event{Kind: EventLeaving})
	case instance.NoteLeaveEarly:
		a.log.Warn("leaving before every task moved", "active", n.Count, "why", n.Detail)
	}
}

func lagText(l int64) any {
	if l == instance.UnknownLag {
		return "unknown"
	}
	return l
}

// abort stops after an error without committing anything more: the
// instance stops, or, after an error Run answers with new clients
// (rejoins), only this member does.
func (a *App) abort(err error) error {
	a.commit.Abort()
	a.closeAll()
	if rejoins(err) {
		a.log.Warn("closing the tasks", "err", err)
	} else {
		a.log.Error("stopping", "err", err)
	}
	return err
}

// oneShot runs fn off the loop for one answer of the member in progress.
// fn gets that member's context and channels, taken now: an answer it
// sends after a fence goes to the loop that asked for it, never to the
// next member's. member waits for every oneShot before it returns.
func (a *App) oneShot(fn func(ctx context.Context, ch loopChans)) {
	ctx, ch := a.runCtx, a.ch
	a.oneShots.Add(1)
	go func() {
		defer a.oneShots.Done()
		if a.cfg.OnOneShot != nil {
			a.cfg.OnOneShot(ctx)
		}
		fn(ctx, ch)
	}()
}

// closeAll closes every task, after a rewind still writing their stores
// has ended.
func (a *App) closeAll() {
	if a.shell != nil {
		a.shell.stopRewind()
	}
	for id, t := range a.tasks {
		a.closeTask(t)
		a.forgetTask(id)
	}
	a.storeView(nil)
}

// leave commits everything and leaves the group, within 10 s in all.
func (a *App) leave(active []*work.Task) error {
	ctx, cancel := context.WithTimeout(a.runCtx, 10*time.Second)
	defer cancel()
	if err := a.shell.finalCommit(ctx, active); err != nil {
		a.log.Warn("final commit", "err", err)
	}
	// Callbacks the client calls while leaving find the loop gone, and
	// a poll the loop will not take must not hold the leave up.
	a.closeAll()
	a.stopPolling()
	if err := a.group.LeaveGroupContext(ctx); err != nil {
		a.log.Warn("leaving the group", "err", err)
	}
	if a.cfg.StaticMember {
		// The client does not leave for a static member (it expects it
		// back): a drained instance leaves by its instance id, so the
		// group does not wait a session timeout to rebalance.
		resp, err := a.admin.LeaveGroup(ctx, kadm.LeaveGroup(a.cfg.AppID).InstanceIDs(a.cfg.InstanceID).Reason("baton: drained"))
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
func (a *App) stopForRestart(active []*work.Task) error {
	ctx, cancel := context.WithTimeout(a.runCtx, 10*time.Second)
	defer cancel()
	if err := a.shell.finalCommit(ctx, active); err != nil {
		a.log.Warn("final commit before the restart", "err", err)
	}
	a.closeAll()
	a.log.Info("stopped for a restart: still a member of the group until the session timeout", "session_timeout", a.cfg.Session)
	return nil
}

// pinWorker picks the worker with the fewest active tasks.
func (a *App) pinWorker() int {
	counts := make([]int, len(a.workers))
	for _, t := range a.tasks {
		if t.Active {
			counts[t.Worker]++
		}
	}
	best := 0
	for i, c := range counts {
		if c < counts[best] {
			best = i
		}
	}
	return best
}

func (a *App) sourcePartitions(t *work.Task) map[string][]int32 {
	out := map[string][]int32{}
	for _, s := range t.Sub.Sources {
		out[s] = []int32{t.Part}
	}
	return out
}

// tasksOfPartitions maps partitions of source topics to task ids.
func (a *App) tasksOfPartitions(parts map[string][]int32) []string {
	var out []string
	for topic, ps := range parts {
		if sid, ok := a.bySource[topic]; ok {
			for _, p := range ps {
				out = append(out, topology.TaskID(sid, p))
			}
		}
	}
	return out
}

// onAssigned, onRevoked and onLost hand the partitions to the loop and
// wait until it has started, committed and closed, or dropped the tasks.
func (a *App) onAssigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	ids := a.tasksOfPartitions(assigned)
	now := time.Now().UnixNano()
	a.assignedAt.Store(now)
	if len(assigned) == 0 {
		// kgo fetches the offsets of new partitions only: a session that
		// assigns none has none to fetch (shell.rejoin).
		a.fetchedAt.Store(now)
	}
	a.txnMember.Store(a.memberID())
	a.post(func(id int) instance.Input { return instance.Assigned{Tasks: ids, Request: id} })
}

// onOffsetsFetched notes that the group session's committed offsets are
// fetched: its partitions are fetched from now on, and a rebalance no
// longer cancels that (shell.rejoin).
func (a *App) onOffsetsFetched(context.Context, *kgo.Client, *kmsg.OffsetFetchResponse) error {
	a.fetchedAt.Store(time.Now().UnixNano())
	return nil
}

func (a *App) onRevoked(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
	ids := a.tasksOfPartitions(revoked)
	if len(ids) == 0 {
		return
	}
	a.post(func(id int) instance.Input { return instance.Revoked{Tasks: ids, Request: id} })
}

func (a *App) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	// Published before the loop hears of it: Status says the member is
	// unconfirmed even while the loop is held up.
	a.groupErrAt.Store(time.Now().UnixNano())
	ids := a.tasksOfPartitions(lost)
	a.post(func(id int) instance.Input {
		return instance.Lost{Tasks: ids, Request: id, Abort: a.commit.Lost()}
	})
}

func (a *App) memberID() string {
	id, _ := a.group.GroupMetadata()
	return id
}

// self is the App as the balancer sees it.
type self App

func (s *self) Subscription(owned map[string][]int32) protocol.Subscription {
	a := (*App)(s)
	a.joinedAt.Store(time.Now().UnixNano()) // a join starts: time the round
	snap := a.snapshot.Load()
	sub := protocol.Subscription{InstanceID: a.cfg.InstanceID, Endpoint: a.cfg.Endpoint, Rack: a.cfg.Rack,
		Capacity: int32(a.cfg.Workers), Leaving: snap.Leaving, Lags: map[string]int64{}}
	// A task is active when every source partition of it is owned.
	count := map[string]int{}
	for _, id := range a.tasksOfPartitions(owned) {
		count[id]++
	}
	active := map[string]bool{}
	for id, n := range count {
		sid, _, _ := topology.ParseTaskID(id)
		if n == len(a.subs[sid].Sources) {
			sub.Active = append(sub.Active, id)
			active[id] = true
		}
	}
	for _, id := range snap.Standby {
		if !active[id] {
			sub.Standby = append(sub.Standby, id)
		}
	}
	for _, id := range snap.Learner {
		if !active[id] {
			sub.Learner = append(sub.Learner, id)
		}
	}
	for id, l := range snap.Lags {
		sub.Lags[id] = l
	}
	sent := maps.Clone(sub.Lags)
	a.sentLags.Store(&sent)
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
	a.metrics.Rebalances.Inc()
	took := time.Duration(0)
	if at := a.joinedAt.Load(); at > 0 {
		took = time.Since(time.Unix(0, at))
	}
	a.metrics.Rebalance.Observe(took.Seconds())
	a.metrics.Generation.Set(float64(gen))
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
	allLeaving := len(plan.Instances) > 0
	for _, ip := range plan.Instances {
		allLeaving = allLeaving && leaving[ip.ID]
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
	ps.Loads = plannedLoads(st)
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
	a.ch.planned(instance.Led{AllLeaving: allLeaving, FollowupWithoutMoves: plan.Followup && moved == 0})
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

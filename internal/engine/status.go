package engine

import (
	"maps"
	"math"
	"sort"
	"sync/atomic"
	"time"

	"github.com/baton-streams/baton/lifecycle"
)

// taskView is a task as Status shows it, as the loop last published it.
type taskView struct {
	id        string
	role      lifecycle.Role
	restoring bool // an active task still catching up with its changelog
	lag       int64
	processed *atomic.Int64 // nil for a task not open yet
	restored  *atomic.Int64 // nil for a task not open yet
	waiting   *atomic.Int64 // nil for a task not open yet
}

// statusView is what Status reports, as the loop last published it: the
// tasks, and the counters of closed openings of tasks. A task's opening
// is in one or the other, so their sums only grow.
type statusView struct {
	tasks  []taskView
	closed map[string]TaskTotals
}

// storeView publishes tasks with the closed totals as they are now, and
// what queries read of them.
func (a *App) storeView(tasks []taskView) {
	a.view.Store(&statusView{tasks: tasks, closed: maps.Clone(a.closedTotals)})
	a.publishReadable(tasks)
}

// forgetTask drops a task from a.tasks for good, folding its counters
// into the totals Status reports.
func (a *App) forgetTask(id string) {
	if t, ok := a.tasks[id]; ok {
		c := a.closedTotals[id]
		c.Processed += t.Processed.Load()
		c.Restored += t.Restored.Load()
		a.closedTotals[id] = c
	}
	delete(a.tasks, id)
}

// Status returns a snapshot of the instance. Safe to call at any time from
// any goroutine.
func (a *App) Status() Status {
	st := Status{AppID: a.cfg.AppID, Instance: a.cfg.InstanceID, Workers: a.cfg.Workers, Leaving: a.leaving.Load(), Tasks: []TaskStatus{}}
	st.ConfirmedAt, st.Unconfirmed = a.confirmation(time.Now())
	if at := a.polledAt.Load(); at > 0 {
		st.PolledAt = time.Unix(0, at)
	}
	st.Polling = a.pollAsked.Load() > a.polledAt.Load()
	if g := a.groupClient.Load(); g != nil {
		_, gen := g.GroupMetadata()
		st.Generation = gen
		st.Leader = gen > 0 && a.ledGen.Load() == gen
	}
	// The published view, never the loop's own state: Status is called
	// from any goroutine, listeners included, which may run inside a
	// rebalance callback while the loop works on it.
	st.Totals = map[string]TaskTotals{}
	if view := a.view.Load(); view != nil {
		for id, c := range view.closed {
			st.Totals[id] = c
		}
		for _, v := range view.tasks {
			ts := TaskStatus{ID: v.id, Role: v.role.String(), Lag: v.lag}
			if v.processed != nil {
				ts.Processed = v.processed.Load()
			}
			if v.restored != nil {
				ts.Restored = v.restored.Load()
			}
			if v.waiting != nil && v.role == lifecycle.Active {
				ts.Waiting = v.waiting.Load()
			}
			if ts.Processed != 0 || ts.Restored != 0 || st.Totals[v.id] != (TaskTotals{}) {
				c := st.Totals[v.id]
				c.Processed += ts.Processed
				c.Restored += ts.Restored
				st.Totals[v.id] = c
			}
			if v.role == lifecycle.Active {
				ts.Input = a.inputStatus(v.id)
				ts.Unconfirmed = st.Unconfirmed
			}
			st.Tasks = append(st.Tasks, ts)
		}
	}
	sort.Slice(st.Tasks, func(i, j int) bool { return st.Tasks[i].ID < st.Tasks[j].ID })
	ids := make([]string, len(st.Tasks))
	for i, t := range st.Tasks {
		ids[i] = t.ID
	}
	loads, reported := a.taskLoads(ids)
	for i := range st.Tasks {
		st.Tasks[i].Load = loads[st.Tasks[i].ID]
		if st.Tasks[i].Role == lifecycle.Active.String() {
			st.Tasks[i].LoadReported = reported[st.Tasks[i].ID]
		}
	}
	st.WorkerRate = math.Float64frombits(a.workerRate.Load())
	st.Restore = RestoreStatus{Records: a.restored.Load(), Rate: math.Float64frombits(a.restoreRate.Load()),
		YieldedSeconds: time.Duration(a.yielded.Load()).Seconds()}
	if st.Leader {
		st.Autoscale = a.desired.Load()
	}
	st.Plan = a.lastPlan.Load()
	for _, g := range a.globals.Status() {
		st.GlobalStores = append(st.GlobalStores, GlobalStoreStatus(g))
	}
	a.plansMu.Lock()
	st.Plans = append([]PlanStatus(nil), a.plans...)
	a.plansMu.Unlock()
	return st
}

// confirmation returns when the group last confirmed this member (an
// answered heartbeat, or an assignment) and whether, at now, that is too
// long ago (a session timeout) or the group session failed since. It reads only what kgo's goroutines publish, so a loop
// held up (a commit waiting, a callback not answered) does not hide it.
func (a *App) confirmation(now time.Time) (time.Time, bool) {
	heard, assigned, failed := a.heardAt.Load(), a.assignedAt.Load(), a.groupErrAt.Load()
	last := max(heard, assigned)
	if last == 0 {
		return time.Time{}, false // not a member yet: nothing to confirm
	}
	stale := now.Sub(time.Unix(0, last)) > a.cfg.Session
	// A heartbeat answered after the failure is one of the session
	// joined since: the heartbeat that found the member gone was read
	// before kgo reported the loss.
	return time.Unix(0, last), stale || failed > last
}

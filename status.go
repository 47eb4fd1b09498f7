package baton

import (
	"sort"
)

// taskView is a task as Status shows it: the role copied when published.
type taskView struct {
	t    *task
	role string
}

// Status returns a snapshot of the instance. Safe to call at any time from
// any goroutine.
func (a *App) Status() Status {
	st := Status{AppID: a.cfg.appID, Instance: a.cfg.instanceID, Workers: a.cfg.workers, Leaving: a.leaving.Load(), Tasks: []TaskStatus{}}
	if g := a.groupClient.Load(); g != nil {
		_, gen := g.GroupMetadata()
		st.Generation = gen
		st.Leader = gen > 0 && a.ledGen.Load() == gen
	}
	// The published view, not a.mu: Status is called from listeners, which
	// may run inside a rebalance while the loop holds the lock.
	if view := a.view.Load(); view != nil {
		for _, v := range *view {
			lag := int64(0)
			if v.t.stateful() {
				lag = v.t.lag.Load()
			}
			st.Tasks = append(st.Tasks, TaskStatus{ID: v.t.id, Role: v.role, Lag: lag, Processed: v.t.processed.Load()})
		}
	}
	sort.Slice(st.Tasks, func(i, j int) bool { return st.Tasks[i].ID < st.Tasks[j].ID })
	st.Plan = a.lastPlan.Load()
	a.plansMu.Lock()
	st.Plans = append([]PlanStatus(nil), a.plans...)
	a.plansMu.Unlock()
	return st
}

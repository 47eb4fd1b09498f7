package baton

import (
	"math"
	"sort"
	"sync/atomic"

	"github.com/baton-streams/baton/lifecycle"
)

// taskView is a task as Status shows it, as the loop last published it.
type taskView struct {
	id        string
	role      lifecycle.Role
	lag       int64
	processed *atomic.Int64 // nil for a task not open yet
	restored  *atomic.Int64 // nil for a task not open yet
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
			ts := TaskStatus{ID: v.id, Role: v.role.String(), Lag: v.lag}
			if v.processed != nil {
				ts.Processed = v.processed.Load()
			}
			if v.restored != nil {
				ts.Restored = v.restored.Load()
			}
			if v.role == lifecycle.Active {
				ts.Input = a.inputStatus(v.id)
			}
			st.Tasks = append(st.Tasks, ts)
		}
	}
	sort.Slice(st.Tasks, func(i, j int) bool { return st.Tasks[i].ID < st.Tasks[j].ID })
	st.WorkerRate = math.Float64frombits(a.workerRate.Load())
	if st.Leader {
		st.Autoscale = a.desired.Load()
	}
	st.Plan = a.lastPlan.Load()
	st.GlobalStores = a.globals.status()
	a.plansMu.Lock()
	st.Plans = append([]PlanStatus(nil), a.plans...)
	a.plansMu.Unlock()
	return st
}

package baton

import (
	"sort"
)

// Status returns a snapshot of the instance. Safe to call at any time from
// any goroutine.
func (a *App) Status() Status {
	st := Status{AppID: a.cfg.appID, Instance: a.cfg.instanceID, Workers: a.cfg.workers, Leaving: a.leaving.Load(), Tasks: []TaskStatus{}}
	if a.group != nil {
		_, gen := a.group.GroupMetadata()
		st.Generation = gen
		st.Leader = gen > 0 && a.ledGen.Load() == gen
	}
	a.mu.Lock()
	for _, t := range a.tasks {
		lag := int64(0)
		if t.stateful() {
			lag = t.lag.Load()
		}
		st.Tasks = append(st.Tasks, TaskStatus{ID: t.id, Role: t.role, Lag: lag, Processed: t.processed.Load()})
	}
	a.mu.Unlock()
	sort.Slice(st.Tasks, func(i, j int) bool { return st.Tasks[i].ID < st.Tasks[j].ID })
	st.Plan = a.lastPlan.Load()
	return st
}

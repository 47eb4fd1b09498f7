package engine

import (
	"maps"
	"math"
	"slices"
	"time"

	"github.com/baton-streams/baton/assign"
	"github.com/baton-streams/baton/internal/load"
	"github.com/baton-streams/baton/protocol"
)

// observeLoads takes, at each read of the input, the busy time each
// active task took since the last read into the load meter, and publishes
// the loads measured (for Subscription, Status and baton_task_load).
func (s *shell) observeLoads(at time.Time) {
	a := s.a
	busy := map[string]time.Duration{}
	for _, t := range a.activeTasks() {
		busy[t.ID] = time.Duration(t.Busy.Swap(0))
	}
	a.loadMeter.Observe(at, busy)
	measured := a.loadMeter.Loads(at)
	a.measured.Store(&measured)
	a.metrics.TaskLoad.Reset() // series of tasks gone from here disappear
	for id, l := range measured {
		a.metrics.TaskLoad.WithLabelValues(id).Set(l)
	}
	s.askForLoads(at, busy, measured)
}

// askForLoads asks the group for a rebalance when the loads the instance
// would report for its active tasks differ from those it reported at its
// last join (load.Ask): loads travel only in a join's subscriptions, so
// without it a group with no other reason to rebalance would plan on old
// loads for ever. At most one ask in LoadRebalance after the last join
// or ask; none while the instance leaves or reports no loads, nor while a
// round is under way. The rebalance goes the way of the core's
// (shell.rejoin).
func (s *shell) askForLoads(at time.Time, active map[string]time.Duration, measured map[string]float64) {
	a := s.a
	if a.cfg.LoadStep <= 0 || a.leaving.Load() {
		return
	}
	var reported map[string]float64
	if p := a.reported.Load(); p != nil {
		reported = *p
	}
	last := time.Unix(0, a.reportedAt.Load())
	if a.loadAskedAt.After(last) {
		last = a.loadAskedAt
	}
	k := load.Ask{Step: a.cfg.LoadStep, Every: a.cfg.LoadRebalance}
	why, ok := k.Due(at, last, slices.Collect(maps.Keys(active)), measured, reported)
	if !ok {
		return
	}
	// While a round is under way the instance reports its loads in it:
	// an ask held until the round ends (shell.rejoin) would bring a
	// second round for loads already reported. The next read looks
	// again.
	now := time.Now().UnixNano()
	if !roundSettled(now, max(a.joinedAt.Load(), s.forcedAt), a.assignedAt.Load(), a.fetchedAt.Load(), a.cfg.Rebalance) {
		return
	}
	a.loadAskedAt = at
	s.rejoin(why)
}

// reportLoads returns the loads the instance reports for its active tasks
// at a join, in protocol.LoadUnits: those measured, quantised to the
// step with hysteresis against what it reported at the previous join;
// none with a step of zero. Called on the group goroutine.
func (a *App) reportLoads(active []string) map[string]int32 {
	a.reportedAt.Store(time.Now().UnixNano())
	if a.cfg.LoadStep <= 0 {
		return nil
	}
	var measured map[string]float64
	if m := a.measured.Load(); m != nil {
		measured = map[string]float64{}
		for _, id := range active {
			if l, ok := (*m)[id]; ok {
				measured[id] = l
			}
		}
	}
	var prev map[string]float64
	if p := a.reported.Load(); p != nil {
		prev = *p
	}
	q := load.Quantise(measured, prev, a.cfg.LoadStep)
	a.reported.Store(&q)
	if len(q) == 0 {
		return nil
	}
	out := make(map[string]int32, len(q))
	for id, l := range q {
		out[id] = int32(max(1, min(math.MaxInt32, math.Round(l/protocol.LoadUnit))))
	}
	return out
}

// plannedLoads returns the load of each task of a plan's input.
func plannedLoads(st assign.State) map[string]float64 {
	out := make(map[string]float64, len(st.Tasks))
	for _, t := range st.Tasks {
		out[string(t.ID)] = t.Load
	}
	return out
}

// taskLoads returns, for Status, the load of each of ids: measured here
// (active tasks), else estimated from the tasks measured here
// (load.Estimate); and the loads last reported to the group.
func (a *App) taskLoads(ids []string) (loads, reported map[string]float64) {
	var measured map[string]float64
	if m := a.measured.Load(); m != nil {
		measured = *m
	}
	if p := a.reported.Load(); p != nil {
		reported = maps.Clone(*p)
	}
	return load.Estimate(ids, measured), reported
}

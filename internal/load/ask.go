package load

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// DefaultAskEvery is Ask's default least time between two reports: a
// member asks for a rebalance for its loads at most once in this time
// after its last join.
const DefaultAskEvery = 5 * time.Minute

// Ask decides when a member asks the group for a rebalance so that a
// change of its loads reaches the leader: loads travel only in the
// subscriptions of a join, and a group with no other reason to rebalance
// would plan on old loads for ever.
//
// A member asks when the figure it would report now for one of its
// active tasks (Quantise of the measured load against the figure last
// reported) differs from the figure last reported, or when it reported
// none for the task. It waits until every active task is measured (the
// meter has watched it for its settle), so that one ask brings all of
// them; and it asks at most once in Every after its last report or ask,
// so that loads that keep changing (a task that moves, a load that
// climbs step after step) bring one rebalance in Every, not one at each
// step. Steady loads bring none: Quantise keeps a figure until the load
// is a full step away from it.
type Ask struct {
	// Step is the step of the reported loads (Quantise): zero or less is
	// DefaultStep.
	Step float64
	// Every is the least time between the last report or ask and the
	// next ask: zero or less is DefaultAskEvery.
	Every time.Duration
}

// Due reports whether a member asks for a rebalance at at, and why.
// last is when it last reported loads (its last join) or asked, whichever
// is later; active its active tasks; measured the loads its meter
// measured (Meter.Loads); reported the figures it last reported.
func (k Ask) Due(at, last time.Time, active []string, measured, reported map[string]float64) (why string, ok bool) {
	every := k.Every
	if every <= 0 {
		every = DefaultAskEvery
	}
	if len(active) == 0 || at.Sub(last) < every {
		return "", false
	}
	now := make(map[string]float64, len(active))
	for _, id := range active {
		l, ok := measured[id]
		if !ok {
			return "", false // not settled: ask once all are measured
		}
		now[id] = l
	}
	q := Quantise(now, reported, k.Step)
	var changed []string
	for _, id := range slices.Sorted(slices.Values(active)) {
		p, ok := reported[id]
		switch {
		case !ok:
			changed = append(changed, fmt.Sprintf("%s %.2f (not reported)", id, q[id]))
		case q[id] != p:
			changed = append(changed, fmt.Sprintf("%s %.2f (reported %.2f)", id, q[id], p))
		}
	}
	if len(changed) == 0 {
		return "", false
	}
	if len(changed) > 3 {
		changed = append(changed[:3], fmt.Sprintf("%d more", len(changed)-3))
	}
	return "task loads changed: " + strings.Join(changed, ", "), true
}

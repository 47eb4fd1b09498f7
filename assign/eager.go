package assign

import (
	"cmp"
	"slices"
)

// planEager is the stop-the-world baseline: every active task is revoked
// and all tasks are dealt again from scratch, ignoring where they ran and
// where state is; no learners. Stateful and stateless tasks are dealt
// separately, each task to the instance furthest below its share (tasks of
// unequal load heaviest first).
func planEager(g *group) Plan {
	n := len(g.tasks)
	owner := g.sc.ints.get(n)
	revoked := g.sc.ints.get(n)
	learner := g.sc.ints.get(n)
	for t := range n {
		owner[t], revoked[t], learner[t] = none, g.owner[t], none
	}
	var reasons []Reason
	for _, b := range newBuckets(g) {
		order := append([]int(nil), b.tasks...)
		if !b.uniform {
			slices.SortStableFunc(order, func(a, c int) int { return cmp.Compare(g.tasks[c].Load, g.tasks[a].Load) })
		}
		for _, t := range order {
			if g.live == 0 {
				break
			}
			i := b.lightest()
			b.place(t, i)
			owner[t] = i
		}
	}
	p := &planner{g: g, newOwner: owner, revokedBy: revoked, learner: learner}
	p.standby = placeStandbys(g, owner, learner, learner, func(ReasonKind, int, int, string, ...any) {})
	plan := p.output()
	plan.Followup = false // one phase: members rejoined having revoked everything
	for t, o := range g.owner {
		if o != none {
			reasons = append(reasons, Reason{Kind: ReasonRevoke, Task: g.tasks[t].ID, Instance: g.insts[o].ID, Why: "eager: every task is revoked in every rebalance"})
		}
	}
	plan.Reasons = reasons
	return plan
}

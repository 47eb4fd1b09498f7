package assign

import (
	"math"
	"slices"
)

// warming reports whether the plan warms stateful tasks for a balance
// move: a learner on a non-leaving instance for a task whose owner is live
// and not leaving. Learners that drain a leaving instance do not count.
func (p *planner) warming(sf *bucket) bool {
	g := p.g
	for _, t := range sf.tasks {
		l, o := p.learner[t], g.owner[t]
		if l != none && o != none && !g.leaving[l] && !g.leaving[o] {
			return true
		}
	}
	return false
}

// standIn sets the stateless bucket's shares for a round whose plan warms
// stateful tasks (see warming): instead of each instance's share of the
// stateless load, each non-leaving instance gets what balances its total
// active load, stateful and stateless, given the stateful tasks the plan
// leaves active on it. A new instance whose stateful tasks are still
// learners so carries stateless tasks in their place, beyond its share of
// the bucket, and gives them back as its stateful tasks arrive. A round
// whose plan warms nothing keeps the bucket's own shares, so the stable
// plan, which has no learner, balances each bucket on its own (item 10).
//
// The shares are levelFill's: the stateless load is poured over the
// non-leaving instances as water over steps of height "stateful load per
// unit of capacity". They are not whole numbers even with equal loads, so
// the bucket rounds them as it rounds unequal loads (roundingBound), and
// an instance is in line between the floor and the ceiling of its share.
func (p *planner) standIn(sf, sl *bucket) {
	g := p.g
	if len(sl.tasks) == 0 || !(sl.totalCap > 0) || !p.warming(sf) {
		return
	}
	m := len(g.insts)
	active := make([]float64, m)
	for _, t := range sf.tasks {
		if i := p.newOwner[t]; i != none {
			active[i] += g.tasks[t].Load
		}
	}
	load := 0.0
	for _, t := range sl.tasks {
		load += g.tasks[t].Load
	}
	caps := make([]float64, m)
	for i, in := range g.insts {
		if !g.leaving[i] {
			caps[i] = float64(in.Capacity)
		}
	}
	level := levelFill(load, caps, active)
	unit := 1.0 // stateless weights are loads, or 1 for a task when all are equal
	if sl.uniform {
		unit = g.tasks[sl.tasks[0]].Load
	}
	sl.standIn = true
	sl.plain = slices.Clone(sl.share)
	eps := 1e-9 * max(1, sl.totalW)
	for i := range g.insts {
		if g.leaving[i] {
			continue
		}
		w := level[i] / unit
		sl.share[i] = w * sl.totalCap
		if sl.uniform {
			sl.floor[i] = int(math.Floor(w + eps))
			sl.ceil[i] = int(math.Ceil(w - eps))
		}
	}
	sl.outOfLine = 0
	for i := range g.insts {
		if sl.outside(i) {
			sl.outOfLine++
		}
	}
	sl.slop = sl.roundingBound()
}

// levelFill shares load out over the instances of capacity caps (0: takes
// none) that already carry base, so that the totals per unit of capacity
// come out level: it finds the level L at which the instances with
// base/cap below L, each filled up to L*cap, take the whole load, and
// returns what each takes, L*cap - base or 0. Instances are visited by
// base/cap, then by index, so the result depends on the figures alone.
func levelFill(load float64, caps, base []float64) []float64 {
	var order []int
	for i, c := range caps {
		if c > 0 {
			order = append(order, i)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ra, rb := base[a]/caps[a], base[b]/caps[b]
		switch {
		case ra < rb:
			return -1
		case ra > rb:
			return 1
		}
		return 0
	})
	out := make([]float64, len(caps))
	sumCap, sumBase, level := 0.0, 0.0, 0.0
	n := 0
	for k, i := range order {
		sumCap += caps[i]
		sumBase += base[i]
		level = (load + sumBase) / sumCap
		n = k + 1
		if n == len(order) || level <= base[order[n]]/caps[order[n]] {
			break
		}
	}
	for _, i := range order[:n] {
		out[i] = max(0, level*caps[i]-base[i])
	}
	return out
}

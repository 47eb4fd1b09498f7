package assign

import (
	"container/heap"
	"slices"
)

// placeStandbys chooses the standbys of every stateful task once actives
// and learners are decided. Existing standbys are kept where still allowed
// (sticky); missing ones go first to an instance with the warmest local
// copy, then to the least loaded instance. At least one standby sits on a
// rack other than the active's when such an instance exists.
//
// A task never gets a standby on its active or learner host, on a leaving
// instance, or on the instance revoking it this round (that instance is
// the natural standby once the move completes, and gets it then: its copy
// is the warmest).
func placeStandbys(g *group, owner, learner, revokedBy []int, why func(ReasonKind, int, int, string, ...any)) [][]int {
	if g.cfg.Standbys == 0 {
		return nil
	}
	out := make([][]int, len(g.tasks))
	// load counts every task an instance runs in any role, so standbys
	// spread by capacity.
	load := make([]int, len(g.insts))
	for t := range g.tasks {
		if owner[t] != none {
			load[owner[t]]++
		}
		if learner[t] != none {
			load[learner[t]]++
		}
		for _, i := range g.standbys.of(t) {
			if !g.leaving[i] && i != owner[t] && i != learner[t] && i != revokedBy[t] {
				load[i]++ // kept unless dropped below
			}
		}
	}
	h := newRackHeaps(g, load)
	lighter := func(a, b int) bool { return h.lighter(a, b) }
	for t, task := range g.tasks {
		if !task.Stateful {
			continue
		}
		excluded := func(i int) bool {
			return g.leaving[i] || i == owner[t] || i == learner[t] || i == revokedBy[t]
		}
		eligible := g.live
		if owner[t] != none && !g.leaving[owner[t]] {
			eligible--
		}
		if learner[t] != none && !g.leaving[learner[t]] {
			eligible--
		}
		want := min(g.cfg.Standbys, eligible)

		var kept []int
		for _, i := range g.standbys.of(t) {
			if !excluded(i) {
				kept = append(kept, i)
			}
		}
		warmer := func(a, b int) bool {
			la, lb := g.lagOf(a, t), g.lagOf(b, t)
			if la != lb {
				return la < lb
			}
			return lighter(a, b)
		}
		// warmer is a total order: the sort's result does not depend on
		// its stability.
		slices.SortFunc(kept, func(a, b int) int {
			if warmer(a, b) {
				return -1
			}
			return 1
		})
		for len(kept) > want {
			h.remove(kept[len(kept)-1])
			kept = kept[:len(kept)-1]
		}
		taken := func(i int) bool { return excluded(i) || containsInt(kept, i) }

		// The rack rule: one standby off the active's rack, where possible.
		if owner[t] != none {
			rack := g.insts[owner[t]].Rack
			offRack := func(i int) bool { return g.insts[i].Rack != rack }
			satisfied := false
			for _, i := range kept {
				satisfied = satisfied || offRack(i)
			}
			if !satisfied && want > 0 {
				if c := bestCandidate(h, g.holders.of(t), func(i int) bool { return !taken(i) && offRack(i) }, rack, warmer); c != none {
					if len(kept) == want {
						h.remove(kept[len(kept)-1])
						kept = kept[:len(kept)-1]
					}
					kept = append(kept, c)
					h.add(c)
					why(ReasonStandby, t, c, "standby on a rack (%q) other than its active's", g.insts[c].Rack)
				}
			}
		}
		for len(kept) < want {
			c := bestCandidate(h, g.holders.of(t), func(i int) bool { return !taken(i) }, noRack, warmer)
			if c == none {
				break
			}
			kept = append(kept, c)
			h.add(c)
			why(ReasonStandby, t, c, "standby %d of %d: %s", len(kept), want, standbyCause(g, c, t))
		}
		out[t] = kept
	}
	return out
}

func standbyCause(g *group, i, t int) string {
	if l := g.lagOf(i, t); l != noState {
		return "it has the warmest local copy (lag " + lagText(l) + ")"
	}
	return "no free instance has state for it; this one is the least loaded"
}

// noRack is a rack name no instance has (rack names are printable).
const noRack = "\x00"

// bestCandidate returns the warmest instance holding local state for t
// that ok accepts, else the least loaded instance that ok accepts and is
// not on rack notOn.
func bestCandidate(h *rackHeaps, holders []int, ok func(int) bool, notOn string, warmer func(a, b int) bool) int {
	best := none
	for _, i := range holders {
		if ok(i) && (best == none || warmer(i, best)) {
			best = i
		}
	}
	if best != none {
		return best
	}
	for _, rack := range h.names {
		if rack == notOn {
			continue
		}
		if i := h.byRack[rack].top(ok); i != none && (best == none || h.lighter(i, best)) {
			best = i
		}
	}
	return best
}

// rackHeaps keeps the non-leaving instances of each rack in a heap by load
// per unit of capacity (then id), sharing the load counts.
type rackHeaps struct {
	g      *group
	load   []int
	index  []int // instance -> position in its rack's heap
	names  []string
	byRack map[string]*instHeap
}

func newRackHeaps(g *group, load []int) *rackHeaps {
	h := &rackHeaps{g: g, load: load, index: make([]int, len(g.insts)), byRack: map[string]*instHeap{}}
	for i, in := range g.insts {
		if g.leaving[i] {
			continue
		}
		r := h.byRack[in.Rack]
		if r == nil {
			r = &instHeap{index: h.index, less: h.lighter}
			h.byRack[in.Rack] = r
			h.names = append(h.names, in.Rack)
		}
		r.Push(i)
	}
	for _, r := range h.byRack {
		heap.Init(r)
	}
	return h
}

// lighter orders instances by load per unit of capacity, then id.
func (h *rackHeaps) lighter(a, b int) bool {
	la := h.load[a] * h.g.insts[b].Capacity
	lb := h.load[b] * h.g.insts[a].Capacity
	if la != lb {
		return la < lb
	}
	return a < b
}

func (h *rackHeaps) add(i int)    { h.load[i]++; h.fix(i) }
func (h *rackHeaps) remove(i int) { h.load[i]--; h.fix(i) }
func (h *rackHeaps) fix(i int) {
	heap.Fix(h.byRack[h.g.insts[i].Rack], h.index[i])
}

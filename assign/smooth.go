package assign

import (
	"cmp"
	"fmt"
	"slices"
)

// planner carries one round of the smooth or cooperative policy. The round
// has five steps, each a pass over tasks or instances in id order:
//
//  1. position: every task with a live owner is positioned where it will
//     run once moves in flight finish (at its kept learner, else its owner);
//  2. orphans: tasks without a live owner get one now;
//  3. drain: tasks of leaving instances are positioned elsewhere;
//  4. balance: tasks move from the instance furthest above its share to the
//     one furthest below, until every instance is within its share;
//  5. realize: each task positioned away from its owner is revoked (when
//     the destination is caught up or the task is stateless) or gets a
//     learner there (within max_learners); standbys are placed last.
type planner struct {
	g        *group
	policy   Policy
	learners bool // policy uses learners and state-aware placement

	newOwner  []int // task -> instance it is active on in the plan, or none
	revokedBy []int // task -> instance revoking it this round, or none
	learner   []int // task -> kept or new learner host in the plan, or none
	nLearners int   // learners in the plan so far, in every bucket
	standby   [][]int
	moveSeq   []int // task -> order in which its last move was decided (0: never)
	forced    []bool
	// again is set when orphans placed this round left a bucket out of
	// balance: they cannot move in the round that placed them, so the
	// plan asks for a follow-up in which they can.
	again  bool
	pinned []bool // task -> positioned at its kept learner; the balance may not move it
	// causes says why tasks' positions moved away from their owners;
	// causeAt is, by task, the index + 1 of its latest cause, 0 if none.
	causes  []moveCause
	causeAt []int32
	seq     int
	reasons []Reason
}

func (p *planner) why(kind ReasonKind, t, i int, format string, args ...any) {
	id := ""
	if i != none {
		id = p.g.insts[i].ID
	}
	p.reasons = append(p.reasons, Reason{Kind: kind, Task: p.g.tasks[t].ID, Instance: id, Why: fmt.Sprintf(format, args...)})
}

func (p *planner) name(i int) string { return p.g.insts[i].ID }

func planIncremental(g *group, policy Policy) Plan {
	n := len(g.tasks)
	p := &planner{g: g, policy: policy, learners: policy == Smooth}
	p.newOwner = g.sc.ints.filled(n, none)
	p.revokedBy = g.sc.ints.filled(n, none)
	p.learner = g.sc.ints.filled(n, none)
	p.moveSeq = g.sc.ints.get(n)
	p.forced = g.sc.bools.get(n)
	p.pinned = g.sc.bools.get(n)
	p.causeAt = g.sc.int32s.get(n)
	p.keepLearners()
	bs := newBuckets(g)
	for k, b := range bs {
		if k == 1 && p.learners && !g.cfg.SeparateBuckets {
			p.standIn(bs[0], b) // the stateful bucket is planned: its learners are known
		}
		p.position(b)
		placed := p.orphans(b)
		p.drain(b)
		p.balance(b)
		if placed > 0 && !b.balanced() {
			p.again = true
		}
		p.realize(b)
	}
	p.standby = placeStandbys(g, p.newOwner, p.learner, p.revokedBy, p.why)
	return p.output()
}

// keepLearners decides which learners of the input survive: one per task,
// on a non-leaving instance, for a stateful task with a live owner; at most
// max_learners in all, the least advanced dropped first.
func (p *planner) keepLearners() {
	g := p.g
	type kept struct {
		t, i int
		lag  int64
	}
	var all []kept
	for _, t := range g.learnerTasks {
		best := none
		for _, i := range g.learners.of(t) {
			switch {
			case !p.learners:
				p.why(ReasonDropLearner, t, i, "policy %s uses no learners", p.policy)
			case !g.tasks[t].Stateful:
				p.why(ReasonDropLearner, t, i, "stateless tasks move at once and need no learner")
			case g.owner[t] == none:
				p.why(ReasonDropLearner, t, i, "its target is gone: no live instance has the task active")
			case best == none || g.lagOf(i, t) < g.lagOf(best, t):
				if best != none {
					p.why(ReasonDropLearner, t, best, "another learner of the task is further along")
				}
				best = i
			default:
				p.why(ReasonDropLearner, t, i, "another learner of the task is further along")
			}
		}
		if best != none {
			all = append(all, kept{t, best, g.lagOf(best, t)})
		}
	}
	slices.SortStableFunc(all, func(a, b kept) int { return cmp.Compare(a.lag, b.lag) })
	for k, l := range all {
		if k >= g.cfg.MaxLearners {
			p.why(ReasonDropLearner, l.t, l.i, "the group holds more than max_learners=%d learners; this one is among the least advanced", g.cfg.MaxLearners)
			continue
		}
		p.learner[l.t] = l.i
		p.nLearners++
	}
}

// position places every task of the bucket that has a live owner.
func (p *planner) position(b *bucket) {
	b.placeAll(b.tasks, func(t int) int {
		o := p.g.owner[t]
		switch {
		case o == none:
		case p.learner[t] != none && !p.g.leaving[p.learner[t]]:
			p.pinned[t] = true // a learner is kept until it is ready
			return p.learner[t]
		case !p.g.leaving[o]:
			return o
		}
		return none
	})
}

// orphans gives every task without a live owner to the warmest live copy
// (stateful, smooth policy) or to the instance furthest below its share.
// It returns how many it placed.
func (p *planner) orphans(b *bucket) int {
	g := p.g
	for _, t := range b.tasks {
		if g.owner[t] != none {
			continue
		}
		p.pinned[t] = true // an orphan's owner is decided by the orphan rule alone
		if g.live == 0 {
			p.why(ReasonOrphan, t, none, "no live instance may take it: every instance is leaving")
			continue
		}
		if !b.stateful || !p.learners {
			i := b.lightest()
			b.place(t, i)
			p.why(ReasonOrphan, t, i, "orphaned; %s is furthest below its share", p.name(i))
			continue
		}
		lowest := int64(noState)
		for _, i := range g.holders.of(t) {
			if !g.leaving[i] {
				lowest = min(lowest, g.lagOf(i, t))
			}
		}
		if lowest == noState {
			i := b.lightest()
			b.place(t, i)
			p.why(ReasonOrphan, t, i, "orphaned and no live instance has state for it; %s is furthest below its share", p.name(i))
			continue
		}
		warm := func(i int) bool { return g.lagOf(i, t)-lowest <= g.cfg.AcceptableLag }
		wasLearner := func(i int) bool {
			for _, l := range g.learners.of(t) {
				if l == i && warm(i) {
					return true
				}
			}
			return false
		}
		i := b.lightestOf(g.learners.of(t), wasLearner)
		how := "its learner"
		if i == none {
			i = b.lightestOf(g.holders.of(t), warm)
			how = "a warm copy"
		}
		b.place(t, i)
		p.why(ReasonOrphan, t, i, "orphaned; %s holds %s (lag %d, lowest live lag %d, acceptable %d) and is the least loaded such instance",
			p.name(i), how, g.lagOf(i, t), lowest, g.cfg.AcceptableLag)
	}
	return p.placedOrphans(b)
}

// placedOrphans counts the bucket's orphans that got a position.
func (p *planner) placedOrphans(b *bucket) int {
	n := 0
	for _, t := range b.tasks {
		if p.g.owner[t] == none && b.pos[t] != none {
			n++
		}
	}
	return n
}

// drain positions the tasks of leaving instances (that no learner already
// carries) on non-leaving ones: a caught-up copy with room if there is
// one, else the instance furthest below its share.
func (p *planner) drain(b *bucket) {
	g := p.g
	if g.live == 0 {
		return
	}
	for _, t := range b.tasks {
		o := g.owner[t]
		if o == none || !g.leaving[o] || b.pos[t] != none {
			continue
		}
		i := none
		if b.stateful && p.learners {
			i = b.lightestOf(g.holders.of(t), func(i int) bool { return g.caughtUp(i, t) && b.fits(i, t) })
		}
		if i == none {
			i = b.lightest()
		}
		p.setCause(t, moveCause{b: b, from: o, to: i, drained: true})
		b.place(t, i)
		p.forced[t] = true
		p.seq++
		p.moveSeq[t] = p.seq
	}
}

// balance moves tasks from the heaviest to the lightest instance until the
// bucket is balanced. It ends: every move strictly lowers the exact sum of
// squared deviations, even though the figures it decides on are rounded
// (bucket.lowers), so no positioning of the tasks comes back and there
// are finitely many; between two moves each instance is marked stuck at
// most once, and then heaviest finds none.
func (p *planner) balance(b *bucket) {
	if p.g.live == 0 {
		return
	}
	stuck := make([]bool, len(p.g.insts)) // instances with nothing that can move now
	var stuckList []int
	for !b.balanced() {
		from, to := b.heaviest(func(i int) bool { return !stuck[i] }), b.lightest()
		if from == none || to == none || from == to {
			return
		}
		t := p.pick(b, from, to)
		if t == none {
			stuck[from] = true
			stuckList = append(stuckList, from)
			continue
		}
		for _, i := range stuckList {
			stuck[i] = false
		}
		stuckList = stuckList[:0]
		p.setCause(t, b.causeOf(from, to))
		b.move(t, to)
		p.seq++
		p.moveSeq[t] = p.seq
	}
}

// pick chooses which task positioned on from moves to to: not one a learner
// already carries there, then one the destination is caught up on, then
// the best fit of load, then the warmest destination copy, then by id.
func (p *planner) pick(b *bucket, from, to int) int {
	if b.uniform {
		return p.pickUniform(b, from, to)
	}
	g := p.g
	gap := b.dev(from) - b.dev(to)
	toHasState := g.hasState[to]
	// floor is the best key any task can have here; the first task (in id
	// order) that reaches it is the answer.
	floor := [4]float64{}
	if b.stateful && p.learners && !toHasState {
		floor[1], floor[3] = 1, float64(min(int64(noState), 1<<53))
	}
	best := none
	var bestKey [4]float64
	for _, t := range b.on[from] {
		if p.pinned[t] {
			continue
		}
		wt := b.weight[t] * b.totalCap
		if !b.lowers(gap, wt) {
			continue // would not lower the sum of squared deviations
		}
		var key [4]float64
		if p.g.owner[t] != from {
			key[0] = 1 // a drained task placed here this round: rather keep it
		}
		if b.stateful && p.learners {
			lag := int64(noState)
			if toHasState {
				lag = g.lagOf(to, t)
			}
			if lag > g.cfg.AcceptableLag {
				key[1] = 1
			}
			key[3] = float64(min(lag, 1<<53))
		}
		if !b.uniform {
			d := gap - 2*wt
			if d < 0 {
				d = -d
			}
			key[2] = d
		}
		if best == none || less(key, bestKey) {
			best, bestKey = t, key
			if b.uniform && key == floor {
				break
			}
		}
	}
	return best
}

// pickUniform is pick for tasks of equal load, where the fit of load is
// the same for every task: the key is (drained here, destination not
// caught up, destination lag capped at 2^53), smallest first, then id.
//
// Tasks the destination has no state for all share one key but for the
// first part, so only the first of each kind can win; the others worth
// looking at are the few the destination has state for. When those are
// fewer than the tasks on from, pickUniform looks at them and at the first
// two tasks without state, instead of at every task on from.
func (p *planner) pickUniform(b *bucket, from, to int) int {
	g := p.g
	gap := b.dev(from) - b.dev(to)
	if !b.lowers(gap, b.totalCap) {
		return none // moving any task (weight 1) would not lower the sum of squared deviations
	}
	type key struct {
		drained, cold int
		lag           int64
	}
	lessKey := func(a, c key) bool {
		if a.drained != c.drained {
			return a.drained < c.drained
		}
		if a.cold != c.cold {
			return a.cold < c.cold
		}
		return a.lag < c.lag
	}
	aware := b.stateful && p.learners
	keyOf := func(t int, lag int64) key {
		var k key
		if g.owner[t] != from {
			k.drained = 1 // a drained task placed here this round: rather keep it
		}
		if aware {
			if lag > g.cfg.AcceptableLag {
				k.cold = 1
			}
			k.lag = min(lag, 1<<53)
		}
		return k
	}
	best := none
	var bestKey key
	consider := func(t int, k key) {
		if best == none || lessKey(k, bestKey) || (k == bestKey && t < best) {
			best, bestKey = t, k
		}
	}
	held := g.instLags[to]
	if !aware || !g.hasState[to] || len(held) >= len(b.on[from]) {
		// Every task on from, in id order; the first to reach the best
		// key any task can have ends the scan.
		floor := key{}
		if aware && !g.hasState[to] {
			floor.lag = 1 << 53
			if int64(noState) > g.cfg.AcceptableLag {
				floor.cold = 1
			}
		}
		for _, t := range b.on[from] {
			if p.pinned[t] {
				continue
			}
			lag := int64(noState)
			if aware && g.hasState[to] {
				lag = g.lagOf(to, t)
			}
			k := keyOf(t, lag)
			if best == none || lessKey(k, bestKey) {
				best, bestKey = t, k
				if k == floor {
					break
				}
			}
		}
		return best
	}
	// The tasks on from that to has state for.
	for _, e := range held {
		if t := int(e.task); b.pos[t] == from && !p.pinned[t] {
			consider(t, keyOf(t, e.lag))
		}
	}
	// The first task on from without state on to, of either kind.
	found := [2]bool{}
	for _, t := range b.on[from] {
		if p.pinned[t] || g.lagOf(to, t) != noState {
			continue
		}
		k := keyOf(t, noState)
		if found[k.drained] {
			continue
		}
		found[k.drained] = true
		consider(t, k)
		if found[0] && found[1] || k.drained == 0 {
			break // a drained task cannot beat an earlier one that is not
		}
	}
	return best
}

func less(a, b [4]float64) bool {
	for k := range a {
		if a[k] != b[k] {
			return a[k] < b[k]
		}
	}
	return false
}

// realize turns positions into the plan: orphans become active, tasks
// positioned away from their owner are revoked (stateless, or the
// destination is caught up) or get a learner there (within max_learners).
func (p *planner) realize(b *bucket) {
	g := p.g
	type wanted struct{ t, i int }
	var newLearners []wanted
	for _, t := range b.tasks {
		o, at, l := g.owner[t], b.pos[t], p.learner[t]
		switch {
		case o == none:
			p.newOwner[t] = at
		case at == none || at == o:
			p.newOwner[t] = o // stays (at == none: every instance is leaving)
		case !b.stateful || !p.learners || g.caughtUp(at, t):
			p.revokedBy[t] = o
			if l != none && l != at {
				p.why(ReasonDropLearner, t, l, "the task moves to %s instead", p.name(at))
			}
			if l != none {
				p.nLearners--
			}
			p.learner[t], l = none, none
			p.why(ReasonRevoke, t, o, "%s; moves to %s%s", p.cause(t), p.name(at), p.warmth(b, t, at))
		case l == at:
			p.newOwner[t] = o // its learner is still warming
		default:
			p.newOwner[t] = o
			if l == none {
				newLearners = append(newLearners, wanted{t, at})
			}
		}
		if l != none && l != at && g.caughtUp(l, t) {
			p.why(ReasonDropLearner, t, l, "ready, but the plan does not move the task to %s", p.name(l))
			p.learner[t] = none
			p.nLearners--
		}
	}
	slices.SortStableFunc(newLearners, func(a, c wanted) int {
		x, y := a.t, c.t
		if p.forced[x] != p.forced[y] {
			if p.forced[x] {
				return -1
			}
			return 1
		}
		return cmp.Compare(p.moveSeq[x], p.moveSeq[y])
	})
	for _, nl := range newLearners {
		if p.nLearners >= g.cfg.MaxLearners {
			break
		}
		p.learner[nl.t] = nl.i
		p.nLearners++
		p.why(ReasonLearner, nl.t, nl.i, "%s; %s warms a copy first (its lag: %s)", p.cause(nl.t), p.name(nl.i), lagText(g.lagOf(nl.i, nl.t)))
	}
}

// moveCause records why the balance moved a task, formatted only when a
// reason is shown.
type moveCause struct {
	b                  *bucket
	from, to           int
	drained            bool
	fromCount, toCount int
	fromW, toW         float64
}

func (p *planner) setCause(t int, c moveCause) {
	p.causes = append(p.causes, c)
	p.causeAt[t] = int32(len(p.causes))
}

// cause is why task t's position moved away from its owner; the zero
// moveCause if it did not move in this plan.
func (p *planner) cause(t int) moveCause {
	if k := p.causeAt[t]; k > 0 {
		return p.causes[k-1]
	}
	return moveCause{}
}

func (b *bucket) causeOf(from, to int) moveCause {
	return moveCause{b: b, from: from, to: to, fromCount: b.count[from], toCount: b.count[to], fromW: b.w[from], toW: b.w[to]}
}

func (c moveCause) String() string {
	if c.b == nil {
		return "a move planned in an earlier round"
	}
	name := func(i int) string { return c.b.g.insts[i].ID }
	if c.drained {
		return name(c.from) + " is leaving"
	}
	return fmt.Sprintf("%s is above its share of %s (%s) and %s below (%s)", name(c.from), c.b.kind(),
		c.b.describe(c.from, c.fromCount, c.fromW), name(c.to), c.b.describe(c.to, c.toCount, c.toW))
}

// kind names the bucket's tasks.
func (b *bucket) kind() string {
	if b.stateful {
		return "stateful tasks"
	}
	return "stateless tasks"
}

// warmth describes the destination's copy of a moved stateful task.
func (p *planner) warmth(b *bucket, t, to int) string {
	if !b.stateful || !p.learners {
		return ""
	}
	if p.learner[t] == to || (len(p.g.learners.of(t)) > 0 && containsInt(p.g.learners.of(t), to)) {
		return fmt.Sprintf(", whose learner is ready (lag %d)", p.g.lagOf(to, t))
	}
	return fmt.Sprintf(", which is caught up (lag %d)", p.g.lagOf(to, t))
}

func lagText(l int64) string {
	if l == noState {
		return "none: restoring from the start"
	}
	return fmt.Sprint(l)
}

// describe gives an instance's load (count tasks of weight w) against its share.
func (b *bucket) describe(i, count int, w float64) string {
	share := 0.0
	if b.totalCap > 0 {
		share = b.share[i] / b.totalCap
	}
	own := ""
	if b.standIn && b.totalCap > 0 {
		own = fmt.Sprintf(" standing in for stateful tasks warming, %.2f of its own", b.plain[i]/b.totalCap)
	}
	if b.uniform {
		return fmt.Sprintf("%d tasks planned, share %.2f%s", count, share, own)
	}
	return fmt.Sprintf("load %.2f planned, share %.2f%s", w, share, own)
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// output assembles the plan, sorted: tasks are visited in id order, so
// every list comes out sorted. The lists of all instances share one
// backing array per role, sized by a first count.
func (p *planner) output() Plan {
	g := p.g
	plan := Plan{Instances: make([]InstancePlan, len(g.insts)), Reasons: p.reasons, Followup: p.again}
	m := len(g.insts)
	const roles = 4 // active, standby, learner, revoked
	count := make([]int, roles*m)
	var total [roles]int
	for t := range g.tasks {
		if i := p.newOwner[t]; i != none {
			count[i*roles]++
		}
		if i := p.revokedBy[t]; i != none {
			count[i*roles+3]++
		}
		if i := p.learner[t]; i != none {
			count[i*roles+2]++
		}
		if p.standby != nil {
			for _, i := range p.standby[t] {
				count[i*roles+1]++
			}
		}
	}
	for i := range m {
		for r := range roles {
			total[r] += count[i*roles+r]
		}
	}
	var backing [roles][]TaskID
	for r := range roles {
		backing[r] = make([]TaskID, total[r])
	}
	// Each instance's lists are cut from the backing arrays in order;
	// count becomes the next free position of each list.
	var at [roles]int
	for i, in := range g.insts {
		var l [roles][]TaskID
		for r := range roles {
			c := count[i*roles+r]
			l[r] = backing[r][at[r] : at[r]+c : at[r]+c]
			count[i*roles+r] = at[r]
			at[r] += c
		}
		plan.Instances[i] = InstancePlan{ID: in.ID, Active: l[0], Standby: l[1], Learner: l[2], Revoked: l[3]}
	}
	active, standby, learner, revoked := backing[0], backing[1], backing[2], backing[3]
	for t, task := range g.tasks {
		if i := p.newOwner[t]; i != none {
			active[count[i*roles]] = task.ID
			count[i*roles]++
		}
		if i := p.revokedBy[t]; i != none {
			revoked[count[i*roles+3]] = task.ID
			count[i*roles+3]++
			plan.Followup = true
		}
		if i := p.learner[t]; i != none {
			learner[count[i*roles+2]] = task.ID
			count[i*roles+2]++
		}
		if p.standby != nil {
			for _, i := range p.standby[t] {
				standby[count[i*roles+1]] = task.ID
				count[i*roles+1]++
			}
		}
	}
	return plan
}

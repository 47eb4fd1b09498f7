package assign

import (
	"container/heap"
	"math"
	"slices"
)

// none marks "no instance" in per-task instance indexes.
const none = -1

// noState is the lag of a task an instance has no local state for.
const noState = math.MaxInt64

// group is the indexed form of a State that the policies work on. Tasks and
// instances are sorted by id, so every loop over them is deterministic and
// independent of the input order. build makes it.
type group struct {
	cfg   Config
	tasks []Task
	insts []Instance
	sc    *scratch // lends the per-plan arrays

	owner        []int        // task -> live instance that has it active, or none
	learners     taskLists    // task -> instances holding it as learner, ascending
	standbys     taskLists    // task -> instances holding it as standby, ascending
	holders      taskLists    // task -> instances with local state for it, ascending
	holderLag    []int64      // the lag of each holders entry, at the same position
	hasState     []bool       // instance -> has local state for some stateful task
	instLags     [][]lagEntry // instance -> its local state: stateful tasks and lags, in no order
	leaving      []bool       // instance -> leaving
	learnerTasks []int        // tasks with a learner in the input, ascending
	nStateful    int          // number of stateful tasks
	live         int          // number of non-leaving instances
}

// lagOf is instance i's lag on task t, or noState.
func (g *group) lagOf(i, t int) int64 {
	if g.holders.start == nil {
		return noState
	}
	a, b := int(g.holders.start[t]), int(g.holders.start[t+1])
	hs := g.holders.flat[a:b]
	if len(hs) <= 8 {
		for k, h := range hs {
			if h == i {
				return g.holderLag[a+k]
			}
		}
		return noState
	}
	if k, ok := slices.BinarySearch(hs, i); ok {
		return g.holderLag[a+k]
	}
	return noState
}

// caughtUp reports whether instance i's copy of t is within acceptable lag.
func (g *group) caughtUp(i, t int) bool {
	return g.lagOf(i, t) <= g.cfg.AcceptableLag
}

// bucket balances one class of tasks (stateful or stateless) over the
// non-leaving instances. It tracks where each task is positioned and every
// instance's deviation from its share.
//
// Deviations are kept scaled by the total capacity, dev = w*C - W*cap, so
// that with equal loads every figure is an exact integer held in a
// float64 (up to 2^52). With unequal loads they are rounded; see lowers
// for why the balance still ends.
type bucket struct {
	g        *group
	stateful bool
	tasks    []int // task indexes in the bucket, ascending

	uniform   bool      // all loads equal: balance by count
	weight    []float64 // task -> weight (1 when uniform)
	maxW      float64   // largest weight
	totalW    float64
	totalCap  float64
	floor     []int     // uniform: floor of the share (in tasks)
	ceil      []int     // uniform: ceiling of the share
	share     []float64 // scaled share: W*cap
	w         []float64 // instance -> positioned weight
	count     []int     // instance -> positioned tasks
	pos       []int     // task -> instance it is positioned on, or none
	on        [][]int   // instance -> tasks positioned there, ascending (id order)
	outOfLine int       // non-leaving instances over the ceiling or under the floor
	slop      float64   // bound on the rounding error of a move's gain; see lowers
	// standIn: the shares balance the total active load while stateful
	// tasks warm (planner.standIn); plain keeps the bucket's own shares.
	standIn   bool
	plain     []float64
	low, high *instHeap // non-leaving instances by deviation, lowest and highest first
}

func newBucket(g *group, stateful bool) *bucket {
	bs := newBuckets(g)
	if stateful {
		return bs[0]
	}
	return bs[1]
}

// newBuckets makes the stateful and the stateless bucket, in that order.
// They share their per-task arrays: a task is in one bucket only.
func newBuckets(g *group) [2]*bucket {
	n := len(g.tasks)
	pos := g.sc.ints.filled(n, none)
	weight := g.sc.floats.take(n) // every task is in one bucket, which sets its weight
	var bs [2]*bucket
	var first [2]float64 // the load of each bucket's first task
	size := [2]int{g.nStateful, n - g.nStateful}
	for k := range bs {
		bs[k] = &bucket{g: g, stateful: k == 0, pos: pos, weight: weight, uniform: true}
		bs[k].tasks = g.sc.ints.take(size[k])[:0]
	}
	for t, task := range g.tasks {
		k := 1
		if task.Stateful {
			k = 0
		}
		b := bs[k]
		if len(b.tasks) == 0 {
			first[k] = task.Load
		} else if task.Load != first[k] {
			b.uniform = false
		}
		b.tasks = append(b.tasks, t)
	}
	for _, b := range bs {
		if b.uniform {
			// Weight 1 each: the total is the count, exactly (as the sum
			// of ones is, below 2^53).
			for _, t := range b.tasks {
				weight[t] = 1
			}
			b.totalW = float64(len(b.tasks))
			if len(b.tasks) > 0 {
				b.maxW = 1
			}
			continue
		}
		for _, t := range b.tasks {
			w := g.tasks[t].Load
			weight[t] = w
			b.totalW += w
			if w > b.maxW { // loads are finite and > 0
				b.maxW = w
			}
		}
	}
	for _, b := range bs {
		b.fillShares()
	}
	return bs
}

// fillShares sets every instance's share of the bucket.
func (b *bucket) fillShares() {
	g, m := b.g, len(b.g.insts)
	capTotal := 0
	for i, in := range g.insts {
		if !g.leaving[i] {
			capTotal += in.Capacity
		}
	}
	b.totalCap = float64(capTotal)
	b.floor = make([]int, m)
	b.ceil = make([]int, m)
	b.share = make([]float64, m)
	b.w = make([]float64, m)
	b.count = make([]int, m)
	b.on = make([][]int, m)
	for i, in := range g.insts {
		if g.leaving[i] || capTotal == 0 {
			continue
		}
		b.share[i] = b.totalW * float64(in.Capacity)
		if b.uniform {
			num := len(b.tasks) * in.Capacity
			b.floor[i] = num / capTotal
			b.ceil[i] = b.floor[i]
			if num%capTotal != 0 {
				b.ceil[i]++
			}
		}
	}
	for i := range g.insts {
		if b.outside(i) {
			b.outOfLine++
		}
	}
	b.slop = b.roundingBound()
}

// roundingBound bounds how far the computed gain of a move, gap - wt (see
// lowers), can be from the exact one: the same formula in real
// arithmetic, on the exact loads positioned on the two instances and the
// bucket's constants (C and the shares, as computed). Write u = 2^-53, n
// for the bucket's tasks and S for the largest figure a deviation is made
// of: W*C or a share.
//
// With equal loads every figure is an integer, exact while S <= 2^52
// (then |dev| <= 2^52 and gap <= 2^53): the bound is 0. Beyond, each dev
// rounds twice (2uS), gap once more (6uS), gap - C once more (9uS): the
// bound is 16uS.
//
// Shares that stand in for warming stateful tasks (planner.standIn) are
// not whole numbers even with equal loads; the bound is then the one of
// unequal loads, which covers them: the counts are exact and the shares
// are constants of the round.
//
// With unequal loads each w[i] is a float sum of the loads positioned on
// i: positioning adds each task once, and a balance move sums both
// instances afresh (move), so no error builds up over moves: w[i] is off
// by at most about n*u*W. Then dev = w*C - share, rounded twice, is off by
// (n+2)uS; gap, rounded once more, by (2n+6)uS; wt = load*C by uS; and
// gap - wt, rounded once more, by (2n+10)uS in all, to first order. The
// bound, 4(n+8)uS, is twice that and more.
//
// Without capacity (or with a total that overflowed) no move is safe: the
// bound is infinite and the balance makes none.
func (b *bucket) roundingBound() float64 {
	if !(b.totalCap > 0) {
		return math.Inf(1)
	}
	s := b.totalW * b.totalCap
	for _, share := range b.share {
		s = max(s, share)
	}
	const u = 0x1p-53
	switch {
	case b.uniform && !b.standIn && s <= 1<<52:
		return 0
	case b.uniform && !b.standIn:
		return 16 * u * s
	}
	return 4 * (float64(len(b.tasks)) + 8) * u * s
}

// lowers reports whether moving a task of scaled weight wt (load*C) from
// an instance to one gap below it (scaled) lowers the sum of squared
// deviations, by a margin rounding cannot fake.
//
// In exact arithmetic the move changes the sum by 2*wt*(wt - gap): it
// lowers it when wt < gap. A move with wt == gap only swaps the two
// deviations; on rounded figures the test wt < gap could pass both ways,
// and the balance would move the task back and forth for ever. So the
// test is gap - wt > slop, slop bounding the error of the computed
// gap - wt (roundingBound): when it passes, the exact wt < gap holds, and
// every move the balance makes strictly lowers the exact sum of squared
// deviations, a function of where the tasks are positioned. No
// positioning can come back, there are finitely many, so the balance
// ends. The moves forgone are those that would change the sum by no more
// than rounding does, which leave the two instances as far apart as
// before, the other way round.
func (b *bucket) lowers(gap, wt float64) bool { return gap-wt > b.slop }

// heaps returns the instances ordered by deviation, building them on first
// use so that positioning every task first costs no heap upkeep.
func (b *bucket) heaps() (low, high *instHeap) {
	if b.low == nil {
		m := len(b.g.insts)
		// Keyed by deviation, and by its negation for the highest first.
		b.low = &instHeap{index: make([]int, m), key: make([]float64, m)}
		b.high = &instHeap{index: make([]int, m), key: make([]float64, m)}
		for i := range b.g.insts {
			if !b.g.leaving[i] {
				d := b.dev(i)
				b.low.key[i], b.high.key[i] = d, -d
				b.low.Push(i)
				b.high.Push(i)
			}
		}
		heap.Init(b.low)
		heap.Init(b.high)
	}
	return b.low, b.high
}

// dev is instance i's scaled deviation from its share: > 0 above, < 0 below.
func (b *bucket) dev(i int) float64 { return b.w[i]*b.totalCap - b.share[i] }

// outside reports whether non-leaving instance i is out of balance: over
// the ceiling or under the floor of its share (equal loads), or more than
// one largest task away from its share (unequal loads).
func (b *bucket) outside(i int) bool {
	if b.g.leaving[i] {
		return false
	}
	if b.uniform {
		return b.count[i] > b.ceil[i] || b.count[i] < b.floor[i]
	}
	slack := b.maxW*b.totalCap + 1e-9*b.totalW*b.totalCap
	d := b.dev(i)
	return d > slack || d < -slack
}

// place positions task t on instance i (or removes it when i is none).
// Lists stay in id order, so scans that stop at the first best task pick
// the lowest id.
func (b *bucket) place(t, i int) { b.put(t, i, false) }

// move is place for the balance, which may move a task many times: with
// unequal loads it sums the load of both instances afresh instead of
// adding and subtracting, so that rounding errors do not build up over
// moves (see roundingBound).
func (b *bucket) move(t, i int) { b.put(t, i, !b.uniform) }

// put is place; resum recomputes the load of the instances it changes.
func (b *bucket) put(t, i int, resum bool) {
	if p := b.pos[t]; p != none {
		b.before(p)
		on := b.on[p]
		k, _ := slices.BinarySearch(on, t)
		b.on[p] = slices.Delete(on, k, k+1)
		if resum {
			b.w[p] = b.sum(p)
		} else {
			b.w[p] -= b.weight[t]
		}
		b.count[p]--
		b.after(p)
	}
	b.pos[t] = i
	if i != none {
		b.before(i)
		on := b.on[i]
		if n := len(on); n == 0 || on[n-1] < t {
			b.on[i] = append(on, t) // tasks are mostly placed in id order
		} else {
			k, _ := slices.BinarySearch(on, t)
			b.on[i] = slices.Insert(on, k, t)
		}
		if resum {
			b.w[i] = b.sum(i)
		} else {
			b.w[i] += b.weight[t]
		}
		b.count[i]++
		b.after(i)
	}
}

// sum is the load positioned on instance i, added up in id order.
func (b *bucket) sum(i int) float64 {
	w := 0.0
	for _, t := range b.on[i] {
		w += b.weight[t]
	}
	return w
}

// placeAll positions every task of ts on at(t) (skipping none), before
// any other placement: ts ascending, no heaps yet, nothing positioned. It is place without the
// upkeep, which is redone once at the end.
func (b *bucket) placeAll(ts []int, at func(t int) int) {
	for _, t := range ts {
		if i := at(t); i != none {
			b.pos[t] = i
			b.count[i]++
		}
	}
	// Every instance's list is cut from one slice, to the size it needs
	// now; a list that grows later moves out on its own.
	total := 0
	for _, c := range b.count {
		total += c
	}
	backing := b.g.sc.ints.take(total) // appended to, within its length
	for i, c := range b.count {
		b.on[i] = backing[:0:c]
		backing = backing[c:]
	}
	for _, t := range ts {
		if i := b.pos[t]; i != none {
			b.on[i] = append(b.on[i], t)
			b.w[i] += b.weight[t]
		}
	}
	b.outOfLine = 0
	for i := range b.g.insts {
		if b.outside(i) {
			b.outOfLine++
		}
	}
}

// before and after bracket a change to instance i's tasks: they keep the
// count of instances out of line and the heaps up to date.
func (b *bucket) before(i int) {
	if b.outside(i) {
		b.outOfLine--
	}
}

func (b *bucket) after(i int) {
	if b.outside(i) {
		b.outOfLine++
	}
	if b.low != nil && !b.g.leaving[i] {
		d := b.dev(i)
		b.low.key[i], b.high.key[i] = d, -d
		b.low.fix(b.low.index[i])
		b.high.fix(b.high.index[i])
	}
}

// instHeap is a heap of instance indexes under an ordering (less) of
// the caller's, or by key then index when key is set, with each
// instance's position kept in index for heap.Fix.
type instHeap struct {
	items []int
	index []int // instance -> position in items
	less  func(x, y int) bool
	key   []float64 // instance -> key, smallest first; without less
}

// before reports whether instance x comes before instance y.
func (h *instHeap) before(x, y int) bool {
	if h.key != nil {
		kx, ky := h.key[x], h.key[y]
		return kx < ky || (kx == ky && x < y)
	}
	return h.less(x, y)
}

func (h *instHeap) Len() int           { return len(h.items) }
func (h *instHeap) Less(a, c int) bool { return h.before(h.items[a], h.items[c]) }
func (h *instHeap) Swap(a, c int) {
	h.items[a], h.items[c] = h.items[c], h.items[a]
	h.index[h.items[a]] = a
	h.index[h.items[c]] = c
}
func (h *instHeap) Push(x any) {
	i := x.(int)
	h.index[i] = len(h.items)
	h.items = append(h.items, i)
}
func (h *instHeap) Pop() any {
	i := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	return i
}

// fix is heap.Fix(h, k) without the interface calls: it runs on every
// move the balance makes.
func (h *instHeap) fix(k int) {
	if !h.down(k) {
		h.up(k)
	}
}

func (h *instHeap) down(k0 int) bool {
	k, n := k0, len(h.items)
	for {
		c := 2*k + 1
		if c >= n || c < 0 {
			break
		}
		if r := c + 1; r < n && h.before(h.items[r], h.items[c]) {
			c = r
		}
		if !h.before(h.items[c], h.items[k]) {
			break
		}
		h.Swap(k, c)
		k = c
	}
	return k > k0
}

func (h *instHeap) up(k int) {
	for k > 0 {
		p := (k - 1) / 2
		if !h.before(h.items[k], h.items[p]) {
			break
		}
		h.Swap(k, p)
		k = p
	}
}

// top returns the first instance in heap order that ok accepts, or none.
func (h *instHeap) top(ok func(i int) bool) int {
	if len(h.items) > 0 && ok(h.items[0]) {
		return h.items[0]
	}
	best := none
	var skipped []int
	for h.Len() > 0 {
		i := heap.Pop(h).(int)
		skipped = append(skipped, i)
		if ok(i) {
			best = i
			break
		}
	}
	for _, i := range skipped {
		heap.Push(h, i)
	}
	return best
}

// lightest returns the non-leaving instance furthest below its share
// (lowest index among equals), or none.
func (b *bucket) lightest() int {
	low, _ := b.heaps()
	if len(low.items) == 0 {
		return none
	}
	return low.items[0]
}

// lightestOf returns, among candidates that ok accepts, the non-leaving
// instance furthest below its share, or none.
func (b *bucket) lightestOf(candidates []int, ok func(i int) bool) int {
	best := none
	for _, i := range candidates {
		if b.g.leaving[i] || !ok(i) {
			continue
		}
		if best == none || b.dev(i) < b.dev(best) || (b.dev(i) == b.dev(best) && i < best) {
			best = i
		}
	}
	return best
}

// heaviest returns the non-leaving instance furthest above its share
// among those with tasks that ok accepts, or none.
func (b *bucket) heaviest(ok func(i int) bool) int {
	_, high := b.heaps()
	return high.top(func(i int) bool { return b.count[i] > 0 && ok(i) })
}

// fits reports whether adding task t to i keeps i within its share.
func (b *bucket) fits(i, t int) bool {
	if b.uniform {
		return b.count[i]+1 <= b.ceil[i]
	}
	return b.dev(i)+b.weight[t]*b.totalCap <= b.maxW*b.totalCap
}

// balanced reports whether every non-leaving instance is within its share.
func (b *bucket) balanced() bool { return b.outOfLine == 0 }

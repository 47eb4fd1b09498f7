package sim

import (
	"cmp"
	"container/heap"
	"encoding/hex"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/baton-streams/baton/assign"
)

// This file emulates Kafka Streams' HighAvailabilityTaskAssignor with its
// TaskMovement step (3.x and 4.x, rack awareness off), as the leader of a
// group on the classic, cooperative protocol runs it. Each rebalance is
// computed from scratch, with no memory of the last:
//
//  1. a target for the stateful actives: the tasks in Kafka Streams' task
//     order dealt round-robin over the clients in process order, then
//     balanced over the clients' threads (capacity);
//  2. standbys: each replica on the least loaded client that does not
//     hold the task, then balanced over threads the same way;
//  3. active movements: an active whose target client is not caught up
//     while another client is further along goes to a caught-up client
//     (one holding a standby first: they swap), or to the most caught-up
//     one when none is, and the target gets a warm-up while the round's
//     budget (max_learners, Kafka Streams' max.warmup.replicas) lasts;
//  4. standby movements likewise, for standbys on clients that are not
//     caught up;
//  5. stateless actives, each to the client with the fewest actives per
//     thread.
//
// A probing rebalance is needed when any movement was scheduled. The
// cooperative protocol then turns every change of an active's owner into
// a revocation now and an assignment in the follow-up rebalance.

// assignKStreams is the probing policy's assignor. The clients are
// s.Instances in the order given (the engine lists them in process order);
// probe reports that the plan scheduled movements.
func assignKStreams(s assign.State) (assign.Plan, bool, error) {
	if err := assign.Validate(s); err != nil {
		return assign.Plan{}, false, err
	}
	g := newKSGroup(s)
	g.targetActives()
	g.targetStandbys()
	moves := g.activeMovements() + g.standbyMovements()
	g.statelessActives()
	return g.plan(), moves > 0, nil
}

// settledKStreams is the assignment a group settled under Kafka Streams
// runs: the target of steps 1, 2 and 5, with nothing left to move. Given
// it, with every copy caught up, assignKStreams plans the same and
// schedules no movement.
func settledKStreams(s assign.State) (assign.Plan, error) {
	if err := assign.Validate(s); err != nil {
		return assign.Plan{}, err
	}
	g := newKSGroup(s)
	g.targetActives()
	g.targetStandbys()
	g.statelessActives()
	return g.plan(), nil
}

// running is the lag of a client's running active (Kafka Streams'
// Task.LATEST_OFFSET): caught up, and ahead of any other copy.
const running = -1

type ksHolder struct {
	c   int
	lag int64
}

type ksGroup struct {
	s   assign.State
	n   int       // clients, in process order: s.Instances
	cap []float64 // client -> threads
	// Tasks by rank: their position in Kafka Streams' task order.
	ids      []assign.TaskID
	stateful []bool
	prev     []int        // rank -> client that had it active, or -1
	byLag    [][]ksHolder // rank -> clients with a copy, by lag then process order
	acc      int64
	budget   int // warm-ups left in this round

	// The assignment being built.
	active  []int   // rank -> client, or -1
	standby [][]int // rank -> clients with a standby of it
	warm    [][]int // rank -> clients with a warm-up of it
	count   []int   // client -> tasks assigned in any role
	actives []int   // client -> actives assigned

	reasons []assign.Reason
}

func newKSGroup(s assign.State) *ksGroup {
	n := len(s.Instances)
	g := &ksGroup{s: s, n: n, cap: make([]float64, n), acc: s.Config.AcceptableLag, budget: s.Config.MaxLearners,
		count: make([]int, n), actives: make([]int, n)}
	order := make([]int, len(s.Tasks))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return compareTaskIDs(s.Tasks[a].ID, s.Tasks[b].ID) })
	m := len(order)
	rank := make(map[assign.TaskID]int, m)
	g.ids, g.stateful = make([]assign.TaskID, m), make([]bool, m)
	for r, i := range order {
		g.ids[r], g.stateful[r] = s.Tasks[i].ID, s.Tasks[i].Stateful
		rank[s.Tasks[i].ID] = r
	}
	g.prev, g.active = filled(m, -1), filled(m, -1)
	g.byLag, g.standby, g.warm = make([][]ksHolder, m), make([][]int, m), make([][]int, m)
	for c, in := range s.Instances {
		g.cap[c] = float64(in.Capacity)
		for _, id := range in.Active {
			g.prev[rank[id]] = c
		}
		for id, lag := range in.Lag {
			r := rank[id]
			if g.prev[r] == c && lag == 0 {
				lag = running
			}
			g.byLag[r] = append(g.byLag[r], ksHolder{c, lag})
		}
		for _, id := range in.Active {
			// An active with no lag reported counts as running.
			if r := rank[id]; g.stateful[r] {
				if _, ok := in.Lag[id]; !ok {
					g.byLag[r] = append(g.byLag[r], ksHolder{c, running})
				}
			}
		}
	}
	for _, hs := range g.byLag {
		slices.SortFunc(hs, func(a, b ksHolder) int {
			if a.lag != b.lag {
				return cmp.Compare(a.lag, b.lag)
			}
			return a.c - b.c
		})
	}
	return g
}

func filled(n, v int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// lag is client c's lag on task r: math.MaxInt64 without a copy.
func (g *ksGroup) lag(c, r int) int64 {
	for _, h := range g.byLag[r] {
		if h.c == c {
			return h.lag
		}
	}
	return math.MaxInt64
}

func (g *ksGroup) caughtUp(c, r int) bool { return g.lag(c, r) <= g.acc }

// behind: c is not caught up on r and another client is further along.
func (g *ksGroup) behind(c, r int) bool {
	hs := g.byLag[r]
	return len(hs) > 0 && !g.caughtUp(c, r) && hs[0].lag < g.lag(c, r)
}

func (g *ksGroup) nCaughtUp(r int) int {
	k := 0
	for _, h := range g.byLag[r] {
		if h.lag <= g.acc {
			k++
		}
	}
	return k
}

func (g *ksGroup) load(c int) float64 { return float64(g.count[c]) / g.cap[c] }

func (g *ksGroup) holds(c, r int) bool {
	return g.active[r] == c || slices.Contains(g.standby[r], c) || slices.Contains(g.warm[r], c)
}

func (g *ksGroup) setActive(r, c int) {
	if o := g.active[r]; o >= 0 {
		g.count[o]--
		g.actives[o]--
	}
	g.active[r] = c
	g.count[c]++
	g.actives[c]++
}

// shouldMove is Kafka Streams' test for moving one task from src to dst
// while balancing over threads: it must lower a positive skew of their
// loads without reversing it.
func (g *ksGroup) shouldMove(src, dst int) bool {
	skew := g.load(src) - g.load(dst)
	if skew <= 0 {
		return false
	}
	proposed := float64(g.count[src]-1)/g.cap[src] - float64(g.count[dst]+1)/g.cap[dst]
	return proposed >= 0 && proposed < skew
}

// balance moves tasks of one role (lists: each client's, in rank order)
// from client to client, every ordered pair in turn, until no pair
// should move one.
func (g *ksGroup) balance(lists [][]int, move func(r, from, to int)) {
	for again := true; again; {
		again = false
		for src := range g.n {
			for dst := range g.n {
				if src == dst || !g.shouldMove(src, dst) {
					continue
				}
				for _, r := range slices.Clone(lists[src]) {
					if !g.shouldMove(src, dst) {
						break
					}
					if g.holds(dst, r) {
						continue
					}
					move(r, src, dst)
					k, _ := slices.BinarySearch(lists[src], r)
					lists[src] = slices.Delete(lists[src], k, k+1)
					k, _ = slices.BinarySearch(lists[dst], r)
					lists[dst] = slices.Insert(lists[dst], k, r)
					again = true
				}
			}
		}
	}
}

func (g *ksGroup) targetActives() {
	if g.n == 0 {
		return
	}
	lists := make([][]int, g.n)
	k := 0
	for r := range g.ids {
		if g.stateful[r] {
			c := k % g.n
			g.setActive(r, c)
			lists[c] = append(lists[c], r)
			k++
		}
	}
	g.balance(lists, func(r, _, to int) { g.setActive(r, to) })
}

func (g *ksGroup) targetStandbys() {
	if g.s.Config.Standbys == 0 || g.n == 0 {
		return
	}
	lists := make([][]int, g.n)
	h := g.byLoad(func(c int) float64 { return g.load(c) })
	for r := range g.ids {
		if !g.stateful[r] {
			continue
		}
		for range g.s.Config.Standbys {
			c := h.pick(func(c int) bool { return !g.holds(c, r) })
			if c < 0 {
				break
			}
			g.standby[r] = append(g.standby[r], c)
			g.count[c]++
			lists[c] = append(lists[c], r)
			h.update(c)
		}
	}
	g.balance(lists, func(r, from, to int) {
		k := slices.Index(g.standby[r], from)
		g.standby[r][k] = to
		g.count[from]--
		g.count[to]++
	})
}

type ksMove struct{ r, c, caught int }

func sortMoves(ms []ksMove) {
	slices.SortFunc(ms, func(a, b ksMove) int {
		return cmp.Or(cmp.Compare(a.caught, b.caught), cmp.Compare(a.r, b.r), cmp.Compare(a.c, b.c))
	})
}

// leastLoaded is the caught-up client of r with the lowest load that
// satisfies ok (ties: process order), or -1.
func (g *ksGroup) leastLoaded(r int, ok func(c int) bool) int {
	best := -1
	for _, h := range g.byLag[r] {
		if h.lag > g.acc || !ok(h.c) {
			continue
		}
		if best < 0 || g.load(h.c) < g.load(best) || g.load(h.c) == g.load(best) && h.c < best {
			best = h.c
		}
	}
	return best
}

// mostCaughtUp is the first client satisfying ok in r's order by lag (then
// process order; clients without a copy last) that comes before dst, or -1.
func (g *ksGroup) mostCaughtUp(r, dst int, ok func(c int) bool) int {
	for _, h := range g.byLag[r] {
		if h.c == dst {
			return -1
		}
		if ok(h.c) {
			return h.c
		}
	}
	for c := range g.n {
		if c == dst {
			return -1
		}
		if g.lag(c, r) == math.MaxInt64 && ok(c) {
			return c
		}
	}
	return -1
}

func (g *ksGroup) hasStandby(c, r int) bool { return slices.Contains(g.standby[r], c) }

// activeMovements moves each target active whose client is behind to a
// caught-up client, warming the target up. It returns the movements.
func (g *ksGroup) activeMovements() int {
	var ms []ksMove
	for r, c := range g.active {
		if c >= 0 && g.stateful[r] && g.behind(c, r) {
			ms = append(ms, ksMove{r, c, g.nCaughtUp(r)})
		}
	}
	sortMoves(ms)
	for _, m := range ms {
		r, dst := m.r, m.c
		if src := g.leastLoaded(r, func(c int) bool { return g.hasStandby(c, r) }); src >= 0 {
			g.swap(r, src, dst)
			continue
		}
		src := g.leastLoaded(r, func(int) bool { return true })
		if src < 0 {
			src = g.mostCaughtUp(r, dst, func(int) bool { return true })
			if g.hasStandby(src, r) {
				g.swap(r, src, dst)
				continue
			}
		}
		g.setActive(r, src)
		g.why(assign.ReasonOrphan, r, src, "%s is further along (lag %s) than %s, the target of Kafka Streams' assignment (lag %s)",
			g.name(src), lagWord(g.lag(src, r)), g.name(dst), lagWord(g.lag(dst, r)))
		if g.budget > 0 {
			g.budget--
			g.warm[r] = append(g.warm[r], dst)
			g.count[dst]++
			g.why(assign.ReasonLearner, r, dst, "%s is the task's target in Kafka Streams' assignment; a warm-up first (lag %s)", g.name(dst), lagWord(g.lag(dst, r)))
		}
	}
	return len(ms)
}

// swap makes src's standby of r active and the target dst a standby.
func (g *ksGroup) swap(r, src, dst int) {
	k := slices.Index(g.standby[r], src)
	g.standby[r][k] = dst
	g.setActive(r, src)
	g.why(assign.ReasonOrphan, r, src, "%s's standby is caught up (lag %s) where %s, the target of Kafka Streams' assignment, is not: they swap",
		g.name(src), lagWord(g.lag(src, r)), g.name(dst))
}

// standbyMovements moves each standby whose client is behind to another
// client, the original one keeping a warm-up while the budget lasts. It
// returns the movements made.
func (g *ksGroup) standbyMovements() int {
	var ms []ksMove
	for r := range g.ids {
		for _, c := range g.standby[r] {
			if g.behind(c, r) {
				ms = append(ms, ksMove{r, c, g.nCaughtUp(r)})
			}
		}
	}
	sortMoves(ms)
	moved := 0
	for _, m := range ms {
		r, dst := m.r, m.c
		free := func(c int) bool { return !g.holds(c, r) }
		src := g.leastLoaded(r, free)
		if src < 0 {
			src = g.mostCaughtUp(r, dst, free)
		}
		if src < 0 {
			continue
		}
		moved++
		k := slices.Index(g.standby[r], dst)
		g.standby[r][k] = src
		g.count[src]++
		if g.budget > 0 {
			g.budget--
			g.warm[r] = append(g.warm[r], dst)
			g.why(assign.ReasonLearner, r, dst, "its standby moves to %s, further along; it stays as a warm-up (lag %s)", g.name(src), lagWord(g.lag(dst, r)))
		} else {
			g.count[dst]--
		}
	}
	return moved
}

func (g *ksGroup) statelessActives() {
	h := g.byLoad(func(c int) float64 { return float64(g.actives[c]) / g.cap[c] })
	for r := range g.ids {
		if g.stateful[r] || g.n == 0 {
			continue
		}
		c := h.pick(func(int) bool { return true })
		g.setActive(r, c)
		h.update(c)
	}
}

// plan turns the assignment into baton's plan: an active that changes
// owner is revoked from the old one now and given to the new one in the
// follow-up.
func (g *ksGroup) plan() assign.Plan {
	p := assign.Plan{Instances: make([]assign.InstancePlan, g.n)}
	for c, in := range g.s.Instances {
		p.Instances[c].ID = in.ID
	}
	for r, c := range g.active {
		o := g.prev[r]
		switch {
		case c < 0:
		case o >= 0 && o != c:
			p.Instances[o].Revoked = append(p.Instances[o].Revoked, g.ids[r])
			p.Followup = true
			g.why(assign.ReasonRevoke, r, o, "moves to %s in the follow-up", g.name(c))
		default:
			p.Instances[c].Active = append(p.Instances[c].Active, g.ids[r])
		}
		for _, x := range g.standby[r] {
			p.Instances[x].Standby = append(p.Instances[x].Standby, g.ids[r])
		}
		for _, x := range g.warm[r] {
			p.Instances[x].Learner = append(p.Instances[x].Learner, g.ids[r])
		}
	}
	for i := range p.Instances {
		ip := &p.Instances[i]
		for _, l := range [][]assign.TaskID{ip.Active, ip.Standby, ip.Learner, ip.Revoked} {
			slices.Sort(l)
		}
	}
	p.Reasons = g.reasons
	return p
}

func (g *ksGroup) name(c int) string { return g.s.Instances[c].ID }

func (g *ksGroup) why(kind assign.ReasonKind, r, c int, format string, args ...any) {
	g.reasons = append(g.reasons, assign.Reason{Kind: kind, Task: g.ids[r], Instance: g.name(c), Why: fmt.Sprintf(format, args...)})
}

func lagWord(l int64) string {
	switch l {
	case math.MaxInt64:
		return "no copy"
	case running:
		return "running"
	}
	return fmt.Sprint(l)
}

// ksHeap orders clients by a load, then process order, for picking the
// least loaded one that qualifies.
type ksHeap struct {
	load func(c int) float64
	at   []int // client -> position in items
	cs   []int
}

func (g *ksGroup) byLoad(load func(c int) float64) *ksHeap {
	h := &ksHeap{load: load, at: make([]int, g.n), cs: make([]int, g.n)}
	for c := range g.n {
		h.cs[c], h.at[c] = c, c
	}
	heap.Init(h)
	return h
}

func (h *ksHeap) Len() int { return len(h.cs) }
func (h *ksHeap) Less(a, b int) bool {
	la, lb := h.load(h.cs[a]), h.load(h.cs[b])
	return la < lb || la == lb && h.cs[a] < h.cs[b]
}
func (h *ksHeap) Swap(a, b int) {
	h.cs[a], h.cs[b] = h.cs[b], h.cs[a]
	h.at[h.cs[a]], h.at[h.cs[b]] = a, b
}
func (h *ksHeap) Push(x any) { c := x.(int); h.at[c] = len(h.cs); h.cs = append(h.cs, c) }
func (h *ksHeap) Pop() any {
	c := h.cs[len(h.cs)-1]
	h.cs = h.cs[:len(h.cs)-1]
	return c
}

// pick is the least loaded client satisfying ok, or -1; the heap is left
// as it was.
func (h *ksHeap) pick(ok func(c int) bool) int {
	var skipped []int
	found := -1
	for h.Len() > 0 {
		c := heap.Pop(h).(int)
		if ok(c) {
			found = c
			heap.Push(h, c)
			break
		}
		skipped = append(skipped, c)
	}
	for _, c := range skipped {
		heap.Push(h, c)
	}
	return found
}

// update restores the order after client c's load changed.
func (h *ksHeap) update(c int) { heap.Fix(h, h.at[c]) }

// compareTaskIDs is Kafka Streams' task order: ids of the form
// SUBTOPOLOGY_PARTITION by subtopology then partition, numerically, before
// any other id; other ids in byte order.
func compareTaskIDs(a, b assign.TaskID) int {
	sa, pa, oka := splitTaskID(a)
	sb, pb, okb := splitTaskID(b)
	switch {
	case oka && okb:
		return cmp.Or(cmp.Compare(sa, sb), cmp.Compare(pa, pb))
	case oka:
		return -1
	case okb:
		return 1
	}
	return strings.Compare(string(a), string(b))
}

func splitTaskID(id assign.TaskID) (sub, part int, ok bool) {
	s, p, found := strings.Cut(string(id), "_")
	if !found {
		return 0, 0, false
	}
	a, err1 := strconv.Atoi(s)
	b, err2 := strconv.Atoi(p)
	return a, b, err1 == nil && err2 == nil && a >= 0 && b >= 0
}

// ProcessKey is what orders an instance among the clients of the probing
// policy: its process if set, else its id.
func (is InstanceSpec) ProcessKey() string {
	if is.Process != "" {
		return is.Process
	}
	return is.ID
}

// sortByProcess puts xs in the order Kafka Streams' assignor visits the
// processes of the instances spec gives, keeping the order of instances
// of one process.
func sortByProcess[T any](xs []T, spec func(T) InstanceSpec) {
	slices.SortStableFunc(xs, func(a, b T) int {
		return compareProcesses(spec(a).ProcessKey(), spec(b).ProcessKey())
	})
}

// compareProcesses orders process keys as Kafka Streams orders its
// clients' process ids. Two UUIDs compare as Java's UUID.compareTo does:
// by their two 64-bit halves as signed numbers (so a UUID starting with 8
// to f comes before one starting with 0 to 7). A UUID comes before any
// other key; other keys compare in byte order.
func compareProcesses(a, b string) int {
	ua, oka := parseUUID(a)
	ub, okb := parseUUID(b)
	switch {
	case oka && okb:
		return cmp.Or(cmp.Compare(ua[0], ub[0]), cmp.Compare(ua[1], ub[1]))
	case oka:
		return -1
	case okb:
		return 1
	}
	return strings.Compare(a, b)
}

// parseUUID reads a UUID in its canonical form (8-4-4-4-12 hex digits) as
// Java's two signed halves.
func parseUUID(s string) ([2]int64, bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return [2]int64{}, false
	}
	b, err := hex.DecodeString(s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:])
	if err != nil {
		return [2]int64{}, false
	}
	var u [2]int64
	for i := range 2 {
		var x uint64
		for _, c := range b[8*i : 8*i+8] {
			x = x<<8 | uint64(c)
		}
		u[i] = int64(x)
	}
	return u, true
}

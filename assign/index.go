package assign

import (
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"strings"
)

// build validates s and indexes it into a group. Field paths are only
// formatted on error: this runs on every plan, and at 100,000 tasks its
// cost is most of a plan's, so it works in flat arrays: one table from
// task id to index (taskIndex), and every per-task list of instances
// (learners, standbys, holders of local state) cut from one shared slice.
func build(s State, sc *scratch) (*group, error) {
	c := s.Config
	if c.Standbys < 0 {
		return nil, fieldErr("config.standbys", "must be >= 0, got %d", c.Standbys)
	}
	if c.MaxLearners < 1 {
		return nil, fieldErr("config.max_learners", "must be >= 1, got %d", c.MaxLearners)
	}
	if c.AcceptableLag < 0 {
		return nil, fieldErr("config.acceptable_lag", "must be >= 0, got %d", c.AcceptableLag)
	}
	n := len(s.Tasks)
	var ids taskIndex
	ids.init(s.Tasks, sc)
	sorted := true
	stateful := sc.bools.take(n) // input index -> stateful: a lag entry's task, without reading the task
	g := &group{cfg: c, sc: sc}
	for k, t := range s.Tasks {
		if t.ID == "" {
			return nil, fieldErr(fmt.Sprintf("tasks[%d].id", k), "must not be empty")
		}
		if !ids.insert(k) {
			return nil, fieldErr(fmt.Sprintf("tasks[%d].id", k), "task %q is listed twice", t.ID)
		}
		if !(t.Load > 0) || math.IsInf(t.Load, 0) {
			return nil, fieldErr(fmt.Sprintf("tasks[%d].load", k), "must be a finite number > 0, got %v", t.Load)
		}
		stateful[k] = t.Stateful
		if t.Stateful {
			g.nStateful++
		}
		if !ids.grid && k > 0 && sorted && s.Tasks[k-1].ID >= t.ID {
			sorted = false
		}
	}

	// Tasks in id order. Callers that list them sorted already (the
	// simulator does) skip the sort; then the rank of a task is its input
	// index and rank is left nil.
	var rank []int32 // input index -> sorted rank
	if ids.grid {
		sorted = ids.sorted
	}
	if sorted {
		g.tasks = s.Tasks // read only, like the rest of s
	} else {
		order := sortIDs(s.Tasks, sc) // sorted rank -> input index
		rank = sc.int32s.get(n)
		g.tasks = make([]Task, n)
		for r, o := range order {
			rank[o.k] = int32(r)
			g.tasks[r] = s.Tasks[o.k]
		}
	}
	find := func(id TaskID) int {
		k := ids.find(id)
		if k < 0 || rank == nil {
			return k
		}
		return int(rank[k])
	}
	// findAll is find for every id of a list, into found.
	var found []int32
	var lagIDs []TaskID
	var lagVals []int64
	findAll := func(list []TaskID) []int32 {
		found = slices.Grow(found[:0], len(list))[:len(list)]
		ids.findAll(list, found)
		if rank != nil {
			for j, k := range found {
				if k >= 0 {
					found[j] = rank[k]
				}
			}
		}
		return found
	}

	// Instances in id order; ipos is an input index's sorted position.
	m := len(s.Instances)
	iorder := make([]int, m)
	for k := range iorder {
		iorder[k] = k
	}
	slices.SortFunc(iorder, func(a, b int) int { return strings.Compare(s.Instances[a].ID, s.Instances[b].ID) })
	ipos := make([]int, m)
	g.insts = make([]Instance, m)
	g.leaving = make([]bool, m)
	for i, k := range iorder {
		ipos[k] = i
		g.insts[i] = s.Instances[k]
		g.leaving[i] = s.Instances[k].Leaving
		if !s.Instances[k].Leaving {
			g.live++
		}
	}

	g.owner = sc.ints.filled(n, none)
	// Standby, learner and lag entries, per instance in input order, then
	// regrouped by task below.
	type entry = lagEntry
	var roleEntries [2][]entry // standby, learner (lag unused)
	var lagEntries []entry
	{
		var roles [2]int
		lags := 0
		for _, in := range s.Instances {
			roles[0] += len(in.Standby)
			roles[1] += len(in.Learner)
			lags += len(in.Lag)
		}
		roleEntries[0] = sc.entries.take(roles[0])[:0]
		roleEntries[1] = sc.entries.take(roles[1])[:0]
		lagEntries = sc.entries.take(lags)[:0]
	}
	roleSpan := make([][2][2]int32, m) // input instance -> role -> [start, end) in roleEntries
	lagSpan := make([][2]int32, m)
	seenBy := sc.int32s.get(n) // task -> input instance index + 1 that last listed it
	seenAs := sc.bytes.take(n) // read only where seenBy says it was written
	roleNames := [3]string{"active", "standby", "learner"}
	names := make(map[string]bool, m)
	for k, in := range s.Instances {
		if in.ID == "" {
			return nil, fieldErr(fmt.Sprintf("instances[%d].id", k), "must not be empty")
		}
		if names[in.ID] {
			return nil, fieldErr(fmt.Sprintf("instances[%d].id", k), "instance %q is listed twice", in.ID)
		}
		names[in.ID] = true
		if in.Capacity < 1 {
			return nil, fieldErr(fmt.Sprintf("instances[%d].capacity", k), "must be >= 1, got %d", in.Capacity)
		}
		for r, list := range [3][]TaskID{in.Active, in.Standby, in.Learner} {
			if r > 0 {
				roleSpan[k][r-1][0] = int32(len(roleEntries[r-1]))
			}
			for j, t := range findAll(list) {
				id := list[j]
				field := func() string { return fmt.Sprintf("instances[%d].%s[%d]", k, roleNames[r], j) }
				if t < 0 {
					return nil, fieldErr(field(), "unknown task %q", id)
				}
				if seenBy[t] == int32(k+1) {
					if seenAs[t] == uint8(r) {
						return nil, fieldErr(field(), "task %q is listed twice", id)
					}
					return nil, fieldErr(field(), "task %q is also %s on instance %q: one role per instance", id, roleNames[seenAs[t]], in.ID)
				}
				seenBy[t], seenAs[t] = int32(k+1), uint8(r)
				if r == 0 {
					if other := g.owner[t]; other != none {
						return nil, fieldErr(field(), "task %q is also active on instance %q", id, g.insts[other].ID)
					}
					g.owner[t] = ipos[k]
					continue
				}
				roleEntries[r-1] = append(roleEntries[r-1], entry{task: int32(t)})
			}
			if r > 0 {
				roleSpan[k][r-1][1] = int32(len(roleEntries[r-1]))
			}
		}
		lagSpan[k][0] = int32(len(lagEntries))
		if ids.grid {
			// No need to gather the ids first: a lookup in the grid
			// costs no more than reading the id.
			for id, lag := range in.Lag {
				t := ids.findGrid(id)
				if t < 0 || lag < 0 {
					return nil, lagError(k, in.Lag, func(id TaskID) bool { return find(id) >= 0 })
				}
				if !stateful[t] {
					continue
				}
				if rank != nil {
					t = rank[t]
				}
				lagEntries = append(lagEntries, entry{t, lag})
			}
			lagSpan[k][1] = int32(len(lagEntries))
			continue
		}
		lagIDs, lagVals = lagIDs[:0], lagVals[:0]
		for id, lag := range in.Lag {
			lagIDs = append(lagIDs, id)
			lagVals = append(lagVals, lag)
		}
		for j, t := range findAll(lagIDs) {
			if t < 0 || lagVals[j] < 0 {
				return nil, lagError(k, in.Lag, func(id TaskID) bool { return find(id) >= 0 })
			}
			if g.tasks[t].Stateful {
				lagEntries = append(lagEntries, entry{t, lagVals[j]})
			}
		}
		lagSpan[k][1] = int32(len(lagEntries))
	}

	// Regroup by task, visiting instances in id order so that every
	// per-task list is in ascending instance order.
	perTask := func(entries []entry, span func(k int) [2]int32, lags []int64) taskLists {
		if len(entries) == 0 {
			return taskLists{}
		}
		l := taskLists{start: sc.int32s.get(n + 1), flat: sc.ints.take(len(entries))}
		for _, e := range entries {
			l.start[e.task+1]++
		}
		for t := range n {
			l.start[t+1] += l.start[t]
		}
		fill := sc.int32s.take(n)
		copy(fill, l.start[:n])
		for i, k := range iorder {
			sp := span(k)
			for _, e := range entries[sp[0]:sp[1]] {
				l.flat[fill[e.task]] = i
				if lags != nil {
					lags[fill[e.task]] = e.lag
				}
				fill[e.task]++
			}
		}
		return l
	}
	g.standbys = perTask(roleEntries[0], func(k int) [2]int32 { return roleSpan[k][0] }, nil)
	g.learners = perTask(roleEntries[1], func(k int) [2]int32 { return roleSpan[k][1] }, nil)
	for _, e := range roleEntries[1] {
		g.learnerTasks = append(g.learnerTasks, int(e.task))
	}
	slices.Sort(g.learnerTasks)
	g.learnerTasks = slices.Compact(g.learnerTasks)
	g.holderLag = sc.int64s.take(len(lagEntries)) // every entry written by perTask
	g.holders = perTask(lagEntries, func(k int) [2]int32 { return lagSpan[k] }, g.holderLag)
	g.hasState = make([]bool, m)
	g.instLags = make([][]lagEntry, m)
	for k := range s.Instances {
		g.hasState[ipos[k]] = lagSpan[k][1] > lagSpan[k][0]
		g.instLags[ipos[k]] = lagEntries[lagSpan[k][0]:lagSpan[k][1]:lagSpan[k][1]]
	}
	return g, nil
}

// lagEntry is a task and a lag (or only a task, for role lists).
type lagEntry struct {
	task int32
	lag  int64
}

// taskLists holds a list of instances per task, all cut from one slice:
// task t's list is flat[start[t]:start[t+1]].
type taskLists struct {
	start []int32
	flat  []int
}

// of returns task t's list; callers must not append to it.
func (l *taskLists) of(t int) []int {
	if l.start == nil {
		return nil
	}
	a, b := l.start[t], l.start[t+1]
	return l.flat[a:b:b]
}

// keyed is a task's input index with the first eight bytes of its id,
// big-endian: comparing prefixes orders ids as strings.Compare does, except
// that equal prefixes need the whole ids.
type keyed struct {
	prefix uint64
	k      int32
}

// tasksSorted reports whether the tasks are in strictly ascending id order
// (build checks it as it reads the tasks).
func tasksSorted(tasks []Task) bool {
	for k := 1; k < len(tasks); k++ {
		if tasks[k-1].ID >= tasks[k].ID {
			return false
		}
	}
	return true
}

// sortIDs returns the tasks' input indexes in id order; ids are distinct.
// It sorts by prefix with a least-significant-digit radix sort, one pass
// per byte of the prefix that is not the same in every id, then sorts
// each run of equal prefixes by whole id.
func sortIDs(tasks []Task, sc *scratch) []keyed {
	order := sc.keys.get(len(tasks))
	var counts [8][256]int
	for k, t := range tasks {
		var p uint64
		for j := range min(8, len(t.ID)) {
			p |= uint64(t.ID[j]) << (56 - 8*j)
		}
		order[k] = keyed{p, int32(k)}
		for d := range 8 {
			counts[d][byte(p>>(8*d))]++
		}
	}
	tmp := sc.keys.get(len(tasks))
	for d := range 8 {
		c := &counts[d]
		if len(tasks) == 0 || c[byte(order[0].prefix>>(8*d))] == len(tasks) {
			continue // every id has the same byte here
		}
		sum := 0
		for b := range c {
			c[b], sum = sum, sum+c[b]
		}
		for _, o := range order {
			b := byte(o.prefix >> (8 * d))
			tmp[c[b]] = o
			c[b]++
		}
		order, tmp = tmp, order
	}
	for a := 0; a < len(order); {
		b := a + 1
		for b < len(order) && order[b].prefix == order[a].prefix {
			b++
		}
		if b-a > 1 {
			slices.SortFunc(order[a:b], func(x, y keyed) int { return strings.Compare(string(tasks[x.k].ID), string(tasks[y.k].ID)) })
		}
		a = b
	}
	return order
}

// idSeed keys the task id table's hash. The table is never iterated, so
// its layout changes no result.
var idSeed = maphash.MakeSeed()

// idTable finds a task's input index from its id: open addressing with
// linear probing over a power-of-two array at most half full. At 100,000
// tasks it is built three times faster than a map.
type idTable struct {
	slots []int32 // input index + 1; 0 is empty
	mask  uint64
}

func (tb *idTable) init(n int, sc *scratch) {
	size := 8
	for size < 2*n {
		size <<= 1
	}
	tb.slots = sc.int32s.get(size)
	tb.mask = uint64(size - 1)
}

// insert adds tasks[k]'s id and reports false if an earlier task has it.
func (tb *idTable) insert(tasks []Task, k int) bool {
	id := tasks[k].ID
	h := maphash.String(idSeed, string(id)) & tb.mask
	for {
		s := tb.slots[h]
		if s == 0 {
			tb.slots[h] = int32(k + 1)
			return true
		}
		if tasks[s-1].ID == id {
			return false
		}
		h = (h + 1) & tb.mask
	}
}

// findAll sets found[j] to find(list[j]). It works in blocks whose
// hashes, then slots, then ids are read in separate passes, so that the
// memory reads of one block overlap instead of waiting on each other.
func (tb *idTable) findAll(tasks []Task, list []TaskID, found []int32) {
	const block = 16
	var h [block]uint64
	var slot [block]int32
	for len(list) > 0 {
		n := min(block, len(list))
		for j := range n {
			h[j] = maphash.String(idSeed, string(list[j])) & tb.mask
		}
		for j := range n {
			slot[j] = tb.slots[h[j]]
		}
		for j := range n {
			s, at := slot[j], h[j]
			for s != 0 && tasks[s-1].ID != list[j] {
				at = (at + 1) & tb.mask
				s = tb.slots[at]
			}
			found[j] = s - 1
		}
		list, found = list[n:], found[n:]
	}
}

// find returns the input index of the task with the given id, or -1.
func (tb *idTable) find(tasks []Task, id TaskID) int {
	h := maphash.String(idSeed, string(id)) & tb.mask
	for {
		s := tb.slots[h]
		if s == 0 {
			return -1
		}
		if tasks[s-1].ID == id {
			return int(s - 1)
		}
		h = (h + 1) & tb.mask
	}
}

// taskIndex finds a task's input index from its id. Ids of the form
// "<subtopology>_<partition>" (decimal, without leading zeros), which is
// what a topology's tasks are, are read as two numbers that index a table
// per subtopology: no hashing, no string comparison, and a table of four
// bytes a task. A task list with any other id, or numbers too sparse for
// such a table, is indexed by an idTable instead. Both give the same
// answers.
type taskIndex struct {
	tasks  []Task
	grid   bool
	sorted bool // with the grid: the tasks are in strictly ascending id order
	// The grid: subtopology s's partitions are slots[start[s]:start[s+1]],
	// each the input index + 1 of its task, 0 for none. sub and part are
	// every task's numbers, by input index, for insert.
	start, slots, sub, part []int32
	ids                     idTable
}

// init prepares the index for the tasks; insert then adds them one by one.
func (x *taskIndex) init(tasks []Task, sc *scratch) {
	x.tasks = tasks
	if x.initGrid(sc) {
		x.grid = true
		return
	}
	x.ids.init(len(tasks), sc)
}

// initGrid sizes the grid, and reports false if some id is not of the
// grid's form or the table would be more than about twice the tasks.
func (x *taskIndex) initGrid(sc *scratch) bool {
	n := len(x.tasks)
	x.sub, x.part = sc.int32s.take(n), sc.int32s.take(n)
	maxSub := int32(-1)
	x.sorted = true
	for k, t := range x.tasks {
		s, p, ok := parseID(t.ID)
		if !ok {
			return false
		}
		if k > 0 && x.sorted && x.tasks[k-1].ID >= t.ID { // while the id is at hand
			x.sorted = false
		}
		x.sub[k], x.part[k] = s, p
		maxSub = max(maxSub, s)
	}
	limit := 2*n + 64
	if int(maxSub) >= limit {
		return false
	}
	x.start = sc.int32s.get(int(maxSub) + 2)
	for k, s := range x.sub {
		x.start[s+1] = max(x.start[s+1], x.part[k]+1) // partitions of s
	}
	total := 0
	for s := range int(maxSub) + 1 {
		total += int(x.start[s+1])
		if total > limit {
			return false
		}
		x.start[s+1] = int32(total)
	}
	x.slots = sc.int32s.get(total)
	return true
}

// parseID reads an id of the form "<subtopology>_<partition>": two
// decimal numbers of at most nine digits, without sign or leading zeros.
// Every such id names one pair of numbers and every pair one such id, so
// a task is found by its numbers alone. It runs for every id of the
// state, several hundred thousand a plan: ids of a subtopology below 10
// and a partition below 100,000 take a short way, the digits of the
// partition read at once rather than one after the other.
func parseID(id TaskID) (sub, part int32, ok bool) {
	n := len(id)
	if n < 3 || n > 10 || id[1] != '_' {
		return parseIDBytes(id)
	}
	s := id[0] - '0'
	if s > 9 || (id[2] == '0' && n > 3) {
		return 0, 0, false
	}
	q := id[2:]
	var p, most uint32 // the partition, and its largest digit
	switch len(q) {
	case 1:
		a := uint32(q[0] - '0')
		p, most = a, a
	case 2:
		a, b := uint32(q[0]-'0'), uint32(q[1]-'0')
		p, most = a*10+b, max(a, b)
	case 3:
		a, b, c := uint32(q[0]-'0'), uint32(q[1]-'0'), uint32(q[2]-'0')
		p, most = a*100+b*10+c, max(a, b, c)
	case 4:
		a, b, c, d := uint32(q[0]-'0'), uint32(q[1]-'0'), uint32(q[2]-'0'), uint32(q[3]-'0')
		p, most = a*1000+b*100+c*10+d, max(a, b, c, d)
	case 5:
		a, b, c, d, e := uint32(q[0]-'0'), uint32(q[1]-'0'), uint32(q[2]-'0'), uint32(q[3]-'0'), uint32(q[4]-'0')
		p, most = a*10000+b*1000+c*100+d*10+e, max(a, b, c, d, e)
	default:
		for i := 0; i < len(q); i++ {
			c := uint32(q[i] - '0')
			p = p*10 + c
			most = max(most, c)
		}
	}
	if most > 9 { // a byte that is not a digit (below '0', it wrapped around)
		return 0, 0, false
	}
	return int32(s), int32(p), true
}

// parseIDBytes is parseID a byte at a time, for ids of any length.
func parseIDBytes(id TaskID) (sub, part int32, ok bool) {
	if len(id) < 3 || len(id) > 19 {
		return 0, 0, false
	}
	var v int32
	first := 0 // where the number being read starts
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c == '_' && first == 0 && i > 0 {
			if i > 9 || (id[0] == '0' && i > 1) {
				return 0, 0, false
			}
			sub, v, first = v, 0, i+1
			continue
		}
		if c < '0' || c > '9' {
			return 0, 0, false
		}
		v = v*10 + int32(c-'0')
	}
	digits := len(id) - first
	if first == 0 || digits == 0 || digits > 9 || (id[first] == '0' && digits > 1) {
		return 0, 0, false
	}
	return sub, v, true
}

// insert adds task k and reports false if an earlier task has its id.
func (x *taskIndex) insert(k int) bool {
	if !x.grid {
		return x.ids.insert(x.tasks, k)
	}
	at := x.start[x.sub[k]] + x.part[k]
	if x.slots[at] != 0 {
		return false
	}
	x.slots[at] = int32(k + 1)
	return true
}

// find returns the input index of the task with the given id, or -1.
func (x *taskIndex) find(id TaskID) int {
	if !x.grid {
		return x.ids.find(x.tasks, id)
	}
	return int(x.findGrid(id))
}

func (x *taskIndex) findGrid(id TaskID) int32 {
	s, p, ok := parseID(id)
	if !ok || int(s) >= len(x.start)-1 {
		return -1
	}
	a := x.start[s]
	if p >= x.start[s+1]-a {
		return -1
	}
	return x.slots[a+p] - 1
}

// findAll sets found[j] to find(list[j]).
func (x *taskIndex) findAll(list []TaskID, found []int32) {
	if !x.grid {
		x.ids.findAll(x.tasks, list, found)
		return
	}
	for j, id := range list {
		found[j] = x.findGrid(id)
	}
}

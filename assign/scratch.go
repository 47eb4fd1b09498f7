package assign

import "sync"

// scratch lends the working arrays of one plan: the index build makes and
// the planner's per-task and per-bucket arrays. At 100,000 tasks they are
// most of what a plan allocates, so Assign takes them from a pool and gives
// them back when the plan is made; they carry nothing from one plan to the
// next (every array is handed out cleared, or taken as it was left by a
// caller that writes every element before reading it) and the plan holds
// none of them.
type scratch struct {
	ints    bufs[int]
	int32s  bufs[int32]
	int64s  bufs[int64]
	floats  bufs[float64]
	bools   bufs[bool]
	bytes   bufs[uint8]
	entries bufs[lagEntry]
	keys    bufs[keyed]
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func getScratch() *scratch { return scratchPool.Get().(*scratch) }

// release returns sc to the pool; nothing it lent may be used after.
func (sc *scratch) release() {
	sc.ints.next, sc.int32s.next, sc.int64s.next, sc.floats.next = 0, 0, 0, 0
	sc.bools.next, sc.bytes.next, sc.entries.next, sc.keys.next = 0, 0, 0, 0
	scratchPool.Put(sc)
}

// bufs is a list of arrays of one type, lent in the order they are asked
// for: a plan asks for the same arrays in the same order every time, so
// each is usually large enough already.
type bufs[T any] struct {
	list [][]T
	next int
}

// get lends a cleared array of length n.
func (b *bufs[T]) get(n int) []T {
	s := b.take(n)
	clear(s)
	return s
}

// filled lends an array of length n with every element v.
func (b *bufs[T]) filled(n int, v T) []T {
	s := b.take(n)
	for k := range s {
		s[k] = v
	}
	return s
}

// take lends an array of length n as it was left.
func (b *bufs[T]) take(n int) []T {
	if b.next == len(b.list) {
		b.list = append(b.list, nil)
	}
	s := b.list[b.next]
	if cap(s) < n {
		s = make([]T, n, n+n/8)
	} else {
		s = s[:n]
	}
	b.list[b.next] = s
	b.next++
	return s
}

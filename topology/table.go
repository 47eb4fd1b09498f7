package topology

import (
	"fmt"
	"strconv"
)

// TableFromTopic returns the table of topic: for each key, the value of
// its latest record; a record with a null value (a tombstone) deletes the
// key. The topic should be compacted, and partitioned by key (the
// default partitioner), like a Kafka Streams table's.
//
// The table is materialized in store storeName with the topic itself as
// its changelog, as Kafka Streams does with source tables: nothing more
// is written, and a learner, a standby or a restarted task restores the
// store by reading the topic. The store holds each record's key and value
// bytes as they are on the topic, so looking a key up (JoinTable) encodes
// it with keys and expects the same bytes: keys must encode each key the
// one way producers do. A record without a key is skipped; a key or value
// that does not decode stops the task with an error wrapping ErrDecode.
func TableFromTopic[K, V any](b *Builder, topic, storeName string, keys Codec[K], values Codec[V]) Table[K, V] {
	if keys == nil || values == nil {
		b.errorf("TableFromTopic(%q): nil codec", topic)
		return brokenTable[K, V](b, storeName)
	}
	if b.storeByName[storeName] != nil {
		b.errorf("TableFromTopic(%q): store %q is already used", topic, storeName)
		return brokenTable[K, V](b, storeName)
	}
	src := b.nodeName("fromTable")
	b.addSource(src, []string{topic}, bytesPort, buildSource)
	name := b.nodeName("table")
	b.add(&node{
		name: name, kind: processorKind, parents: []string{src},
		in: bytesPort, out: portOf[K, change[V]](), desc: typesOf[K, change[V]](),
		build: func(t *task, n *node, children []any) (any, error) {
			out, err := childrenAs[kvReceiver[K, change[V]]](n, children)
			if err != nil {
				return nil, err
			}
			return &tableRun[K, V]{t: t, name: n.name, store: storeName, keys: keys, values: values, out: out}, nil
		},
	})
	b.AddStore(storeName, name)
	if def := b.storeByName[storeName]; def != nil {
		def.source = topic
	}
	return Table[K, V]{b: b, changes: name, store: storeName, keys: keys, values: values}
}

// tableRun is a TableFromTopic node of one task.
type tableRun[K, V any] struct {
	t      *task
	name   string
	store  string
	keys   Codec[K]
	values Codec[V]
	out    fanout[K, change[V]]
}

func (r *tableRun[K, V]) receive(rec Record) error {
	if rec.Key == nil {
		return nil
	}
	st := r.t.ctx.Store(r.store)
	if st == nil {
		return r.t.fail(r.name, fmt.Errorf("the runtime gave no store %q", r.store))
	}
	k, err := r.keys.Decode(rec.Key)
	if err != nil {
		return r.t.fail(r.name, fmt.Errorf("%w: key of %s[%d]@%d: %w", ErrDecode, rec.Topic, rec.Partition, rec.Offset, err))
	}
	var c change[V]
	old, found, err := st.Get(rec.Key)
	if err != nil {
		return r.t.fail(r.name, fmt.Errorf("store %q: get: %w", r.store, err))
	}
	if found {
		if c.old, err = r.values.Decode(old); err != nil {
			return r.t.fail(r.name, fmt.Errorf("%w: store %q: value of key %q: %w", ErrDecode, r.store, rec.Key, err))
		}
		c.hasOld = true
	}
	if rec.Value == nil {
		if !found {
			return nil
		}
		if err := st.Delete(rec.Key); err != nil {
			return r.t.fail(r.name, fmt.Errorf("store %q: delete: %w", r.store, err))
		}
		return r.out.emit(rec, k, c)
	}
	if c.new, err = r.values.Decode(rec.Value); err != nil {
		return r.t.fail(r.name, fmt.Errorf("%w: value of %s[%d]@%d: %w", ErrDecode, rec.Topic, rec.Partition, rec.Offset, err))
	}
	c.hasNew = true
	if err := st.Put(rec.Key, rec.Value); err != nil {
		return r.t.fail(r.name, fmt.Errorf("store %q: put: %w", r.store, err))
	}
	return r.out.emit(rec, k, c)
}

// Repartition writes s to the internal topic RepartitionTopic(appID, name)
// and reads it back, so that from there on each record is in the
// partition of its key: what a join needs after the key changed (Map,
// FlatMap, SelectKey). s must have codecs.
func Repartition[K, V any](s Stream[K, V], name string) Stream[K, V] {
	return repartition(s, name)
}

// lookup reads key k in a table's store while a task processes a record.
type lookup[K, V any] struct {
	store  string
	keys   Codec[K]
	values Codec[V]
}

func (l lookup[K, V]) get(t *task, node string, k K) (V, bool, error) {
	var zero V
	st := t.ctx.Store(l.store)
	if st == nil {
		return zero, false, t.fail(node, fmt.Errorf("the runtime gave no store %q", l.store))
	}
	kb, err := l.keys.Encode(k)
	if err != nil {
		return zero, false, t.fail(node, fmt.Errorf("encode key for store %q: %w", l.store, err))
	}
	b, found, err := st.Get(kb)
	if err != nil || !found {
		if err != nil {
			err = t.fail(node, fmt.Errorf("store %q: get: %w", l.store, err))
		}
		return zero, false, err
	}
	v, err := l.values.Decode(b)
	if err != nil {
		return zero, false, t.fail(node, fmt.Errorf("%w: store %q: value of key %q: %w", ErrDecode, l.store, kb, err))
	}
	return v, true, nil
}

// joinable checks that t can be looked up from a join named op, and
// returns its lookup.
func joinable[K, V any](b *Builder, op string, t Table[K, V]) (lookup[K, V], bool) {
	switch {
	case t.changes == "":
		return lookup[K, V]{}, false // a mistake already recorded
	case t.b != b:
		b.errorf("%s: the table belongs to another Builder", op)
	case t.store == "":
		b.errorf("%s: the table of %s has no store (a join of tables is not materialized); join its inputs instead", op, t.changes)
	case t.windowed:
		b.errorf("%s: table %q is windowed: its store is keyed by window, not by key alone", op, t.store)
	case t.keys == nil || t.values == nil:
		b.errorf("%s: table %q has no codecs", op, t.store)
	default:
		return lookup[K, V]{store: t.store, keys: t.keys, values: t.values}, true
	}
	return lookup[K, V]{}, false
}

// JoinTable joins each record of s with the value of its key in table t,
// when there is one: fn's result is sent on with the record's key. A
// record whose key is not in t is dropped (LeftJoinTable keeps it).
//
// The join looks the key up in t's store, so the two must be
// co-partitioned: s and t end up in the same subtopology, and the
// runtime refuses to start, naming both topics, unless they have the
// same number of partitions. If s's key may have changed since its source
// (Map, FlatMap, SelectKey), Repartition it first: Build says so
// otherwise. Within a task, records of s and updates of t are processed
// in the order they are fetched, not ordered by timestamp across the two
// topics as Kafka Streams tries to.
func JoinTable[K, V, VT, R any](s Stream[K, V], t Table[K, VT], fn func(k K, v V, vt VT) R) Stream[K, R] {
	if s.builder().nilFunc("JoinTable", s.node, fn) {
		return Stream[K, R]{b: s.b}
	}
	return joinTable(s, t, "joinTable", func(k K, v V, vt VT, found bool) (R, bool) {
		if !found {
			var zero R
			return zero, false
		}
		return fn(k, v, vt), true
	})
}

// LeftJoinTable is JoinTable keeping every record of s: fn gets found =
// false and a zero vt when the key is not in t.
func LeftJoinTable[K, V, VT, R any](s Stream[K, V], t Table[K, VT], fn func(k K, v V, vt VT, found bool) R) Stream[K, R] {
	if s.builder().nilFunc("LeftJoinTable", s.node, fn) {
		return Stream[K, R]{b: s.b}
	}
	return joinTable(s, t, "leftJoinTable", func(k K, v V, vt VT, found bool) (R, bool) { return fn(k, v, vt, found), true })
}

func joinTable[K, V, VT, R any](s Stream[K, V], t Table[K, VT], op string, fn func(K, V, VT, bool) (R, bool)) Stream[K, R] {
	b := s.builder()
	if s.node == "" {
		return Stream[K, R]{b: b}
	}
	l, ok := joinable(b, op, t)
	if !ok {
		return Stream[K, R]{b: b}
	}
	if s.keyChanged {
		b.errorf("%s with table %q: the stream of %s may have a new key (Map, FlatMap, SelectKey): Repartition it first", op, t.store, s.node)
		return Stream[K, R]{b: b}
	}
	out := addOp(s, op, func(tk *task, name string, out fanout[K, R]) kvReceiver[K, V] {
		return kvFunc[K, V](func(rec Record, k K, v V) error {
			vt, found, err := l.get(tk, name, k)
			if err != nil {
				return err
			}
			r, keep := fn(k, v, vt, found)
			if !keep {
				return nil
			}
			return out.emit(rec, k, r)
		})
	})
	b.AddStore(t.store, out.node)
	return out
}

// JoinTables joins two tables on their key: the result has, for each key
// in both, fn of the two values, and changes whenever either side does (a
// key deleted from either side is deleted from the result). Its values
// are encoded with codec; it is not materialized (it has no store), so
// it cannot itself be joined, but it can be aggregated (GroupTableBy),
// sent on (ToStream) or written to a topic (ToTopic). Both tables must be
// materialized and co-partitioned, as for JoinTable.
func JoinTables[K, V1, V2, R any](left Table[K, V1], right Table[K, V2], fn func(k K, v1 V1, v2 V2) R, codec Codec[R]) Table[K, R] {
	if left.b != nil && left.b.nilFunc("JoinTables", left.changes, fn) {
		return brokenTable[K, R](left.b, "")
	}
	return joinTables(left, right, "joinTables", codec, func(k K, v1 V1, v2 V2, found bool) (R, bool) {
		if !found {
			var zero R
			return zero, false
		}
		return fn(k, v1, v2), true
	})
}

// LeftJoinTables is JoinTables keeping every key of left: fn gets found
// = false and a zero v2 while the key is not in right.
func LeftJoinTables[K, V1, V2, R any](left Table[K, V1], right Table[K, V2], fn func(k K, v1 V1, v2 V2, found bool) R, codec Codec[R]) Table[K, R] {
	if left.b != nil && left.b.nilFunc("LeftJoinTables", left.changes, fn) {
		return brokenTable[K, R](left.b, "")
	}
	return joinTables(left, right, "leftJoinTables", codec, func(k K, v1 V1, v2 V2, found bool) (R, bool) { return fn(k, v1, v2, found), true })
}

// joinTables wires both sides: an update of the left looks the key up in
// the right's store and the other way round; fn gives the result of a
// left value and a right one (found false: none), and whether there is
// a result at all.
func joinTables[K, V1, V2, R any](left Table[K, V1], right Table[K, V2], op string, codec Codec[R], fn func(K, V1, V2, bool) (R, bool)) Table[K, R] {
	b := left.b
	if b == nil {
		panic("topology: use of a zero Table")
	}
	ll, okl := joinable(b, op+" (left)", left)
	rl, okr := joinable(b, op+" (right)", right)
	if !okl || !okr {
		return brokenTable[K, R](b, "")
	}
	if codec == nil {
		b.errorf("%s: nil codec for the result", op)
		return brokenTable[K, R](b, "")
	}
	// A side's update (before, after) with the other side's current value
	// gives the result's change.
	result := func(before, after func() (R, bool)) change[R] {
		var c change[R]
		c.old, c.hasOld = before()
		c.new, c.hasNew = after()
		return c
	}
	fromLeft := addOp(Stream[K, change[V1]]{b: b, node: left.changes}, op+"Left", func(t *task, name string, out fanout[K, change[R]]) kvReceiver[K, change[V1]] {
		return kvFunc[K, change[V1]](func(rec Record, k K, c change[V1]) error {
			v2, found, err := rl.get(t, name, k)
			if err != nil {
				return err
			}
			ch := result(
				func() (R, bool) { return side(c.hasOld, func() (R, bool) { return fn(k, c.old, v2, found) }) },
				func() (R, bool) { return side(c.hasNew, func() (R, bool) { return fn(k, c.new, v2, found) }) })
			if !ch.hasOld && !ch.hasNew {
				return nil
			}
			return out.emit(rec, k, ch)
		})
	})
	fromRight := addOp(Stream[K, change[V2]]{b: b, node: right.changes}, op+"Right", func(t *task, name string, out fanout[K, change[R]]) kvReceiver[K, change[V2]] {
		return kvFunc[K, change[V2]](func(rec Record, k K, c change[V2]) error {
			v1, found, err := ll.get(t, name, k)
			if err != nil || !found {
				return err // no left value: no result before or after
			}
			// Without a right value (hasOld or hasNew false, with a zero
			// value), fn gives the left join's unmatched result, or none.
			ch := result(
				func() (R, bool) { return fn(k, v1, c.old, c.hasOld) },
				func() (R, bool) { return fn(k, v1, c.new, c.hasNew) })
			if !ch.hasOld && !ch.hasNew {
				return nil
			}
			return out.emit(rec, k, ch)
		})
	})
	b.AddStore(right.store, fromLeft.node)
	b.AddStore(left.store, fromRight.node)
	merged := b.nodeName(op)
	b.add(&node{
		name: merged, kind: processorKind, parents: []string{fromLeft.node, fromRight.node},
		in: portOf[K, change[R]](), out: portOf[K, change[R]](), desc: typesOf[K, change[R]](),
		build: func(t *task, n *node, children []any) (any, error) {
			out, err := childrenAs[kvReceiver[K, change[R]]](n, children)
			if err != nil {
				return nil, err
			}
			return kvFunc[K, change[R]](fanout[K, change[R]](out).emit), nil
		},
	})
	return Table[K, R]{b: b, changes: merged, keys: left.keys, values: codec}
}

// side is f's result if present, else none.
func side[R any](present bool, f func() (R, bool)) (R, bool) {
	if !present {
		var zero R
		return zero, false
	}
	return f()
}

// tableOp is one step of a table aggregation: add a value to a group's
// aggregate, or take it out (the old value of a key that changed).
type tableOp[V any] struct {
	v   V
	add bool
}

// opCodec writes a tableOp as one byte (1: add, 0: subtract) and the
// value.
type opCodec[V any] struct{ values Codec[V] }

func (c opCodec[V]) Encode(o tableOp[V]) ([]byte, error) {
	vb, err := c.values.Encode(o.v)
	if err != nil {
		return nil, err
	}
	flag := byte(0)
	if o.add {
		flag = 1
	}
	return append([]byte{flag}, vb...), nil
}

func (c opCodec[V]) Decode(b []byte) (tableOp[V], error) {
	if len(b) == 0 || b[0] > 1 {
		return tableOp[V]{}, fmt.Errorf("not a table aggregation step (want a 0 or 1 byte, then the value): %q", b)
	}
	v, err := c.values.Decode(b[1:])
	return tableOp[V]{v: v, add: b[0] == 1}, err
}

// GroupedTable is a table's rows regrouped by a new key, ready for a table
// aggregation (TableAggregate, TableCount, TableReduce).
type GroupedTable[K, V any] struct{ g Grouped[K, tableOp[V]] }

// GroupTableBy regroups t's rows: fn maps each (key, value) row to the
// group key and the value to aggregate. When a row changes, its old
// value is taken out of its old group's aggregate and its new value
// added to its new group's: the aggregates always reflect the table as
// it is. The rows go through the internal topic RepartitionTopic(appID,
// name), encoded with keys and values; name must be stable across
// deployments.
func GroupTableBy[K, V, K2, V2 any](t Table[K, V], fn func(K, V) (K2, V2), keys Codec[K2], values Codec[V2], name string) GroupedTable[K2, V2] {
	b := t.b
	if b == nil {
		panic("topology: use of a zero Table")
	}
	if t.changes == "" || b.nilFunc("GroupTableBy", t.changes, fn) {
		return GroupedTable[K2, V2]{Grouped[K2, tableOp[V2]]{Stream[K2, tableOp[V2]]{b: b}}}
	}
	if keys == nil || values == nil {
		b.errorf("GroupTableBy %q: nil codec", name)
		return GroupedTable[K2, V2]{Grouped[K2, tableOp[V2]]{Stream[K2, tableOp[V2]]{b: b}}}
	}
	steps := addOp(Stream[K, change[V]]{b: b, node: t.changes}, "groupTableBy", func(_ *task, _ string, out fanout[K2, tableOp[V2]]) kvReceiver[K, change[V]] {
		return kvFunc[K, change[V]](func(rec Record, k K, c change[V]) error {
			if c.hasOld {
				k2, v2 := fn(k, c.old)
				if err := out.emit(rec, k2, tableOp[V2]{v: v2}); err != nil {
					return err
				}
			}
			if c.hasNew {
				k2, v2 := fn(k, c.new)
				return out.emit(rec, k2, tableOp[V2]{v: v2, add: true})
			}
			return nil
		})
	})
	steps.keys, steps.values = keys, opCodec[V2]{values}
	return GroupedTable[K2, V2]{Grouped[K2, tableOp[V2]]{repartition(steps, name)}}
}

// TableAggregate keeps, per group, an aggregate of the values of the rows
// in it, in store storeName encoded with codec: init() for a new group,
// add when a row joins the group (or its value changes), subtract when it
// leaves (or before its value changes). The result is a table of the
// aggregates; a group whose rows all left keeps its aggregate.
func TableAggregate[K, V, A any](g GroupedTable[K, V], storeName string, init func() A, add, subtract func(K, V, A) A, codec Codec[A]) Table[K, A] {
	if b := g.g.s.builder(); b.nilFunc("TableAggregate into store "+strconv.Quote(storeName), g.g.s.node, init, add, subtract) {
		return brokenTable[K, A](b, storeName)
	}
	return aggregate(g.g, storeName, "tableAggregate", codec, func(k K, o tableOp[V], agg A, found bool) A {
		if !found {
			agg = init()
		}
		if o.add {
			return add(k, o.v, agg)
		}
		return subtract(k, o.v, agg)
	})
}

// TableCount counts the rows of each group, in store storeName.
func TableCount[K, V any](g GroupedTable[K, V], storeName string) Table[K, int64] {
	one := func(_ K, _ V, n int64) int64 { return n + 1 }
	less := func(_ K, _ V, n int64) int64 { return n - 1 }
	return TableAggregate(g, storeName, func() int64 { return 0 }, one, less, Int64)
}

// TableReduce combines the values of each group's rows with add, taking a
// row's value out with subtract, in store storeName encoded with the
// GroupTableBy values codec. A group's first value is its aggregate as is.
func TableReduce[K, V any](g GroupedTable[K, V], storeName string, add, subtract func(agg, v V) V) Table[K, V] {
	if b := g.g.s.builder(); b.nilFunc("TableReduce into store "+strconv.Quote(storeName), g.g.s.node, add, subtract) {
		return brokenTable[K, V](b, storeName)
	}
	var values Codec[V]
	if c, ok := g.g.s.values.(opCodec[V]); ok {
		values = c.values
	}
	return aggregate(g.g, storeName, "tableReduce", values, func(_ K, o tableOp[V], agg V, found bool) V {
		switch {
		case !found && o.add:
			return o.v
		case !found: // a subtraction comes after its addition: not reached
			return agg
		case o.add:
			return add(agg, o.v)
		default:
			return subtract(agg, o.v)
		}
	})
}

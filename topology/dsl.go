package topology

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Stream is a typed stream of key-value pairs in a Builder: records read
// from a topic and decoded (FromTopic), then transformed by the functions
// of this package (Map, Filter, GroupBy, ...). Go methods cannot have type
// parameters, so operations that change a type are functions.
//
// A Stream carries codecs for its key and value when they are known: from
// FromTopic, and kept by operations that do not change the type. Writing
// a stream to a topic (To, GroupBy, GroupByKey) needs both; set them with
// WithCodecs after an operation that changed a type.
//
// Mistakes (a missing codec, a bad topic name) are recorded in the Builder
// and reported by Build; the operations themselves never fail.
type Stream[K, V any] struct {
	b          *Builder
	node       string // the node emitting the stream; "" after a mistake
	keys       Codec[K]
	values     Codec[V]
	keyChanged bool // the key may differ from the one the topic is partitioned by
}

// KeyValue is one pair emitted by FlatMap.
type KeyValue[K, V any] struct {
	Key   K
	Value V
}

// Grouped is a stream partitioned by its key, ready to aggregate: every
// record of a key is processed by the same task.
type Grouped[K, V any] struct{ s Stream[K, V] }

// Table is a changelog stream read as a table: the latest value per key.
// Tables come from aggregations (Count, Aggregate, Reduce, the windowed
// and table aggregations), from a topic (TableFromTopic) and from joins
// of tables (JoinTables). Inside the graph a table passes on changes: for
// each update of a key, its value before (if it had one) and after (none
// when the key is deleted), which is what table aggregations need to
// retract a key's old contribution.
//
// A table is materialized when it has a store (Store is not ""): then
// streams and other tables can join it.
type Table[K, V any] struct {
	b       *Builder
	changes string // the node emitting change[V] pairs; "" after a mistake
	store   string
	keys    Codec[K]
	values  Codec[V]
	// windowed: the store is keyed by window as well as key, so it cannot
	// be looked up by key alone.
	windowed bool
	// closeAfter: for a windowed table, how long after a window's End, in
	// stream time, the window closes (SuppressUntilWindowCloses).
	closeAfter time.Duration
}

// change is one update of a table's key: its value before and after.
type change[V any] struct {
	old, new       V
	hasOld, hasNew bool
}

func brokenTable[K, V any](b *Builder, store string) Table[K, V] {
	return Table[K, V]{b: b, store: store}
}

// Store returns the name of the table's store; "" if it has none.
func (t Table[K, V]) Store() string { return t.store }

// ToStream returns the stream of the table's updates: one (key, new
// value) per update, in order. Deletes (a tombstone on a table's topic, a
// join result that no longer holds) are not in it; ToTopic writes them.
func (t Table[K, V]) ToStream() Stream[K, V] {
	if t.changes == "" {
		return Stream[K, V]{b: t.b}
	}
	out := addOp(Stream[K, change[V]]{b: t.b, node: t.changes}, "toStream", func(_ *task, _ string, out fanout[K, V]) kvReceiver[K, change[V]] {
		return kvFunc[K, change[V]](func(rec Record, k K, c change[V]) error {
			if !c.hasNew {
				return nil
			}
			return out.emit(rec, k, c.new)
		})
	})
	out.keys, out.values = t.keys, t.values
	return out
}

// ToTopic writes the table's updates to topic, encoded with its codecs: a
// delete as a tombstone (a null value), so that a compacted topic holds
// the table.
func (t Table[K, V]) ToTopic(topic string) {
	b := t.b
	if b == nil {
		panic("topology: use of a zero Table")
	}
	if t.changes == "" {
		return
	}
	if t.keys == nil || t.values == nil {
		b.errorf("ToTopic(%q): the table of %s has no codecs", topic, t.changes)
		return
	}
	keys, values := t.keys, t.values
	sink := b.addSink(b.nodeName("toTopic"), topic, []string{t.changes}, portOf[K, change[V]](), func(tk *task, n *node, _ []any) (any, error) {
		return kvFunc[K, change[V]](func(rec Record, k K, c change[V]) error {
			kb, err := keys.Encode(k)
			if err != nil {
				return tk.fail(n.name, fmt.Errorf("encode key for %q: %w", topic, err))
			}
			var vb []byte
			if c.hasNew {
				if vb, err = values.Encode(c.new); err != nil {
					return tk.fail(n.name, fmt.Errorf("encode value for %q: %w", topic, err))
				}
				if vb == nil {
					vb = []byte{} // a value, not a tombstone
				}
			}
			if err := send(tk.ctx, topic, kb, vb, rec.Headers); err != nil {
				return tk.fail(n.name, fmt.Errorf("send to %q: %w", topic, err))
			}
			return nil
		}), nil
	})
	sink.desc = typesOf[K, V]()
}

// kvPort is the port type of DSL edges carrying (K, V) pairs.
type kvPort[K, V any] struct{}

func portOf[K, V any]() reflect.Type { return reflect.TypeFor[kvPort[K, V]]() }

func typesOf[K, V any]() string {
	v := reflect.TypeFor[V]().String()
	if inner, ok := strings.CutPrefix(v, "topology.change["); ok {
		// A table's updates. The type argument is named with its
		// package path: keep the package name only.
		inner = strings.TrimSuffix(inner, "]")
		if i := strings.LastIndexByte(inner, '/'); i >= 0 {
			inner = inner[i+1:]
		}
		v = inner + " changes"
	}
	return reflect.TypeFor[K]().String() + ", " + v
}

// kvReceiver is a DSL node instance: it takes decoded pairs. rec is the
// task's input record, for its metadata (Record rules apply).
type kvReceiver[K, V any] interface {
	receiveKV(rec Record, k K, v V) error
}

type kvFunc[K, V any] func(rec Record, k K, v V) error

func (f kvFunc[K, V]) receiveKV(rec Record, k K, v V) error { return f(rec, k, v) }

// fanout is a DSL node's children.
type fanout[K, V any] []kvReceiver[K, V]

func (f fanout[K, V]) emit(rec Record, k K, v V) error {
	for _, c := range f {
		if err := c.receiveKV(rec, k, v); err != nil {
			return err
		}
	}
	return nil
}

func (b *Builder) nodeName(op string) string {
	b.seq++
	return fmt.Sprintf("%s#%d", op, b.seq)
}

func (s Stream[K, V]) builder() *Builder {
	if s.b == nil {
		panic("topology: use of a zero Stream; streams come from FromTopic")
	}
	return s.b
}

// sameCodec returns c as a Codec[U] when T is U, else nil.
func sameCodec[T, U any](c Codec[T]) Codec[U] {
	u, _ := any(c).(Codec[U])
	return u
}

// FromTopic returns the stream of the records of topic, decoded with keys
// and values. The topic is assumed partitioned by key (the default
// partitioner), so GroupByKey needs no repartitioning. A record that does
// not decode stops its task with an error wrapping ErrDecode.
func FromTopic[K, V any](b *Builder, topic string, keys Codec[K], values Codec[V]) Stream[K, V] {
	name := b.nodeName("fromTopic")
	if keys == nil || values == nil {
		b.errorf("FromTopic(%q): nil codec", topic)
		return Stream[K, V]{b: b}
	}
	addDecodingSource(b, name, topic, keys, values)
	return Stream[K, V]{b: b, node: name, keys: keys, values: values}
}

func addDecodingSource[K, V any](b *Builder, name, topic string, keys Codec[K], values Codec[V]) {
	n := b.addSource(name, []string{topic}, portOf[K, V](), func(t *task, n *node, children []any) (any, error) {
		out, err := childrenAs[kvReceiver[K, V]](n, children)
		return &decodeRun[K, V]{t: t, name: n.name, keys: keys, values: values, out: out}, err
	})
	n.desc = typesOf[K, V]()
}

type decodeRun[K, V any] struct {
	t      *task
	name   string
	keys   Codec[K]
	values Codec[V]
	out    fanout[K, V]
}

func (d *decodeRun[K, V]) receive(rec Record) error {
	k, err := d.keys.Decode(rec.Key)
	if err != nil {
		return d.t.fail(d.name, fmt.Errorf("%w: key of %s[%d]@%d: %w", ErrDecode, rec.Topic, rec.Partition, rec.Offset, err))
	}
	v, err := d.values.Decode(rec.Value)
	if err != nil {
		return d.t.fail(d.name, fmt.Errorf("%w: value of %s[%d]@%d: %w", ErrDecode, rec.Topic, rec.Partition, rec.Offset, err))
	}
	return d.out.emit(rec, k, v)
}

// addOp adds a DSL processor node taking s and returns its stream, with
// s's codecs where the types are unchanged.
func addOp[KI, VI, KO, VO any](s Stream[KI, VI], op string, mk func(t *task, name string, out fanout[KO, VO]) kvReceiver[KI, VI]) Stream[KO, VO] {
	b := s.builder()
	if s.node == "" {
		return Stream[KO, VO]{b: b}
	}
	name := b.nodeName(op)
	b.add(&node{
		name: name, kind: processorKind, parents: []string{s.node},
		in: portOf[KI, VI](), out: portOf[KO, VO](), desc: typesOf[KO, VO](),
		build: func(t *task, n *node, children []any) (any, error) {
			out, err := childrenAs[kvReceiver[KO, VO]](n, children)
			if err != nil {
				return nil, err
			}
			return mk(t, n.name, out), nil
		},
	})
	return Stream[KO, VO]{b: b, node: name, keys: sameCodec[KI, KO](s.keys), values: sameCodec[VI, VO](s.values), keyChanged: s.keyChanged}
}

// WithCodecs returns s with these codecs, for writing it to a topic after
// an operation that changed its types.
func (s Stream[K, V]) WithCodecs(keys Codec[K], values Codec[V]) Stream[K, V] {
	s.keys, s.values = keys, values
	return s
}

// Map replaces each pair by fn's. The key may change, so GroupByKey after
// Map repartitions.
func Map[K, V, K2, V2 any](s Stream[K, V], fn func(K, V) (K2, V2)) Stream[K2, V2] {
	if s.builder().nilFunc("Map", s.node, fn) {
		return Stream[K2, V2]{b: s.b}
	}
	out := addOp(s, "map", func(_ *task, _ string, out fanout[K2, V2]) kvReceiver[K, V] {
		return kvFunc[K, V](func(rec Record, k K, v V) error {
			k2, v2 := fn(k, v)
			return out.emit(rec, k2, v2)
		})
	})
	out.keyChanged = true
	return out
}

// MapValues replaces each value by fn's; keys are kept.
func MapValues[K, V, V2 any](s Stream[K, V], fn func(V) V2) Stream[K, V2] {
	if s.builder().nilFunc("MapValues", s.node, fn) {
		return Stream[K, V2]{b: s.b}
	}
	return addOp(s, "mapValues", func(_ *task, _ string, out fanout[K, V2]) kvReceiver[K, V] {
		return kvFunc[K, V](func(rec Record, k K, v V) error { return out.emit(rec, k, fn(v)) })
	})
}

// Filter keeps the pairs for which keep returns true.
func Filter[K, V any](s Stream[K, V], keep func(K, V) bool) Stream[K, V] {
	if s.builder().nilFunc("Filter", s.node, keep) {
		return Stream[K, V]{b: s.b}
	}
	return addOp(s, "filter", func(_ *task, _ string, out fanout[K, V]) kvReceiver[K, V] {
		return kvFunc[K, V](func(rec Record, k K, v V) error {
			if !keep(k, v) {
				return nil
			}
			return out.emit(rec, k, v)
		})
	})
}

// FlatMap replaces each pair by the pairs fn returns, in order. The key may
// change, so GroupByKey after FlatMap repartitions.
func FlatMap[K, V, K2, V2 any](s Stream[K, V], fn func(K, V) []KeyValue[K2, V2]) Stream[K2, V2] {
	if s.builder().nilFunc("FlatMap", s.node, fn) {
		return Stream[K2, V2]{b: s.b}
	}
	out := addOp(s, "flatMap", func(_ *task, _ string, out fanout[K2, V2]) kvReceiver[K, V] {
		return kvFunc[K, V](func(rec Record, k K, v V) error {
			for _, kv := range fn(k, v) {
				if err := out.emit(rec, kv.Key, kv.Value); err != nil {
					return err
				}
			}
			return nil
		})
	})
	out.keyChanged = true
	return out
}

// FlatMapValues replaces each pair by one pair per value fn returns, with
// the same key.
func FlatMapValues[K, V, V2 any](s Stream[K, V], fn func(V) []V2) Stream[K, V2] {
	if s.builder().nilFunc("FlatMapValues", s.node, fn) {
		return Stream[K, V2]{b: s.b}
	}
	return addOp(s, "flatMapValues", func(_ *task, _ string, out fanout[K, V2]) kvReceiver[K, V] {
		return kvFunc[K, V](func(rec Record, k K, v V) error {
			for _, v2 := range fn(v) {
				if err := out.emit(rec, k, v2); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// SetHeaders sets the headers of each record from fn, given its key,
// value and headers (those of the input record it came from, or as an
// earlier SetHeaders left them); the records sent from it on carry what
// fn returns. fn must not modify the Headers it is given: Headers.With
// and Headers.Without return changed copies. A nil fn is a mistake Build
// reports.
func SetHeaders[K, V any](s Stream[K, V], fn func(k K, v V, h Headers) Headers) Stream[K, V] {
	if s.builder().nilFunc("SetHeaders", s.node, fn) {
		return Stream[K, V]{b: s.b}
	}
	return addOp(s, "setHeaders", func(_ *task, _ string, out fanout[K, V]) kvReceiver[K, V] {
		return kvFunc[K, V](func(rec Record, k K, v V) error {
			rec.Headers = fn(k, v, rec.Headers)
			return out.emit(rec, k, v)
		})
	})
}

// Foreach calls fn for each pair, on the task's goroutine, then passes
// the pair on unchanged. Its result may be ignored, ending the stream
// there (Kafka Streams' foreach), or processed further (Kafka Streams'
// peek; Peek is the same operation under that name). A nil fn is a
// mistake Build reports.
func Foreach[K, V any](s Stream[K, V], fn func(K, V)) Stream[K, V] {
	return peek(s, "foreach", "Foreach", fn)
}

// Peek is Foreach under Kafka Streams' name for it: fn is called for
// each pair, on the task's goroutine, then the pair is passed on
// unchanged. A nil fn is a mistake Build reports.
func Peek[K, V any](s Stream[K, V], fn func(K, V)) Stream[K, V] {
	return peek(s, "peek", "Peek", fn)
}

func peek[K, V any](s Stream[K, V], op, fnName string, fn func(K, V)) Stream[K, V] {
	if s.builder().nilFunc(fnName, s.node, fn) {
		return Stream[K, V]{b: s.b}
	}
	return addOp(s, op, func(_ *task, _ string, out fanout[K, V]) kvReceiver[K, V] {
		return kvFunc[K, V](func(rec Record, k K, v V) error {
			fn(k, v)
			return out.emit(rec, k, v)
		})
	})
}

// nilFunc records a mistake of op on the stream of node when one of fns
// is a nil function, and reports whether it did: a nil function would
// otherwise panic at the first record.
func (b *Builder) nilFunc(op, node string, fns ...any) bool {
	for _, fn := range fns {
		if fn == nil || reflect.ValueOf(fn).IsNil() {
			b.errorf("%s on %s: nil function", op, streamLabel(node))
			return true
		}
	}
	return false
}

// streamLabel names the stream of node in errors.
func streamLabel(node string) string {
	if node == "" {
		return "a stream after a mistake"
	}
	return "the stream of " + node
}

// SelectKey replaces each key by fn(key, value) and keeps the value, in
// order. The key may change, so, as after Map, GroupByKey repartitions
// and joins ask for Repartition. The stream keeps its value codec, and
// its key codec if K2 is K (set one with WithCodecs otherwise). A nil fn
// is a mistake Build reports.
func SelectKey[K, V, K2 any](s Stream[K, V], fn func(K, V) K2) Stream[K2, V] {
	if s.builder().nilFunc("SelectKey", s.node, fn) {
		return Stream[K2, V]{b: s.b}
	}
	out := addOp(s, "selectKey", func(_ *task, _ string, out fanout[K2, V]) kvReceiver[K, V] {
		return kvFunc[K, V](func(rec Record, k K, v V) error { return out.emit(rec, fn(k, v), v) })
	})
	out.keyChanged = true
	return out
}

// To sends each pair, encoded with the stream's codecs, to topic. The
// runtime partitions by the encoded key (Partition).
func (s Stream[K, V]) To(topic string) {
	b := s.builder()
	if s.node == "" {
		return
	}
	if s.keys == nil || s.values == nil {
		b.errorf("To(%q): the stream of %s has no codecs (set them with WithCodecs)", topic, s.node)
		return
	}
	addEncodingSink(s, b.nodeName("to"), topic)
}

func addEncodingSink[K, V any](s Stream[K, V], name, topic string) {
	keys, values := s.keys, s.values
	sink := s.b.addSink(name, topic, []string{s.node}, portOf[K, V](), func(t *task, n *node, _ []any) (any, error) {
		return kvFunc[K, V](func(rec Record, k K, v V) error {
			kb, err := keys.Encode(k)
			if err != nil {
				return t.fail(n.name, fmt.Errorf("encode key for %q: %w", topic, err))
			}
			vb, err := values.Encode(v)
			if err != nil {
				return t.fail(n.name, fmt.Errorf("encode value for %q: %w", topic, err))
			}
			if err := send(t.ctx, topic, kb, vb, rec.Headers); err != nil {
				return t.fail(n.name, fmt.Errorf("send to %q: %w", topic, err))
			}
			return nil
		}), nil
	})
	sink.desc = typesOf[K, V]()
}

// GroupBy groups s by the key fn computes, encoded with keys. It always
// repartitions, through the internal topic RepartitionTopic(appID, name);
// name must be stable across deployments, since it names a topic. s must
// have a value codec.
func GroupBy[K, V, K2 any](s Stream[K, V], fn func(K, V) K2, keys Codec[K2], name string) Grouped[K2, V] {
	if s.builder().nilFunc("GroupBy", s.node, fn) {
		return Grouped[K2, V]{Stream[K2, V]{b: s.b}}
	}
	rekeyed := addOp(s, "groupBy", func(_ *task, _ string, out fanout[K2, V]) kvReceiver[K, V] {
		return kvFunc[K, V](func(rec Record, k K, v V) error { return out.emit(rec, fn(k, v), v) })
	})
	rekeyed.keys = keys
	return Grouped[K2, V]{repartition(rekeyed, name)}
}

// GroupByKey groups s by its key. It repartitions through
// RepartitionTopic(appID, name) only if the key may have changed since the
// source (Map, FlatMap, SelectKey; see Merge too); name must still be
// given and stable, since a later change to the topology may need the
// topic.
func GroupByKey[K, V any](s Stream[K, V], name string) Grouped[K, V] {
	if !s.keyChanged {
		return Grouped[K, V]{s}
	}
	return Grouped[K, V]{repartition(s, name)}
}

// repartition writes s to a repartition topic and reads it back: from the
// reader on, each key is in the partition Partition gives its encoded key.
func repartition[K, V any](s Stream[K, V], name string) Stream[K, V] {
	b := s.builder()
	if s.node == "" {
		return s
	}
	if s.keys == nil || s.values == nil {
		b.errorf("repartition %q: the stream of %s has no codecs (set them with WithCodecs)", name, s.node)
		return Stream[K, V]{b: b}
	}
	topic := b.AddRepartitionTopic(name)
	addEncodingSink(s, b.nodeName("toRepartition"), topic)
	src := b.nodeName("fromRepartition")
	addDecodingSource(b, src, topic, s.keys, s.values)
	return Stream[K, V]{b: b, node: src, keys: s.keys, values: s.values}
}

// Count counts the records of each key in store storeName.
func Count[K, V any](g Grouped[K, V], storeName string) Table[K, int64] {
	return aggregate(g, storeName, "count", Int64, func(_ K, _ V, n int64, _ bool) int64 { return n + 1 })
}

// Aggregate folds the records of each key with fn, starting from init(),
// keeping each key's aggregate in store storeName encoded with codec.
func Aggregate[K, V, A any](g Grouped[K, V], storeName string, init func() A, fn func(K, V, A) A, codec Codec[A]) Table[K, A] {
	if b := g.s.builder(); b.nilFunc("Aggregate into store "+strconv.Quote(storeName), g.s.node, init, fn) {
		return brokenTable[K, A](b, storeName)
	}
	return aggregate(g, storeName, "aggregate", codec, func(k K, v V, agg A, found bool) A {
		if !found {
			agg = init()
		}
		return fn(k, v, agg)
	})
}

// Reduce combines the values of each key with fn (the first value is kept
// as is), in store storeName encoded with the stream's value codec.
func Reduce[K, V any](g Grouped[K, V], storeName string, fn func(agg, v V) V) Table[K, V] {
	if b := g.s.builder(); b.nilFunc("Reduce into store "+strconv.Quote(storeName), g.s.node, fn) {
		return brokenTable[K, V](b, storeName)
	}
	return aggregate(g, storeName, "reduce", g.s.values, func(_ K, v V, agg V, found bool) V {
		if !found {
			return v
		}
		return fn(agg, v)
	})
}

func aggregate[K, V, A any](g Grouped[K, V], storeName, op string, codec Codec[A], fn func(k K, v V, agg A, found bool) A) Table[K, A] {
	s := g.s
	b := s.builder()
	if s.node == "" {
		return brokenTable[K, A](b, storeName)
	}
	if s.keys == nil || codec == nil {
		b.errorf("%s into store %q: no key codec or no codec for the aggregate (set them with WithCodecs)", op, storeName)
		return brokenTable[K, A](b, storeName)
	}
	if b.storeByName[storeName] != nil {
		b.errorf("%s: store %q is already used", op, storeName)
		return brokenTable[K, A](b, storeName)
	}
	keys := s.keys
	out := addOp(s, op, func(t *task, name string, out fanout[K, change[A]]) kvReceiver[K, V] {
		return kvFunc[K, V](func(rec Record, k K, v V) error {
			st := t.ctx.Store(storeName)
			if st == nil {
				return t.fail(name, fmt.Errorf("the runtime gave no store %q", storeName))
			}
			kb, err := keys.Encode(k)
			if err != nil {
				return t.fail(name, fmt.Errorf("encode key for store %q: %w", storeName, err))
			}
			old, found, err := st.Get(kb)
			if err != nil {
				return t.fail(name, fmt.Errorf("store %q: get: %w", storeName, err))
			}
			var c change[A]
			if found {
				if c.old, err = codec.Decode(old); err != nil {
					return t.fail(name, fmt.Errorf("%w: store %q: value of key %q: %w", ErrDecode, storeName, kb, err))
				}
				c.hasOld = true
			}
			c.new, c.hasNew = fn(k, v, c.old, found), true
			nb, err := codec.Encode(c.new)
			if err != nil {
				return t.fail(name, fmt.Errorf("encode value for store %q: %w", storeName, err))
			}
			if err := st.Put(kb, nb); err != nil {
				return t.fail(name, fmt.Errorf("store %q: put: %w", storeName, err))
			}
			return out.emit(rec, k, c)
		})
	})
	b.AddStore(storeName, out.node)
	return Table[K, A]{b: b, changes: out.node, store: storeName, keys: keys, values: codec}
}

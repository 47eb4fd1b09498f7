package topology

import (
	"fmt"
	"slices"
	"strings"
)

// GlobalStoreSpec describes one global store: a local copy, on every
// instance, of every partition of Topic. The runtime keeps it (see
// Topology.GlobalStores); nodes read it through Context.Store(Name).
type GlobalStoreSpec struct {
	Name  string // the store's name, given to FromGlobalTopic
	Topic string // the topic it holds, every partition of it
}

// GlobalTable is a table every instance holds whole: each record of its
// topic, from every partition, in a local store keyed by the record's key
// bytes, with the record's value bytes (a record with a nil value deletes
// its key). It is meant for small reference data that streams look up
// with JoinGlobal and LeftJoinGlobal, whatever their partitioning. Make it
// with FromGlobalTopic.
type GlobalTable[K, V any] struct {
	b      *Builder
	store  string
	topic  string
	keys   Codec[K]
	values Codec[V]
	ok     bool // false after a mistake, which Build reports
}

// Store returns the name of the table's global store.
func (g GlobalTable[K, V]) Store() string { return g.store }

// Topic returns the topic the table holds.
func (g GlobalTable[K, V]) Topic() string { return g.topic }

// FromGlobalTopic returns the global table of topic, in a global store
// named storeName, decoded with keys and values when a join looks a key
// up. The store holds the record bytes as they are in the topic, so the
// topic is the store's changelog: the runtime restores the store from it
// and writes no changelog of its own, and the topic should be compacted
// (cleanup.policy=compact), or a new instance misses the records
// retention deleted; the runtime logs a warning naming a topic that is
// not, and reads it all the same (a topic that keeps every record works). The
// topic must not be read by a source of the same topology, nor by another
// global table; storeName must be unique among the topology's stores and
// usable as a directory name (1 to 200 of [A-Za-z0-9._-], not starting
// with '.').
func FromGlobalTopic[K, V any](b *Builder, topic string, keys Codec[K], values Codec[V], storeName string) GlobalTable[K, V] {
	g := GlobalTable[K, V]{b: b, store: storeName, topic: topic, keys: keys, values: values}
	bad := false
	if keys == nil || values == nil {
		b.errorf("FromGlobalTopic(%q): nil codec", topic)
		bad = true
	}
	if err := checkTopic(topic); err != nil {
		b.errorf("global store %q: %v", storeName, err)
		bad = true
	}
	if err := checkStoreName(storeName); err != nil {
		b.errorf("global store of topic %q: %v", topic, err)
		bad = true
	}
	if bad {
		return g
	}
	b.globals = append(b.globals, GlobalStoreSpec{Name: storeName, Topic: topic})
	g.ok = true
	return g
}

// AddGlobalStore adds a global store named name holding every partition
// of topic, for the Processor API: every processor node reads it through
// NodeContext.Store(name), keyed by the records' key bytes, their value
// bytes as values; Put and Delete fail. It is FromGlobalTopic without
// codecs, with the same rules.
func (b *Builder) AddGlobalStore(name, topic string) {
	FromGlobalTopic(b, topic, Bytes, Bytes, name)
}

// checkStoreName accepts the names the runtime can use as a directory: 1
// to 200 of [A-Za-z0-9._-], not starting with '.'.
func checkStoreName(name string) error {
	if name == "" || len(name) > 200 || name[0] == '.' {
		return fmt.Errorf("store name %q: want 1 to 200 of [A-Za-z0-9._-], not starting with '.'", name)
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("store name %q has %q (allowed: letters, digits, '.', '_', '-')", name, c)
		}
	}
	return nil
}

// checkGlobals checks the global stores against each other and the rest
// of the graph: one store per name, one global table per topic, no
// source reading a global topic, no store of AddStore with a global
// store's name.
func (g *graph) checkGlobals() {
	byName := map[string]string{}
	byTopic := map[string]string{}
	for _, gs := range g.globals {
		if other, dup := byName[gs.Name]; dup {
			g.errorf("global store %q is made twice (of topics %q and %q)", gs.Name, other, gs.Topic)
		} else {
			byName[gs.Name] = gs.Topic
		}
		if other, dup := byTopic[gs.Topic]; dup && other != gs.Name {
			g.errorf("topic %q is held by two global stores, %q and %q", gs.Topic, other, gs.Name)
		} else {
			byTopic[gs.Topic] = gs.Name
		}
	}
	for _, s := range g.stores {
		if _, dup := byName[s.name]; dup {
			g.errorf("store name %q is used by a global store and by a store of processors %s", s.name, strings.Join(quoteAll(s.processors), ", "))
		}
	}
	names := make([]string, 0, len(g.globals))
	for _, gs := range g.globals {
		names = append(names, gs.Name)
	}
	for _, n := range g.nodes {
		if n.kind == processorKind {
			n.globals = names
		}
		if n.kind != sourceKind {
			continue
		}
		for _, t := range n.topics {
			if gs, ok := byTopic[t]; ok {
				g.errorf("topic %q is read by source %q and held by global store %q: a topic is either a stream's input or a global table", t, n.name, gs)
			}
		}
	}
}

// GlobalStores returns the topology's global stores, in the order they
// were made. The runtime holds each on every instance, apart from every
// subtopology: it restores it from its topic before processing anything
// and keeps reading the topic while it runs. The returned slice is a
// copy.
func (t *Topology) GlobalStores() []GlobalStoreSpec {
	return slices.Clone(t.globals)
}

// describeGlobals is the part of Topology.String about global stores.
func describeGlobals(globals []GlobalStoreSpec) string {
	var sb strings.Builder
	for _, gs := range globals {
		fmt.Fprintf(&sb, "global store %s (every partition of %s)\n", gs.Name, gs.Topic)
	}
	return sb.String()
}

// JoinGlobal joins each pair of s with the entry of g under keyOf(k, v),
// and emits fn(k, v, entry) with s's key. A pair whose key is not in g is
// dropped (an inner join). The lookup reads the task's instance's copy of
// g as it is when the pair is processed: there is no repartitioning, so
// any stream can join a global table. A stored value that does not decode
// stops the task with an error wrapping ErrDecode.
func JoinGlobal[K, V, KG, VG, R any](s Stream[K, V], g GlobalTable[KG, VG], keyOf func(K, V) KG, fn func(K, V, VG) R) Stream[K, R] {
	if fn == nil {
		s.builder().errorf("JoinGlobal with global store %q: nil join function", g.store)
		return Stream[K, R]{b: s.b}
	}
	return joinGlobal(s, g, "joinGlobal", keyOf, func(k K, v V, vg VG, found bool) (R, bool) {
		if !found {
			var zero R
			return zero, false
		}
		return fn(k, v, vg), true
	})
}

// LeftJoinGlobal is JoinGlobal that keeps every pair: for a key not in g,
// fn gets found false and the zero VG.
func LeftJoinGlobal[K, V, KG, VG, R any](s Stream[K, V], g GlobalTable[KG, VG], keyOf func(K, V) KG, fn func(k K, v V, entry VG, found bool) R) Stream[K, R] {
	if fn == nil {
		s.builder().errorf("LeftJoinGlobal with global store %q: nil join function", g.store)
		return Stream[K, R]{b: s.b}
	}
	return joinGlobal(s, g, "leftJoinGlobal", keyOf, func(k K, v V, vg VG, found bool) (R, bool) {
		return fn(k, v, vg, found), true
	})
}

func joinGlobal[K, V, KG, VG, R any](s Stream[K, V], g GlobalTable[KG, VG], op string, keyOf func(K, V) KG, fn func(K, V, VG, bool) (R, bool)) Stream[K, R] {
	b := s.builder()
	switch {
	case g.b == nil:
		b.errorf("%s: a zero GlobalTable; global tables come from FromGlobalTopic", op)
		return Stream[K, R]{b: b}
	case g.b != b:
		b.errorf("%s: global store %q belongs to another Builder", op, g.store)
		return Stream[K, R]{b: b}
	case keyOf == nil:
		b.errorf("%s with global store %q: nil key function", op, g.store)
		return Stream[K, R]{b: b}
	case !g.ok:
		return Stream[K, R]{b: b} // FromGlobalTopic recorded why
	}
	store, keys, values := g.store, g.keys, g.values
	out := addOp(s, op, func(t *task, name string, out fanout[K, R]) kvReceiver[K, V] {
		return kvFunc[K, V](func(rec Record, k K, v V) error {
			st := t.ctx.Store(store)
			if st == nil {
				return t.fail(name, fmt.Errorf("the runtime gave no global store %q", store))
			}
			kb, err := keys.Encode(keyOf(k, v))
			if err != nil {
				return t.fail(name, fmt.Errorf("encode key for global store %q: %w", store, err))
			}
			raw, found, err := st.Get(kb)
			if err != nil {
				return t.fail(name, fmt.Errorf("global store %q: get: %w", store, err))
			}
			var entry VG
			if found {
				if entry, err = values.Decode(raw); err != nil {
					return t.fail(name, fmt.Errorf("%w: global store %q: value of key %q: %w", ErrDecode, store, kb, err))
				}
			}
			r, keep := fn(k, v, entry, found)
			if !keep {
				return nil
			}
			return out.emit(rec, k, r)
		})
	})
	if n := b.byName[out.node]; n != nil && out.node != "" {
		n.desc += "; global store " + store
	}
	return out
}

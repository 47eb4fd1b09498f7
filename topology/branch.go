package topology

import (
	"fmt"
	"reflect"
)

// Splitter routes the records of one stream to branches: made by Split,
// given its branches by Branch and Default.
type Splitter[K, V any] struct {
	s     Stream[K, V]
	node  string // the split node; "" after a mistake
	names map[string]bool
	dflt  string // the default branch's name; "" if none yet
}

// Split returns a Splitter routing each record of s to one branch: the
// first branch, in the order Branch was called, whose predicate accepts
// it; else the default branch, if Default was called (before or after
// Branch: the default branch comes last in any case); else nowhere: a
// record no predicate accepts is dropped when there is no default
// branch. The predicates after the one that accepts a record are not
// called for it. They run on the task's goroutine.
//
// Each branch is a Stream with s's codecs, to be processed and written
// like any other. The split and its branches are in s's subtopology, and
// a record goes through its branch's operations before the next record
// of s is split. Splitting does not change keys: a branch needs
// repartitioning exactly when s does (see GroupByKey).
//
// As with the other operations, mistakes are recorded and Build reports
// them: a nil predicate, an empty or repeated branch name, a second
// default branch, and a Splitter given no branch at all.
func Split[K, V any](s Stream[K, V]) *Splitter[K, V] {
	b := s.builder()
	sp := &Splitter[K, V]{s: s, names: map[string]bool{}}
	if s.node == "" {
		return sp
	}
	sp.node = b.nodeName("split")
	b.add(&node{
		name: sp.node, kind: processorKind, parents: []string{s.node},
		in: portOf[K, V](), out: reflect.TypeFor[branchPort[K, V]](), desc: typesOf[K, V](), split: true,
		build: func(_ *task, n *node, children []any) (any, error) {
			cs, err := childrenAs[*branchRun[K, V]](n, children)
			if err != nil {
				return nil, err
			}
			r := &splitRun[K, V]{}
			for _, c := range cs {
				if c.pred == nil {
					r.dflt = c
				} else {
					r.branches = append(r.branches, c)
				}
			}
			return r, nil
		},
	})
	return sp
}

// Branch adds a branch named name taking the records pred accepts (and no
// earlier branch did), and returns its stream. name is unique among the
// Splitter's branches; it appears in Topology.String and in errors.
func (sp *Splitter[K, V]) Branch(name string, pred func(K, V) bool) Stream[K, V] {
	if pred == nil {
		sp.errorf("branch %q: nil predicate", name)
		return Stream[K, V]{b: sp.s.b}
	}
	out, _ := sp.add(name, pred, "branch")
	return out
}

// Default adds the default branch, named name, taking the records no
// branch accepts, and returns its stream. A Splitter has one at most.
func (sp *Splitter[K, V]) Default(name string) Stream[K, V] {
	if sp.dflt != "" {
		sp.errorf("a second default branch %q (the default branch is %q)", name, sp.dflt)
		return Stream[K, V]{b: sp.s.b}
	}
	out, ok := sp.add(name, nil, "default branch")
	if ok {
		sp.dflt = name
	}
	return out
}

// add adds a branch node; ok is false if branch is not a valid new
// name.
func (sp *Splitter[K, V]) add(branch string, pred func(K, V) bool, what string) (_ Stream[K, V], ok bool) {
	b := sp.s.b
	switch {
	case branch == "":
		sp.errorf("a %s has an empty name", what)
		return Stream[K, V]{b: b}, false
	case sp.names[branch]:
		sp.errorf("branch name %q is used twice", branch)
		return Stream[K, V]{b: b}, false
	}
	sp.names[branch] = true
	if sp.node == "" {
		return Stream[K, V]{b: b}, true
	}
	name := b.nodeName("branch")
	b.add(&node{
		name: name, kind: processorKind, parents: []string{sp.node},
		in: reflect.TypeFor[branchPort[K, V]](), out: portOf[K, V](), desc: fmt.Sprintf("%s; %s %q", typesOf[K, V](), what, branch),
		build: func(_ *task, n *node, children []any) (any, error) {
			out, err := childrenAs[kvReceiver[K, V]](n, children)
			return &branchRun[K, V]{pred: pred, out: out}, err
		},
	})
	s := sp.s
	s.node = name
	return s, true
}

func (sp *Splitter[K, V]) errorf(format string, args ...any) {
	sp.s.builder().errorf("Split of %s: "+format, append([]any{streamLabel(sp.s.node)}, args...)...)
}

// branchPort is the port type of the edges from a split node to its
// branches: nothing else connects to a split node.
type branchPort[K, V any] struct{}

// splitRun is a split node of one task.
type splitRun[K, V any] struct {
	branches []*branchRun[K, V] // in the order added
	dflt     *branchRun[K, V]   // nil without a default branch
}

func (r *splitRun[K, V]) receiveKV(rec Record, k K, v V) error {
	for _, br := range r.branches {
		if br.pred(k, v) {
			return br.out.emit(rec, k, v)
		}
	}
	if r.dflt != nil {
		return r.dflt.out.emit(rec, k, v)
	}
	return nil
}

// branchRun is a branch node of one task; its split node calls pred.
type branchRun[K, V any] struct {
	pred func(K, V) bool // nil for the default branch
	out  fanout[K, V]
}

// Merge returns one stream of the records of s and of others, each
// passed on as it comes. Give two streams or more, each once, all of one
// Builder; anything else (Merge(s) alone, say) is a mistake Build
// reports.
//
// The streams' nodes, the merge and what follows it are in one
// subtopology, whose tasks read all the topics the streams come from
// (their sources' topics, and the repartition topics on the way): these
// must be co-partitioned, with the same number of partitions, which the
// runtime checks when it starts, naming the topics if not
// (Subtopology.CheckPartitions). To merge streams of topics with
// different partition counts, write one of them to a topic with the
// other's count first (To, then FromTopic). Merging a stream with one
// computed from it through a topic (Repartition, an aggregation) would
// make a subtopology read a topic it writes: Build reports the cycle,
// naming the merge.
//
// The merged stream has its records in the order the task processes
// them: those of one partition of a topic in offset order, and those of
// different topics in the order the runtime fetches them. A record
// that reaches the merge along several of the streams (two Filters of
// one stream, say) is passed on once along each: first along the path
// whose node after the fork was added first.
//
// The merged stream's key may have changed (GroupByKey after it
// repartitions, joins ask for Repartition) if any of the streams' may
// have, or if their key codecs are not all the same codec (equal values
// of one comparable type), since the topics would then place one key's
// records by different bytes. It has the key codec and the value codec
// of the streams where they all have the same one, none otherwise (set
// them with WithCodecs).
func Merge[K, V any](s Stream[K, V], others ...Stream[K, V]) Stream[K, V] {
	b := s.builder()
	fail := func(format string, args ...any) Stream[K, V] {
		b.errorf("Merge of %s: "+format, append([]any{streamLabel(s.node)}, args...)...)
		return Stream[K, V]{b: b}
	}
	if len(others) == 0 {
		return fail("no other stream to merge it with (give two or more)")
	}
	streams := append([]Stream[K, V]{s}, others...)
	for i, o := range others {
		switch {
		case o.b == nil:
			return fail("stream %d of %d is a zero Stream (streams come from FromTopic)", i+2, len(streams))
		case o.b != b:
			return fail("stream %d of %d belongs to another Builder", i+2, len(streams))
		}
	}
	parents := make([]string, 0, len(streams))
	out := Stream[K, V]{b: b, keys: s.keys, values: s.values}
	for _, o := range streams {
		if o.node == "" {
			return Stream[K, V]{b: b} // a mistake already recorded
		}
		for _, p := range parents {
			if p == o.node {
				return fail("the stream of %s is given twice", o.node)
			}
		}
		parents = append(parents, o.node)
		out.keyChanged = out.keyChanged || o.keyChanged
		if !sameCodecValue(out.keys, o.keys) {
			out.keys, out.keyChanged = nil, true
		}
		if !sameCodecValue(out.values, o.values) {
			out.values = nil
		}
	}
	out.node = b.nodeName("merge")
	b.add(&node{
		name: out.node, kind: processorKind, parents: parents,
		in: portOf[K, V](), out: portOf[K, V](), desc: typesOf[K, V](), merge: true,
		build: func(_ *task, n *node, children []any) (any, error) {
			cs, err := childrenAs[kvReceiver[K, V]](n, children)
			return kvFunc[K, V](fanout[K, V](cs).emit), err
		},
	})
	return out
}

// sameCodecValue reports whether a and b are the same non-nil codec:
// equal values of one comparable type.
func sameCodecValue(a, b any) bool {
	if a == nil || b == nil {
		return false
	}
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	return va.Type() == vb.Type() && va.Comparable() && vb.Comparable() && a == b
}

package topology

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// Builder assembles a topology from nodes (sources, processors, sinks)
// and stores, with the Processor API below or the typed DSL (FromTopic and
// the functions on Stream), and splits it into subtopologies in Build.
//
// The Add methods never fail: they record problems, and Build reports all of
// them at once. Nodes may be added in any order (a parent may be added after
// its child). A Builder is not safe for concurrent use and is meant to be
// built once.
type Builder struct {
	appID       string
	nodes       []*node // in the order added
	byName      map[string]*node
	stores      []*storeDef
	storeByName map[string]*storeDef
	repart      map[string]string // repartition topic -> name
	errs        []error
	seq         int                           // DSL node numbering
	extractors  map[string]TimestampExtractor // by topic
	timers      []timerDef                    // by AddTimers, in order
	globals     []GlobalStoreSpec             // FromGlobalTopic, in order
}

type nodeKind int

const (
	sourceKind nodeKind = iota
	processorKind
	sinkKind
)

func (k nodeKind) String() string {
	return [...]string{"source", "processor", "sink"}[k]
}

// node is one vertex of the graph as added.
type node struct {
	name    string
	kind    nodeKind
	order   int      // index in Builder.nodes
	topics  []string // source: topics read; sink: the topic written
	parents []string
	stores  []string // connected stores, by AddStore
	globals []string // global stores a processor may read (all of them)
	// in and out are the port types: what the node takes from its parents
	// and gives its children. Processor-API nodes pass Records (bytesPort);
	// DSL nodes pass typed pairs (kvPort[K, V]). Build checks every edge.
	in, out reflect.Type
	// build makes the node's instance for one task, given its children's
	// instances (made first). Sources return a recordReceiver.
	build func(t *task, n *node, children []any) (any, error)
	// desc is an optional detail for String (e.g. the DSL operation).
	desc string
	// supplier is a Processor-API processor's (AddProcessor); nil for
	// DSL nodes.
	supplier Supplier
	// timers is the processor's timer store (AddTimers); "" if none.
	timers string
	// split: a Split node, which must have a branch. merge: a Merge node,
	// named in the errors about cycles it closes.
	split, merge bool
}

type storeDef struct {
	name       string
	processors []string
	source     string    // the topic that is its changelog (a table's); "" for its own
	kind       StoreKind // "" is KeyValueStore
}

// markStore sets the layout of store name, added just before.
func (b *Builder) markStore(name string, kind StoreKind) {
	if def := b.storeByName[name]; def != nil {
		def.kind = kind
	}
}

// bytesPort is the port type of Processor-API edges.
var bytesPort = reflect.TypeFor[Record]()

// NewBuilder returns a builder for application appID. The app id names the
// consumer group and prefixes every internal topic, so it must be a valid
// topic name itself; Build reports it if not.
func NewBuilder(appID string) *Builder {
	return &Builder{
		appID:       appID,
		byName:      map[string]*node{},
		storeByName: map[string]*storeDef{},
		repart:      map[string]string{},
	}
}

// AppID returns the application id given to NewBuilder.
func (b *Builder) AppID() string { return b.appID }

func (b *Builder) errorf(format string, args ...any) {
	b.errs = append(b.errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...))
}

// add adds n and returns it, or records why not and returns a detached
// node.
func (b *Builder) add(n *node) *node {
	switch {
	case n.name == "":
		b.errorf("a %s has an empty name", n.kind)
		return n
	case b.byName[n.name] != nil:
		b.errorf("duplicate node name %q (a %s and a %s)", n.name, b.byName[n.name].kind, n.kind)
		return n
	}
	n.order = len(b.nodes)
	b.nodes = append(b.nodes, n)
	b.byName[n.name] = n
	return n
}

// AddSource adds a source node reading topics. A topic may be read by one
// source only. All topics of the sources of one subtopology must have the
// same partition count, which the runtime checks (Subtopology.
// CheckPartitions).
func (b *Builder) AddSource(name string, topics ...string) {
	b.addSource(name, topics, bytesPort, buildSource)
}

func (b *Builder) addSource(name string, topics []string, out reflect.Type, build func(*task, *node, []any) (any, error)) *node {
	if len(topics) == 0 {
		b.errorf("source %q reads no topic", name)
	}
	for _, t := range topics {
		if err := checkTopic(t); err != nil {
			b.errorf("source %q: %v", name, err)
		}
	}
	return b.add(&node{name: name, kind: sourceKind, topics: slices.Clone(topics), out: out, build: build})
}

// AddProcessor adds a processor node made per task by s (a ProcessorFunc
// or any Supplier), taking the records its parents forward.
func (b *Builder) AddProcessor(name string, s Supplier, parents ...string) {
	if s == nil {
		b.errorf("processor %q has a nil supplier", name)
	}
	b.add(&node{name: name, kind: processorKind, parents: slices.Clone(parents),
		in: bytesPort, out: bytesPort, build: buildProcessor(s), supplier: s})
}

// AddSink adds a sink node sending the records its parents forward to
// topic (a Send per record, key and value unchanged).
func (b *Builder) AddSink(name, topic string, parents ...string) {
	b.addSink(name, topic, parents, bytesPort, buildSink)
}

func (b *Builder) addSink(name, topic string, parents []string, in reflect.Type, build func(*task, *node, []any) (any, error)) *node {
	if err := checkTopic(topic); err != nil {
		b.errorf("sink %q: %v", name, err)
	}
	return b.add(&node{name: name, kind: sinkKind, topics: []string{topic}, parents: slices.Clone(parents), in: in, build: build})
}

// AddStore adds a key-value store and connects it to processors, which see
// it through NodeContext.Store. A store belongs to one subtopology, so all
// the processors connected to it end up in the same one. Its changelog
// topic is ChangelogTopic(appID, name). AddStore may be called again with
// the same name to connect more processors.
func (b *Builder) AddStore(name string, processors ...string) {
	if err := checkTopic(ChangelogTopic(b.appID, name)); err != nil || name == "" {
		b.errorf("store name %q does not make a valid changelog topic name", name)
		return
	}
	s := b.storeByName[name]
	if s == nil {
		s = &storeDef{name: name}
		b.stores = append(b.stores, s)
		b.storeByName[name] = s
	}
	s.processors = append(s.processors, processors...)
}

// AddRepartitionTopic declares an internal repartition topic and returns
// its full name, RepartitionTopic(appID, name), to pass to AddSink and
// AddSource. The runtime creates it (Subtopology.Repartition). It must be
// written by a sink and read by a source of this topology.
func (b *Builder) AddRepartitionTopic(name string) string {
	topic := RepartitionTopic(b.appID, name)
	if err := checkTopic(topic); err != nil || name == "" {
		b.errorf("repartition name %q does not make a valid topic name", name)
		return topic
	}
	if _, dup := b.repart[topic]; dup {
		b.errorf("duplicate repartition topic %q", name)
	}
	b.repart[topic] = name
	return topic
}

// checkTopic checks a topic name as Kafka does: 1 to 249 characters of
// [a-zA-Z0-9._-], and neither "." nor "..".
func checkTopic(t string) error {
	switch {
	case t == "":
		return errors.New("empty topic name")
	case t == "." || t == "..":
		return fmt.Errorf("topic name %q is not allowed", t)
	case len(t) > 249:
		return fmt.Errorf("topic name %.40q... is %d characters long (Kafka's limit is 249)", t, len(t))
	}
	for _, c := range []byte(t) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("topic name %q has %q (allowed: letters, digits, '.', '_', '-')", t, c)
		}
	}
	return nil
}

// Build checks the graph and splits it into subtopologies: the connected
// components of the graph whose edges are parent links and store
// connections. Topics are the only links between subtopologies. IDs follow
// the flow of data (a subtopology writing a topic has a lower ID than the
// one reading it), ties broken by the order nodes were added.
//
// Every problem found is reported, each wrapping ErrInvalid, joined with
// errors.Join. The Topology does not change if the builder is used again.
func (b *Builder) Build() (*Topology, error) {
	g := &graph{appID: b.appID, byName: map[string]*node{}, repart: maps.Clone(b.repart), errs: slices.Clone(b.errs),
		extractors: maps.Clone(b.extractors), timers: slices.Clone(b.timers), globals: slices.Clone(b.globals)}
	for _, n := range b.nodes {
		c := *n
		c.topics, c.parents, c.stores = slices.Clone(n.topics), slices.Clone(n.parents), slices.Clone(n.stores)
		g.nodes = append(g.nodes, &c)
		g.byName[c.name] = &c
	}
	for _, s := range b.stores {
		g.stores = append(g.stores, &storeDef{name: s.name, processors: slices.Clone(s.processors), source: s.source, kind: s.kind})
	}
	if g.appID == "" {
		g.errorf("empty app id")
	} else if err := checkTopic(b.appID); err != nil {
		g.errorf("app id %q must be usable in topic names: %v", b.appID, err)
	}
	if len(b.nodes) == 0 {
		g.errorf("no nodes")
	}
	g.link()
	if len(g.errs) > 0 {
		return nil, errors.Join(g.errs...)
	}
	g.sortNodes()
	g.checkTopics()
	g.checkGlobals()
	if len(g.errs) > 0 {
		return nil, errors.Join(g.errs...)
	}
	g.split()
	if len(g.errs) > 0 {
		return nil, errors.Join(g.errs...)
	}
	return g.topology(), nil
}

// graph is Build's working state. It works on copies of the builder's
// nodes and stores, so the Topology it makes does not change if the
// builder is used again.
type graph struct {
	appID    string
	nodes    []*node
	byName   map[string]*node
	stores   []*storeDef
	repart   map[string]string
	errs     []error
	children map[string][]*node // by parent name, in order added
	// extractors are the TimestampExtractors by topic.
	extractors map[string]TimestampExtractor
	timers     []timerDef
	topo       []*node // nodes, parents before children
	subs       []*sub
	globals    []GlobalStoreSpec
}

type sub struct {
	id       int
	first    int // lowest node order, for tie breaks
	nodes    []*node
	sources  []string
	sinks    []string
	stores   []string
	srcNodes map[string]*node // topic -> source node
}

func (g *graph) errorf(format string, args ...any) {
	g.errs = append(g.errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...))
}

// link resolves parents and stores and checks every edge's port types.
func (g *graph) link() {
	g.children = map[string][]*node{}
	for _, n := range g.nodes {
		if n.kind != sourceKind && len(n.parents) == 0 {
			g.errorf("%s %q has no parent", n.kind, n.name)
		}
		seen := map[string]bool{}
		for _, pn := range n.parents {
			p := g.byName[pn]
			switch {
			case p == nil:
				g.errorf("%s %q: unknown parent %q", n.kind, n.name, pn)
				continue
			case p.kind == sinkKind:
				g.errorf("%s %q: parent %q is a sink, which has no children", n.kind, n.name, pn)
				continue
			case seen[pn]:
				g.errorf("%s %q: parent %q given twice", n.kind, n.name, pn)
				continue
			case p.out != n.in:
				g.errorf("%s %q cannot take the output of %q: it takes %s, %q gives %s (DSL streams connect to DSL operations only)",
					n.kind, n.name, pn, portName(n.in), pn, portName(p.out))
				continue
			}
			seen[pn] = true
			g.children[pn] = append(g.children[pn], n)
		}
	}
	for _, n := range g.nodes {
		if n.split && len(g.children[n.name]) == 0 {
			g.errorf("Split of the stream of %s (node %q) has no branches (add them with Branch or Default)", n.parents[0], n.name)
		}
	}
	for _, s := range g.stores {
		if len(s.processors) == 0 {
			g.errorf("store %q is not connected to any processor", s.name)
		}
		for _, pn := range s.processors {
			p := g.byName[pn]
			switch {
			case p == nil:
				g.errorf("store %q: unknown processor %q", s.name, pn)
			case p.kind != processorKind:
				g.errorf("store %q: %q is a %s; only processors have stores", s.name, pn, p.kind)
			case !slices.Contains(p.stores, s.name):
				p.stores = append(p.stores, s.name)
			}
		}
	}
	g.linkTimers()
}

func portName(t reflect.Type) string {
	if t == bytesPort {
		return "Records"
	}
	return strings.TrimPrefix(t.String(), "topology.")
}

// sortNodes orders the nodes parents first (Kahn's algorithm, ties by the
// order added) and reports the nodes on cycles.
func (g *graph) sortNodes() {
	indeg := map[string]int{}
	for _, n := range g.nodes {
		indeg[n.name] = len(n.parents)
	}
	var ready []*node
	for _, n := range g.nodes {
		if indeg[n.name] == 0 {
			ready = append(ready, n)
		}
	}
	for len(ready) > 0 {
		slices.SortFunc(ready, func(a, b *node) int { return cmp.Compare(a.order, b.order) })
		n := ready[0]
		ready = ready[1:]
		g.topo = append(g.topo, n)
		for _, c := range g.children[n.name] {
			if indeg[c.name]--; indeg[c.name] == 0 {
				ready = append(ready, c)
			}
		}
	}
	if len(g.topo) < len(g.nodes) {
		var cyc []string
		for _, n := range g.nodes {
			if indeg[n.name] > 0 {
				cyc = append(cyc, n.name)
			}
		}
		g.errorf("cycle through nodes %s", strings.Join(quoteAll(cyc), ", "))
	}
}

// checkTopics checks that each topic is read by one source at most and that
// repartition topics are both written and read.
func (g *graph) checkTopics() {
	readBy := map[string]string{}
	written := map[string]bool{}
	for _, n := range g.nodes {
		for _, t := range n.topics {
			if n.kind == sinkKind {
				written[t] = true
				continue
			}
			if other, dup := readBy[t]; dup {
				g.errorf("topic %q is read by two sources, %q and %q", t, other, n.name)
			}
			readBy[t] = n.name
		}
	}
	for _, t := range slices.Sorted(maps.Keys(g.extractors)) {
		if readBy[t] == "" {
			g.errorf("SetTimestampExtractor(%q): no source reads that topic", t)
		}
	}
	for _, t := range slices.Sorted(maps.Keys(g.repart)) {
		if !written[t] || readBy[t] == "" {
			g.errorf("repartition topic %q must be written by a sink and read by a source (written: %t, read: %t)",
				t, written[t], readBy[t] != "")
		}
	}
}

// split groups the nodes into subtopologies and numbers them.
func (g *graph) split() {
	// Union-find over parent links and store connections.
	parent := map[string]string{}
	find := func(x string) string {
		for parent[x] != x {
			parent[x] = parent[parent[x]]
			x = parent[x]
		}
		return x
	}
	union := func(a, b string) {
		ra, rb := find(a), find(b)
		if ra == rb {
			return
		}
		if g.byName[ra].order > g.byName[rb].order {
			ra, rb = rb, ra
		}
		parent[rb] = ra // the root is the earliest node
	}
	for _, n := range g.nodes {
		parent[n.name] = n.name
	}
	for _, n := range g.nodes {
		for _, p := range n.parents {
			union(p, n.name)
		}
	}
	for _, s := range g.stores {
		for _, p := range s.processors {
			union(s.processors[0], p)
		}
	}
	byRoot := map[string]*sub{}
	var subs []*sub
	for _, n := range g.topo {
		r := find(n.name)
		s := byRoot[r]
		if s == nil {
			s = &sub{first: g.byName[r].order, srcNodes: map[string]*node{}}
			byRoot[r] = s
			subs = append(subs, s)
		}
		s.nodes = append(s.nodes, n)
		switch n.kind {
		case sourceKind:
			s.sources = append(s.sources, n.topics...)
			for _, t := range n.topics {
				s.srcNodes[t] = n
			}
		case sinkKind:
			s.sinks = append(s.sinks, n.topics...)
		}
		for _, st := range n.stores {
			if !slices.Contains(s.stores, st) {
				s.stores = append(s.stores, st)
			}
		}
	}
	for _, s := range subs {
		s.sources = sortedUnique(s.sources)
		s.sinks = sortedUnique(s.sinks)
		slices.Sort(s.stores)
		for _, t := range s.sinks {
			if _, ok := s.srcNodes[t]; ok {
				g.errorf("cycle: topic %q is both written and read by the subtopology of node %q%s", t, s.srcNodes[t].name, mergeHint(s))
			}
		}
	}
	if len(g.errs) > 0 {
		return
	}
	// Number the subtopologies along the data flow through topics.
	readers := map[string]*sub{}
	for _, s := range subs {
		for _, t := range s.sources {
			readers[t] = s
		}
	}
	indeg := map[*sub]int{}
	next := map[*sub][]*sub{}
	for _, s := range subs {
		for _, t := range s.sinks {
			if r := readers[t]; r != nil && !slices.Contains(next[s], r) {
				next[s] = append(next[s], r)
				indeg[r]++
			}
		}
	}
	var ready []*sub
	for _, s := range subs {
		if indeg[s] == 0 {
			ready = append(ready, s)
		}
	}
	for len(ready) > 0 {
		slices.SortFunc(ready, func(a, b *sub) int { return cmp.Compare(a.first, b.first) })
		s := ready[0]
		ready = ready[1:]
		s.id = len(g.subs)
		g.subs = append(g.subs, s)
		for _, r := range next[s] {
			if indeg[r]--; indeg[r] == 0 {
				ready = append(ready, r)
			}
		}
	}
	if len(g.subs) < len(subs) {
		var topics []string
		var cyclic []*sub
		for _, s := range subs {
			if indeg[s] > 0 {
				topics = append(topics, s.sources...)
				cyclic = append(cyclic, s)
			}
		}
		g.errorf("cycle between subtopologies through topics %s%s", strings.Join(quoteAll(topics), ", "), mergeHint(cyclic...))
	}
}

// mergeHint names the Merge nodes of subs, for the error about a cycle
// through them; "" if there are none.
func mergeHint(subs ...*sub) string {
	var merges []string
	for _, s := range subs {
		for _, n := range s.nodes {
			if n.merge {
				merges = append(merges, n.name)
			}
		}
	}
	if len(merges) == 0 {
		return ""
	}
	what := "Merge %s puts all its streams"
	if len(merges) > 1 {
		what = "Merges %s put all their streams"
	}
	return fmt.Sprintf(" ("+what+" in one subtopology: a stream cannot be merged with one computed from it through a topic)",
		strings.Join(quoteAll(merges), ", "))
}

func (g *graph) topology() *Topology {
	t := &Topology{appID: g.appID, globals: g.globals}
	for _, s := range g.subs {
		st := Subtopology{ID: s.id, Sources: s.sources, Sinks: s.sinks}
		for _, topic := range slices.Concat(s.sources, s.sinks) {
			if _, ok := g.repart[topic]; ok && !slices.Contains(st.Repartition, topic) {
				st.Repartition = append(st.Repartition, topic)
			}
		}
		slices.Sort(st.Repartition)
		for _, name := range s.stores {
			spec := StoreSpec{Name: name, Changelog: ChangelogTopic(g.appID, name), Kind: g.storeDef(name).kind}
			if spec.Kind == "" {
				spec.Kind = KeyValueStore
			}
			if src := g.storeDef(name).source; src != "" {
				spec.Changelog, spec.Source = src, true
			}
			st.Stores = append(st.Stores, spec)
		}
		for _, n := range s.nodes {
			st.Timers = st.Timers || n.timers != ""
			if n.kind == processorKind {
				st.Processors = append(st.Processors, n.name)
			}
		}
		slices.Sort(st.Processors)
		st.NewProcessor = newProcessorFunc(s, g.children, g.extractors)
		t.subs = append(t.subs, st)
	}
	t.desc = g.describe(t) + describeGlobals(g.globals)
	return t
}

func (g *graph) storeDef(name string) *storeDef {
	for _, s := range g.stores {
		if s.name == name {
			return s
		}
	}
	return nil
}

// describe writes the text of Topology.String.
func (g *graph) describe(t *Topology) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "topology %q: %d subtopologies\n", t.appID, len(t.subs))
	for i, st := range t.subs {
		s := g.subs[i]
		kind := "stateless"
		if st.Stateful() {
			kind = "stateful"
		}
		fmt.Fprintf(&sb, "subtopology %d (%s)\n", st.ID, kind)
		mark := func(topics []string) string {
			var out []string
			for _, tp := range topics {
				if slices.Contains(st.Repartition, tp) {
					tp += " (repartition)"
				}
				out = append(out, tp)
			}
			return strings.Join(out, ", ")
		}
		fmt.Fprintf(&sb, "  reads:  %s\n", mark(st.Sources))
		if len(st.Sinks) > 0 {
			fmt.Fprintf(&sb, "  writes: %s\n", mark(st.Sinks))
		}
		for _, spec := range st.Stores {
			if spec.Source {
				fmt.Fprintf(&sb, "  store:  %s (changelog: its source topic %s)\n", spec.Name, spec.Changelog)
				continue
			}
			fmt.Fprintf(&sb, "  store:  %s (changelog %s)\n", spec.Name, spec.Changelog)
		}
		for _, n := range s.nodes {
			fmt.Fprintf(&sb, "  %-9s %s", n.kind, n.name)
			if n.desc != "" {
				fmt.Fprintf(&sb, " (%s)", n.desc)
			}
			if len(n.topics) > 0 {
				fmt.Fprintf(&sb, " [%s]", strings.Join(n.topics, ", "))
			}
			if len(n.stores) > 0 {
				fmt.Fprintf(&sb, " stores [%s]", strings.Join(n.stores, ", "))
			}
			if n.timers != "" {
				fmt.Fprintf(&sb, " timers in %s", n.timers)
			}
			if cs := g.children[n.name]; len(cs) > 0 {
				names := make([]string, len(cs))
				for i, c := range cs {
					names[i] = c.name
				}
				fmt.Fprintf(&sb, " -> %s", strings.Join(names, ", "))
			}
			sb.WriteByte('\n')
		}
	}
	return sb.String()
}

func sortedUnique(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = fmt.Sprintf("%q", x)
	}
	return out
}

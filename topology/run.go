package topology

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// task is the processor of one task: the instances of its subtopology's
// nodes, wired parents to children.
type task struct {
	id        string
	partition int32
	sources   map[string]recordReceiver // by topic
	topics    []string
	extract   map[string]TimestampExtractor // by topic; nil: the record's
	clock     streamClock
	// timers are the timers of its nodes with timers, in graph order.
	timers []*timerRun

	// Set for the duration of one Process call.
	ctx      Context
	failNode string // the deepest node that returned the error
	failErr  error
}

// recordReceiver is a node instance that takes Records: a source, a
// Processor-API processor or a sink.
type recordReceiver interface {
	receive(rec Record) error
}

func newProcessorFunc(s *sub, children map[string][]*node, extractors map[string]TimestampExtractor) func(string, int32) Processor {
	extract := map[string]TimestampExtractor{}
	for _, topic := range s.sources {
		if fn := extractors[topic]; fn != nil {
			extract[topic] = fn
		}
	}
	return func(taskID string, partition int32) Processor {
		t := &task{id: taskID, partition: partition, sources: map[string]recordReceiver{}, topics: s.sources, extract: extract}
		inst := map[string]any{}
		for _, n := range slices.Backward(s.nodes) { // children first
			cs := children[n.name]
			ci := make([]any, len(cs))
			for i, c := range cs {
				ci[i] = inst[c.name]
			}
			x, err := n.build(t, n, ci)
			if err != nil {
				// Build checked the port types, so this is a bug in this
				// package; report it on every record rather than panic.
				return errProcessor{fmt.Errorf("topology: task %s: node %q: %w", taskID, n.name, err)}
			}
			inst[n.name] = x
			if n.kind == sourceKind {
				for _, topic := range n.topics {
					t.sources[topic] = x.(recordReceiver)
				}
			}
		}
		return t
	}
}

type errProcessor struct{ err error }

func (p errProcessor) Process(Context, Record) error { return p.err }

// Process runs rec through the task's graph from the source of rec.Topic.
func (t *task) Process(ctx Context, rec Record) error {
	src := t.sources[rec.Topic]
	if src == nil {
		return &ProcessError{TaskID: t.id, Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset,
			Err: fmt.Errorf("%w: reads %q", ErrUnknownTopic, t.topics)}
	}
	if fn := t.extract[rec.Topic]; fn != nil {
		ts, err := fn(rec)
		if err != nil {
			return &ProcessError{TaskID: t.id, Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset,
				Err: fmt.Errorf("%w: %w", ErrTimestamp, err)}
		}
		rec.Timestamp = ts
	}
	if ts, ok := ctx.(timestampSetter); ok {
		ts.SetTimestamp(rec.Timestamp)
	}
	t.ctx, t.failNode, t.failErr = ctx, "", nil
	defer func() { t.ctx, t.failNode, t.failErr = nil, "", nil }()
	fail := func(node string, err error) error {
		return &ProcessError{TaskID: t.id, Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Node: node, Err: err}
	}
	if len(t.timers) == 0 {
		t.clock.observe(rec.Timestamp)
	} else if err := t.advanceStreamTime(rec.Timestamp); err != nil {
		return fail("", err)
	}
	if err := src.receive(rec); err != nil {
		return fail(t.failNode, err)
	}
	// The stream-time timers due, now that the record is done.
	for _, r := range t.timers {
		if err := r.fire(StreamTime, t.clock.t); err != nil {
			return fail(t.failedIn(r), err)
		}
	}
	return nil
}

// fail attributes err to node unless it is (or wraps) an error a child
// already returned, so that ProcessError names the node where it began.
func (t *task) fail(node string, err error) error {
	if t.failErr == nil || !errors.Is(err, t.failErr) {
		t.failNode, t.failErr = node, err
	}
	return err
}

func childrenAs[T any](n *node, children []any) ([]T, error) {
	out := make([]T, len(children))
	for i, c := range children {
		x, ok := c.(T)
		if !ok {
			return nil, fmt.Errorf("child %d is a %T, want %T", i, c, *new(T))
		}
		out[i] = x
	}
	return out, nil
}

// sourceRun fans a source's records out to its children.
type sourceRun struct{ children []recordReceiver }

func buildSource(_ *task, n *node, children []any) (any, error) {
	cs, err := childrenAs[recordReceiver](n, children)
	return &sourceRun{cs}, err
}

func (s *sourceRun) receive(rec Record) error {
	for _, c := range s.children {
		if err := c.receive(rec); err != nil {
			return err
		}
	}
	return nil
}

// processorRun is a Processor-API node of one task; it is the node's
// NodeContext too.
type processorRun struct {
	t        *task
	n        *node
	node     Node
	children []recordReceiver
	timers   *timerRun // nil without AddTimers
}

func buildProcessor(s Supplier) func(*task, *node, []any) (any, error) {
	return func(t *task, n *node, children []any) (any, error) {
		cs, err := childrenAs[recordReceiver](n, children)
		if err != nil {
			return nil, err
		}
		node := s.NewNode(t.id, t.partition)
		if node == nil {
			return nil, errors.New("supplier returned a nil Node")
		}
		p := &processorRun{t: t, n: n, node: node, children: cs}
		if n.timers != "" {
			if _, ok := node.(TimerNode); !ok {
				return nil, fmt.Errorf("has timers (AddTimers) but its Node, a %T, has no OnTimer method (see TimerNode)", node)
			}
			p.timers = &timerRun{p: p, store: n.timers}
			t.timers = append(t.timers, p.timers)
		}
		return p, nil
	}
}

func (p *processorRun) receive(rec Record) error {
	if err := p.node.Process(p, rec); err != nil {
		return p.t.fail(p.n.name, err)
	}
	return nil
}

func (p *processorRun) TaskID() string { return p.t.id }

// StreamTime is the task's stream time, including the record in process.
func (p *processorRun) StreamTime() time.Time { return p.t.clock.t }
func (p *processorRun) Partition() int32      { return p.t.partition }

func (p *processorRun) Store(name string) Store {
	if name == p.n.timers || !slices.Contains(p.n.stores, name) && !slices.Contains(p.n.globals, name) {
		return nil
	}
	return p.t.ctx.Store(name)
}

// Timers returns the node's timers; nil without AddTimers.
func (p *processorRun) Timers() Timers {
	if p.timers == nil {
		return nil
	}
	return p.timers
}

func (p *processorRun) Send(topic string, key, value []byte) error {
	return p.t.ctx.Send(topic, key, value)
}

// SendHeaders sends a record with headers (HeaderSender).
func (p *processorRun) SendHeaders(topic string, key, value []byte, headers Headers) error {
	return send(p.t.ctx, topic, key, value, headers)
}

func (p *processorRun) Forward(rec Record) error {
	for _, c := range p.children {
		if err := c.receive(rec); err != nil {
			return err
		}
	}
	return nil
}

// sinkRun sends records to its topic.
type sinkRun struct {
	t     *task
	name  string
	topic string
}

func buildSink(t *task, n *node, _ []any) (any, error) {
	return &sinkRun{t: t, name: n.name, topic: n.topics[0]}, nil
}

func (s *sinkRun) receive(rec Record) error {
	if err := send(s.t.ctx, s.topic, rec.Key, rec.Value, rec.Headers); err != nil {
		return s.t.fail(s.name, fmt.Errorf("send to %q: %w", s.topic, err))
	}
	return nil
}

package topology

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// Clock says what a timer's time is measured on.
type Clock uint8

const (
	// StreamTime timers fire once the task's stream time (the largest
	// event time of its records, see NodeContext.StreamTime) reaches
	// them, after the record that moved it there. Only records move
	// stream time.
	StreamTime Clock = iota + 1
	// WallClock timers fire once the runtime's clock reaches them, at
	// the next Punctuate call (every 100 ms or so in package baton).
	WallClock
)

func (c Clock) String() string {
	switch c {
	case StreamTime:
		return "stream-time"
	case WallClock:
		return "wall-clock"
	}
	return fmt.Sprintf("Clock(%d)", uint8(c))
}

func (c Clock) check() error {
	if c != StreamTime && c != WallClock {
		return fmt.Errorf("topology: timers: unknown clock %d (want StreamTime or WallClock)", uint8(c))
	}
	return nil
}

// Timers are the timers of one Processor-API node in one task, kept in
// the node's timer store (Builder.AddTimers). A timer is named by its
// clock and a name: one clock's timers have distinct names, and the two
// clocks' timers are independent. Name is copied; it may be empty.
type Timers interface {
	// Set makes the timer of that clock and name due at at, replacing
	// the one of the same clock and name if any. A time already reached
	// is allowed: the timer fires at the next chance (see the package
	// docs). Times must lie between the years 1678 and 2262 (what
	// Unix nanoseconds in an int64 can hold); others are an error.
	Set(clock Clock, name []byte, at time.Time) error
	// Cancel removes the timer of that clock and name; cancelling one
	// that does not exist (or already fired) is not an error.
	Cancel(clock Clock, name []byte) error
	// At returns when the timer of that clock and name is due, and
	// false if there is no such timer.
	At(clock Clock, name []byte) (at time.Time, ok bool, err error)
}

// TimerNode is a Node with timers: a node given a timer store with
// Builder.AddTimers must implement it. OnTimer is called once per timer,
// when it fires; the timer is gone by then (At reports it missing), and
// OnTimer may Set it again, for a periodic timer. It may use ctx as
// Process does: stores, Send and Forward (the record passed on goes to
// the node's children); what it sends carries the timer's time as its
// timestamp. The removal of the timer and the writes and sends of OnTimer
// are part of the same work: under exactly-once they commit together.
type TimerNode interface {
	Node
	OnTimer(ctx NodeContext, clock Clock, name []byte, at time.Time) error
}

// Punctuator is implemented by the processors of subtopologies with
// timers (Subtopology.Timers). The runtime calls Punctuate from time to
// time with its clock's time, on the goroutine that processes the task's
// records and never during Process: it fires the wall-clock timers due
// at now, and no stream-time timer. Its writes and sends are part of the
// task's work like a record's, committed with it.
type Punctuator interface {
	Punctuate(ctx Context, now time.Time) error
}

// TimerError is the error of Punctuate: a wall-clock timer's OnTimer, or
// its timer store, failed. An error while firing stream-time timers after
// a record is that record's ProcessError instead.
type TimerError struct {
	TaskID string
	Node   string
	Err    error
}

func (e *TimerError) Error() string {
	return fmt.Sprintf("topology: task %s: node %q: %v", e.TaskID, e.Node, e.Err)
}

func (e *TimerError) Unwrap() error { return e.Err }

// AddTimers gives processor, a Processor-API node (AddProcessor), timers
// kept in store, which is declared with AddStore: it has a changelog and
// is restored like any store, so the timers (and the task's stream time,
// kept there too) move with the task. The processor's Node must implement
// TimerNode. The store belongs to the timers alone: NodeContext.Store
// returns nil for it, and Build reports it connected to another
// processor, given to AddTimers twice, or a processor with two timer
// stores.
func (b *Builder) AddTimers(store, processor string) {
	b.AddStore(store, processor)
	b.markStore(store, InternalStore)
	b.timers = append(b.timers, timerDef{store: store, processor: processor})
}

type timerDef struct{ store, processor string }

// linkTimers checks the AddTimers calls and marks the nodes with timers.
func (g *graph) linkTimers() {
	byStore := map[string]string{}
	twice := map[string]bool{}
	for _, d := range g.timers {
		if other, dup := byStore[d.store]; dup {
			g.errorf("timer store %q given twice (to %q and %q)", d.store, other, d.processor)
			twice[d.store] = true
			continue
		}
		byStore[d.store] = d.processor
		p := g.byName[d.processor]
		switch {
		case p == nil || p.kind != processorKind:
			continue // link reported it, for the store
		case p.supplier == nil:
			g.errorf("AddTimers(%q, %q): %q is not a Processor-API processor (AddProcessor); only those have timers", d.store, d.processor, d.processor)
			continue
		case p.timers != "":
			g.errorf("processor %q has two timer stores, %q and %q", d.processor, p.timers, d.store)
			continue
		}
		if _, ok := p.supplier.(ProcessorFunc); ok {
			g.errorf("processor %q has timers (AddTimers) but is a ProcessorFunc, which has no OnTimer method (its Node must implement TimerNode)", d.processor)
		}
		p.timers = d.store
	}
	for _, s := range g.stores {
		owner, ok := byStore[s.name]
		if !ok || twice[s.name] {
			continue
		}
		for _, pn := range s.processors {
			if pn != owner {
				g.errorf("timer store %q of processor %q is connected to %q too; a timer store belongs to its processor alone", s.name, owner, pn)
			}
		}
	}
}

// The layout of a timer store. Times are Unix nanoseconds with the sign
// bit flipped, 8 bytes big-endian (encodeTime), so byte order is time
// order. clock is one byte, the Clock.
//
//	0x00 's'                       -> the task's stream time (8 bytes)
//	0x01 clock time(8) name        -> empty: the due index, in (time, name) order per clock
//	0x02 clock name                -> time(8): the timer by name, for Set, Cancel and At
//
// A timer is in both the index and the by-name entries, written and
// removed together.
var streamTimeKey = []byte{0x00, 's'}

const (
	dueTag    = 0x01
	byNameTag = 0x02
)

var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

func encodeTime(t time.Time) ([]byte, error) {
	if t.Before(minTime) || t.After(maxTime) {
		return nil, fmt.Errorf("topology: timers: time %s is out of range (%s to %s)",
			t.UTC().Format(time.RFC3339Nano), minTime.UTC().Format(time.RFC3339), maxTime.UTC().Format(time.RFC3339))
	}
	return binary.BigEndian.AppendUint64(nil, uint64(t.UnixNano())^(1<<63)), nil
}

func decodeTime(b []byte) (time.Time, error) {
	if len(b) != 8 {
		return time.Time{}, fmt.Errorf("topology: timer store: a time has %d bytes, want 8", len(b))
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(b)^(1<<63))), nil
}

func dueKey(c Clock, enc, name []byte) []byte {
	k := make([]byte, 0, 10+len(name))
	return append(append(append(k, dueTag, byte(c)), enc...), name...)
}

func byNameKey(c Clock, name []byte) []byte {
	k := make([]byte, 0, 2+len(name))
	return append(append(k, byNameTag, byte(c)), name...)
}

// timerRun is a node's Timers in one task.
type timerRun struct {
	p     *processorRun
	store string
}

// st returns the timer store, which only exists while the task processes
// a record or fires timers.
func (r *timerRun) st() (Store, error) {
	ctx := r.p.t.ctx
	if ctx == nil {
		return nil, fmt.Errorf("topology: node %q: timers used outside Process and OnTimer", r.p.n.name)
	}
	s := ctx.Store(r.store)
	if s == nil {
		return nil, fmt.Errorf("topology: node %q: the runtime has no timer store %q", r.p.n.name, r.store)
	}
	return s, nil
}

func (r *timerRun) Set(clock Clock, name []byte, at time.Time) error {
	if err := clock.check(); err != nil {
		return err
	}
	enc, err := encodeTime(at)
	if err != nil {
		return err
	}
	s, err := r.st()
	if err != nil {
		return err
	}
	if err := r.remove(s, clock, name); err != nil {
		return err
	}
	if err := s.Put(dueKey(clock, enc, name), nil); err != nil {
		return err
	}
	return s.Put(byNameKey(clock, name), enc)
}

func (r *timerRun) Cancel(clock Clock, name []byte) error {
	if err := clock.check(); err != nil {
		return err
	}
	s, err := r.st()
	if err != nil {
		return err
	}
	return r.remove(s, clock, name)
}

// remove deletes the timer of clock and name, if there is one.
func (r *timerRun) remove(s Store, clock Clock, name []byte) error {
	bk := byNameKey(clock, name)
	enc, ok, err := s.Get(bk)
	if err != nil || !ok {
		return err
	}
	if len(enc) != 8 {
		return fmt.Errorf("topology: timer store %q: timer %q has a time of %d bytes, want 8", r.store, name, len(enc))
	}
	if err := s.Delete(dueKey(clock, enc, name)); err != nil {
		return err
	}
	return s.Delete(bk)
}

func (r *timerRun) At(clock Clock, name []byte) (time.Time, bool, error) {
	if err := clock.check(); err != nil {
		return time.Time{}, false, err
	}
	s, err := r.st()
	if err != nil {
		return time.Time{}, false, err
	}
	enc, ok, err := s.Get(byNameKey(clock, name))
	if err != nil || !ok {
		return time.Time{}, false, err
	}
	at, err := decodeTime(enc)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("topology: timer store %q: timer %q: %w", r.store, name, err)
	}
	return at, true, nil
}

var errStop = errors.New("stop")

// fire fires the node's timers of clock due at bound, in (time, name)
// order, each after removing it. A timer set by OnTimer fires in the same
// pass only if it comes after the one firing in that order; one at or
// before it waits for the next pass, so a pass always ends.
func (r *timerRun) fire(clock Clock, bound time.Time) error {
	tn, ok := r.p.node.(TimerNode)
	if !ok { // newProcessorFunc checked
		return fmt.Errorf("its Node, a %T, has no OnTimer method", r.p.node)
	}
	s, err := r.st()
	if err != nil {
		return err
	}
	// The index entries due at bound are those before the first key of
	// the next nanosecond.
	end := []byte{dueTag, byte(clock) + 1}
	if enc, err := encodeTime(bound); err == nil {
		if u := binary.BigEndian.Uint64(enc); u < math.MaxUint64 {
			end = binary.BigEndian.AppendUint64([]byte{dueTag, byte(clock)}, u+1)
		}
	}
	var last []byte
	for {
		start := []byte{dueTag, byte(clock)}
		if last != nil {
			start = append(last, 0) // the key right after the last fired
		}
		var key []byte
		var at time.Time
		err := s.Iterate(start, end, func(k, _ []byte) error {
			if len(k) < 10 {
				return fmt.Errorf("topology: timer store %q: index key %x is too short", r.store, k)
			}
			t, err := decodeTime(k[2:10])
			if err != nil {
				return err
			}
			if t.After(bound) {
				return errStop
			}
			key, at = bytes.Clone(k), t
			return errStop
		})
		if err != nil && !errors.Is(err, errStop) {
			return err
		}
		if key == nil {
			return nil
		}
		name := key[10:]
		if err := s.Delete(key); err != nil {
			return err
		}
		if err := s.Delete(byNameKey(clock, name)); err != nil {
			return err
		}
		if ts, ok := r.p.t.ctx.(timestampSetter); ok {
			ts.SetTimestamp(at)
		}
		if err := tn.OnTimer(r.p, clock, bytes.Clone(name), at); err != nil {
			return fmt.Errorf("%s timer %q due %s: %w", clock, name, at.UTC().Format(time.RFC3339Nano), err)
		}
		last = key
	}
}

// streamTime reads the stream time kept in the node's timer store.
func (r *timerRun) streamTime(s Store) (time.Time, bool, error) {
	v, ok, err := s.Get(streamTimeKey)
	if err != nil || !ok {
		return time.Time{}, false, err
	}
	t, err := decodeTime(v)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("topology: timer store %q: stream time: %w", r.store, err)
	}
	return t, true, nil
}

// advanceStreamTime makes the task's stream time the largest of ts and
// the stream times kept in its timer stores, and writes it to those
// behind.
func (t *task) advanceStreamTime(ts time.Time) error {
	st := ts
	switch {
	case st.Before(minTime):
		st = minTime
	case st.After(maxTime):
		st = maxTime
	}
	stores := make([]Store, len(t.timers))
	kept := make([]time.Time, len(t.timers))
	has := make([]bool, len(t.timers))
	for i, r := range t.timers {
		var err error
		if stores[i], err = r.st(); err != nil {
			return err
		}
		if kept[i], has[i], err = r.streamTime(stores[i]); err != nil {
			return err
		}
		if has[i] && kept[i].After(st) {
			st = kept[i]
		}
	}
	enc, err := encodeTime(st)
	if err != nil {
		return fmt.Errorf("stream time: %w", err)
	}
	for i, s := range stores {
		if has[i] && kept[i].Equal(st) {
			continue
		}
		if err := s.Put(streamTimeKey, enc); err != nil {
			return err
		}
	}
	t.clock = streamClock{t: st, set: true}
	return nil
}

// failedIn names the node where an error firing r's timers began: a
// child OnTimer forwarded to, or r's own node.
func (t *task) failedIn(r *timerRun) string {
	if t.failNode != "" {
		return t.failNode
	}
	return r.p.n.name
}

// Punctuate fires the task's wall-clock timers due at now, node by node
// in the order of the graph.
func (t *task) Punctuate(ctx Context, now time.Time) error {
	if len(t.timers) == 0 {
		return nil
	}
	t.ctx, t.failNode, t.failErr = ctx, "", nil
	defer func() { t.ctx, t.failNode, t.failErr = nil, "", nil }()
	// StreamTime in OnTimer is the one kept in the timer stores.
	var st time.Time
	for _, r := range t.timers {
		s, err := r.st()
		if err == nil {
			var kept time.Time
			var ok bool
			if kept, ok, err = r.streamTime(s); ok && kept.After(st) {
				st = kept
			}
		}
		if err != nil {
			return &TimerError{TaskID: t.id, Node: r.p.n.name, Err: err}
		}
	}
	t.clock = streamClock{t: st, set: !st.IsZero()}
	for _, r := range t.timers {
		if err := r.fire(WallClock, now); err != nil {
			return &TimerError{TaskID: t.id, Node: t.failedIn(r), Err: err}
		}
	}
	return nil
}

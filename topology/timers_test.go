package topology

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// timerCtx is a task's Context for timer tests: its stores, what it sent
// (with the timestamp it was told), and nothing else.
type timerCtx struct {
	stores map[string]*MemStore
	stamp  time.Time
	sent   []string
}

func (c *timerCtx) TaskID() string   { return "0_0" }
func (c *timerCtx) Partition() int32 { return 0 }
func (c *timerCtx) Store(name string) Store {
	if s, ok := c.stores[name]; ok {
		return s
	}
	return nil
}
func (c *timerCtx) Send(topic string, k, v []byte) error {
	c.sent = append(c.sent, fmt.Sprintf("%s@%d", v, c.stamp.UnixMilli()))
	return nil
}
func (c *timerCtx) SetTimestamp(ts time.Time) { c.stamp = ts }

// copyStore is what a new owner restores from the changelog.
func copyStore(s *MemStore) *MemStore {
	c := &MemStore{}
	for _, k := range s.Keys() {
		v, _, _ := s.Get([]byte(k))
		c.Put([]byte(k), v)
	}
	return c
}

// scriptNode applies the command in each record's value to its timers:
// "set|<clock>|<name>|<ms>", "cancel|<clock>|<name>" or "" (nothing).
// Its OnTimer sends "<clock> <name> <ms>", then: a timer named "p..."
// sets itself again period ms later (until limit), and one named "c..."
// cancels the timer "k" of its clock.
type scriptNode struct {
	period, limit int64
}

func clockOf(s string) Clock {
	if s == "s" {
		return StreamTime
	}
	return WallClock
}

func clockName(c Clock) string {
	if c == StreamTime {
		return "s"
	}
	return "w"
}

func (n scriptNode) Process(ctx NodeContext, rec Record) error {
	f := strings.Split(string(rec.Value), "|")
	tm := ctx.Timers()
	switch {
	case len(rec.Value) == 0:
		return nil
	case f[0] == "set":
		var ms int64
		fmt.Sscan(f[3], &ms)
		return tm.Set(clockOf(f[1]), []byte(f[2]), time.UnixMilli(ms))
	case f[0] == "cancel":
		return tm.Cancel(clockOf(f[1]), []byte(f[2]))
	}
	return fmt.Errorf("bad command %q", rec.Value)
}

func (n scriptNode) OnTimer(ctx NodeContext, clock Clock, name []byte, at time.Time) error {
	if _, ok, err := ctx.Timers().At(clock, name); err != nil || ok {
		return fmt.Errorf("timer %s %q still there while it fires (err %v)", clock, name, err)
	}
	if err := ctx.Send("out", nil, fmt.Appendf(nil, "%s %s %d", clockName(clock), name, at.UnixMilli())); err != nil {
		return err
	}
	switch {
	case bytes.HasPrefix(name, []byte("p")) && at.UnixMilli() < n.limit:
		return ctx.Timers().Set(clock, name, at.Add(time.Duration(n.period)*time.Millisecond))
	case bytes.HasPrefix(name, []byte("c")):
		return ctx.Timers().Cancel(clock, []byte("k"))
	}
	return nil
}

func scriptTopology(t *testing.T, n scriptNode) *Topology {
	t.Helper()
	b := NewBuilder("app")
	b.AddSource("src", "in")
	b.AddProcessor("script", SupplierFunc(func(string, int32) Node { return n }), "src")
	b.AddTimers("timers", "script")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if !topo.Subtopologies()[0].Timers {
		t.Fatal("Subtopology.Timers is false")
	}
	return topo
}

// timerModel is the reference: the timers as a map, the stream time as
// the largest record time.
type timerModel struct {
	n      scriptNode
	timers map[Clock]map[string]int64
	stream int64
	seen   bool
	out    []string
}

func (m *timerModel) set(c Clock, name string, at int64) { m.timers[c][name] = at }

// pass fires the timers of c due at bound in (time, name) order, each
// after the last one fired.
func (m *timerModel) pass(c Clock, bound int64) {
	lastAt, lastName, any := int64(0), "", false
	for {
		best, found := "", false
		for name, at := range m.timers[c] {
			if at > bound || any && cmp.Or(cmp.Compare(at, lastAt), strings.Compare(name, lastName)) <= 0 {
				continue
			}
			if !found || cmp.Or(cmp.Compare(at, m.timers[c][best]), strings.Compare(name, best)) < 0 {
				best, found = name, true
			}
		}
		if !found {
			return
		}
		at := m.timers[c][best]
		delete(m.timers[c], best)
		m.out = append(m.out, fmt.Sprintf("%s %s %d@%d", clockName(c), best, at, at))
		switch {
		case strings.HasPrefix(best, "p") && at < m.n.limit:
			m.set(c, best, at+m.n.period)
		case strings.HasPrefix(best, "c"):
			delete(m.timers[c], "k")
		}
		lastAt, lastName, any = at, best, true
	}
}

func (m *timerModel) record(ts int64, cmd string) {
	if !m.seen || ts > m.stream {
		m.stream, m.seen = ts, true
	}
	f := strings.Split(cmd, "|")
	switch {
	case cmd == "":
	case f[0] == "set":
		var ms int64
		fmt.Sscan(f[3], &ms)
		m.set(clockOf(f[1]), f[2], ms)
	case f[0] == "cancel":
		delete(m.timers[clockOf(f[1])], f[2])
	}
	m.pass(StreamTime, m.stream)
}

// storedTimers decodes a timer store, checking that the due index and
// the by-name entries agree.
func storedTimers(t *testing.T, s *MemStore) map[Clock]map[string]int64 {
	t.Helper()
	byName := map[Clock]map[string]int64{StreamTime: {}, WallClock: {}}
	due := map[Clock]map[string]int64{StreamTime: {}, WallClock: {}}
	for _, k := range s.Keys() {
		v, _, _ := s.Get([]byte(k))
		switch k[0] {
		case byNameTag:
			at, err := decodeTime(v)
			if err != nil {
				t.Fatal(err)
			}
			byName[Clock(k[1])][k[2:]] = at.UnixMilli()
		case dueTag:
			at, err := decodeTime([]byte(k[2:10]))
			if err != nil {
				t.Fatal(err)
			}
			due[Clock(k[1])][k[10:]] = at.UnixMilli()
		}
	}
	for _, c := range []Clock{StreamTime, WallClock} {
		if fmt.Sprint(byName[c]) != fmt.Sprint(due[c]) {
			t.Fatalf("%s timers: by name %v, due index %v", c, byName[c], due[c])
		}
	}
	return byName
}

// TestTimersRandomAgainstModel runs random out-of-order records that set,
// replace and cancel timers of both clocks, random punctuations and
// random handovers (a new processor over a copy of the store), and
// checks every timer fired, in order, and the stored timers against a
// reference model.
func TestTimersRandomAgainstModel(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		n := scriptNode{period: int64(1 + rng.IntN(30)), limit: int64(200 + rng.IntN(400))}
		topo := scriptTopology(t, n)
		sub := topo.Subtopologies()[0]
		proc := sub.NewProcessor("0_0", 0)
		ctx := &timerCtx{stores: map[string]*MemStore{"timers": {}}}
		m := &timerModel{n: n, timers: map[Clock]map[string]int64{StreamTime: {}, WallClock: {}}}
		names := []string{"a", "b", "k", "c1", "p1", "p2", "", "a\x00"}
		base, wall := int64(0), int64(0)
		var moves int
		for i := range 150 {
			switch r := rng.IntN(20); {
			case r < 3:
				wall += int64(rng.IntN(60))
				if err := proc.(Punctuator).Punctuate(ctx, time.UnixMilli(wall)); err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
				m.pass(WallClock, wall)
				continue
			case r < 4:
				// A handover: the new owner has the changelog's copy.
				moves++
				proc = sub.NewProcessor("0_0", 0)
				ctx = &timerCtx{stores: map[string]*MemStore{"timers": copyStore(ctx.stores["timers"])}, sent: ctx.sent}
				continue
			}
			base += int64(rng.IntN(10))
			ts := base - int64(rng.IntN(40)) // out of order
			var cmd string
			name := names[rng.IntN(len(names))]
			clock := []string{"s", "w"}[rng.IntN(2)]
			switch rng.IntN(4) {
			case 0, 1:
				cmd = fmt.Sprintf("set|%s|%s|%d", clock, name, base+int64(rng.IntN(80))-20)
			case 2:
				cmd = fmt.Sprintf("cancel|%s|%s", clock, name)
			}
			err := proc.Process(ctx, Record{Topic: "in", Offset: int64(i), Value: []byte(cmd), Timestamp: time.UnixMilli(ts)})
			if err != nil {
				t.Fatalf("seed %d record %d: %v", seed, i, err)
			}
			m.record(ts, cmd)
			if got, want := ctx.sent, m.out; !slices.Equal(got, want) {
				t.Fatalf("seed %d after record %d (%q at %d, %d handovers): fired\n%q\nwant\n%q", seed, i, cmd, ts, moves, got, want)
			}
			if got := storedTimers(t, ctx.stores["timers"]); fmt.Sprint(got) != fmt.Sprint(m.timers) {
				t.Fatalf("seed %d after record %d: stored timers %v, want %v", seed, i, got, m.timers)
			}
		}
		if len(m.out) == 0 {
			t.Fatalf("seed %d: no timer fired", seed)
		}
		if moves == 0 {
			t.Fatalf("seed %d: no handover", seed)
		}
	}
}

// TestTimersHandover moves a task to a new processor over a copy of its
// timer store, as a new owner restores it: a wall-clock timer that fell
// due during the move fires once, on the new owner; a stream-time timer
// the old owner fired does not fire again, though the new owner's first
// record is older; the stream time goes on from the old owner's.
func TestTimersHandover(t *testing.T) {
	n := scriptNode{limit: -1}
	sub := scriptTopology(t, n).Subtopologies()[0]
	rec := func(off, ms int64, cmd string) Record {
		return Record{Topic: "in", Offset: off, Value: []byte(cmd), Timestamp: time.UnixMilli(ms)}
	}
	old := sub.NewProcessor("0_0", 0)
	octx := &timerCtx{stores: map[string]*MemStore{"timers": {}}}
	for i, r := range []Record{
		rec(0, 10, "set|s|s1|100"),
		rec(1, 20, "set|s|s2|200"),
		rec(2, 30, "set|w|w1|1000"),
		rec(3, 150, ""), // fires s1
	} {
		if err := old.Process(octx, r); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if err := old.(Punctuator).Punctuate(octx, time.UnixMilli(999)); err != nil {
		t.Fatal(err)
	}
	if want := []string{"s s1 100@100"}; !slices.Equal(octx.sent, want) {
		t.Fatalf("old owner fired %q, want %q", octx.sent, want)
	}

	// The move: the new owner has the changelog's copy of the store. The
	// wall clock passes w1's time meanwhile.
	var streamTimes []int64
	probe := &streamProbe{scriptNode: n, seen: &streamTimes}
	b := NewBuilder("app")
	b.AddSource("src", "in")
	b.AddProcessor("script", SupplierFunc(func(string, int32) Node { return probe }), "src")
	b.AddTimers("timers", "script")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	nw := topo.Subtopologies()[0].NewProcessor("0_0", 0)
	nctx := &timerCtx{stores: map[string]*MemStore{"timers": copyStore(octx.stores["timers"])}}
	if err := nw.Process(nctx, rec(4, 120, "")); err != nil {
		t.Fatal(err)
	}
	for _, now := range []int64{1500, 1600} {
		if err := nw.(Punctuator).Punctuate(nctx, time.UnixMilli(now)); err != nil {
			t.Fatal(err)
		}
	}
	if err := nw.Process(nctx, rec(5, 250, "")); err != nil {
		t.Fatal(err)
	}
	if err := nw.Process(nctx, rec(6, 260, "")); err != nil {
		t.Fatal(err)
	}
	if want := []string{"w w1 1000@1000", "s s2 200@200"}; !slices.Equal(nctx.sent, want) {
		t.Fatalf("new owner fired %q, want %q", nctx.sent, want)
	}
	if want := []int64{150, 250, 260}; !slices.Equal(streamTimes, want) {
		t.Fatalf("new owner's stream times %v, want %v (going on from the old owner's 150)", streamTimes, want)
	}
}

// streamProbe is a scriptNode recording the stream time of each record.
type streamProbe struct {
	scriptNode
	seen *[]int64
}

func (p *streamProbe) Process(ctx NodeContext, rec Record) error {
	*p.seen = append(*p.seen, ctx.StreamTime().UnixMilli())
	return p.scriptNode.Process(ctx, rec)
}

func TestTimersBuildErrors(t *testing.T) {
	node := SupplierFunc(func(string, int32) Node { return scriptNode{} })
	for _, tc := range []struct {
		name  string
		build func(b *Builder)
		want  string
	}{
		{"unknown processor", func(b *Builder) { b.AddTimers("t", "nope") }, `store "t": unknown processor "nope"`},
		{"store twice", func(b *Builder) {
			b.AddProcessor("q", node, "src")
			b.AddTimers("t", "p")
			b.AddTimers("t", "q")
		}, `timer store "t" given twice`},
		{"two timer stores", func(b *Builder) {
			b.AddTimers("t1", "p")
			b.AddTimers("t2", "p")
		}, `processor "p" has two timer stores`},
		{"shared store", func(b *Builder) {
			b.AddProcessor("q", node, "src")
			b.AddTimers("t", "p")
			b.AddStore("t", "q")
		}, `timer store "t" of processor "p" is connected to "q" too`},
		{"ProcessorFunc", func(b *Builder) {
			b.AddProcessor("f", ProcessorFunc(func(NodeContext, Record) error { return nil }), "src")
			b.AddTimers("t", "f")
		}, `processor "f" has timers (AddTimers) but is a ProcessorFunc`},
		{"sink", func(b *Builder) {
			b.AddSink("out", "out", "p")
			b.AddTimers("t", "out")
		}, `store "t": "out" is a sink`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := NewBuilder("app")
			b.AddSource("src", "in")
			b.AddProcessor("p", node, "src")
			tc.build(b)
			_, err := b.Build()
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Build: %v, want ErrInvalid saying %s", err, tc.want)
			}
			if n := strings.Count(err.Error(), "\n") + 1; n != 1 {
				t.Fatalf("Build: %d errors for one mistake: %v", n, err)
			}
		})
	}

	// A DSL node has no timers.
	b := NewBuilder("app")
	FlatMapValues(FromTopic(b, "in", Bytes, String), strings.Fields).To("out")
	b.AddTimers("t", "flatMapValues#2")
	if _, err := b.Build(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not a Processor-API processor") {
		t.Fatalf("timers on a DSL node: %v", err)
	}
}

// plainNode has no OnTimer.
type plainNode struct{}

func (plainNode) Process(NodeContext, Record) error { return nil }

// A node given timers whose Node has no OnTimer fails every record with
// an error naming it, and a node without timers has nil Timers.
func TestTimersNodeWithoutOnTimer(t *testing.T) {
	var timers []Timers
	b := NewBuilder("app")
	b.AddSource("src", "in")
	b.AddProcessor("plain", SupplierFunc(func(string, int32) Node { return plainNode{} }), "src")
	b.AddProcessor("probe", ProcessorFunc(func(ctx NodeContext, rec Record) error {
		timers = append(timers, ctx.Timers())
		return nil
	}), "src")
	b.AddTimers("t", "plain")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	proc := topo.Subtopologies()[0].NewProcessor("0_0", 0)
	ctx := &timerCtx{stores: map[string]*MemStore{"t": {}}}
	for range 2 {
		err := proc.Process(ctx, Record{Topic: "in"})
		if err == nil || !strings.Contains(err.Error(), `node "plain"`) || !strings.Contains(err.Error(), "no OnTimer method") {
			t.Fatalf("Process: %v, want an error naming node \"plain\" and OnTimer", err)
		}
	}

	b = NewBuilder("app")
	b.AddSource("src", "in")
	b.AddProcessor("probe", ProcessorFunc(func(ctx NodeContext, rec Record) error {
		timers = append(timers, ctx.Timers())
		return nil
	}), "src")
	topo, err = b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if topo.Subtopologies()[0].Timers {
		t.Fatal("Subtopology.Timers without timers")
	}
	if err := topo.Subtopologies()[0].NewProcessor("0_0", 0).Process(ctx, Record{Topic: "in"}); err != nil {
		t.Fatal(err)
	}
	if len(timers) != 1 || timers[0] != nil {
		t.Fatalf("Timers of a node without timers: %v", timers)
	}
}

// Bad arguments and a damaged store give errors, never panics; an error
// from OnTimer names the node and the timer.
func TestTimersErrors(t *testing.T) {
	var fail error
	var tm Timers
	b := NewBuilder("app")
	b.AddSource("src", "in")
	b.AddProcessor("p", SupplierFunc(func(string, int32) Node { return &failNode{err: &fail, timers: &tm} }), "src")
	b.AddTimers("t", "p")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	proc := topo.Subtopologies()[0].NewProcessor("0_0", 0)
	ctx := &timerCtx{stores: map[string]*MemStore{"t": {}}}
	if err := proc.Process(ctx, Record{Topic: "in", Timestamp: time.UnixMilli(5)}); err != nil {
		t.Fatal(err)
	}
	if err := tm.Set(Clock(9), nil, time.UnixMilli(1)); err == nil || !strings.Contains(err.Error(), "unknown clock 9") {
		t.Fatalf("Set with clock 9: %v", err)
	}
	if err := tm.Set(StreamTime, nil, time.Time{}); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Fatalf("Set at the zero time: %v", err)
	}
	if _, _, err := tm.At(WallClock, nil); err == nil || !strings.Contains(err.Error(), "outside Process") {
		t.Fatalf("At after Process: %v", err)
	}

	// OnTimer fails: the record's ProcessError names the node and timer;
	// Punctuate's TimerError likewise.
	boom := errors.New("boom")
	fail = boom
	err = proc.Process(ctx, Record{Topic: "in", Offset: 3, Value: []byte("s"), Timestamp: time.UnixMilli(10)})
	var pe *ProcessError
	if !errors.Is(err, boom) || !errors.As(err, &pe) || pe.Node != "p" || pe.Offset != 3 || !strings.Contains(err.Error(), `stream-time timer "x"`) {
		t.Fatalf("OnTimer failing after a record: %v", err)
	}
	if err := proc.Process(ctx, Record{Topic: "in", Offset: 4, Value: []byte("w"), Timestamp: time.UnixMilli(10)}); err != nil {
		t.Fatal(err)
	}
	err = proc.(Punctuator).Punctuate(ctx, time.UnixMilli(100))
	var te *TimerError
	if !errors.Is(err, boom) || !errors.As(err, &te) || te.Node != "p" || !strings.Contains(err.Error(), `wall-clock timer "x"`) {
		t.Fatalf("OnTimer failing in Punctuate: %v", err)
	}

	// A damaged store.
	fail = nil
	ctx.stores["t"].Put(streamTimeKey, []byte("bad"))
	if err := proc.Process(ctx, Record{Topic: "in", Timestamp: time.UnixMilli(10)}); err == nil || !strings.Contains(err.Error(), "want 8") {
		t.Fatalf("damaged stream time: %v", err)
	}
	ctx.stores["t"] = &MemStore{}
	ctx.stores["t"].Put([]byte{dueTag, byte(WallClock), 1}, nil)
	if err := proc.(Punctuator).Punctuate(ctx, time.UnixMilli(100)); err == nil || !strings.Contains(err.Error(), "too short") {
		t.Fatalf("damaged index: %v", err)
	}
}

// failNode sets timer "x" of the clock its record names ("s" or "w"),
// due at once, and fails its OnTimer with *err.
type failNode struct {
	err    *error
	timers *Timers
}

func (n *failNode) Process(ctx NodeContext, rec Record) error {
	*n.timers = ctx.Timers()
	if len(rec.Value) == 0 {
		return nil
	}
	return ctx.Timers().Set(clockOf(string(rec.Value)), []byte("x"), time.UnixMilli(1))
}

func (n *failNode) OnTimer(NodeContext, Clock, []byte, time.Time) error { return *n.err }

// againNode: the first time timer "x" fires, it sets "x" again at the
// same time and "y" at the same time; "y" comes after "x" and fires in the
// same pass, "x" at or before the one firing waits for the next pass.
type againNode struct {
	fired *[]string
	again map[Clock]bool
}

func (againNode) Process(ctx NodeContext, rec Record) error {
	if len(rec.Value) == 0 {
		return nil
	}
	return ctx.Timers().Set(clockOf(string(rec.Value)), []byte("x"), time.UnixMilli(5))
}

func (n againNode) OnTimer(ctx NodeContext, clock Clock, name []byte, at time.Time) error {
	*n.fired = append(*n.fired, fmt.Sprintf("%s %s %d", clockName(clock), name, at.UnixMilli()))
	if string(name) == "x" && !n.again[clock] {
		n.again[clock] = true
		if err := ctx.Timers().Set(clock, []byte("x"), at); err != nil {
			return err
		}
		return ctx.Timers().Set(clock, []byte("y"), at)
	}
	return nil
}

func TestTimersSetWhileFiring(t *testing.T) {
	var fired []string
	b := NewBuilder("app")
	b.AddSource("src", "in")
	b.AddProcessor("p", SupplierFunc(func(string, int32) Node { return againNode{&fired, map[Clock]bool{}} }), "src")
	b.AddTimers("t", "p")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	proc := topo.Subtopologies()[0].NewProcessor("0_0", 0)
	ctx := &timerCtx{stores: map[string]*MemStore{"t": {}}}
	step := func(what string, fn func() error, want ...string) {
		t.Helper()
		fired = nil
		if err := fn(); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(fired, want) {
			t.Fatalf("%s: fired %q, want %q", what, fired, want)
		}
	}
	rec := func(v string) func() error {
		return func() error {
			return proc.Process(ctx, Record{Topic: "in", Value: []byte(v), Timestamp: time.UnixMilli(10)})
		}
	}
	punct := func() error { return proc.(Punctuator).Punctuate(ctx, time.UnixMilli(10)) }
	step("record setting x", rec("s"), "s x 5", "s y 5")
	step("next record", rec(""), "s x 5")
	step("punctuate after a record setting x", func() error {
		if err := rec("w")(); err != nil {
			return err
		}
		return punct()
	}, "w x 5", "w y 5")
	step("next punctuate", punct, "w x 5")
	step("punctuate again", punct)
}

// forwardNode forwards a record from OnTimer.
type forwardNode struct{}

func (forwardNode) Process(ctx NodeContext, rec Record) error {
	return ctx.Timers().Set(clockOf(string(rec.Value)), nil, time.UnixMilli(1))
}

func (forwardNode) OnTimer(ctx NodeContext, _ Clock, _ []byte, _ time.Time) error {
	return ctx.Forward(Record{Value: []byte("from a timer")})
}

// An error in a child of a node with timers, on a record OnTimer
// forwarded, names the child.
func TestTimersChildError(t *testing.T) {
	boom := errors.New("boom")
	b := NewBuilder("app")
	b.AddSource("src", "in")
	b.AddProcessor("timers", SupplierFunc(func(string, int32) Node { return forwardNode{} }), "src")
	b.AddTimers("t", "timers")
	b.AddProcessor("child", ProcessorFunc(func(NodeContext, Record) error { return boom }), "timers")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	proc := topo.Subtopologies()[0].NewProcessor("0_0", 0)
	ctx := &timerCtx{stores: map[string]*MemStore{"t": {}}}
	err = proc.Process(ctx, Record{Topic: "in", Value: []byte("s"), Timestamp: time.UnixMilli(5)})
	var pe *ProcessError
	if !errors.Is(err, boom) || !errors.As(err, &pe) || pe.Node != "child" {
		t.Fatalf("after a record: %v, want a ProcessError of node \"child\"", err)
	}
	if err := proc.Process(ctx, Record{Topic: "in", Value: []byte("w"), Timestamp: time.UnixMilli(5)}); err != nil {
		t.Fatal(err)
	}
	err = proc.(Punctuator).Punctuate(ctx, time.UnixMilli(5))
	var te *TimerError
	if !errors.Is(err, boom) || !errors.As(err, &te) || te.Node != "child" {
		t.Fatalf("Punctuate: %v, want a TimerError of node \"child\"", err)
	}
}

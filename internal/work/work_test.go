package work

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/taskstore"
	"github.com/baton-streams/baton/state"
	"github.com/baton-streams/baton/topology"
)

// recordingHost keeps what a task produces, for tests of a task alone.
type recordingHost struct {
	recs []*kgo.Record
	errs []error
}

func (h *recordingHost) Produce(r *kgo.Record, _ func(*kgo.Record, error)) {
	h.recs = append(h.recs, r)
}
func (h *recordingHost) Fail(err error)                                    { h.errs = append(h.errs, err) }
func (h *recordingHost) PartitionsOf(string) (int32, error)                { return 4, nil }
func (h *recordingHost) GlobalStore(string) topology.Store                 { return nil }
func (h *recordingHost) BadRecord(_ *Task, _ *kgo.Record, err error) error { return err }
func (h *recordingHost) Processed(*Task, int)                              {}
func (h *recordingHost) FirstRecord(*Task, *kgo.Record)                    {}
func (h *recordingHost) LateRecord(*Task, string)                          {}

// TestStoreViewEmptyValue: a Put of an empty value is a value (Get finds
// it, Iterate visits it, the changelog gets an empty value and not a
// tombstone); a Delete is a delete.
func TestStoreViewEmptyValue(t *testing.T) {
	rc := &recordingHost{}
	tk := &Task{ID: "0_0"}
	ts := taskstore.New("s", "c", state.NewMemory("s"), false)
	v := &storeView{c: NewContext(rc, tk), s: ts}
	for _, k := range []string{"empty", "nil"} {
		var val []byte
		if k == "empty" {
			val = []byte{}
		}
		if err := v.Put([]byte(k), val); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.Delete([]byte("gone")); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"empty", "nil"} {
		if _, ok, err := v.Get([]byte(k)); err != nil || !ok {
			t.Errorf("Get(%q) after a Put of an empty value: ok %v, err %v", k, ok, err)
		}
	}
	var seen []string
	if err := v.Iterate(nil, nil, func(k, _ []byte) error { seen = append(seen, string(k)); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seen, []string{"empty", "nil"}) {
		t.Errorf("Iterate visited %q", seen)
	}
	for _, r := range rc.recs {
		if tomb := r.Value == nil; tomb != (string(r.Key) == "gone") {
			t.Errorf("changelog record %q: tombstone %v", r.Key, tomb)
		}
	}
}

// procFunc is a topology.Processor made of a function.
type procFunc func(topology.Context, topology.Record) error

func (f procFunc) Process(ctx topology.Context, r topology.Record) error { return f(ctx, r) }

func records(topic string, n int) []*kgo.Record {
	out := make([]*kgo.Record, n)
	for i := range out {
		out[i] = &kgo.Record{Topic: topic, Offset: int64(10 + i), LeaderEpoch: 3}
	}
	return out
}

// TestProcessStopsAfterTheDeadline: a turn processes at least one record,
// none after the one that ends past its deadline, and its offsets are
// the next after the last record processed of each topic.
func TestProcessStopsAfterTheDeadline(t *testing.T) {
	slow := procFunc(func(topology.Context, topology.Record) error { time.Sleep(2 * time.Millisecond); return nil })
	task := &Task{ID: "0_0", Sub: topology.Subtopology{Sources: []string{"a", "b"}}, Proc: slow, Offsets: map[string]kgo.EpochOffset{}}
	task.Ctx = NewContext(&recordingHost{}, task)

	n, err := task.Process(records("a", 3), time.Now().Add(-time.Second))
	if err != nil || n != 1 {
		t.Fatalf("a turn already past its deadline processed %d records (err %v), want 1", n, err)
	}
	if got := task.Offsets["a"]; got.Offset != 11 || got.Epoch != 3 {
		t.Errorf("offset of a after its record 10: %+v, want 11 in epoch 3", got)
	}

	recs := append(records("a", 50), records("b", 50)...)
	n, err = task.Process(recs, time.Now().Add(20*time.Millisecond))
	if err != nil || n < 1 || n >= len(recs) {
		t.Fatalf("a 20 ms turn over 100 records of 2 ms processed %d (err %v)", n, err)
	}
	last := recs[n-1]
	if got := task.Offsets[last.Topic].Offset; got != last.Offset+1 {
		t.Errorf("offset of %s after %d records: %d, want %d", last.Topic, n, got, last.Offset+1)
	}
	if got := task.Processed.Load(); got != int64(1+n) {
		t.Errorf("Processed = %d, want %d", got, 1+n)
	}
}

// skipHost is a host whose bad-record policy skips every failed record.
type skipHost struct{ recordingHost }

func (*skipHost) BadRecord(*Task, *kgo.Record, error) error { return nil }

// TestProcessBadRecord: a record whose processing fails stops the turn
// before it unless the policy skips it; a skipped record is processed
// (its offset committed).
func TestProcessBadRecord(t *testing.T) {
	bad := errors.New("bad record")
	proc := procFunc(func(_ topology.Context, r topology.Record) error {
		if r.Offset == 12 {
			return bad
		}
		return nil
	})
	for _, c := range []struct {
		host  Host
		n     int
		fails bool
	}{{&recordingHost{}, 2, true}, {&skipHost{}, 5, false}} {
		task := &Task{ID: "0_1", Sub: topology.Subtopology{Sources: []string{"a"}}, Proc: proc, Offsets: map[string]kgo.EpochOffset{}}
		task.Ctx = NewContext(c.host, task)
		n, err := task.Process(records("a", 5), time.Now().Add(time.Minute))
		if n != c.n || (err != nil) != c.fails || (err != nil && !errors.Is(err, bad)) {
			t.Errorf("%T: processed %d (err %v), want %d (fails %v)", c.host, n, err, c.n, c.fails)
		}
		if got := task.Offsets["a"].Offset; got != int64(10+c.n) {
			t.Errorf("%T: offset %d after %d records, want %d", c.host, got, c.n, 10+c.n)
		}
	}
}

// TestTableBootReady: a bootstrap is over once the ends are read and each
// table partition is processed up to its end, or may be let go: none of
// its records waits, and a fetch of it came back empty or it has been
// quiet for the idle time.
func TestTableBootReady(t *testing.T) {
	t0 := time.Unix(1000, 0)
	idle := 2 * time.Second
	pos := map[string]int64{"t1": 5, "t2": 9}
	at := func(topic string) int64 { return pos[topic] }
	none := func(string) bool { return false }

	b := &TableBoot{Empty: map[string]bool{}}
	if b.Ready(at, none, t0.Add(time.Hour), idle) {
		t.Fatal("ready before the ends were read")
	}
	b.Ends, b.Last = map[string]int64{"t1": 5, "t2": 10}, t0
	if b.Ready(at, none, t0.Add(time.Second), idle) {
		t.Error("ready with t2 one record short of its end, 1 s after the ends came")
	}
	if !b.Ready(at, none, t0.Add(idle), idle) {
		t.Error("not ready with t2 quiet for the idle time")
	}
	if b.Ready(at, func(topic string) bool { return topic == "t2" }, t0.Add(time.Hour), idle) {
		t.Error("ready while a record of t2 waits to be processed")
	}
	b.Empty["t2"] = true
	if !b.Ready(at, none, t0.Add(time.Second), idle) {
		t.Error("not ready after an empty fetch of t2")
	}
	pos["t2"] = 10
	b.Empty["t2"] = false
	if !b.Ready(at, none, t0, idle) {
		t.Error("not ready with every table partition at its end")
	}
}

// TestTableBootSplit: while a task boots, its table records run and the
// others wait, in order; table records after the ends came count as news.
func TestTableBootSplit(t *testing.T) {
	recs := []*kgo.Record{{Topic: "stream", Offset: 1}, {Topic: "table", Offset: 2}, {Topic: "stream", Offset: 3}, {Topic: "table", Offset: 4}}
	b := &TableBoot{}
	now := time.Unix(2000, 0)
	run, wait := b.Split(recs, []string{"table"}, now)
	if len(run) != 2 || run[0].Offset != 2 || run[1].Offset != 4 || len(wait) != 2 || wait[0].Offset != 1 || wait[1].Offset != 3 {
		t.Fatalf("split into run %v and wait %v", run, wait)
	}
	if !b.Last.IsZero() {
		t.Error("table records before the ends came moved Last")
	}
	b.Ends = map[string]int64{"table": 10}
	b.Split(recs, []string{"table"}, now)
	if !b.Last.Equal(now) {
		t.Errorf("Last = %v after table records were dispatched at %v", b.Last, now)
	}
}

// TestProcessPanicGoesToThePolicy: a processor's panic is recovered on
// the worker and handed to the error policy like an error (a
// *PanicError wrapping ErrPanic, with the stack); skipped, the turn goes
// on.
func TestProcessPanicGoesToThePolicy(t *testing.T) {
	proc := procFunc(func(_ topology.Context, r topology.Record) error {
		if r.Offset == 11 {
			panic("unlucky record")
		}
		return nil
	})
	task := &Task{ID: "0_1", Sub: topology.Subtopology{Sources: []string{"a"}}, Proc: proc, Offsets: map[string]kgo.EpochOffset{}}
	task.Ctx = NewContext(&recordingHost{}, task)
	n, err := task.Process(records("a", 3), time.Now().Add(time.Minute))
	var pe *PanicError
	if n != 1 || !errors.Is(err, ErrPanic) || !errors.As(err, &pe) || pe.Value != "unlucky record" || len(pe.Stack) == 0 {
		t.Fatalf("processed %d (err %v), want 1 and the panic as an error", n, err)
	}
	task.Ctx = NewContext(&skipHost{}, task)
	if n, err := task.Process(records("a", 3), time.Now().Add(time.Minute)); n != 3 || err != nil {
		t.Errorf("with the panic skipped: processed %d (err %v), want 3", n, err)
	}
}

// failingState is a store whose reads fail, as on a broken disk.
type failingState struct{ state.Store }

var errDisk = errors.New("disk: input/output error")

func (failingState) Get([]byte) ([]byte, bool, error) { return nil, false, errDisk }

// TestProcessStoreFailureIsNeverSkipped: a record whose processing met a
// failure of the runtime's own (here a store read) stops the turn even
// when the policy skips failed records, whatever the processor made of
// the error; a record the processor failed by itself is skipped.
func TestProcessStoreFailureIsNeverSkipped(t *testing.T) {
	ts := taskstore.New("s", "c", failingState{state.NewMemory("s")}, false)
	mine := errors.New("my own error")
	proc := procFunc(func(ctx topology.Context, r topology.Record) error {
		if r.Offset == 10 {
			return mine
		}
		if _, _, err := ctx.Store("s").Get([]byte("k")); err != nil {
			return errors.New("lookup failed") // the store's error, not wrapped
		}
		return nil
	})
	task := &Task{ID: "0_1", Sub: topology.Subtopology{Sources: []string{"a"}}, Proc: proc, Offsets: map[string]kgo.EpochOffset{},
		Stores: map[string]*taskstore.Store{"s": ts}}
	task.Ctx = NewContext(&skipHost{}, task)
	n, err := task.Process(records("a", 3), time.Now().Add(time.Minute))
	if n != 1 || err == nil || !strings.Contains(err.Error(), "lookup failed") {
		t.Errorf("processed %d (err %v), want the first record skipped and the second to stop the turn", n, err)
	}
}

// panickyTimers is a processor whose wall-clock timers panic.
type panickyTimers struct{ procFunc }

func (panickyTimers) Punctuate(topology.Context, time.Time) error { panic("timer broke") }

// TestPunctuatePanicIsAnError: a timer's panic comes back as an error
// (a *PanicError) for the instance to stop with, not a crash.
func TestPunctuatePanicIsAnError(t *testing.T) {
	task := &Task{ID: "0_2", Proc: panickyTimers{}, Offsets: map[string]kgo.EpochOffset{}}
	task.Ctx = NewContext(&recordingHost{}, task)
	if err := task.Punctuate(time.Now()); !errors.Is(err, ErrPanic) || !strings.Contains(err.Error(), "timer broke") {
		t.Errorf("Punctuate = %v, want the panic as an error", err)
	}
}

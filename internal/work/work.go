// Package work runs the records of an instance's tasks: a task's runtime
// state (Task), the topology.Context its processor is given (Context), the
// store view that keeps its writes pending until they are committed, and
// the worker goroutines that run batches of its records (Worker).
//
// The membership's loop owns every Task. While a batch of a task's records
// is being processed, the worker the task is pinned to owns its processing
// fields (its processor, its stores' pending writes, its offsets); the
// loop hands a batch over on the worker's channel and takes the task back
// when the batch is done. The runtime's side (producing, failing the
// instance, metrics, the bad-record policy) is reached through Host.
package work

import (
	"bytes"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/taskstore"
	"github.com/baton-streams/baton/topology"
)

// Host is what a task's processing needs from the runtime. Its methods
// are called on a worker goroutine (Produce's promise on the client's),
// and must not block on the loop.
type Host interface {
	// Produce sends a record the processing wrote, in the open commit.
	Produce(r *kgo.Record, promise func(*kgo.Record, error))
	// Fail stops the instance: nothing after err may be committed.
	Fail(err error)
	// PartitionsOf returns the partition count of a topic to send to.
	PartitionsOf(topic string) (int32, error)
	// GlobalStore returns the global store of that name, or nil.
	GlobalStore(name string) topology.Store
	// BadRecord applies the bad-record policy (decode errors) or the
	// processing-error policy (any other error of the record's
	// processors, panics included) to a record whose processing failed
	// with err: nil if processing goes on. It is not asked about a
	// record whose processing met a store or send failure (StoreFailed):
	// that stops the instance.
	BadRecord(t *Task, r *kgo.Record, err error) error
	// Processed counts n records a task processed.
	Processed(t *Task, n int)
	// FirstRecord tells of a task's first record since it was assigned.
	FirstRecord(t *Task, r *kgo.Record)
	// LateRecord counts a record a windowed aggregation dropped as late.
	LateRecord(t *Task, store string)
}

// Task is the runtime half of one task on this instance (its decisions
// are the instance core's).
type Task struct {
	ID      string
	Sub     topology.Subtopology
	Part    int32
	Stores  map[string]*taskstore.Store // open stores, by name
	Proc    topology.Processor
	Worker  int                        // the worker it is pinned to
	Ctx     *Context                   // its processor's context
	Offsets map[string]kgo.EpochOffset // input topic -> next offset to commit
	Active  bool                       // its processor exists
	Reading bool                       // the restore client reads its changelogs
	// failed is the first failure of the runtime's own (a store's read
	// or write, a send's target) during the record in process: no
	// error policy skips such a record (worker only).
	failed error

	// Handover figures.
	AssignedAt time.Time
	Replayed   int64       // records restored after becoming active
	First      bool        // first record processed since assigned
	LastRecord time.Time   // timestamp of the record in process, or of the last one
	In         *kgo.Record // the record in process
	// Boot, while not nil, is the bootstrap of the task's tables: its
	// other topics' records wait.
	Boot *TableBoot
	// Stamp is the event time of the record in process: what it sends
	// and writes carries it.
	Stamp  time.Time
	LastAt time.Time // when the last record was processed
	// Punctuated is when its timers last fired (loop only), for a
	// subtopology with timers.
	Punctuated time.Time

	Processed atomic.Int64
	// Waiting is how many polled records wait for the task's processor,
	// as the loop last counted them (after each poll and each turn).
	Waiting atomic.Int64
	// Busy is the time, in nanoseconds, workers spent on the task's
	// batches since the loop last took it (internal/load): written by
	// the worker, taken by the loop.
	Busy atomic.Int64
	// Restored counts changelog records restored into the stores while
	// the task was active here, over the life of this task (Replayed
	// restarts at each activation; this does not).
	Restored atomic.Int64
}

// TableBoot is a task's bootstrap of its tables (topology.TableFromTopic
// read along with other topics): until its table partitions are up to
// date, the records of its other topics wait. Its methods decide; the
// loop reads the ends and the positions, and says what time it is.
type TableBoot struct {
	Ends map[string]int64 // table topic -> its end at activation; nil: not read yet
	Gen  uint64           // which activation the read belongs to
	Last time.Time        // when the ends came, or the last table record was dispatched
	// Empty: the table topics whose partition a fetch returned without
	// records since the activation.
	Empty map[string]bool
}

// Ready reports whether the bootstrap is over at now. It is once the ends
// are read and, for each table partition, the task's position (pos) has
// reached its end, or none of its records waits to be processed (waiting)
// and either a fetch of it came back empty or no record of it has come
// for idle since the ends were read or its last record was dispatched.
// The end may be that of a transaction marker, or of a record compaction
// removed, which no record processed reaches.
func (b *TableBoot) Ready(pos func(topic string) int64, waiting func(topic string) bool, now time.Time, idle time.Duration) bool {
	if b.Ends == nil {
		return false
	}
	for topic, end := range b.Ends {
		if pos(topic) >= end {
			continue
		}
		if waiting(topic) || !b.Empty[topic] && now.Sub(b.Last) < idle {
			return false
		}
	}
	return true
}

// Split returns, of a task's records while it boots, those that may be
// processed now (its table topics' records: tables are the task's table
// topics) and those that wait, each in order. Table records dispatched
// after the ends were read count as news of their partitions (Last).
func (b *TableBoot) Split(recs []*kgo.Record, tables []string, now time.Time) (run, wait []*kgo.Record) {
	for _, r := range recs {
		if slices.Contains(tables, r.Topic) {
			run = append(run, r)
		} else {
			wait = append(wait, r)
		}
	}
	if len(run) > 0 && b.Ends != nil {
		b.Last = now
	}
	return run, wait
}

// Context is the topology.Context of a task.
type Context struct {
	host Host
	task *Task
}

// NewContext makes t's context, through which its processing reaches h.
func NewContext(h Host, t *Task) *Context { return &Context{host: h, task: t} }

func (c *Context) TaskID() string { return c.task.ID }

// LateRecord counts a record a windowed aggregation dropped as late.
func (c *Context) LateRecord(store string) { c.host.LateRecord(c.task, store) }

// SetTimestamp is called by the task with the record's event time (after
// its timestamp extractor): what it sends and writes carries that time.
func (c *Context) SetTimestamp(ts time.Time) { c.task.Stamp = ts }
func (c *Context) Partition() int32          { return c.task.Part }

// Store returns the task's store of that name, or else the global store.
func (c *Context) Store(name string) topology.Store {
	s, ok := c.task.Stores[name]
	if !ok {
		return c.host.GlobalStore(name) // nil if there is none
	}
	return &storeView{c: c, s: s}
}

func (c *Context) Send(topic string, key, value []byte) error {
	n, err := c.host.PartitionsOf(topic)
	if err != nil {
		return c.task.runtimeErr(err)
	}
	rec := &kgo.Record{Topic: topic, Partition: topology.Partition(key, n), Key: bytes.Clone(key), Value: bytes.Clone(value), Timestamp: c.task.Stamp}
	c.Produce(rec)
	return nil
}

// SendHeaders is Send with headers (topology.HeaderSender).
func (c *Context) SendHeaders(topic string, key, value []byte, headers topology.Headers) error {
	n, err := c.host.PartitionsOf(topic)
	if err != nil {
		return c.task.runtimeErr(err)
	}
	rec := &kgo.Record{Topic: topic, Partition: topology.Partition(key, n), Key: bytes.Clone(key), Value: bytes.Clone(value), Timestamp: c.task.Stamp,
		Headers: headersOut(headers)}
	c.Produce(rec)
	return nil
}

// headersIn are a fetched record's headers as the topology sees them
// (nil for none: most records have none, and cost nothing).
func headersIn(hs []kgo.RecordHeader) topology.Headers {
	if len(hs) == 0 {
		return nil
	}
	out := make(topology.Headers, len(hs))
	for i, h := range hs {
		out[i] = topology.Header{Key: h.Key, Value: h.Value}
	}
	return out
}

// headersOut copies headers into a record to produce.
func headersOut(hs topology.Headers) []kgo.RecordHeader {
	if len(hs) == 0 {
		return nil
	}
	out := make([]kgo.RecordHeader, len(hs))
	for i, h := range hs {
		out[i] = kgo.RecordHeader{Key: h.Key, Value: bytes.Clone(h.Value)}
	}
	return out
}

// Produce sends r in the open commit; if it fails, the instance fails:
// nothing after it may be committed.
func (c *Context) Produce(r *kgo.Record) {
	c.host.Produce(r, func(r *kgo.Record, err error) {
		if err != nil {
			c.host.Fail(fmt.Errorf("baton: producing to %s[%d]: %w", r.Topic, r.Partition, err))
		}
	})
}

// storeView is the topology.Store a processor uses: reads see the task's
// own pending writes; writes go to the changelog and stay pending until
// the commit applies them with the acknowledged offset.
type storeView struct {
	c *Context
	s *taskstore.Store
}

func (v *storeView) Get(key []byte) ([]byte, bool, error) {
	val, ok, err := v.s.Get(key)
	return val, ok, v.c.task.runtimeErr(err)
}

// Iterate merges the task's writes not yet applied with the store's data,
// in key order (taskstore.Store.Iterate). An error fn returns is the
// processor's own; one of the store's is the runtime's.
func (v *storeView) Iterate(start, end []byte, fn func(key, value []byte) error) error {
	var fnErr error
	err := v.s.Iterate(start, end, func(k, val []byte) error {
		fnErr = fn(k, val)
		return fnErr
	})
	if err != nil && (fnErr == nil || !errors.Is(err, fnErr)) {
		v.c.task.runtimeErr(err)
	}
	return err
}

// runtimeErr notes err, if any, as a failure of the runtime's own during
// the record in process (Task.failed), and returns it.
func (t *Task) runtimeErr(err error) error {
	if err != nil && t.failed == nil {
		t.failed = err
	}
	return err
}

func (v *storeView) Put(key, value []byte) error {
	if value == nil {
		value = []byte{}
	}
	return v.write(key, value)
}

func (v *storeView) Delete(key []byte) error { return v.write(key, nil) }

func (v *storeView) write(key, value []byte) error {
	k := bytes.Clone(key)
	if value != nil {
		value = append([]byte{}, value...) // an empty value stays a value, not a delete
	}
	s, t := v.s, v.c.task
	if s.Source {
		// The record in process is the changelog record: the store holds
		// it once its offset is committed.
		in := t.In
		if in == nil || in.Topic != s.Changelog {
			return fmt.Errorf("baton: task %s: store %s has its source topic %s as its changelog: it is written only while that topic's records are processed", t.ID, s.Name, s.Changelog)
		}
		s.Stage(string(k), taskstore.Write{Value: value}, in)
		s.Ack(in.Offset + 1)
		return nil
	}
	rec := &kgo.Record{Topic: s.Changelog, Partition: t.Part, Key: k, Value: value, Timestamp: t.Stamp}
	s.Stage(string(k), taskstore.Write{Value: value}, rec)
	v.c.host.Produce(rec, func(r *kgo.Record, err error) {
		if err != nil {
			v.c.host.Fail(fmt.Errorf("baton: task %s: changelog write to %s[%d]: %w", t.ID, r.Topic, r.Partition, err))
			return
		}
		s.Ack(r.Offset + 1)
	})
	return nil
}

// Worker runs batches of records for the tasks pinned to it, on its own
// goroutine (Run).
type Worker struct {
	ID int
	In chan []*Batch
	// Busy is the time, in nanoseconds, the worker spent processing, and
	// Records the records it processed meanwhile: records per busy second
	// is what the worker sustains when it never waits for input.
	// Written by the worker, read by the loop.
	Busy    atomic.Int64
	Records atomic.Int64

	busySeconds prometheus.Counter
}

// NewWorker makes worker id, which adds its busy time to busySeconds.
func NewWorker(id int, busySeconds prometheus.Counter) *Worker {
	return &Worker{ID: id, In: make(chan []*Batch), busySeconds: busySeconds}
}

// Batch is a task's records for one turn of its worker. The worker
// processes them in order, at least one if any, and stops after the one
// that ends past Deadline; N is how many it processed (written by the
// worker before Done). If Punctuate is set, the worker then punctuates
// the task's timers with that time.
type Batch struct {
	Task      *Task
	Recs      []*kgo.Record
	Punctuate time.Time
	Deadline  time.Time
	N         int
	Done      *sync.WaitGroup
	Err       *atomic.Pointer[error]
}

// Run runs the batches sent to the worker until In is closed.
func (w *Worker) Run() {
	for batches := range w.In {
		for _, b := range batches {
			start := time.Now()
			n, err := b.Task.Process(b.Recs, b.Deadline)
			if err == nil && !b.Punctuate.IsZero() {
				err = b.Task.Punctuate(b.Punctuate)
			}
			took := time.Since(start)
			b.N = n
			// Counted before Done: the loop reads both once the batch
			// is done, and sees them together.
			w.Busy.Add(int64(took))
			b.Task.Busy.Add(int64(took))
			w.Records.Add(int64(n))
			w.busySeconds.Add(took.Seconds())
			if err != nil {
				e := err
				b.Err.CompareAndSwap(nil, &e)
			}
			b.Done.Done()
		}
	}
}

// Process runs the task's records in order: at least one, and none after
// the one that ends past deadline. It returns how many it ran.
func (t *Task) Process(recs []*kgo.Record, deadline time.Time) (n int, err error) {
	h := t.Ctx.host
	// The clock is read every stride records, the stride set from the
	// records' cost so far so that a turn overruns its deadline by about
	// a quarter of what was left at the last reading: every record when
	// records are slow, up to every 64th when they take microseconds.
	start, check, stride := time.Now(), 1, 1
	defer func() {
		// The next offset of each topic is the last processed record's.
		done := map[string]bool{}
		for i := n - 1; i >= 0 && len(done) < len(t.Sub.Sources); i-- {
			r := recs[i]
			if !done[r.Topic] {
				done[r.Topic] = true
				t.Offsets[r.Topic] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
			}
		}
		t.Processed.Add(int64(n))
		if n > 0 {
			t.LastAt = time.Now()
		}
		h.Processed(t, n)
	}()
	for _, r := range recs {
		if n == check {
			now := time.Now()
			if now.After(deadline) {
				break
			}
			per := now.Sub(start) / time.Duration(n)
			stride = 64
			if per > 0 {
				stride = int(min(64, max(1, deadline.Sub(now)/(4*per))))
			}
			check = n + stride
		}
		rec := topology.Record{Key: r.Key, Value: r.Value, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp,
			Headers: headersIn(r.Headers)}
		t.LastRecord, t.Stamp, t.In, t.failed = r.Timestamp, r.Timestamp, r, nil
		perr := t.processOne(rec)
		t.In = nil
		if perr != nil {
			if t.failed != nil {
				return n, fmt.Errorf("baton: task %s: %w", t.ID, perr)
			}
			if err := h.BadRecord(t, r, perr); err != nil {
				return n, fmt.Errorf("baton: task %s: %w", t.ID, err)
			}
		}
		n++
		if !t.First {
			t.First = true
			h.FirstRecord(t, r)
		}
	}
	return n, nil
}

// ErrPanic is wrapped by the error of a record whose processing panicked
// (a user function or processor): the panic is recovered on the worker
// and the record goes to the processing-error policy like an error.
var ErrPanic = errors.New("baton: processing panicked")

// PanicError is a panic recovered while a record was processed, with the
// panicking goroutine's stack.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("%v: %v", ErrPanic, e.Value) }

// Unwrap makes errors.Is(err, ErrPanic) true, and reaches a panic value
// that is itself an error.
func (e *PanicError) Unwrap() []error {
	if err, ok := e.Value.(error); ok {
		return []error{ErrPanic, err}
	}
	return []error{ErrPanic}
}

// processOne processes one record, turning a panic into a *PanicError.
func (t *Task) processOne(rec topology.Record) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return t.Proc.Process(t.Ctx, rec)
}

// Punctuate fires the task's wall-clock timers due at now, on the worker
// that runs its records. What the timers write and send joins the task's
// uncommitted work, as a record's does.
func (t *Task) Punctuate(now time.Time) error {
	p, ok := t.Proc.(topology.Punctuator)
	if !ok {
		return nil
	}
	t.Stamp = now
	if err := punctuate(p, t.Ctx, now); err != nil {
		return fmt.Errorf("baton: task %s: %w", t.ID, err)
	}
	return nil
}

// punctuate fires p's timers, turning a panic into a *PanicError: a
// timer's failure stops the instance with an error, not the process.
func punctuate(p topology.Punctuator, ctx topology.Context, now time.Time) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return p.Punctuate(ctx, now)
}

package baton

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/taskstore"
	"github.com/baton-streams/baton/topology"
)

// task is the runtime half of one task on this instance (its decisions
// are the instance core's). The loop owns it; while a batch of its records
// is being processed, the worker it is pinned to owns the processing
// fields (proc, stores' pending writes, offsets).
type task struct {
	id      string
	sub     topology.Subtopology
	part    int32
	stores  map[string]*taskstore.Store // open stores, by name
	proc    topology.Processor
	worker  int
	ctx     *taskContext
	offsets map[string]kgo.EpochOffset // input topic -> next offset to commit
	active  bool                       // its processor exists
	reading bool                       // the restore client reads its changelogs

	// Handover figures.
	assignedAt time.Time
	replayed   int64       // records restored after becoming active
	first      bool        // first record processed since assigned
	lastRecord time.Time   // timestamp of the record in process, or of the last one
	in         *kgo.Record // the record in process
	// boot, while not nil, is the bootstrap of the task's tables: its
	// other topics' records wait (tables.go).
	boot *tableBoot
	// stamp is the event time of the record in process: what it sends
	// and writes carries it.
	stamp  time.Time
	lastAt time.Time // when the last record was processed
	// punctuated is when its timers were last punctuated (loop only),
	// for a subtopology with timers.
	punctuated time.Time

	processed atomic.Int64
	// restored counts changelog records restored into the stores while
	// the task was active here, over the life of this task (replayed
	// restarts at each activation; this does not).
	restored atomic.Int64
}

// taskContext is the topology.Context of a task.
type taskContext struct {
	a *App
	t *task
}

func (c *taskContext) TaskID() string { return c.t.id }

// LateRecord counts a record a windowed aggregation dropped as late.
func (c *taskContext) LateRecord(store string) {
	c.a.metrics.Late.WithLabelValues(c.t.id, store).Inc()
}

// SetTimestamp is called by the task with the record's event time (after
// its timestamp extractor): what it sends and writes carries that time.
func (c *taskContext) SetTimestamp(ts time.Time) { c.t.stamp = ts }
func (c *taskContext) Partition() int32          { return c.t.part }
func (c *taskContext) Store(name string) topology.Store {
	s, ok := c.t.stores[name]
	if !ok {
		return c.a.globals.Store(name) // nil if there is none
	}
	return &storeView{c: c, s: s}
}

func (c *taskContext) Send(topic string, key, value []byte) error {
	n, err := c.a.partitionsOf(topic)
	if err != nil {
		return err
	}
	rec := &kgo.Record{Topic: topic, Partition: topology.Partition(key, n), Key: clone(key), Value: clone(value), Timestamp: c.t.stamp}
	c.a.produce(rec, c.a.produced)
	return nil
}

// produced fails the App when a produce fails: nothing after it may be
// committed.
func (a *App) produced(r *kgo.Record, err error) {
	if err != nil {
		a.fail(fmt.Errorf("baton: producing to %s[%d]: %w", r.Topic, r.Partition, err))
	}
}

// storeView is the topology.Store a processor uses: reads see the task's
// own pending writes; writes go to the changelog and stay pending until
// the commit applies them with the acknowledged offset.
type storeView struct {
	c *taskContext
	s *taskstore.Store
}

func (v *storeView) Get(key []byte) ([]byte, bool, error) { return v.s.Get(key) }

// Iterate merges the task's writes not yet applied with the store's data,
// in key order (taskstore.Store.Iterate).
func (v *storeView) Iterate(start, end []byte, fn func(key, value []byte) error) error {
	return v.s.Iterate(start, end, fn)
}

func (v *storeView) Put(key, value []byte) error {
	if value == nil {
		value = []byte{}
	}
	return v.write(key, value)
}

func (v *storeView) Delete(key []byte) error { return v.write(key, nil) }

func (v *storeView) write(key, value []byte) error {
	k := clone(key)
	if value != nil {
		value = append([]byte{}, value...) // an empty value stays a value, not a delete
	}
	s := v.s
	if s.Source {
		// The record in process is the changelog record: the store holds
		// it once its offset is committed.
		in := v.c.t.in
		if in == nil || in.Topic != s.Changelog {
			return fmt.Errorf("baton: task %s: store %s has its source topic %s as its changelog: it is written only while that topic's records are processed", v.c.t.id, s.Name, s.Changelog)
		}
		s.Stage(string(k), taskstore.Write{Value: value}, in)
		s.Ack(in.Offset + 1)
		return nil
	}
	rec := &kgo.Record{Topic: s.Changelog, Partition: v.c.t.part, Key: k, Value: value, Timestamp: v.c.t.stamp}
	s.Stage(string(k), taskstore.Write{Value: value}, rec)
	v.c.a.produce(rec, func(r *kgo.Record, err error) {
		if err != nil {
			v.c.a.fail(fmt.Errorf("baton: task %s: changelog write to %s[%d]: %w", v.c.t.id, r.Topic, r.Partition, err))
			return
		}
		s.Ack(r.Offset + 1)
	})
	return nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

// worker runs batches of records for the tasks pinned to it.
type worker struct {
	id int
	in chan []*batch
	// busy is the time, in nanoseconds, the worker spent processing, and
	// records the records it processed meanwhile: records per busy second
	// is what the worker sustains when it never waits for input.
	// Written by the worker, read by the loop.
	busy    atomic.Int64
	records atomic.Int64
}

// batch is a task's records for one turn of its worker. The worker
// processes them in order, at least one if any, and stops after the one
// that ends past deadline; n is how many it processed (written by the
// worker before done). If punctuate is set, the worker then punctuates
// the task's timers with that time.
type batch struct {
	t         *task
	recs      []*kgo.Record
	punctuate time.Time
	deadline  time.Time
	n         int
	done      *sync.WaitGroup
	err       *atomic.Pointer[error]
}

func (a *App) startWorkers() {
	a.workers = make([]*worker, a.cfg.workers)
	for i := range a.workers {
		w := &worker{id: i, in: make(chan []*batch)}
		a.workers[i] = w
		a.workersRunning.Go(func() { w.run(a) })
	}
}

// stopWorkers ends the workers and waits for them: a worker finishes the
// turn it is in (bounded by the turn's deadline) and takes no other.
func (a *App) stopWorkers() {
	for _, w := range a.workers {
		close(w.in)
	}
	a.workersRunning.Wait()
}

func (w *worker) run(a *App) {
	busy := a.metrics.WorkerBusy.WithLabelValues(strconv.Itoa(w.id))
	for batches := range w.in {
		for _, b := range batches {
			start := time.Now()
			n, err := a.process(b.t, b.recs, b.deadline)
			if err == nil && !b.punctuate.IsZero() {
				err = a.punctuate(b.t, b.punctuate)
			}
			took := time.Since(start)
			b.n = n
			// Counted before done: the loop reads both once the batch
			// is done, and sees them together.
			w.busy.Add(int64(took))
			w.records.Add(int64(n))
			busy.Add(took.Seconds())
			if err != nil {
				e := err
				b.err.CompareAndSwap(nil, &e)
			}
			b.done.Done()
		}
	}
}

// process runs a task's records in order: at least one, and none after
// the one that ends past deadline. It returns how many it ran.
func (a *App) process(t *task, recs []*kgo.Record, deadline time.Time) (n int, err error) {
	// The clock is read every stride records, the stride set from the
	// records' cost so far so that a turn overruns its deadline by about
	// a quarter of what was left at the last reading: every record when
	// records are slow, up to every 64th when they take microseconds.
	start, check, stride := time.Now(), 1, 1
	defer func() {
		// The next offset of each topic is the last processed record's.
		done := map[string]bool{}
		for i := n - 1; i >= 0 && len(done) < len(t.sub.Sources); i-- {
			r := recs[i]
			if !done[r.Topic] {
				done[r.Topic] = true
				t.offsets[r.Topic] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
			}
		}
		t.processed.Add(int64(n))
		if n > 0 {
			t.lastAt = time.Now()
			if txn, ok := a.commit.(*transactional); ok {
				txn.processed.Add(int64(n))
			}
		}
		a.metrics.Processed.WithLabelValues(t.id).Add(float64(n))
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
		rec := topology.Record{Key: r.Key, Value: r.Value, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp}
		t.lastRecord, t.stamp, t.in = r.Timestamp, r.Timestamp, r
		perr := t.proc.Process(t.ctx, rec)
		t.in = nil
		if perr != nil {
			if err := a.badRecord(t, r, perr); err != nil {
				return n, fmt.Errorf("baton: task %s: %w", t.id, err)
			}
		}
		n++
		if !t.first {
			t.first = true
			a.emit(Event{Kind: EventFirstRecord, Task: t.id, Record: r.Timestamp})
			a.metrics.Handover.Observe(time.Since(t.assignedAt).Seconds())
		}
	}
	return n, nil
}

// punctuateEvery is how often the runtime punctuates the timers of each
// active task with timers: the wall-clock timers fire that late at most
// (plus a turn).
const punctuateEvery = 100 * time.Millisecond

// punctuate fires the task's wall-clock timers due at now, on the worker
// that runs its records. What the timers write and send joins the task's
// uncommitted work, as a record's does.
func (a *App) punctuate(t *task, now time.Time) error {
	p, ok := t.proc.(topology.Punctuator)
	if !ok {
		return nil
	}
	t.stamp = now
	if err := p.Punctuate(t.ctx, now); err != nil {
		return fmt.Errorf("baton: task %s: %w", t.id, err)
	}
	return nil
}

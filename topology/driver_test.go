package topology

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// driver runs a Topology in memory the way the runtime does with one
// instance: one Processor per task, records partitioned by Partition,
// every Send appended to its topic's log and, if a subtopology reads that
// topic, processed by the task of its partition. It scribbles over each
// input record's buffers after Process returns, as a runtime reusing them
// would, so a processor that keeps them without copying fails the tests.
type driver struct {
	t      testing.TB
	topo   *Topology
	parts  map[string]int32       // partition count per topic
	reader map[string]Subtopology // topic -> the subtopology reading it
	tasks  map[string]Processor
	stores map[string]map[string]*MemStore // task -> store name -> store
	logs   map[string][][]Record           // topic -> partition -> records
	queue  []Record                        // produced, not yet processed
	late   map[string]int                  // late records counted, by store
}

// newDriver makes a driver. parts gives the partition count of the input
// and output topics; a repartition topic not in parts gets the count of
// the subtopology writing it, as the runtime will create it.
func newDriver(t testing.TB, topo *Topology, parts map[string]int32) *driver {
	d := &driver{t: t, topo: topo, parts: map[string]int32{}, reader: map[string]Subtopology{},
		tasks: map[string]Processor{}, stores: map[string]map[string]*MemStore{}, logs: map[string][][]Record{}, late: map[string]int{}}
	for k, v := range parts {
		d.parts[k] = v
	}
	for _, s := range topo.Subtopologies() { // writers have lower IDs
		n, err := s.CheckPartitions(d.parts)
		if err != nil {
			t.Fatalf("driver: %v", err)
		}
		for _, topic := range s.Sources {
			d.reader[topic] = s
		}
		for _, topic := range s.Repartition {
			if _, ok := d.parts[topic]; !ok {
				d.parts[topic] = n
			}
		}
	}
	return d
}

// input appends a record to partition p of topic and queues it.
func (d *driver) input(topic string, p int32, key, value []byte) {
	d.t.Helper()
	d.inputAt(topic, p, key, value, time.Time{})
}

// inputAt is input with the record's timestamp.
func (d *driver) inputAt(topic string, p int32, key, value []byte, ts time.Time) {
	d.t.Helper()
	d.inputWith(topic, p, key, value, ts, nil)
}

// inputWith is inputAt with the record's headers.
func (d *driver) inputWith(topic string, p int32, key, value []byte, ts time.Time, headers Headers) {
	d.t.Helper()
	if p < 0 || p >= d.parts[topic] {
		d.t.Fatalf("driver: %s has no partition %d", topic, p)
	}
	for len(d.logs[topic]) < int(d.parts[topic]) {
		d.logs[topic] = append(d.logs[topic], nil)
	}
	rec := Record{Key: bytes.Clone(key), Value: bytes.Clone(value), Topic: topic, Partition: p,
		Offset: int64(len(d.logs[topic][p])), Timestamp: ts, Headers: headers}
	d.logs[topic][p] = append(d.logs[topic][p], rec)
	if _, ok := d.reader[topic]; ok {
		d.queue = append(d.queue, rec)
	}
}

// run processes queued records, and the records they produce, until none
// is left or one fails.
func (d *driver) run() error {
	for len(d.queue) > 0 {
		rec := d.queue[0]
		d.queue = d.queue[1:]
		s := d.reader[rec.Topic]
		id := s.TaskID(rec.Partition)
		proc := d.tasks[id]
		if proc == nil {
			proc = s.NewProcessor(id, rec.Partition)
			d.tasks[id] = proc
			d.stores[id] = map[string]*MemStore{}
			for _, spec := range s.Stores {
				d.stores[id][spec.Name] = &MemStore{}
			}
		}
		in := rec
		in.Key, in.Value = bytes.Clone(rec.Key), bytes.Clone(rec.Value)
		err := proc.Process(&driverCtx{d: d, task: id, partition: rec.Partition, ts: rec.Timestamp}, in)
		scribble(in.Key)
		scribble(in.Value)
		if err != nil {
			return err
		}
	}
	return nil
}

func scribble(b []byte) {
	for i := range b {
		b[i] = '#'
	}
}

// store returns a task's store, or nil.
func (d *driver) store(task, name string) *MemStore { return d.stores[task][name] }

// records returns partition p of topic.
func (d *driver) records(topic string, p int32) []Record {
	if int(p) >= len(d.logs[topic]) {
		return nil
	}
	return d.logs[topic][p]
}

// outputs returns every record of topic as "key=value", by partition.
func outputs(d *driver, topic string) map[int32][]string {
	got := map[int32][]string{}
	for p := range d.parts[topic] {
		for _, r := range d.records(topic, p) {
			got[p] = append(got[p], string(r.Key)+"="+string(r.Value))
		}
	}
	return got
}

// expect adds "key=value" to want, in the partition of key among n.
func expect(want map[int32][]string, n int32, key, value string) {
	p := Partition([]byte(key), n)
	want[p] = append(want[p], key+"="+value)
}

type driverCtx struct {
	d         *driver
	task      string
	partition int32
	ts        time.Time // what Send stamps records with: the event time of the record in process
}

// SetTimestamp is told the event time of the record in process.
func (c *driverCtx) SetTimestamp(ts time.Time) { c.ts = ts }

// LateRecord counts a late record in the driver.
func (c *driverCtx) LateRecord(store string) { c.d.late[store]++ }

func (c *driverCtx) TaskID() string   { return c.task }
func (c *driverCtx) Partition() int32 { return c.partition }

func (c *driverCtx) Store(name string) Store {
	if s := c.d.stores[c.task][name]; s != nil {
		return s
	}
	return nil // not a typed nil *MemStore
}

func (c *driverCtx) Send(topic string, key, value []byte) error {
	n, ok := c.d.parts[topic]
	if !ok {
		return fmt.Errorf("driver: unknown topic %q", topic)
	}
	c.d.inputAt(topic, Partition(key, n), key, value, c.ts)
	return nil
}

// SendHeaders is Send with headers (HeaderSender).
func (c *driverCtx) SendHeaders(topic string, key, value []byte, headers Headers) error {
	n, ok := c.d.parts[topic]
	if !ok {
		return fmt.Errorf("driver: unknown topic %q", topic)
	}
	c.d.inputWith(topic, Partition(key, n), key, value, c.ts, headers)
	return nil
}

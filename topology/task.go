package topology

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Record is one record flowing through a task.
//
// Key and Value belong to the runtime: they are valid only while the
// Process call that received them runs, because the runtime may reuse their
// buffers afterwards. A processor copies (bytes.Clone) what it keeps.
type Record struct {
	Key, Value []byte
	Topic      string // source topic (set by the runtime on input)
	Partition  int32
	Offset     int64
	Timestamp  time.Time
	// Headers are the input record's headers, carried to every record
	// sent while it is processed (see Headers). They belong to the
	// runtime like Key and Value: change them with Headers.With and
	// Headers.Without, which copy, never in place.
	Headers Headers
}

// Header is one record header: a key and a value, as Kafka carries them.
// A key may appear more than once.
type Header struct {
	Key   string
	Value []byte
}

// Headers are a record's headers, in order.
//
// Headers travel with a record through the topology: each record a sink
// sends (an output topic or a repartition topic) carries the headers of
// the record it was made from, so an input record's headers reach the
// outputs derived from it, through repartitions too. A processor changes
// them on the record it forwards (Record.Headers = rec.Headers.With(...)),
// and the DSL with SetHeaders. Stores and their changelogs keep no
// headers: an aggregation's output carries the headers of the record that
// updated it last, a join's those of the record that triggered it, and a
// record sent from a timer none. Tests' fake Contexts that do not
// implement HeaderSender drop them.
type Headers []Header

// Get returns the value of the last header with key, and whether there
// is one.
func (h Headers) Get(key string) ([]byte, bool) {
	for i := len(h) - 1; i >= 0; i-- {
		if h[i].Key == key {
			return h[i].Value, true
		}
	}
	return nil, false
}

// With returns a copy of h with key set to value: every header with key
// is replaced by one at the end. h is not modified.
func (h Headers) With(key string, value []byte) Headers {
	out := make(Headers, 0, len(h)+1)
	for _, x := range h {
		if x.Key != key {
			out = append(out, x)
		}
	}
	return append(out, Header{Key: key, Value: value})
}

// Without returns a copy of h without the headers with key (nil when
// none is left). h is not modified.
func (h Headers) Without(key string) Headers {
	var out Headers
	for _, x := range h {
		if x.Key != key {
			out = append(out, x)
		}
	}
	return out
}

// HeaderSender is a Context that sends records with headers. The
// runtime's Context is one; the topology's sinks use it when the Context
// they are given has it, and Send otherwise.
type HeaderSender interface {
	SendHeaders(topic string, key, value []byte, headers Headers) error
}

// send sends a record with headers through ctx, which drops them if it
// is not a HeaderSender.
func send(ctx Context, topic string, key, value []byte, headers Headers) error {
	if hs, ok := ctx.(HeaderSender); ok && len(headers) > 0 {
		return hs.SendHeaders(topic, key, value, headers)
	}
	return ctx.Send(topic, key, value)
}

// Store is a task's local key-value store as processors see it. The runtime
// implements it (buffered writes + changelog); tests can use MemStore.
//
// Put and Delete do not retain their arguments (an implementation copies
// what it keeps), so callers may reuse them. The value returned by Get may
// share memory with the store: it is valid until the next Put or Delete on
// the same store, and the caller must not modify it. A missing key is
// (nil, false, nil); an error means the store failed, not that the key is
// absent.
//
// Iterate calls fn for each key in [start, end) in ascending byte order,
// with the task's own writes included; a nil start or end leaves that side
// unbounded. It sees the store as it was when Iterate began: fn may Put and
// Delete (for example to expire what it visits) without changing what the
// iteration visits. key and value are valid only until fn returns. An
// error from fn stops the iteration and is returned as is.
type Store interface {
	Get(key []byte) (value []byte, ok bool, err error)
	Put(key, value []byte) error
	Delete(key []byte) error
	Iterate(start, end []byte, fn func(key, value []byte) error) error
}

// Context is what the runtime gives a task's processors while it processes
// one record. It is valid only during that Process call.
type Context interface {
	TaskID() string // e.g. "1_3"
	Partition() int32
	// Store returns the task's store with this name; nil if the
	// subtopology has none of that name.
	Store(name string) Store
	// Send produces a record to topic (a sink or repartition topic); the
	// runtime partitions it by key with Kafka's default murmur2 partitioner
	// (see Partition), so kcat and Java clients agree. Send does not retain
	// key or value after it returns (the runtime copies what it keeps).
	// The record carries the timestamp of the input record in process, as
	// in Kafka Streams, so latency can be read off any output.
	Send(topic string, key, value []byte) error
}

// Processor handles the records of one task. A new one is made per task
// (Subtopology.NewProcessor), so processors may keep per-task fields; the
// runtime calls it from one goroutine.
type Processor interface {
	Process(ctx Context, rec Record) error
}

// Topology is a built, immutable application graph split into
// subtopologies. It is safe to use from many goroutines.
type Topology struct {
	appID string
	subs  []Subtopology
	desc  string
	// globals are the global stores (FromGlobalTopic), apart from every
	// subtopology.
	globals []GlobalStoreSpec
}

// AppID returns the application id the topology was built for; internal
// topic names are derived from it.
func (t *Topology) AppID() string { return t.appID }

// Subtopologies returns the subtopologies in ascending ID order, IDs
// 0..n-1. A subtopology's ID is lower than the IDs of the subtopologies
// reading the topics it writes. The returned slice is a copy; the slices
// inside it are shared and must not be modified.
func (t *Topology) Subtopologies() []Subtopology {
	return append([]Subtopology(nil), t.subs...)
}

// String returns a human-readable description: every subtopology with its
// topics, stores and nodes.
func (t *Topology) String() string { return t.desc }

// Subtopology is a connected part of a topology. It runs as one task per
// partition of its sources: task "<ID>_<p>" reads partition p of each
// source topic.
type Subtopology struct {
	ID      int
	Sources []string // topic names read; all co-partitioned; task ID_p reads partition p of each
	Sinks   []string // topics written (output topics and repartition topics)
	// Repartition is the subset of Sources+Sinks that are internal
	// repartition topics the runtime must create
	// ("<app-id>-<name>-repartition").
	Repartition []string
	// Stores are the subtopology's stores; it is stateful iff
	// len(Stores) > 0.
	Stores []StoreSpec
	// Timers: a node of the subtopology has timers (Builder.AddTimers).
	// Its processors then implement Punctuator, which the runtime calls
	// for each active task from time to time to fire wall-clock timers.
	Timers bool
	// Processors are the names of its Processor-API nodes
	// (Builder.AddProcessor), sorted: the nodes a record's processing
	// error can be attributed to (ProcessError.Node) for a policy of its
	// own.
	Processors []string
	// NewProcessor makes the processor of one task. It is safe to call
	// from many goroutines; each processor it returns is used by one.
	NewProcessor func(taskID string, partition int32) Processor
}

// Stateful reports whether the subtopology's tasks have stores.
func (s Subtopology) Stateful() bool { return len(s.Stores) > 0 }

// TaskID returns the id of this subtopology's task for partition p.
func (s Subtopology) TaskID(p int32) string { return TaskID(s.ID, p) }

// CheckPartitions checks that the subtopology's source topics are
// co-partitioned, given each topic's partition count (which only the
// runtime knows), and returns that common count: the number of tasks. A
// missing or non-positive count, or counts that differ, give an error
// wrapping ErrInvalid that names the topics.
func (s Subtopology) CheckPartitions(partitions map[string]int32) (int32, error) {
	var n int32
	for i, topic := range s.Sources {
		c, ok := partitions[topic]
		if !ok || c <= 0 {
			return 0, fmt.Errorf("%w: subtopology %d: no partition count for source topic %q", ErrInvalid, s.ID, topic)
		}
		if i == 0 {
			n = c
			continue
		}
		if c != n {
			return 0, fmt.Errorf("%w: subtopology %d: source topics are not co-partitioned: %q has %d partitions, %q has %d",
				ErrInvalid, s.ID, s.Sources[0], n, topic, c)
		}
	}
	return n, nil
}

// StoreSpec describes one store of a subtopology.
type StoreSpec struct {
	Name      string // e.g. "counts"; changelog topic is ChangelogTopic(appID, Name)
	Changelog string // "<app-id>-<name>-changelog", or the source topic of a table
	// Source: the changelog is a topic the subtopology reads (a table's
	// topic, TableFromTopic). The runtime neither creates nor writes it:
	// the store is written only while its task processes that topic's
	// records, with each record's key and value as they are on the topic,
	// and its checkpoint is the input offset.
	Source bool
	// Kind is how the store's keys are laid out, for reads from outside
	// the topology (queries).
	Kind StoreKind
}

// StoreKind is the layout of a store's keys.
type StoreKind string

const (
	// KeyValueStore: one entry per key, under the key's encoding (the
	// stores of aggregations and tables, and the Processor API's).
	KeyValueStore StoreKind = "key-value"
	// WindowStore: one entry per key and window, under
	// WindowStoreKey(start, key) (WindowCount, WindowAggregate,
	// WindowReduce).
	WindowStore StoreKind = "window"
	// SessionStore: one entry per key and session, in the layout
	// SessionWindows describes (SessionCount, SessionAggregate,
	// SessionReduce).
	SessionStore StoreKind = "session"
	// InternalStore: state the runtime keeps for an operator (a
	// stream-stream join's buffers, Suppress's buffer, timers), not a
	// view of the application's data.
	InternalStore StoreKind = "internal"
)

// ChangelogTopic returns the name of the changelog topic of store in
// application appID: "<app-id>-<store>-changelog".
func ChangelogTopic(appID, store string) string { return appID + "-" + store + "-changelog" }

// RepartitionTopic returns the name of the internal repartition topic name
// of application appID: "<app-id>-<name>-repartition".
func RepartitionTopic(appID, name string) string { return appID + "-" + name + "-repartition" }

// TaskID returns the id of the task of subtopology sub for partition p:
// "<sub>_<p>".
func TaskID(sub int, p int32) string {
	return strconv.Itoa(sub) + "_" + strconv.FormatInt(int64(p), 10)
}

// ParseTaskID splits a task id made by TaskID. A malformed id gives an
// error wrapping ErrInvalid.
func ParseTaskID(id string) (sub int, p int32, err error) {
	a, b, ok := strings.Cut(id, "_")
	if ok {
		var s, q int64
		s, err = strconv.ParseInt(a, 10, 32)
		if err == nil {
			q, err = strconv.ParseInt(b, 10, 32)
		}
		if err == nil && s >= 0 && q >= 0 {
			return int(s), int32(q), nil
		}
	}
	return 0, 0, fmt.Errorf("%w: task id %q (want <subtopology>_<partition>)", ErrInvalid, id)
}

// Errors returned by the package; match them with errors.Is.
var (
	// ErrInvalid is wrapped by every error about a topology that cannot be
	// built or run as described: unknown parents, duplicate names, cycles,
	// bad topic names, partition counts that do not match.
	ErrInvalid = errors.New("topology: invalid topology")
	// ErrDecode is wrapped when a codec cannot decode a record's key or
	// value, or a stored value. The error from Process also names the
	// task, topic, partition and offset of the input record.
	ErrDecode = errors.New("topology: cannot decode")
	// ErrUnknownTopic is returned by a task's Process for a record from a
	// topic its subtopology does not read.
	ErrUnknownTopic = errors.New("topology: record from a topic the subtopology does not read")
)

// ProcessError is the error a task's Process returns when a node fails: it
// says which input record (task, topic, partition, offset) and which node.
type ProcessError struct {
	TaskID    string
	Topic     string
	Partition int32
	Offset    int64
	Node      string // the node that failed; "" if the record reached none
	Err       error
}

func (e *ProcessError) Error() string {
	s := fmt.Sprintf("topology: task %s: record %s[%d]@%d", e.TaskID, e.Topic, e.Partition, e.Offset)
	if e.Node != "" {
		s += fmt.Sprintf(": node %q", e.Node)
	}
	return s + ": " + e.Err.Error()
}

func (e *ProcessError) Unwrap() error { return e.Err }

// Package topology describes what a baton application computes: a graph of
// sources, processors, stores and sinks, split into subtopologies that the
// runtime runs as tasks. It is pure: no Kafka, no goroutines, no I/O, no
// clock. The runtime (package baton) consumes it through Topology,
// Subtopology, Processor, Context and Store; users build topologies with
// the Processor API (Builder) or the typed DSL (FromTopic and friends).
//
// # Building
//
// A Builder collects nodes and stores; Build checks the graph and splits it
// into subtopologies, the connected components of parent links and store
// connections. Topics are the only links between subtopologies: a topic
// written by one and read by another is a boundary (a repartition topic,
// or any user topic). IDs run 0..n-1 along the flow of data, ties broken
// by the order nodes were added, so the same code gives the same IDs and
// task ids on every instance. Every mistake Build finds is reported at
// once, each wrapping ErrInvalid: unknown or repeated parents, duplicate
// names, cycles (in the node graph, a subtopology reading what it writes,
// or subtopologies feeding each other through topics), stores connected to
// nothing, invalid app ids and topic names (Kafka's rules), repartition
// topics not both written and read.
//
// The builder cannot know partition counts. The runtime must check, with
// Subtopology.CheckPartitions, that the sources of each subtopology have
// the same count (they are co-partitioned), and create each repartition
// topic with the count of the subtopology writing it.
//
// The DSL (Stream, Grouped, Table) builds the same kind of graph with typed
// values between nodes: records are decoded once at a source and encoded
// once at a sink (To, or the repartition of GroupBy/GroupByKey), with a
// Codec. GroupBy always repartitions; GroupByKey only if the key may have
// changed since the source (Map, FlatMap). Aggregations (Count, Aggregate,
// Reduce) keep one value per encoded key in a store and emit every update.
//
// # Time and windows
//
// Every record has an event time: its Kafka timestamp (the producer's
// create time, or the broker's append time on a topic configured so), or
// what a TimestampExtractor set with Builder.SetTimestampExtractor returns
// for its topic (ValueTimestamp reads it from the decoded key and value).
// It replaces Record.Timestamp before the first node sees the record, and
// what the task sends while processing the record carries it.
//
// A task's stream time is the largest event time it has processed; it
// never goes back, so a record older than it is out of order. Processor-
// API nodes read it with NodeContext.StreamTime.
//
// Windowed aggregations (WindowedBy, then WindowCount, WindowAggregate or
// WindowReduce) group a key's records by event-time window: tumbling
// (TumblingWindows, each record in one window) or hopping
// (HoppingWindows, each record in size/advance of them), aligned to the
// Unix epoch. Each update of a window is sent on at once, keyed by
// Windowed (the key and the window; WindowedCodec writes it as Kafka
// Streams does). The windowed store keeps its own stream time, in the
// store itself, so it moves with the store: a learner or standby that
// restores the store restores its stream time with it, and a new owner
// closes windows exactly when the old one would have. A window closes
// when the stream time reaches its end plus the grace period; a record all
// of whose windows are closed is dropped as late and counted (the
// runtime's baton_late_records_total). Windows are deleted once the
// stream time is past their start by the retention (default size plus
// grace), with a tombstone in the store's compacted changelog.
//
// # Global tables
//
// A global table (FromGlobalTopic) is a topic held whole by every
// instance, for small reference data: every partition of it, in a local
// global store keyed by each record's key bytes, holding its value bytes;
// a record with a nil value deletes its key. The topic is the store's
// changelog (baton writes none of its own), so it should be compacted. A stream
// joins it with JoinGlobal (a pair whose looked-up key is absent is
// dropped) or LeftJoinGlobal (every pair is kept), looking an entry up by
// a key computed from each pair: nothing is repartitioned, and any stream
// can join any global table. Global stores belong to no subtopology and
// connect none (Topology.GlobalStores lists them). The runtime fills
// each one from its topic before processing anything, then keeps reading
// the topic and applying its records while it runs, so a lookup sees the
// table as this instance has read it so far: an update reaches every
// instance, each at its own pace, and a join is not ordered with the
// table's updates as a join of co-partitioned topics would be. Nodes
// read the store through Context.Store under its name; it is read-only
// (Put and Delete fail). With the Processor API, Builder.AddGlobalStore
// adds one, and every processor node may read it.
//
// # Lifecycle and threading
//
// For each task "<subtopology>_<partition>" it runs, the runtime calls
// Subtopology.NewProcessor once, then Process for each record of the
// task's partitions, in offset order per partition, from one goroutine at
// a time; a Processor is never shared between tasks, so it may keep
// per-task fields without locks. NewProcessor itself may be called from
// any goroutine. When a task moves away, the runtime drops its Processor;
// when it comes back, it makes a new one (state lives in stores, not in
// processors). The Topology is immutable once built.
//
// During Process the processor may use ctx: Store for the task's stores
// (which the runtime restores from their changelog topics before the first
// record) and Send for output. If Process returns an error the runtime
// stops the task: the record is not committed. Errors from the package's
// own nodes are *ProcessError values naming the task, the input record's
// topic, partition and offset, and the node; a record whose key or value
// does not decode gives one wrapping ErrDecode, never a panic.
//
// # Ownership of byte slices
//
//   - Record.Key and Record.Value belong to the runtime and are valid only
//     until Process returns: the runtime may reuse their buffers. Copy what
//     you keep (DSL codecs do: String and Bytes copy).
//   - Store.Put and Store.Delete, and Context.Send, do not retain their
//     arguments after they return: the implementation copies what it
//     keeps, so callers may reuse their slices.
//   - A value returned by Store.Get is valid until the next Put or Delete
//     on that store and must not be modified.
//
// # Partitioning
//
// Partition is Kafka's default partitioner for keyed records (murmur2), so
// records baton sends land where a Java or kcat producer would put them,
// and a topic produced by any of them can be read as already partitioned
// by key.
package topology

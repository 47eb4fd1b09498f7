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
// topics not both written and read, timers given to an unknown node or to
// a node that cannot have them (see AddTimers).
//
// The builder cannot know partition counts. The runtime must check, with
// Subtopology.CheckPartitions, that the sources of each subtopology have
// the same count (they are co-partitioned), and create each repartition
// topic with the count of the subtopology writing it.
//
// The DSL (Stream, Grouped, Table) builds the same kind of graph with typed
// values between nodes: records are decoded once at a source and encoded
// once at a sink (To, or the repartition of GroupBy/GroupByKey), with a
// Codec. Stateless operations go record by record: Map, MapValues,
// SelectKey, Filter, FlatMap, FlatMapValues and Foreach (also named
// Peek). Split sends each record to the first of its branches whose
// predicate accepts it, or to its default branch, and Merge makes one
// stream of several; merged streams share a subtopology, so their topics
// must be co-partitioned. GroupBy always repartitions; GroupByKey only if
// the key may have changed since the source (Map, FlatMap, SelectKey, a
// Merge of such). Aggregations (Count, Aggregate, Reduce) keep one value
// per encoded key in a store and emit every update.
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
// Session windows (SessionWindowedBy with InactivityGap, then
// SessionCount, SessionAggregate or SessionReduce) group a key's records
// into sessions of activity: records at most the gap apart are one
// session, [Start, End] from its first record's time to its last's. A
// record within the gap of a session extends it; one within the gap of
// two merges them (SessionAggregate's merge function combines their
// aggregates): the sessions it replaces are deleted, sent on as deletes
// (tombstones through ToTopic) before the new session's value. A session
// closes once the stream time is past its End by more than the gap plus
// the grace period; a record is late, dropped and counted, if it is more
// than the grace behind the stream time and not within an open session
// or the gap after one, so that a closed session never changes. Sessions
// are deleted once the stream time is past their End by more than the
// retention (default gap plus grace). The session store keeps its stream
// time and sessions under keys of its own (see SessionWindows); results
// are keyed by Windowed, written by SessionWindowedCodec as Kafka Streams
// writes session keys.
//
// Every update of a window is sent on by default. SuppressUntilWindowCloses
// sends only each window's final value, once, when the window closes,
// holding the latest value of each open window in a store of its own
// with a changelog: it moves with the task, and under exactly-once each
// closed window is sent exactly once.
// Sessions, the application `baton run sessions` runs, puts them
// together: clicks regrouped by user, counted per session, each session
// written once when it closes.
//
// Kafka Streams' sliding windows (a window per record, ending at it, of a
// fixed time difference) are not offered. They are not aligned to the
// epoch, so hopping windows cannot give them: hopping windows advancing
// by 1 ms hold the same records but send an update for every
// millisecond-window a record falls into. Built on their own, a new
// window's aggregate must come from the records it holds, and an
// aggregation only adds records (it cannot take one out of a
// neighbouring window's aggregate), so the records themselves would have
// to be kept as a stream join keeps them.
//
// # Tables and joins
//
// A Table is the latest value per key of a changelog stream. It comes
// from an aggregation, or from a compacted topic (TableFromTopic), whose
// store takes the topic itself as its changelog: nothing more is written,
// and a learner or standby restores the table by reading the topic up to
// the group's committed offset of it (the active task goes on from
// there). Inside the graph a table passes on changes, a key's value
// before and after each update, so that GroupTableBy and the table
// aggregations (TableAggregate, TableCount, TableReduce) can take a row's
// old value out of its old group before adding the new one: the
// aggregates always reflect the table as it is.
//
// JoinTable and LeftJoinTable join each record of a stream with the
// table's value for its key; JoinTables and LeftJoinTables join two
// tables into a table that changes when either side does. Joins look the
// key up in the other side's store, so both sides are in one subtopology
// and their topics must be co-partitioned (the runtime checks it and
// names the topics if not); a stream whose key may have changed is
// repartitioned first (Repartition). JoinStreams joins two streams within
// a time window (JoinWithin): each pair of records with the same key and
// event times at most the window apart is emitted once, when its second
// record comes; each side's records wait in a store of their own for as
// long as a later record could still pair with them. A record more than
// the window plus the grace period (JoinWindows.Grace, default 0) behind
// the join's stream time is late, dropped and counted.
//
// LeftJoinStreams also sends on each left record that pairs with no
// right record, and OuterJoinStreams each record of either side that
// pairs with none, with fn told which side is missing. Such a record is
// sent on once, when no record can pair with it any more: when the
// join's stream time passes its time plus twice the window plus the
// grace (a partner may be up to the window after it, and that partner
// may itself come up to the window plus the grace behind the stream
// time). Until then it is listed in a store with a changelog, so it
// moves with its task, and a record is either in pairs or sent on alone,
// never both. Kafka Streams sends it a window earlier and may pair it
// after that with a partner that comes out of order.
//
// # Joins on a foreign key
//
// Kafka Streams joins two tables on a key taken from the left table's
// values (KTable.join with a foreign-key extractor): each left row is
// sent, keyed by its foreign key, to the right table's partitions on a
// subscription topic, and the right side answers on a response topic
// keyed by the left key, which the left side checks against a hash of
// the row's current value to drop answers to rows that have changed
// since. baton has no such join. Its graph cannot express it: the left
// table's subtopology would write the subscriptions that the right
// table's reads and read the responses it writes, and Build refuses
// subtopologies feeding each other (a cycle through topics). The
// runtime also gives each repartition topic the partition count of
// the subtopology writing it, where the subscription topic needs the
// right table's count and the response topic the left's.
//
// Two joins come close. When the right table is small, make it a global
// table and join the left table's changes with it (ToStream, then
// JoinGlobal or LeftJoinGlobal with keyOf giving the foreign key): no
// partitioning constraint, but a change of a right row reaches no
// result until its left rows change. When it is not, regroup the left
// table by the foreign key (GroupTableBy, then TableAggregate keeping,
// per foreign key, the left rows that point to it), join that table
// with the right one (JoinTables: both are keyed by the foreign key, so
// the regrouped table's repartition topic and the right table's topic
// must have the same partition count), and flatten the joined rows back
// to the left keys (ToStream, FlatMap): every change on either side
// reaches the results, at the cost of resending all the left rows of a
// foreign key whenever one of them or its right row changes, and
// without a tombstone for a left row that leaves a foreign key (the
// example of GroupTableBy shows both).
//
// A task that reads a table's topic and other topics processes the table
// up to its end offset, as read when the task starts (or until the table
// has had no record for two seconds: a transaction marker may end it),
// before its other topics' records; after that it processes its topics in
// the order records are fetched (Kafka Streams orders them by timestamp across a task's
// partitions instead). A windowed table cannot be joined by key alone,
// and a join of tables has no store, so neither can be the table side of
// a join.
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
// The processor of a subtopology with timers (Subtopology.Timers) is a
// Punctuator too: the runtime calls Punctuate from the same goroutine as
// Process, never at the same time, to fire wall-clock timers.
//
// During Process the processor may use ctx: Store for the task's stores
// (which the runtime restores from their changelog topics before the first
// record) and Send for output. If Process returns an error the runtime
// stops the task: the record is not committed. Errors from the package's
// own nodes are *ProcessError values naming the task, the input record's
// topic, partition and offset, and the node; a record whose key or value
// does not decode gives one wrapping ErrDecode, never a panic.
//
// # Time and timers
//
// Every record has an event time: Record.Timestamp, or what the
// TimestampExtractor of its topic returns (SetTimestampExtractor). A
// task's stream time is the largest event time of the records it has
// processed (NodeContext.StreamTime); records arriving out of order do not
// move it back.
//
// A Processor-API node may have timers: Builder.AddTimers gives it a
// timer store, and NodeContext.Timers sets, replaces, cancels and reads
// them. A timer has a clock, a name and a time; setting the timer of a
// clock and name again replaces it. The node must implement TimerNode,
// whose OnTimer is called once per timer that fires:
//
//   - A StreamTime timer fires when the task's stream time reaches its
//     time, after the record that moved it there has gone through the
//     whole graph (a timer set for a time already reached fires after the
//     record in process). Only records move stream time.
//   - A WallClock timer fires when the runtime's clock reaches its time:
//     the runtime calls the task's Punctuate (see Punctuator) with its
//     clock's time every 100 ms or so, between records, never during one.
//     A timer due while the task has no owner (during a handover) fires
//     at the new owner's first Punctuate.
//
// After a record, or in Punctuate, the nodes with timers fire theirs in
// the order of the graph, each node in order of (time, name). A timer
// that OnTimer sets fires in the same pass if it comes after the timer
// firing in that order; if not (the same time and name again, for
// example), it waits for the next record or the next Punctuate, so a
// timer setting itself again at its own time does not loop. OnTimer may
// use the node's stores, Send and Forward; what it sends carries the
// timer's time as its timestamp. Its errors are the record's
// ProcessError after a record and a TimerError from Punctuate.
//
// Each timer fires once. It is removed from the timer store in the same
// writes as what OnTimer writes and sends, so the runtime commits them
// together (under exactly-once, in one transaction), and a task that
// moves takes its timers with it: the timer store has a changelog and is
// restored by learners and standbys like any store. The task's stream
// time is kept in the timer store too, so a new owner goes on from the
// old owner's stream time instead of starting afresh (and, under
// exactly-once, an aborted transaction takes back the stream time its
// records moved, with the rest of their work); that costs one changelog
// write per record that moves stream time. What the runtime
// commits is what happened: after a crash under at-least-once, a timer
// that fired since the last commit may fire again on the next owner, as a
// record may be processed again.
//
// The timer store's layout is the package's: the node sees it only
// through Timers (NodeContext.Store returns nil for it), and no other
// node may be connected to it.
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

// Package versus runs the same wordcount on several engines (baton under
// its policies, Kafka Streams, goka) against one Apache Kafka cluster and
// measures each from outside, the same way, in one run. It backs
// `baton bench versus`; docs/versus.md explains the figures.
//
// # Engines are processes
//
// Every engine is an executable keeping the peer contract of
// compare/README.md: the same flags, one JSON status line per second on
// stdout (StatusLine), SIGTERM for a graceful stop. The harness reads
// nothing from inside an engine: end-to-end latency and gaps come from the
// output topic (every output record carries its input record's timestamp,
// the send time), and task placement and progress from the status lines.
//
// # Lifecycle and ownership
//
// Execute starts (or joins) the cluster and, per configuration and event, fresh
// topics, its own instances, a producer and an output reader, and stops all
// of them before it returns, also on error or when ctx is done. Results are
// plain values that marshal to JSON.
//
// # Pure analysis
//
// Analyze takes a Recording (arrivals on the output, status lines, the
// event's time) and returns the figures; it has no clock and no I/O and is
// tested on synthetic recordings.
package versus

// Package bench measures baton on the embedded cluster: what happens to
// processing when the group scales out, drains or loses an instance, under
// the smooth policy and its baselines (cooperative, eager), plus the restore
// rate, the throughput against a plain consumer and the heartbeat trade-off.
// It backs `baton bench`.
//
// # What is measured
//
// The figures are those of docs/design ("Figures that matter"): the pause of
// unmoved tasks against their normal gap, the handover gap of moved tasks,
// the records restored on the critical path, the time to balance and the
// throughput dip. Processing is observed from outside the runtime, by
// sampling every instance's App.Status every few milliseconds and watching
// each task's processed counter, and from the App's events (first and last
// record of a handover, restores, revokes). Sampling bounds the resolution
// of a gap to the sampling interval.
//
// # Lifecycle and ownership
//
// Each Run* function starts its own embedded cluster, instances and
// producer, and stops all of them before it returns, also on error or when
// ctx is done. Results are plain values the caller owns; they marshal to
// JSON. Runs take seconds to minutes and are not meant to run concurrently
// on one machine: their figures would disturb each other.
//
// The analysis (Analyze) is pure: it takes the recorded samples and events
// and returns the figures, so it is tested without a cluster.
package bench

// Package load turns the busy time of an instance's tasks into the loads
// the group balances on (docs/assign.md, "Loads"): a smoothed measure per
// active task ([Meter]), the figure a member reports for it, quantised
// with hysteresis ([Quantise]), and an estimate for every task from the
// loads measured or reported ([Estimate]); and when a member asks the
// group for a rebalance because the figures it would report changed
// ([Ask]).
//
// A load is the share of one worker's time a task's processing takes:
// 0.25 is a quarter of a worker.
//
// # Lifecycle
//
// The runtime's loop owns a Meter: it calls [Meter.Observe] with the busy
// time each active task took since the last call, and reads
// [Meter.Loads]. The functions are pure.
//
// # Guarantees
//
// The package is pure: no goroutines, clock or I/O; time is an argument.
// Results depend only on the arguments (map iteration order never shows).
// A Meter is not safe for concurrent use; the functions are. Returned maps
// belong to the caller.
package load

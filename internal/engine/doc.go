// Package engine is the runtime of a baton.App: everything between the
// API (package baton, which checks the options and converts what this
// package reports) and the packages that decide (instance, lifecycle,
// assign) or do one kind of I/O (internal/commit, internal/restore,
// internal/rewind, internal/work, internal/global, internal/topics).
//
// What it owns, and who runs it:
//
//   - App: the configuration, the clients' options, the published
//     snapshots that Status and the group balancer read (atomics, written
//     by the loop or by kgo's group goroutine), and Run, on the caller's
//     goroutine.
//   - membership: one group membership, from joining to leaving: its
//     clients, run context, channels, tasks and stores, backlog, workers,
//     committer and the goroutines it started. Its loop (App.loop, on
//     Run's goroutine) is its only writer. A fence or an unresolved abort
//     ends it and Run starts another; nothing is reset in place.
//   - shell: the loop's half that steps the core (instance.Core) with
//     what happened and carries out the effects it returns. It never
//     waits on disk or the network: store opens, closes and writes,
//     restores, end-offset reads, commits and the rewind run on their own
//     goroutines and report back to the loop as inputs.
//   - self and groupHook: the App as kgo's group goroutine sees it (the
//     balancer's Subscription, Assigned and Led; the group's errors and
//     heartbeats). They read and publish atomics and post to the loop;
//     they never touch the membership's state.
//
// Its own Event and Status types are package baton's, field for field,
// without the documentation: package baton documents them and converts
// these for its users.
package engine

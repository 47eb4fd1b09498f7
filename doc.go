// Package baton runs stateful stream processing on Kafka and scales without
// stopping the world.
//
// An application is a topology (package topology: a processor API and a
// typed DSL) run by any number of instances. Each instance is one
// consumer-group member: an App. Its workers run the tasks the group's
// leader assigns it; a task is one partition of one subtopology, with its
// state in local stores (Pebble) backed by compacted changelog topics.
//
// # What happens when the group changes
//
// The leader (any member) computes the plan with package assign from the
// members' subscriptions alone. A stateful task moves only to an instance
// that is caught up on it: the destination first runs a learner, which
// restores the task's state from its changelog while the owner keeps
// processing. When the learner is within the acceptable lag, its instance
// rejoins at once; the owner commits and gives the task up (cooperative
// protocol: nothing else is revoked) and the follow-up round assigns it to
// the learner's instance, which replays the last few records and
// processes. Stateless tasks move at once. A crashed instance's tasks go
// to the warmest live copy (a standby, if configured). An instance whose
// Run context ends drains: it marks itself leaving, its tasks move to warm
// copies, then it leaves.
//
// # Lifecycle
//
// New checks the options and builds nothing that needs the cluster. Run
// locks the state directory, waits up to 10 s for the brokers, creates the
// internal topics that are missing (repartition topics, changelogs) and
// checks those that exist (docs/topics.md), joins
// the group and processes until its context ends; then it drains (bounded
// by WithDrainTimeout; Leave cuts it short), commits and leaves the group.
// Run returns nil after a graceful stop. Run may be called once per App.
// Every goroutine an App starts has stopped when Run returns.
//
// # Guarantees
//
// At-least-once (the default): input offsets are committed only after the
// changelog and output records they produced are acknowledged, and a
// store's data is applied together with the changelog offset it reflects,
// so a restart resumes exactly where its state is. After a crash, the
// records processed since the last commit are processed again.
//
// Exactly-once (WithGuarantee(ExactlyOnce)): every commit interval is one
// Kafka transaction per instance holding its changelog writes, its output
// and its input offsets; the offsets carry the member's group generation,
// so an instance the group has expelled cannot commit. A store applies its
// writes only once their transaction has committed. A task handed over
// (a learner promoted, a drain) is committed before it moves; a failed
// commit aborts the transaction, drops the stores' uncommitted writes and
// rewinds the input to the last commit. Changelogs (restores, standbys,
// learners) and input are read read_committed, so readers of the output
// must be too. A crashed instance's open transaction holds up readers of
// its changelogs until the cluster aborts it, at WithTransactionTimeout.
//
// # Inside an instance
//
// The decisions of an instance (what to open, restore, pause, commit, when
// to rejoin, when a learner is ready, which lags to report, when a drain
// is over, when the input rewinds after an aborted transaction) live in
// package instance, a pure state machine stepped with what happened. One goroutine owns it and every task: kgo's rebalance
// callbacks post to it and wait for its answer, and polls, store opens and
// closes, writes to the stores (restored changelog records, and what a
// finished commit made durable), end-offset reads and commits run in the
// background and report back to it; no lock is held across I/O. Store
// writes run one at a time, in the order the loop started them, and a
// commit's writes are read from memory until they are in the store. A goroutine started for one answer
// belongs to the group membership that started it: it reports to that
// membership's loop only, and the membership ends only after it. How long
// the loop spends on each thing it wakes for is the histogram
// baton_loop_turn_seconds. At-least-once commits are
// pipelined: the writes of a commit are sealed, processing goes on while
// their acknowledgements arrive, and the input offsets are committed
// after them, on the commit path's own goroutine. A transaction stops
// processing while it commits. A commit step gives up once the group has
// not confirmed the member for a session timeout: the group may have
// handed its tasks on.
//
// Processing of a task is in order and on one worker goroutine at a time.
// A task with timers (topology.Builder.AddTimers) is punctuated every
// 100 ms or so on the same worker, between its records: its wall-clock
// timers due by then fire, and what they write and send is committed
// with the task's records.
// Status and the Listener are safe to use from any goroutine; a Listener
// must not block.
//
// # Where things live
//
// Imports run one way: this package uses those below it and none of them
// uses it; TestLayering holds them to one order.
//
//   - this package: the API only (New, the options, App.Run, Status,
//     Leave, App.Get and its HTTP face, the errors, the events and the
//     status types).
//   - internal/engine: the runtime of an App: Run, one value per group
//     membership with the loop that owns it and the shell that carries
//     out the core's effects, the store opens, restores, table bootstraps
//     and input reads it starts, and the group balancer's hooks.
//   - internal/commit: the committers, at-least-once and transactional,
//     which do the Kafka I/O of commits on their own goroutine and report
//     to the loop, and the store writes a commit made durable.
//   - internal/rewind: exactly-once's way back after an aborted
//     transaction (stores caught up with their changelogs, input set back
//     to the last commit), on a goroutine of its own.
//   - internal/work: a task's runtime state, the context its processor is
//     given, the worker goroutines that run its records, and when a task
//     that reads tables may process its other topics.
//   - instance and lifecycle: the pure decisions of an instance and of one
//     task (no goroutines, clock or I/O), tested by golden scenarios.
//   - assign, member and protocol: the leader's plan, the group balancer
//     that runs it inside kgo, what members tell each other, and the
//     group as a reader outside it sees it (member.ReadGroup).
//   - internal/query: reads of a task's store from outside the task:
//     which copy may answer, the router that finds one here or on another
//     instance, and GET /query/STORE/KEY (docs/queries.md); it runs on
//     its callers' goroutines.
//   - internal/restore: the changelog reader of standbys, learners and
//     restoring actives (its own goroutine).
//   - internal/taskstore: a task's store as the loop sees it, with the
//     writes that are not durable yet.
//   - internal/topics: topic preparation before the member joins, and the
//     name of one partition of a topic.
//   - internal/global: global stores and their reader goroutine.
//   - internal/purge: deletion of committed repartition records (its own
//     goroutine).
//   - internal/measure and internal/metrics: the autoscaling figures and
//     the Prometheus metrics; internal/errs: the errors the API names.
package baton

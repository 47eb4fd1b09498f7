// Package assign is baton's assignor: a pure function from a consumer
// group's state to a plan saying which instance runs which task, in which
// role, and what must be revoked.
//
// # Contract
//
// Assign(state, policy) reads the tasks (stateful or not, load), the live
// instances (capacity, rack, leaving, the tasks each holds as active,
// standby or learner, and per-task lag) and the config (standbys, max
// learners, acceptable lag). It returns a Plan. It has no clock, no I/O, no
// goroutines and no memory between calls (it reuses its working arrays
// from one call to the next, cleared, so nothing of a plan depends on an
// earlier one); it does not modify its input;
// the same state gives the same plan whatever the order of its lists. That
// is what lets any member lead: a leader that crashes mid-scaling is
// replaced by one that computes the same plan from the same
// subscriptions. Assign is safe to call from many goroutines.
//
// The state is validated first (Validate; Decode for JSON): an invalid
// state returns an error wrapping ErrInvalidState, a *FieldError naming
// the offending field. Check verifies the per-round guarantees of a plan
// and is used by the tests, the simulator and the runtime's self-checks.
//
// # The smooth policy
//
// One round runs five steps over tasks and instances in id order:
//
//  1. Position. Every task with a live owner is positioned where it will
//     run when moves in flight finish: at its learner if it has one (a
//     learner is kept until it is ready, its target is gone, or the group
//     holds more than MaxLearners, the least advanced dropped first), else
//     at its owner. Tasks of leaving owners are left unpositioned.
//  2. Orphans (no live owner: crashed, revoked last round, or new). A
//     stateful orphan goes to a non-leaving instance whose lag is within
//     AcceptableLag of the lowest, preferring one that held it as a
//     learner, and among those to the one furthest below its share. With
//     no state anywhere, or for a stateless orphan, it goes to the
//     instance furthest below its share. Taking the lowest lag exactly
//     would hand a just-revoked task back to the instance that revoked it.
//  3. Drain. Tasks of leaving instances are positioned on a caught-up
//     copy with room when there is one, else on the instance furthest
//     below its share.
//  4. Balance. While some non-leaving instance is out of line (over the
//     ceiling or under the floor of its share; with unequal loads, more
//     than one largest task away from it), a task moves from the instance
//     furthest above its share to the one furthest below. The task chosen
//     is one the destination is caught up on, else the warmest, else the
//     first by id; tasks carried by a learner or orphans placed this round
//     do not move. A move is only made if it lowers the sum of squared
//     deviations by more than rounding could (loads that are not integers
//     make the figures inexact), so the loop ends, and a group that is in
//     line is left alone (stickiness).
//  5. Realize. A task positioned away from its owner is revoked at once
//     when it is stateless or the destination is caught up (a ready
//     learner or a standby within AcceptableLag): the follow-up round
//     gives the orphan to that warm copy. Otherwise a learner is placed
//     at the destination, drained tasks first, then in the order the
//     balance chose them, up to MaxLearners in the group. Standbys come
//     last (see below).
//
// Because the leader remembers nothing, a moved task needs two rounds (the
// revoke, then the assignment) and the orphan rule must send it to the
// instance the move intended. It does: a move is only planned when the
// source is more than one task above the destination, so after the revoke
// the destination is still the lighter warm copy.
//
// # Choices the seed leaves open
//
//   - Buckets. Stateful and stateless tasks are balanced separately, each
//     by its own share, so stateless tasks cannot hide a skew of state.
//     Kafka Streams balances everything as tasks per thread, weight 1.
//   - Stand-ins. In a round whose plan warms stateful tasks for a balance
//     move (a learner on a non-leaving instance for a task of a live,
//     non-leaving owner), the stateless bucket's shares are those that
//     level each instance's total active load (levelFill): a new instance
//     runs stateless tasks in place of the stateful ones it restores, and
//     gives them back as those arrive. The stable plan has no learner, so
//     it balances each bucket on its own. Config.SeparateBuckets turns
//     stand-ins off (docs/assign.md, "Stand-ins").
//   - Shares follow capacity (workers) and, when task loads differ, load:
//     an instance's share of a bucket is the bucket's size or total load
//     times its capacity over the total capacity of non-leaving instances.
//   - Balance is always restored, whatever any leader knew before: the
//     seed's third scenario (a leader crash plus a join) ends skewed in the
//     seed; here learners keep moving surplus off the heavy instance until
//     every instance is within one task of its share.
//   - Learners are rationed group-wide (MaxLearners), not per instance:
//     the limit bounds the restore traffic a scaling event adds to the
//     cluster. They are not tied to a probing interval: an instance whose
//     learner is ready rejoins at once.
//   - Standbys are sticky; a missing one goes to the instance with the
//     warmest local copy (often the previous owner after a move), else to
//     the least loaded instance per unit of capacity. At least one sits on
//     a rack other than the active's when one exists. A task never gets a
//     standby on the instance revoking it in the same round; it gets it in
//     the next.
//
// # Baselines
//
// Cooperative is the same pipeline without learners and blind to state:
// every move is a revoke and a cold assignment (KIP-429 style). Eager
// revokes every task in every round and deals all tasks again from
// scratch (stop-the-world). Both exist so that benchmarks can compare.
package assign

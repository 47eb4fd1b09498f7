// Package autoscale recommends how many instances a baton application
// should run, from what the group measures about itself: the rate of its
// input and the rate one worker sustains when it is fully busy. It is a
// pure decision; something else measures, and something else acts.
//
// # Use
//
// New(cfg) returns a Recommender. Call Recommend with an Observation at
// each evaluation (every few seconds, say) and set the group's size to
// the Recommendation's Instances: it is a target, not a change, so
// applying it again while instances start or stop does no harm.
// Observation.Now is the caller's clock: the package reads no clock, runs
// no goroutines, does no I/O and has no globals that change, and the same
// config and the same observations give the same recommendations. A
// Recommender is owned by one goroutine; it is not safe for concurrent use.
//
// The caller's duties: measure InputRate as records per second over all
// tasks, and WorkerRate from workers that were busy all the time they
// were measured (a worker that waited for input says nothing about what
// it could sustain); leave WorkerRate zero until there is such a
// measurement; say whether Lag is shrinking (LagDraining); count as Moves
// the learners still restoring and the revoked tasks awaiting their
// follow-up round. Now must not go back.
//
// Bad input never panics: an invalid Config makes New return a
// *FieldError wrapping ErrInvalidConfig, and an invalid Observation makes
// Recommend return one wrapping ErrInvalidObservation, leaving the
// Recommender as it was. Each names the field and says why.
//
// # The need
//
// Each observation is first turned into a need: the instances it alone
// calls for.
//
//   - The rate to sustain is InputRate, plus Lag / DrainTime when there is
//     lag and it is not draining. A lag that does not shrink means the
//     group processes no faster than records arrive, so it must also
//     work the backlog off; a draining lag needs no more.
//   - One instance sustains WorkerRate × WorkersPerInstance.
//   - The need is ⌈rate × (1 + Headroom) / per-instance rate⌉, brought
//     within [MinInstances, MaxInstances]. No input needs MinInstances.
//   - While WorkerRate is zero (not measured yet) the need is the current
//     count, within the bounds: the rule holds rather than guess.
//
// # Stabilisation
//
// The Recommender remembers each evaluation's need and when it was made;
// a need stays in effect until the next evaluation. Out is quick, in is
// slow:
//
//   - Scale out when the need is above the current count and at least k
//     instances were needed at every moment of the last OutWindow, k
//     being above the current count: the recommendation is k, the lowest
//     need in that window. One high sample does not raise the count; a
//     need that lasts OutWindow does.
//   - Scale in when the need is below the current count and no more than
//     k instances were needed at any moment of the last InWindow, k being
//     below the current count: the recommendation is k, the highest need
//     in that window. Even then it holds while Moves > 0 (a scale-in
//     starts moves of its own, on top of those not finished) or while a
//     lag is draining (the capacity to go is what drains it).
//   - A window the history does not yet reach back across (just after New)
//     allows no change in its direction.
//   - The current count is Observation.Instances, except after a change
//     the group has not reached yet (instances still starting, or still
//     there after a scale-in): then it is the count recommended, so that
//     a hold holds the group to where it is going and an autoscaler
//     acting on it cancels nothing on its way. Recommendation.From says
//     which count the rule worked from.
//   - A change is at most MaxStep instances, when MaxStep is set.
//   - A current count outside [MinInstances, MaxInstances] is brought
//     back within them at once, whatever the windows say.
//
// Because the windows look at needs, not at the input, a flapping input
// does not flap the count: the count rises only when a higher need has
// lasted OutWindow, and falls only when no higher need was seen for
// InWindow.
//
// # The reason
//
// Recommendation.Reason says how the need was worked out and what the
// windows decided, in words a person can check:
//
//	input 42k records/s; one worker sustains 9.1k/s; 20% headroom: 6 instances; hold 6
//
// Its wording may change between versions; programs read Instances and
// Needed.
package autoscale

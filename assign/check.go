package assign

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// ErrGuarantee is wrapped by every violation Check reports.
var ErrGuarantee = errors.New("assign: guarantee violated")

// Check verifies that plan, made by the smooth policy from state, keeps the
// guarantees that one round can show (spec/assign.md, items 1 to 9): one
// owner, one role per instance, cooperative moves, no cold handover of
// stateful work, orphans to the warmest copy, stateless tasks without
// learners or standbys, the learner limit, standby placement rules and
// leaving instances. Balance, convergence and stickiness take several
// rounds; tests check them by feeding plans back.
//
// Check does not trust the plan's shape: a plan that misses instances or
// names unknown tasks is reported, not a panic. It returns nil or an
// error wrapping ErrGuarantee that names the guarantee, task and instance;
// an invalid state returns the error Assign would (ErrInvalidState).
//
// Check is a second implementation, written for reading rather than
// speed: it reads the state through maps built here, and shares none of
// the indexes the policies decide with, so a mistake in those cannot hide
// the violation it causes.
func Check(state State, plan Plan) error {
	// The state must be one the assignor accepts (the same validation);
	// the checks below read it directly.
	sc := getScratch()
	_, err := build(state, sc)
	sc.release()
	if err != nil {
		return err
	}
	fail := func(n int, format string, args ...any) error {
		return fmt.Errorf("%w %d: %s", ErrGuarantee, n, fmt.Sprintf(format, args...))
	}
	cfg := state.Config
	stateful := map[TaskID]bool{}
	for _, t := range state.Tasks {
		stateful[t.ID] = t.Stateful
	}
	insts := slices.Clone(state.Instances)
	slices.SortFunc(insts, func(a, b Instance) int { return strings.Compare(a.ID, b.ID) })
	in := map[string]Instance{}
	owner := map[TaskID]string{} // in the state
	live := 0
	for _, i := range insts {
		in[i.ID] = i
		for _, id := range i.Active {
			owner[id] = i.ID
		}
		if !i.Leaving {
			live++
		}
	}
	// lag is an instance's lag on a stateful task, or none.
	const none = int64(math.MaxInt64)
	lag := func(inst string, id TaskID) int64 {
		if l, ok := in[inst].Lag[id]; ok && stateful[id] {
			return l
		}
		return none
	}
	caughtUp := func(inst string, id TaskID) bool { return lag(inst, id) <= cfg.AcceptableLag }
	// The instances holding each task as learner in the state, in id
	// order.
	heldBy := map[TaskID][]string{}
	for _, i := range insts {
		for _, id := range i.Learner {
			heldBy[id] = append(heldBy[id], i.ID)
		}
	}
	learnersIn := func(id TaskID) []string { return heldBy[id] }

	if len(plan.Instances) != len(insts) {
		return fail(0, "plan has %d instances, state has %d", len(plan.Instances), len(insts))
	}
	active := map[TaskID]string{}
	revoked := map[TaskID]string{}
	learners := map[TaskID][]string{}
	standbys := map[TaskID][]string{}
	for k, ip := range plan.Instances {
		i := insts[k]
		if ip.ID != i.ID {
			return fail(0, "plan instance %d is %q, want %q (id order)", k, ip.ID, i.ID)
		}
		roles := map[TaskID]string{}
		for _, r := range []struct {
			name string
			list []TaskID
		}{{"active", ip.Active}, {"standby", ip.Standby}, {"learner", ip.Learner}, {"revoked", ip.Revoked}} {
			if !slices.IsSorted(r.list) {
				return fail(0, "instance %s: %s list is not sorted", i.ID, r.name)
			}
			for _, id := range r.list {
				if _, known := stateful[id]; !known {
					return fail(0, "instance %s: unknown task %q in %s", i.ID, id, r.name)
				}
				if r.name != "revoked" {
					if prev, dup := roles[id]; dup {
						return fail(2, "instance %s holds task %s as %s and %s", i.ID, id, prev, r.name)
					}
					roles[id] = r.name
				}
				switch r.name {
				case "active":
					if other, dup := active[id]; dup {
						return fail(1, "task %s active on %s and %s", id, other, i.ID)
					}
					active[id] = i.ID
				case "standby":
					standbys[id] = append(standbys[id], i.ID)
				case "learner":
					learners[id] = append(learners[id], i.ID)
				case "revoked":
					if owner[id] != i.ID {
						return fail(3, "instance %s revokes task %s it did not own", i.ID, id)
					}
					revoked[id] = i.ID
				}
			}
		}
		if i.Leaving {
			for _, id := range slices.Sorted(maps.Keys(roles)) {
				var had []TaskID
				switch roles[id] {
				case "active":
					had = i.Active
				case "standby":
					had = i.Standby
				case "learner":
					had = i.Learner
				}
				if !slices.Contains(had, id) {
					return fail(9, "leaving instance %s was given task %s as %s", i.ID, id, roles[id])
				}
			}
		}
	}

	tasks := slices.Clone(state.Tasks)
	slices.SortFunc(tasks, func(a, b Task) int { return strings.Compare(string(a.ID), string(b.ID)) })
	nLearners := 0
	for _, t := range tasks {
		id := t.ID
		o, owned := owner[id]
		a, isActive := active[id]
		r, isRevoked := revoked[id]
		nLearners += len(learners[id])
		// 1. One owner; unassigned only while revoked or when nobody may take it.
		if !isActive && !isRevoked && live > 0 {
			return fail(1, "task %s is unassigned though %d live instances may take it", id, live)
		}
		// 3. Cooperative moves: an owned task leaves its owner only by a
		// revoke, and is not active anywhere in the round it is revoked.
		if owned && (!isActive || a != o) {
			if !isRevoked {
				return fail(3, "task %s left %s without being revoked", id, o)
			}
			if isActive {
				return fail(3, "task %s revoked by %s and made active on %s in the same round", id, o, a)
			}
		}
		if isRevoked && isActive {
			return fail(3, "task %s is both revoked and active", id)
		}
		// 4. No cold handover: a revoked stateful task has a caught-up
		// copy on another non-leaving instance.
		if t.Stateful && isRevoked {
			warm := false
			for _, i := range insts {
				warm = warm || (i.ID != r && !i.Leaving && caughtUp(i.ID, id))
			}
			if !warm {
				return fail(4, "stateful task %s revoked from %s with no caught-up copy elsewhere", id, r)
			}
		}
		// 5. Orphans go to a non-leaving instance, stateful ones to a
		// copy within acceptable_lag of the lowest lag, a warm learner
		// first.
		if !owned && isActive {
			if in[a].Leaving {
				return fail(9, "orphan %s given to leaving instance %s", id, a)
			}
			if t.Stateful {
				lowest := none
				for _, i := range insts {
					if !i.Leaving {
						lowest = min(lowest, lag(i.ID, id))
					}
				}
				if lowest != none {
					if l := lag(a, id); l == none || l-lowest > cfg.AcceptableLag {
						return fail(5, "orphan %s went to %s (lag %s), not within %d of the lowest lag %d", id, a, lagText(l), cfg.AcceptableLag, lowest)
					}
					held := learnersIn(id)
					if !slices.Contains(held, a) {
						for _, l := range held {
							if !in[l].Leaving && lag(l, id)-lowest <= cfg.AcceptableLag {
								return fail(5, "orphan %s went to %s, but %s holds it as a warm learner", id, a, l)
							}
						}
					}
				}
			}
		}
		// 6. Stateless tasks get neither learners nor standbys.
		if !t.Stateful && (len(learners[id]) > 0 || len(standbys[id]) > 0) {
			return fail(6, "stateless task %s has a learner or standby", id)
		}
		// 7. A learner only for a task with an active in the plan, one at
		// most.
		if len(learners[id]) > 0 && !isActive {
			return fail(7, "task %s has a learner on %s but no active in the plan", id, learners[id][0])
		}
		if len(learners[id]) > 1 {
			return fail(7, "task %s has %d learners", id, len(learners[id]))
		}
		// 8. No more standbys than configured (distinct, and never beside
		// the active or learner: one role per instance).
		if len(standbys[id]) > cfg.Standbys {
			return fail(8, "task %s has %d standbys, config wants %d", id, len(standbys[id]), cfg.Standbys)
		}
	}
	// 7. A learner whose target is still there (its task is stateful,
	// owned and not revoked) is kept until it is ready, unless the state
	// held more such learners than max_learners.
	var kept []TaskID
	for _, t := range tasks {
		_, owned := owner[t.ID]
		_, isRevoked := revoked[t.ID]
		if len(learnersIn(t.ID)) == 1 && t.Stateful && owned && !isRevoked {
			kept = append(kept, t.ID)
		}
	}
	if len(kept) <= cfg.MaxLearners {
		for _, id := range kept {
			l := learnersIn(id)[0]
			if !caughtUp(l, id) && !slices.Contains(learners[id], l) {
				return fail(7, "learner of %s on %s dropped before it was ready", id, l)
			}
		}
	}
	if nLearners > cfg.MaxLearners {
		return fail(7, "%d learners in the group, max_learners is %d", nLearners, cfg.MaxLearners)
	}
	if len(revoked) > 0 && !plan.Followup {
		return fail(3, "tasks were revoked but followup is false")
	}
	return nil
}

package assign

import (
	"errors"
	"fmt"
	"slices"
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
// error wrapping ErrGuarantee that names the guarantee, task and instance.
func Check(state State, plan Plan) error {
	sc := getScratch()
	defer sc.release()
	g, err := build(state, sc)
	if err != nil {
		return err
	}
	fail := func(n int, format string, args ...any) error {
		return fmt.Errorf("%w %d: %s", ErrGuarantee, n, fmt.Sprintf(format, args...))
	}
	if len(plan.Instances) != len(g.insts) {
		return fail(0, "plan has %d instances, state has %d", len(plan.Instances), len(g.insts))
	}
	tidx := make(map[TaskID]int, len(g.tasks))
	for t, task := range g.tasks {
		tidx[task.ID] = t
	}
	n := len(g.tasks)
	active := make([]int, n)
	learner := make([][]int, n)
	standby := make([][]int, n)
	revoked := make([]int, n)
	for t := range n {
		active[t], revoked[t] = none, none
	}
	for i, ip := range plan.Instances {
		in := g.insts[i]
		if ip.ID != in.ID {
			return fail(0, "plan instance %d is %q, want %q (id order)", i, ip.ID, in.ID)
		}
		roles := map[TaskID]string{}
		for _, r := range []struct {
			name string
			list []TaskID
		}{{"active", ip.Active}, {"standby", ip.Standby}, {"learner", ip.Learner}, {"revoked", ip.Revoked}} {
			if !slices.IsSorted(r.list) {
				return fail(0, "instance %s: %s list is not sorted", in.ID, r.name)
			}
			for _, id := range r.list {
				t, ok := tidx[id]
				if !ok {
					return fail(0, "instance %s: unknown task %q in %s", in.ID, id, r.name)
				}
				if r.name != "revoked" {
					if prev, dup := roles[id]; dup {
						return fail(2, "instance %s holds task %s as %s and %s", in.ID, id, prev, r.name)
					}
					roles[id] = r.name
				}
				switch r.name {
				case "active":
					if active[t] != none {
						return fail(1, "task %s active on %s and %s", id, g.insts[active[t]].ID, in.ID)
					}
					active[t] = i
				case "standby":
					standby[t] = append(standby[t], i)
				case "learner":
					learner[t] = append(learner[t], i)
				case "revoked":
					if g.owner[t] != i {
						return fail(3, "instance %s revokes task %s it did not own", in.ID, id)
					}
					revoked[t] = i
				}
			}
		}
		if in.Leaving {
			for id, role := range roles {
				had := false
				switch role {
				case "active":
					had = slices.Contains(in.Active, id)
				case "standby":
					had = slices.Contains(in.Standby, id)
				case "learner":
					had = slices.Contains(in.Learner, id)
				}
				if !had {
					return fail(9, "leaving instance %s was given task %s as %s", in.ID, id, role)
				}
			}
		}
	}
	learners := 0
	anyRevoked := false
	for t, task := range g.tasks {
		id, o := task.ID, g.owner[t]
		learners += len(learner[t])
		if revoked[t] != none {
			anyRevoked = true
		}
		// 1. One owner; unassigned only while revoked or when nobody may take it.
		if active[t] == none && revoked[t] == none && g.live > 0 {
			return fail(1, "task %s is unassigned though %d live instances may take it", id, g.live)
		}
		// 3. Cooperative moves.
		if o != none && active[t] != o {
			if revoked[t] != o {
				return fail(3, "task %s left %s without being revoked", id, g.insts[o].ID)
			}
			if active[t] != none {
				return fail(3, "task %s revoked by %s and made active on %s in the same round", id, g.insts[o].ID, g.insts[active[t]].ID)
			}
		}
		if revoked[t] != none && active[t] != none {
			return fail(3, "task %s is both revoked and active", id)
		}
		// 4. No cold handover: a revoked stateful task has a caught-up copy
		// on some other non-leaving instance.
		if task.Stateful && revoked[t] != none {
			warm := false
			for i := range g.insts {
				warm = warm || (i != o && !g.leaving[i] && g.caughtUp(i, t))
			}
			if !warm {
				return fail(4, "stateful task %s revoked from %s with no caught-up copy elsewhere", id, g.insts[o].ID)
			}
		}
		// 5. Orphans go to the warmest copy.
		if o == none && active[t] != none {
			a := active[t]
			if g.leaving[a] {
				return fail(9, "orphan %s given to leaving instance %s", id, g.insts[a].ID)
			}
			if task.Stateful {
				lowest := int64(noState)
				for i := range g.insts {
					if !g.leaving[i] {
						lowest = min(lowest, g.lagOf(i, t))
					}
				}
				if lowest != noState {
					if g.lagOf(a, t) == noState || g.lagOf(a, t)-lowest > g.cfg.AcceptableLag {
						return fail(5, "orphan %s went to %s (lag %s), not within %d of the lowest lag %d", id, g.insts[a].ID, lagText(g.lagOf(a, t)), g.cfg.AcceptableLag, lowest)
					}
					hadLearner := slices.Contains(g.learners.of(t), a)
					for _, l := range g.learners.of(t) {
						if !g.leaving[l] && g.lagOf(l, t)-lowest <= g.cfg.AcceptableLag && !hadLearner {
							return fail(5, "orphan %s went to %s, but %s holds it as a warm learner", id, g.insts[a].ID, g.insts[l].ID)
						}
					}
				}
			}
		}
		// 6. Stateless tasks get neither learners nor standbys.
		if !task.Stateful && (len(learner[t]) > 0 || len(standby[t]) > 0) {
			return fail(6, "stateless task %s has a learner or standby", id)
		}
		// 7. Learners: only for a task with a live active elsewhere, on
		// non-leaving instances unless already held there.
		for _, l := range learner[t] {
			if active[t] == none {
				return fail(7, "task %s has a learner on %s but no active in the plan", id, g.insts[l].ID)
			}
		}
		if len(learner[t]) > 1 {
			return fail(7, "task %s has %d learners", id, len(learner[t]))
		}
		// 8. Standbys: distinct, never with the active or learner (checked
		// by one-role), never more than wanted.
		if len(standby[t]) > g.cfg.Standbys {
			return fail(8, "task %s has %d standbys, config wants %d", id, len(standby[t]), g.cfg.Standbys)
		}
	}
	// 7. A learner is kept until it is ready or its target is gone, unless
	// the input held more than max_learners.
	valid := 0
	for t := range g.tasks {
		if len(g.learners.of(t)) == 1 && g.tasks[t].Stateful && g.owner[t] != none && revoked[t] == none {
			valid++
		}
	}
	if valid <= g.cfg.MaxLearners {
		for t := range g.tasks {
			if len(g.learners.of(t)) != 1 || !g.tasks[t].Stateful || g.owner[t] == none || revoked[t] != none {
				continue
			}
			l := g.learners.of(t)[0]
			if !g.caughtUp(l, t) && !slices.Contains(learner[t], l) {
				return fail(7, "learner of %s on %s dropped before it was ready", g.tasks[t].ID, g.insts[l].ID)
			}
		}
	}
	if learners > g.cfg.MaxLearners {
		return fail(7, "%d learners in the group, max_learners is %d", learners, g.cfg.MaxLearners)
	}
	if anyRevoked && !plan.Followup {
		return fail(3, "tasks were revoked but followup is false")
	}
	return nil
}

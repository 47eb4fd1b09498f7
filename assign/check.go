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
// guarantees that one round can show (docs/assign.md, items 1 to 9): one
// owner, one role per instance, cooperative moves, no cold handover of
// stateful work, orphans to the warmest copy, stateless tasks without
// learners or standbys, the learner limit, standby placement rules and
// leaving instances. Balance, convergence and stickiness take several
// rounds; tests check them by feeding plans back.
//
// Cooperative moves (3) include their second half, that nothing else is
// revoked: a task kept on its owner is not revoked. A live instance
// revokes a task only when another live instance holds it as a ready
// learner, or when the balance moves it: then some live instance was out
// of line in the task's bucket (stateful or stateless, shares by count or
// by load), the move lowers the imbalance, and the instance gives up no
// more than its excess (see needlessRevoke for the exact bounds). A
// leaving instance may revoke anything.
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
	fail := violation
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
	// 3. Nothing else is revoked: every revoke has a reason in this round.
	capacity := map[string]int{}
	leaving := map[string]bool{}
	for _, i := range insts {
		capacity[i.ID], leaving[i.ID] = i.Capacity, i.Leaving
	}
	return needlessRevoke(revokeView{cfg: cfg, insts: insts, tasks: tasks, capacity: capacity, leaving: leaving,
		owner: owner, heldBy: heldBy, active: active, revoked: revoked, learners: learners, caughtUp: caughtUp})
}

// violation is the error Check returns for a broken guarantee n.
func violation(n int, format string, args ...any) error {
	return fmt.Errorf("%w %d: %s", ErrGuarantee, n, fmt.Sprintf(format, args...))
}

// revokeView is what needlessRevoke reads: Check's maps of the state and
// the plan.
type revokeView struct {
	cfg      Config
	insts    []Instance // in id order
	tasks    []Task     // in id order
	capacity map[string]int
	leaving  map[string]bool
	owner    map[TaskID]string   // active in the state
	heldBy   map[TaskID][]string // learners in the state, in id order
	active   map[TaskID]string   // in the plan
	revoked  map[TaskID]string   // in the plan
	learners map[TaskID][]string // in the plan
	caughtUp func(inst string, id TaskID) bool
}

// needlessRevoke is the second half of guarantee 3: a task kept on its
// owner is not revoked. A leaving instance may revoke anything; a live
// (non-leaving) instance revokes a task for one of two reasons only:
//
//   - a ready learner: another live instance holds the task as a learner
//     (in the state) and is caught up on it, so the move an earlier round
//     planned is done; or
//   - a balance move: the round moves the task to a lighter instance of
//     its bucket (stateful or stateless tasks, balanced separately).
//
// The balance moves a task, from the heaviest instance that has one it
// may move (orphans placed this round and tasks at a kept learner are
// pinned) to the lightest, only while some live instance is out of line
// (over the ceiling or under the floor of its share; with unequal loads,
// more than one largest task from it), and only if the move lowers the
// sum of squared deviations. So every revoke the second reason does not
// cover is needless, and so is every balance revoke that breaks one of
// these:
//
//  1. Some live instance was out of line when the balance began.
//  2. The move lowers the imbalance: after its moves the giver stands
//     further above its share than the lightest instance stood when the
//     balance began (the lightest only gains). With equal loads a giver
//     never receives; with unequal loads it may have, first, and what
//     may have moved to it is counted in its favour.
//  3. Equal loads: the giver keeps the floor of its share, or its ceiling
//     when no instance was under its floor.
//  4. Equal loads: the moves off their owners are no more than the
//     larger of the tasks missing under the floors and the tasks over
//     the ceilings: each move fills a floor or empties a ceiling, and
//     both when it can.
//
// 3 and 4 are waived when an instance may end up holding only pinned
// tasks above its share (over its ceiling, when none is under a floor):
// it cannot give, so one lower down may. Check sees neither the pins nor
// where revoked tasks go, so needlessRevoke works from bounds: where each
// task stood when the balance began (a task with a learner elsewhere may
// be pinned there; a task of a leaving instance may be anywhere), and
// the moves the plan shows (balance revokes, and learners new to their
// instance). It flags only plans no run of the policy makes.
func needlessRevoke(v revokeView) error {
	var live []string
	totalCap := 0
	for _, i := range v.insts {
		if !i.Leaving {
			live = append(live, i.ID)
			totalCap += i.Capacity
		}
	}
	if totalCap == 0 {
		return nil // nobody may take a task: nothing is balanced
	}
	// With every learner slot used, or a learner kept on a leaving
	// instance, a stateful move the plan cannot show (no learner for it)
	// may have been made.
	nLearners, hidden := 0, false
	for _, ls := range v.learners {
		nLearners += len(ls)
		for _, l := range ls {
			hidden = hidden || v.leaving[l]
		}
	}
	hidden = hidden || nLearners >= v.cfg.MaxLearners
	for _, stateful := range []bool{true, false} {
		if err := v.bucket(stateful, live, totalCap, hidden); err != nil {
			return err
		}
	}
	return nil
}

// bucket checks the revokes of one bucket; see needlessRevoke.
func (v revokeView) bucket(stateful bool, live []string, totalCap int, hidden bool) error {
	kind := "stateless"
	if stateful {
		kind = "stateful"
	}
	var ts []Task
	for _, t := range v.tasks {
		if t.Stateful == stateful {
			ts = append(ts, t)
		}
	}
	if len(ts) == 0 {
		return nil
	}
	uniform := true // equal loads: balanced by count
	for _, t := range ts {
		uniform = uniform && t.Load == ts[0].Load
	}
	weight := func(t Task) float64 {
		if uniform {
			return 1
		}
		return t.Load
	}
	W, maxW := 0.0, 0.0
	for _, t := range ts {
		W += weight(t)
		maxW = max(maxW, weight(t))
	}
	C := float64(totalCap)
	// Each live instance's share of the bucket: its part of W by
	// capacity, or, for stateless tasks in a round that warms stateful
	// ones, what levels its total active load (standInShares).
	shareOf := map[string]float64{}
	standIn := !stateful && !v.cfg.SeparateBuckets && v.warming()
	if standIn {
		shareOf = v.standInShares(live, uniform)
	} else {
		for _, x := range live {
			shareOf[x] = W * float64(v.capacity[x]) / C
		}
	}
	// Per live instance, when the balance began: lo and hi bound the load
	// positioned there; pinned is the load there that may have been
	// pinned (orphans placed this round, tasks held by a learner there),
	// which the balance may not move.
	lo, hi, pinned := map[string]float64{}, map[string]float64{}, map[string]float64{}
	// Per live instance, the moves the plan shows off it (gives) and its
	// revokes among them; moved bounds, per owner, the load of its tasks
	// that may have moved to another instance.
	gives, moved := map[string]float64{}, map[string]float64{}
	revokes := map[string][]TaskID{}
	movedAll := 0.0
	for _, t := range ts {
		id, w := t.ID, weight(t)
		o, owned := v.owner[id]
		if !owned { // an orphan stays where this round put it
			if a, ok := v.active[id]; ok && !v.leaving[a] {
				lo[a] += w
				hi[a] += w
				pinned[a] += w
			}
			continue
		}
		// Live instances other than the owner that hold the task as a
		// learner: a learner kept there pins the task to it.
		var pins []string
		ready := false
		if stateful {
			for _, l := range v.heldBy[id] {
				if l != o && !v.leaving[l] {
					pins = append(pins, l)
					ready = ready || v.caughtUp(l, id)
				}
			}
		}
		for _, l := range pins {
			pinned[l] += w
		}
		if v.leaving[o] {
			// Pinned to a learner or drained: anywhere, as far as the
			// plan tells (the balance may even move it on).
			for _, x := range live {
				hi[x] += w
			}
			continue
		}
		hi[o] += w
		for _, l := range pins {
			hi[l] += w
		}
		if len(pins) == 0 {
			lo[o] += w
		}
		newLearner := ""
		for _, l := range v.learners[id] {
			if !v.leaving[l] && !slices.Contains(v.heldBy[id], l) {
				newLearner = l
			}
		}
		switch {
		case v.revoked[id] == o && !ready:
			gives[o] += w
			revokes[o] = append(revokes[o], id)
		case newLearner != "":
			gives[o] += w // moved by the balance; its learner warms up first
		}
		if _, rv := v.revoked[id]; rv || len(v.learners[id]) > 0 || (stateful && hidden) {
			moved[o] += w
			movedAll += w
		}
	}
	var givers []string // live instances with a revoke only the balance explains
	for _, x := range live {
		if len(revokes[x]) > 0 {
			givers = append(givers, x)
		}
	}
	if len(givers) == 0 {
		return nil
	}

	// Deviations are scaled by the total capacity, as the policy keeps
	// them: load*C - W*capacity, > 0 above the share.
	dev := func(load float64, x string) float64 { return (load - shareOf[x]) * C }
	share := func(x string) float64 { return shareOf[x] }
	eps := 1e-9 * max(1, W)
	floor := func(x string) float64 {
		if standIn {
			return math.Floor(shareOf[x] + eps)
		}
		return float64(len(ts) * v.capacity[x] / totalCap)
	}
	ceil := func(x string) float64 {
		if standIn {
			return math.Ceil(shareOf[x] - eps)
		}
		n := len(ts) * v.capacity[x]
		return float64((n + totalCap - 1) / totalCap)
	}
	amount := func(l, h float64) string { // a load, or its bounds
		unit := "load "
		if uniform {
			unit = ""
		}
		if l == h {
			return fmt.Sprintf("%s%g", unit, h)
		}
		return fmt.Sprintf("%s%g to %g", unit, l, h)
	}
	tol := 0.0 // unequal loads are summed in another order than the policy's
	if !uniform || standIn {
		tol = 1e-9 * W * C
	}

	// 1. No instance out of line: the balance makes no move at all.
	inLine := true
	for _, x := range live {
		if uniform {
			inLine = inLine && lo[x] >= floor(x) && hi[x] <= ceil(x)
		} else {
			inLine = inLine && dev(lo[x], x) >= -maxW*C && dev(hi[x], x) <= maxW*C
		}
	}
	if inLine {
		o := givers[0]
		return violation(3, "needless revoke: instance %s revokes %s task %s, but no live instance was out of line in %s tasks (%s held %s, share %.2f), so the task stays on its owner",
			o, kind, revokes[o][0], kind, o, amount(lo[o], hi[o]), share(o))
	}

	// 2. Each move leaves its giver above where the lightest instance was.
	// The lightest only gains, so its start bounds every move from below;
	// with equal loads a giver never receives, so the plan's moves off it
	// are all it lost; otherwise it may have received what moved (the
	// policy gives a light task only after it took a heavy one).
	lightest, minDev := "", math.Inf(1)
	for _, x := range live {
		if d := dev(lo[x], x); d < minDev {
			lightest, minDev = x, d
		}
	}
	for _, o := range givers {
		after := hi[o] - gives[o]
		if !uniform {
			after += movedAll - moved[o]
		}
		if dev(after, o) <= minDev-tol {
			than := "it was itself"
			if lightest != o {
				than = lightest + " was"
			}
			return violation(3, "needless revoke: instance %s revokes %s task %s, but after its moves it holds at most %s of %s tasks (share %.2f), no further above its share than %s before any move (%s, share %.2f): the move does not lower the imbalance",
				o, kind, revokes[o][0], amount(after, after), kind, share(o), than, amount(lo[lightest], lo[lightest]), share(lightest))
		}
	}
	if !uniform {
		return nil
	}
	// 3 and 4. With equal loads the balance first lifts every instance
	// under its floor, one move each, from the heaviest instance, which
	// is above its share and, while one is over its ceiling, over it: the
	// same move lowers it. Then it lowers the rest over their ceilings,
	// one move each. So a giver keeps its floor, or its ceiling when none
	// is under a floor, unless the heavier ones hold only pinned tasks.
	under, over, total := 0.0, 0.0, 0.0
	for _, x := range live {
		under += max(0, floor(x)-lo[x])
		over += max(0, hi[x]-ceil(x))
		total += gives[x]
	}
	keep, keepName := floor, "floor"
	if under == 0 {
		keep, keepName = ceil, "ceiling"
	}
	for _, x := range live {
		if pinned[x] > ceil(x) || (under > 0 && dev(pinned[x], x) > 0) {
			return nil
		}
	}
	for _, o := range givers {
		if after := hi[o] - gives[o]; after < keep(o) {
			return violation(3, "needless revoke: instance %s revokes %s task %s, one of %d %s tasks it gives up, which leaves it at most %g, below the %s %g of its share %.2f: it gives up more than its excess",
				o, kind, revokes[o][0], int(gives[o]), kind, after, keepName, keep(o), share(o))
		}
	}
	if need := max(under, over); total > need {
		// Name the giver left lowest against its share.
		o := givers[0]
		for _, x := range givers {
			if dev(hi[x]-gives[x], x) < dev(hi[o]-gives[o], o) {
				o = x
			}
		}
		return violation(3, "needless revoke: instance %s revokes %s task %s, but the plan moves %g %s tasks off their owners and %g moves restore every share (at most %g tasks under the floors, %g over the ceilings)",
			o, kind, revokes[o][0], total, kind, need, under, over)
	}
	return nil
}

// warming reports whether the plan warms a stateful task for a balance
// move: a learner on a live instance for a task whose owner in the state
// is live. Then the stateless tasks stand in: their shares level the
// instances' total active loads (standInShares).
func (v revokeView) warming() bool {
	for _, t := range v.tasks {
		o, owned := v.owner[t.ID]
		if !t.Stateful || !owned || v.leaving[o] {
			continue
		}
		for _, l := range v.learners[t.ID] {
			if !v.leaving[l] {
				return true
			}
		}
	}
	return false
}

// standInShares gives each live instance its share of the stateless
// tasks (W in all, in the bucket's weights: 1 a task when uniform) in a
// round that warms stateful tasks: the most that keeps its stateful load
// active in the plan plus its stateless load at or below a level per
// unit of capacity, the level set so that the shares add up to the
// bucket (in its weights: a task counts 1 when the loads are equal). It
// finds the level by dropping, until none is left to drop, the instances
// whose stateful load alone reaches the level of those still counted.
func (v revokeView) standInShares(live []string, uniform bool) map[string]float64 {
	unit, total := 0.0, 0.0      // a stateless task's load when uniform; the bucket's load
	held := map[string]float64{} // stateful load active in the plan
	for _, t := range v.tasks {
		if !t.Stateful {
			total += t.Load
			unit = t.Load
		} else if x, ok := v.active[t.ID]; ok {
			held[x] += t.Load
		}
	}
	in := slices.Clone(live)
	level := 0.0
	for {
		capSum, base := 0.0, 0.0
		for _, x := range in {
			capSum += float64(v.capacity[x])
			base += held[x]
		}
		level = (total + base) / capSum
		kept := in[:0:0]
		for _, x := range in {
			if held[x]/float64(v.capacity[x]) < level {
				kept = append(kept, x)
			}
		}
		if len(kept) == len(in) || len(kept) == 0 {
			break
		}
		in = kept
	}
	out := map[string]float64{}
	for _, x := range in {
		out[x] = max(0, level*float64(v.capacity[x])-held[x])
	}
	if uniform {
		for x := range out {
			out[x] /= unit
		}
	}
	return out
}

package sim

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/baton-streams/baton/assign"
	"github.com/baton-streams/baton/lifecycle"
)

type reasonKey struct {
	kind assign.ReasonKind
	task assign.TaskID
	inst string
}

// applyRound is the end of a rebalance: the leader computes the plan from
// the members' subscriptions and every member carries out its part.
func (e *engine) applyRound() {
	r := &e.round
	if e.leaveAfterJoin() {
		return
	}
	st, members := e.state()
	if e.onState != nil {
		e.onState(st)
	}
	plan, probe, err := e.pol.Assign(st)
	if err != nil {
		e.fail(fmt.Errorf("sim: %s: rebalance #%d at %s: %w", e.sc.Name, r.n, fmtTime(e.now), err))
		return
	}
	e.res.Rebalances++
	if e.opt.Check {
		vs := CheckPlan(st, plan, e.pol.Checks)
		// assign's own checker is a second reading of the same contract.
		if e.pol.Checks == CheckAll {
			if err := assign.Check(st, plan); err != nil {
				vs = append(vs, "assign.Check: "+err.Error())
			}
		}
		for _, v := range vs {
			e.res.Violations = append(e.res.Violations, fmt.Sprintf("rebalance #%d at %s: %s", r.n, fmtTime(e.now), v))
		}
	}
	pos := make(map[string]int, len(members))
	for k, m := range members {
		pos[m.spec.ID] = k
	}
	plans := make([]*assign.InstancePlan, len(members))
	for i := range plan.Instances {
		ip := &plan.Instances[i]
		k, ok := pos[ip.ID]
		if !ok || plans[k] != nil {
			e.fail(fmt.Errorf("sim: %s: rebalance #%d: plan names instance %q that is not a member or names it twice", e.sc.Name, r.n, ip.ID))
			return
		}
		plans[k] = ip
	}
	for k, m := range members {
		if plans[k] == nil {
			e.fail(fmt.Errorf("sim: %s: rebalance #%d: plan has no entry for member %q", e.sc.Name, r.n, m.spec.ID))
			return
		}
	}
	var why map[reasonKey]string
	if e.opt.Reasons {
		why = map[reasonKey]string{}
		for _, rs := range plan.Reasons {
			why[reasonKey{rs.Kind, rs.Task, rs.Instance}] = rs.Why
		}
	}
	explain := func(kind assign.ReasonKind, t assign.TaskID, inst string) string {
		if w, ok := why[reasonKey{kind, t, inst}]; ok {
			return ": " + w
		}
		return ""
	}
	// Sets of task indexes, as stamps: e.mark[role-lifecycle.Active][ti]
	// == stamp means the plan of the member being looked at gives it ti in
	// that role. No map per member.
	if len(e.mark[0]) != len(e.tasks) {
		for i := range e.mark {
			e.mark[i] = make([]int, len(e.tasks))
		}
	}
	resolve := func(role lifecycle.Role, ids []assign.TaskID) bool {
		for _, id := range ids {
			ti, ok := e.taskIx[id]
			if !ok {
				e.fail(fmt.Errorf("sim: %s: rebalance #%d: plan names unknown task %q", e.sc.Name, r.n, id))
				return false
			}
			e.mark[role-lifecycle.Active][ti] = e.stamp
		}
		return true
	}
	planned := func(role lifecycle.Role, ti int) bool { return e.mark[role-lifecycle.Active][ti] == e.stamp }
	var nRevoked, nAssigned, nLearners, nStandbys int
	var revokers []int // members that give up actives
	// Most members of a large group keep exactly what they had; their
	// plan needs no work (except under stop-the-world, where everyone
	// resumes).
	same := make([]bool, len(members))
	for k := range members {
		old, p := &st.Instances[k], plans[k]
		same[k] = !e.pol.StopTheWorld && slices.Equal(old.Active, p.Active) && slices.Equal(old.Standby, p.Standby) && slices.Equal(old.Learner, p.Learner)
	}
	// First everything members give up, so that additions see the tasks
	// free.
	for k, m := range members {
		if same[k] {
			continue
		}
		p := plans[k]
		e.stamp++
		if !resolve(lifecycle.Active, p.Active) || !resolve(lifecycle.Standby, p.Standby) || !resolve(lifecycle.Learner, p.Learner) {
			return
		}
		for _, id := range st.Instances[k].Active {
			ti := e.taskIx[id]
			if planned(lifecycle.Active, ti) {
				continue
			}
			nRevoked++
			if len(revokers) == 0 || revokers[len(revokers)-1] != m.idx {
				revokers = append(revokers, m.idx)
			}
			e.detail("revoke", fmt.Sprintf("%s gives up %s%s", m.spec.ID, id, explain(assign.ReasonRevoke, id, m.spec.ID)))
			e.dropActive(m, e.tasks[ti], true)
		}
		for _, ti := range slices.Sorted(maps.Keys(m.copies)) { // trace lines in task order
			c := m.copies[ti]
			if (c.role == lifecycle.Standby || c.role == lifecycle.Learner) && !planned(c.role, ti) {
				if c.role == lifecycle.Learner && !planned(lifecycle.Active, ti) {
					id := e.tasks[ti].spec.ID
					e.detail("drop", fmt.Sprintf("%s drops %s %s%s", m.spec.ID, c.role, id, explain(assign.ReasonDropLearner, id, m.spec.ID)))
				}
				e.setRole(m, c, lifecycle.None)
			}
		}
	}
	for k, m := range members {
		if same[k] {
			continue
		}
		p := plans[k]
		for _, id := range p.Active {
			ti := e.taskIx[id]
			t := e.tasks[ti]
			if t.owner == m.idx {
				if t.suspended {
					t.suspended = false
					if t.activeCopy == nil || t.activeCopy.following {
						e.begin(t)
					}
				}
				continue
			}
			if t.owner >= 0 {
				e.fail(fmt.Errorf("sim: %s: rebalance #%d: plan makes %s active on %s while %s keeps it", e.sc.Name, r.n, id, m.spec.ID, e.insts[t.owner].spec.ID))
				return
			}
			nAssigned++
			e.activate(m, t, ti, explain(assign.ReasonOrphan, id, m.spec.ID))
		}
		for _, list := range []struct {
			ids  []assign.TaskID
			role lifecycle.Role
		}{{p.Standby, lifecycle.Standby}, {p.Learner, lifecycle.Learner}} {
			for _, id := range list.ids {
				ti := e.taskIx[id]
				t := e.tasks[ti]
				if !t.spec.Stateful {
					continue // reported by the checks; nothing to restore
				}
				e.sync(m)
				c := e.copyOf(m, ti)
				if c.role == list.role {
					continue
				}
				if c.role == lifecycle.Active {
					e.fail(fmt.Errorf("sim: %s: rebalance #%d: plan makes %s both %s and %s on %s", e.sc.Name, r.n, id, c.role, list.role, m.spec.ID))
					return
				}
				e.setRole(m, c, list.role)
				lag := lagInt(t.end(e.now) - c.pos)
				if list.role == lifecycle.Learner {
					nLearners++
					e.detail(list.role.String(), fmt.Sprintf("%s learns %s (lag %d)%s", m.spec.ID, id, lag, explain(assign.ReasonLearner, id, m.spec.ID)))
				} else {
					nStandbys++
					e.detail(list.role.String(), fmt.Sprintf("%s stands by for %s (lag %d)", m.spec.ID, id, lag))
				}
			}
		}
	}
	e.note(e.now, "rebalance", fmt.Sprintf("#%d plan: %d revoked, %d assigned, %d learners placed, %d standbys placed; %d learners, %d unavailable%s",
		r.n, nRevoked, nAssigned, nLearners, nStandbys, e.learners, e.unavailable, map[bool]string{true: "; follow-up", false: ""}[plan.Followup]))
	e.recomputeBalance()

	// Members that drained leave now, and their LeaveGroup joins the
	// next round; but one that gave up actives in this plan of a
	// follow-up rejoins as soon as it has committed them, before it acts
	// on being drained: it leaves during the follow-up round.
	for _, m := range members {
		if !m.leaving || !m.inGroup || m.nActive[0]+m.nActive[1] > 0 {
			continue
		}
		if plan.Followup && slices.Contains(revokers, m.idx) {
			m.leaveAfterJoin = true
			continue
		}
		e.leaveIfDrained(m)
	}
	// Every member got its assignment now: its heartbeat timer starts
	// again.
	for _, m := range members {
		m.beatFrom, m.beatEarly = e.now, !e.pol.StopTheWorld
	}
	r.active = false
	pending, pendWhy, pendSelf := r.pending, r.pendWhy, r.pendSelf
	r.pending, r.pendWhy, r.pendSelf = false, nil, nil
	// A round's assignment replaces the last one's probing schedule.
	e.probingGen++
	if probe {
		e.push(e.now+e.sc.Timing.Probing, evProbing, e.probingGen)
	}
	switch {
	case plan.Followup:
		// A member that gave up actives rejoins as soon as it has
		// committed them (the cooperative client's rejoin after
		// revoking); when none did, the leader asks for the round.
		if len(revokers) == 0 && len(members) > 0 {
			revokers = append(revokers, members[0].idx)
		}
		e.startRound(append([]string{"follow-up"}, pendWhy...), append(revokers, pendSelf...))
	case pending:
		e.startRound(pendWhy, pendSelf)
	}
}

// leaveAfterJoin ends a round whose JoinGroup completed with a drained
// member in it (leaveAfterJoin): the leader plans it, the drained member
// leaves the group, and the broker starts the round again while the
// others wait for their SyncGroup, so they rejoin at once and never get
// that plan. It reports whether it did.
func (e *engine) leaveAfterJoin() bool {
	var gone []string
	for _, in := range e.insts {
		if in.leaveAfterJoin && in.inGroup && in.running {
			in.leaveAfterJoin = false
			gone = append(gone, in.spec.ID)
			e.note(e.now, "left", fmt.Sprintf("%s drained and left the group", in.spec.ID))
			e.stopInstance(in, false)
			in.inGroup, in.leaving = false, false
			e.recomputeBalance()
		}
	}
	if len(gone) == 0 {
		return false
	}
	r := &e.round
	e.res.Rebalances++
	e.note(e.now, "rebalance", fmt.Sprintf("#%d planned, not delivered: %s left while the others waited for their assignment", r.n, strings.Join(gone, ", ")))
	why := []string{strings.Join(gone, ", ") + " left"}
	self := r.pendSelf
	for _, in := range e.insts {
		if in.inGroup && in.running {
			self = append(self, in.idx)
		}
	}
	e.startRound(append(why, r.pendWhy...), self)
	return true
}

// activate makes t active on m. A stateful task restores whatever its new
// owner's copy lacks before it processes: that is the critical path.
func (e *engine) activate(m *instState, t *taskState, ti int, why string) {
	e.setOwner(t, m)
	if t.lastOwner >= 0 && t.lastOwner != m.idx {
		t.moves++
		e.res.Moves++
	}
	for _, x := range t.revokedBy {
		if x == m.idx {
			e.res.Thrash++
			break
		}
	}
	t.lastOwner = m.idx
	if !t.spec.Stateful {
		e.begin(t)
		e.detail(lifecycle.Active.String(), fmt.Sprintf("%s runs %s%s", m.spec.ID, t.spec.ID, why))
		return
	}
	e.sync(m)
	c := e.copyOf(m, ti)
	lag := t.end(e.now) - c.pos
	if c.following {
		lag = 0
	}
	e.setRole(m, c, lifecycle.Active)
	t.activeCopy = c
	if lag <= eps {
		e.setFollowing(m, c, true)
		c.pos = t.end(e.now)
		e.stopRestoring(m, c)
		e.begin(t)
		e.detail(lifecycle.Active.String(), fmt.Sprintf("%s runs %s, caught up%s", m.spec.ID, t.spec.ID, why))
		return
	}
	e.res.RestoredCritical += lag
	e.detail(lifecycle.Active.String(), fmt.Sprintf("%s runs %s after restoring %d records%s", m.spec.ID, t.spec.ID, lagInt(lag), why))
}

// recomputeBalance measures how far the actives are from every
// non-leaving member's share, stateful and stateless separately (the
// balance of docs/assign.md item 10).
func (e *engine) recomputeBalance() {
	if !e.buckets.done {
		bk := &e.buckets
		bk.loadMin = [2]float64{math.Inf(1), math.Inf(1)}
		for _, t := range e.tasks {
			b := bucket(t)
			bk.n[b]++
			bk.loadSum[b] += t.spec.Load
			bk.loadMax[b] = math.Max(bk.loadMax[b], t.spec.Load)
			bk.loadMin[b] = math.Min(bk.loadMin[b], t.spec.Load)
		}
		bk.done = true
	}
	n, loadSum, loadMax, loadMin := e.buckets.n, e.buckets.loadSum, e.buckets.loadMax, e.buckets.loadMin
	totalCap := 0
	for _, in := range e.insts {
		if in.inGroup && in.running && !in.leaving {
			totalCap += in.spec.Capacity
		}
	}
	off, offStateful, under := 0, 0, 0
	// Both buckets together: each member's share of every task (of the
	// whole load, when loads differ).
	allN, allLoad := n[0]+n[1], loadSum[0]+loadSum[1]
	allMax, allMin := math.Max(loadMax[0], loadMax[1]), math.Min(loadMin[0], loadMin[1])
	for _, in := range e.insts {
		if !in.inGroup || !in.running {
			continue
		}
		if !in.leaving && totalCap > 0 && allN > 0 {
			frac := float64(in.spec.Capacity) / float64(totalCap)
			if allMax != allMin {
				if in.loadHeld[0]+in.loadHeld[1] < allLoad*frac-allMax-eps {
					under++
				}
			} else if in.nActive[0]+in.nActive[1] < int(math.Floor(float64(allN)*frac+eps)) {
				under++
			}
		}
		if in.leaving || totalCap == 0 {
			off += in.nActive[0] + in.nActive[1]
			offStateful += in.nActive[1]
			continue
		}
		frac := float64(in.spec.Capacity) / float64(totalCap)
		for b := range 2 {
			if n[b] == 0 {
				continue
			}
			if loadMax[b] != loadMin[b] {
				if in.loadHeld[b] > loadSum[b]*frac+loadMax[b]+eps {
					off++
				}
				continue
			}
			share := float64(n[b]) * frac
			lo, hi := int(math.Floor(share+eps)), int(math.Ceil(share-eps))
			d := 0
			if c := in.nActive[b]; c > hi {
				d = c - hi
			} else if c < lo {
				d = lo - c
			}
			off += d
			if b == 1 {
				offStateful += d
			}
		}
	}
	e.offBalance, e.offStateful, e.underTotal = off, offStateful, under
	e.res.sample(e.now, e.unavailable, e.offBalance)
}

func (e *engine) updateBalanced() {
	// A round in progress is not part of it: until the members act on
	// the round (eager members pause when they notice it; a plan moves
	// tasks) it changes nothing any member holds, and one that moves
	// something unbalances the group when it does.
	bal := e.offBalance == 0 && e.unavailable == 0 && e.learners == 0
	if bal {
		for _, in := range e.insts {
			if in.inGroup && in.leaving {
				bal = false
				break
			}
		}
	}
	if bal && !e.balanced {
		e.balancedAt = e.now
	}
	e.balanced = bal
	if !e.shares && e.offStateful == 0 && e.unavailableStateful == 0 && e.now >= e.firstEvent {
		e.shares, e.sharesAt = true, e.now
	}
	if !e.totalShare && e.underTotal == 0 && e.now >= e.firstEvent {
		e.totalShare, e.totalShareAt = true, e.now
	}
}

func (e *engine) note(at time.Duration, kind, text string) {
	e.res.Timeline = append(e.res.Timeline, Entry{At: at, Kind: kind, Text: text})
}

func (e *engine) detail(kind, text string) {
	if e.opt.Detail {
		e.note(e.now, kind, text)
	}
}

func (e *engine) finish() {
	res := e.res
	res.End = e.now
	res.Balanced = e.balanced
	if e.balanced {
		res.BalancedAt = e.balancedAt
		res.TimeToBalance = max(0, e.balancedAt-e.firstEvent)
	}
	res.SharesHeld = e.shares
	if e.shares {
		res.TimeToShares = max(0, e.sharesAt-e.firstEvent)
	}
	res.TotalShareHeld = e.totalShare
	if e.totalShare {
		res.TimeToTotalShare = max(0, e.totalShareAt-e.firstEvent)
	}
	for _, t := range e.tasks {
		res.MaxMovesPerTask = max(res.MaxMovesPerTask, t.moves)
	}
	res.sample(e.now, e.unavailable, e.offBalance)
	if e.load != nil {
		e.finishLoad()
	}
	e.note(e.now, "end", fmt.Sprintf("%s; %d rebalances, %d moves", map[bool]string{true: "balanced since " + fmtTime(e.balancedAt), false: "not balanced"}[e.balanced], res.Rebalances, res.Moves))
}

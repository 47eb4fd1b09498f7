package sim

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/baton-streams/baton/lifecycle"
)

// Restore progress. An instance restores at its rate, shared equally by
// its restoring active copies if it has any (an active must be restored
// before it processes), else by its restoring standbys and learners. A copy
// chases its task's changelog end, which grows at the task's input rate
// while the task processes. Between two changes to an instance every share
// is constant, so positions are linear in time: they are brought up to
// date (sync) only when something reads or changes them, and the first
// time one reaches a threshold (nextAt) is computed once per change. A step
// of the simulation costs O(instances), not O(copies).

// shares returns the rates a restoring active copy and a restoring
// standby or learner of in receive.
func shareOf(in *instState) (activeShare, otherShare float64) {
	if !in.running || len(in.restoring) == 0 {
		return 0, 0
	}
	if in.nRestAct > 0 {
		return in.spec.Restore / float64(in.nRestAct), 0
	}
	return 0, in.spec.Restore / float64(len(in.restoring))
}

// sync brings the positions of in's restoring copies up to now. Callers
// sync before any change to in's shares.
func (e *engine) sync(in *instState) {
	if in.syncedAt >= e.now {
		return
	}
	dt := (e.now - in.syncedAt).Seconds()
	in.syncedAt = e.now
	if !in.running || len(in.restoring) == 0 {
		return
	}
	as, os := shareOf(in)
	for _, c := range in.restoring {
		share := os
		if c.role == lifecycle.Active {
			share = as
		}
		c.pos += share * dt
		if end := e.tasks[c.task].end(e.now); c.pos > end {
			c.pos = end
		}
	}
}

func (e *engine) startRestoring(in *instState, c *copyState) {
	if _, ok := in.restoring[c.task]; ok {
		return
	}
	e.sync(in)
	in.restoring[c.task] = c
	if c.role == lifecycle.Active {
		in.nRestAct++
	}
	t := e.tasks[c.task]
	t.chasers = append(t.chasers, in.idx)
	in.dirty = true
}

func (e *engine) stopRestoring(in *instState, c *copyState) {
	if _, ok := in.restoring[c.task]; !ok {
		return
	}
	e.sync(in)
	delete(in.restoring, c.task)
	if c.role == lifecycle.Active {
		in.nRestAct--
	}
	t := e.tasks[c.task]
	if i := slices.Index(t.chasers, in.idx); i >= 0 {
		t.chasers = slices.Delete(t.chasers, i, i+1)
	}
	in.dirty = true
}

// setProcessing starts or stops a task; the copies chasing its changelog
// end see the end stop or start growing.
func (e *engine) setProcessing(t *taskState, on bool) {
	for _, x := range t.chasers {
		e.sync(e.insts[x])
		e.insts[x].dirty = true
	}
	t.setProcessingAt(e.now, on)
	if e.load != nil {
		e.loadProcessing(t, on)
	}
}

func (e *engine) threshold(c *copyState) float64 {
	if c.role == lifecycle.Learner && !c.signalled {
		return float64(e.sc.Config.AcceptableLag)
	}
	return 0
}

const eps = 1e-6

const never = time.Duration(math.MaxInt64)

// instNext computes when the first restoring copy of in reaches its
// threshold, from positions synced to now.
func (e *engine) instNext(in *instState) time.Duration {
	if !in.running || len(in.restoring) == 0 {
		return never
	}
	e.sync(in)
	best := never
	as, os := shareOf(in)
	for _, c := range in.restoring {
		share := os
		if c.role == lifecycle.Active {
			share = as
		}
		t := e.tasks[c.task]
		net := share
		if t.processing {
			net -= t.spec.Rate
		}
		if net <= 0 {
			continue
		}
		dist := t.end(e.now) - c.pos - e.threshold(c)
		at := e.now
		if dist > eps {
			secs := dist / net
			if secs > 1e7 {
				continue
			}
			// Round up to the millisecond so timelines stay readable.
			at = e.now + time.Duration(math.Ceil(secs*1000))*time.Millisecond
		}
		best = min(best, at)
	}
	return best
}

func (e *engine) nextCrossing() (time.Duration, bool) {
	best := never
	for _, in := range e.insts {
		if in.dirty {
			in.nextAt = e.instNext(in)
			in.dirty = false
		}
		best = min(best, in.nextAt)
	}
	return best, best != never
}

// advance moves the clock to t; unavailability accrues.
func (e *engine) advance(t time.Duration) {
	if t <= e.now {
		return
	}
	e.res.UnavailableTaskSeconds += float64(e.unavailable) * (t - e.now).Seconds()
	e.res.UnavailableStatefulSeconds += float64(e.unavailableStateful) * (t - e.now).Seconds()
	if e.load != nil {
		e.advanceLoad(t)
	}
	e.now = t
}

// crossings handles every copy that reached its threshold: a learner is
// ready, a copy is caught up, a restoring active starts processing.
func (e *engine) crossings() {
	for _, in := range e.insts {
		if in.dirty || in.nextAt > e.now {
			continue
		}
		e.sync(in)
		in.dirty = true
		var hit []*copyState
		for _, c := range in.restoring {
			lag := e.tasks[c.task].end(e.now) - c.pos
			if lag <= e.threshold(c)+eps {
				hit = append(hit, c)
			}
		}
		sort.Slice(hit, func(a, b int) bool { return hit[a].task < hit[b].task })
		for _, c := range hit {
			t := e.tasks[c.task]
			if c.role == lifecycle.Learner && !c.signalled {
				e.signalReady(in, c)
				if t.end(e.now)-c.pos > eps {
					continue
				}
			}
			e.setFollowing(in, c, true)
			c.pos = t.end(e.now)
			e.stopRestoring(in, c)
			if c.role == lifecycle.Active && !t.processing && !t.starting {
				e.begin(t)
				e.detail("restored", fmt.Sprintf("%s %s %s restored, processing", in.spec.ID, c.role, t.spec.ID))
			}
		}
	}
}

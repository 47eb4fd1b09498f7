package chaos

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/topology"
)

// Interval is the time from one event of a run to the next: which
// instances ran which task as active at some moment in it, and which
// instances were lost in it.
type Interval struct {
	From time.Duration `json:"from"` // since the run began
	To   time.Duration `json:"to"`
	// Event is the event the interval begins with ("start" for the first).
	Event string `json:"event"`
	// Active maps a task to the instances that ran it as active at some
	// moment in the interval, sorted.
	Active map[string][]string `json:"active"`
	// Lost are the instances that crashed, stopped with an error, or were
	// cut off by a cluster or broker restart in the interval, sorted.
	Lost []string `json:"lost,omitempty"`
}

// Duplicate is a word counted more often than the input holds it.
type Duplicate struct {
	Word  string `json:"word"`
	Extra int64  `json:"extra"` // occurrences counted more than once
	// Tasks are the tasks whose work since their last commit, done
	// again, counts the word again: the tasks of subtopology 0 that split
	// the input partitions holding it and the task of subtopology 1 that
	// counts its partition of the repartition topic.
	Tasks []string `json:"tasks"`
}

// excused reports whether some instance that ran one of d's tasks as
// active in an interval was lost in that same interval: an at-least-once
// duplicate is then work since the last commit, done again by the next
// owner.
func (d Duplicate) excused(intervals []Interval) bool {
	for _, in := range intervals {
		for _, task := range d.Tasks {
			for _, owner := range in.Active[task] {
				if slices.Contains(in.Lost, owner) {
					return true
				}
			}
		}
	}
	return false
}

// Unexcused returns the duplicates no loss explains (see OK); the
// duplicates' number is checked against DuplicateBound apart.
func (r Result) Unexcused() []Duplicate {
	var out []Duplicate
	for _, d := range r.Duplicates {
		if !d.excused(r.Intervals) {
			out = append(out, d)
		}
	}
	return out
}

// loss is an instance lost at a moment of the run: it crashed or stopped
// with an error (ends), or a cluster or broker restart cut it off (it
// runs on).
type loss struct {
	at       time.Time
	instance string
	ends     bool
}

// mark is the moment an event of the run began.
type mark struct {
	at    time.Time
	event string
}

// intervals cuts the run from start to end at every mark and says, per
// interval, who ran which task (from the instances' assigned, revoked and
// lost events; an instance that ended runs nothing after its loss) and
// who was lost in it. It is pure: the run records, this decides.
func intervals(start, end time.Time, marks []mark, events []baton.Event, losses []loss) []Interval {
	marks = append([]mark{{at: start, event: "start"}}, marks...)
	events = slices.Clone(events)
	slices.SortStableFunc(events, func(a, b baton.Event) int { return a.Time.Compare(b.Time) })
	losses = slices.Clone(losses)
	slices.SortStableFunc(losses, func(a, b loss) int { return a.at.Compare(b.at) })
	running := map[string]map[string]bool{} // task -> instances running it now
	gone := map[string]bool{}
	var out []Interval
	ei, li := 0, 0
	for k, m := range marks {
		to := end
		if k+1 < len(marks) {
			to = marks[k+1].at
		}
		in := Interval{From: m.at.Sub(start), To: to.Sub(start), Event: m.event, Active: map[string][]string{}}
		seen := map[string]map[string]bool{}
		note := func(task, instance string) {
			if seen[task] == nil {
				seen[task] = map[string]bool{}
			}
			seen[task][instance] = true
		}
		for task, ins := range running {
			for instance := range ins {
				note(task, instance)
			}
		}
		last := k+1 == len(marks)
		within := func(at time.Time) bool { return last || at.Before(to) }
		lost := map[string]bool{}
		for {
			nextEvent := ei < len(events) && within(events[ei].Time)
			nextLoss := li < len(losses) && within(losses[li].at)
			if nextLoss && (!nextEvent || losses[li].at.Before(events[ei].Time)) {
				l := losses[li]
				li++
				lost[l.instance] = true
				if l.ends {
					gone[l.instance] = true
					for _, ins := range running {
						delete(ins, l.instance)
					}
				}
				continue
			}
			if !nextEvent {
				break
			}
			e := events[ei]
			ei++
			switch {
			case gone[e.Instance]:
			case e.Kind == baton.EventAssigned:
				if running[e.Task] == nil {
					running[e.Task] = map[string]bool{}
				}
				running[e.Task][e.Instance] = true
				note(e.Task, e.Instance)
			case e.Kind == baton.EventRevoked || e.Kind == baton.EventLost:
				delete(running[e.Task], e.Instance)
			}
		}
		for task, ins := range seen {
			in.Active[task] = slices.Sorted(maps.Keys(ins))
		}
		in.Lost = slices.Sorted(maps.Keys(lost))
		out = append(out, in)
	}
	return out
}

// Range is the offsets of a task's input partition from From (the group's
// committed offset) to To (the partition's end offset), To excluded.
type Range struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// Uncommitted is the work an instance lost in a run may have done without
// committing it, work its tasks' next owners do again: for each task it ran
// as active at the loss, the range of its input partition from the
// group's committed offset to the partition's end offset, read around the
// loss (see uncommittedRanges). Subtopology 0's task "0_p" splits
// partition p of the input topic, subtopology 1's task "1_p" counts
// partition p of the repartition topic.
type Uncommitted struct {
	Instance string `json:"instance"`
	// Cause is what lost it: an event kind ("crash", "leader-crash",
	// "handover-crash", "cluster-restart", "broker-restart") or "failed"
	// (its Run returned an error).
	Cause string           `json:"cause"`
	At    time.Duration    `json:"at"` // since the run began
	Tasks map[string]Range `json:"tasks"`
}

// offsetRead is one reading, per task, of the group's committed offset on
// the task's input partition (missing: nothing committed) and of that
// partition's end offset.
type offsetRead struct {
	committed map[string]int64
	end       map[string]int64
}

// uncommittedRanges returns, for each task, the range from the lowest
// committed offset any read saw (0 when one saw none) to the highest end
// offset any read saw. A lost instance processed nothing past the end
// offsets after its loss (it could no longer fetch), and its next owners
// start from a committed offset at least as high as any read before them:
// a committed offset read earlier, or an end offset read later, only
// widens a range, which keeps the bound it gives sound. A task no read
// gives an end offset for is an error.
func uncommittedRanges(tasks []string, reads ...offsetRead) (map[string]Range, error) {
	out := map[string]Range{}
	for _, task := range tasks {
		rg := Range{From: -1, To: -1}
		for _, rd := range reads {
			from, ok := rd.committed[task]
			if !ok || from < 0 {
				from = 0
			}
			if rg.From < 0 || from < rg.From {
				rg.From = from
			}
			if end, ok := rd.end[task]; ok && end > rg.To {
				rg.To = end
			}
		}
		if rg.To < 0 {
			return nil, fmt.Errorf("chaos: no end offset for the input partition of task %s", task)
		}
		rg.From = min(rg.From, rg.To)
		out[task] = rg
	}
	return out, nil
}

// inputLine is a line of the input topic as read back at the end of a
// run: its offset in its partition and how many words it holds.
type inputLine struct {
	offset, words int64
}

// duplicateBound is the most occurrences the work the lost instances did
// without committing it can count a second time, under at-least-once: a
// lost splitting task's next owner splits the lines in its range again
// (each of their words may be counted once more), a lost counting task's
// next owner counts the repartition records in its range again (each may
// be counted once more). The losses add up: work done again and lost
// again is done a third time. lines holds each input partition's lines in
// offset order. It is pure: the run records, this decides (as
// checkOverCount does for one crash in the package's scale tests).
func duplicateBound(us []Uncommitted, lines map[int32][]inputLine) int64 {
	var bound int64
	for _, u := range us {
		for task, rg := range u.Tasks {
			sub, p, err := topology.ParseTaskID(task)
			if err != nil || rg.To <= rg.From {
				continue
			}
			switch sub {
			case 0:
				ls := lines[p]
				k, _ := slices.BinarySearchFunc(ls, rg.From, func(l inputLine, off int64) int { return cmp.Compare(l.offset, off) })
				for ; k < len(ls) && ls[k].offset < rg.To; k++ {
					bound += ls[k].words
				}
			case 1:
				bound += rg.To - rg.From
			}
		}
	}
	return bound
}

// activeAt returns the tasks an instance ran as active when it was lost,
// from the events it emitted so far (in the order it emitted them): those
// it was last assigned, and those it last lost (gave up without a commit:
// their work since the last commit is still to be done again) at or after
// since. A task it last revoked was committed first. Sorted.
func activeAt(events []baton.Event, instance string, since time.Time) []string {
	last := map[string]baton.Event{}
	for _, e := range events {
		if e.Instance != instance {
			continue
		}
		switch e.Kind {
		case baton.EventAssigned, baton.EventRevoked, baton.EventLost:
			last[e.Task] = e
		}
	}
	var out []string
	for task, e := range last {
		if e.Kind == baton.EventAssigned || e.Kind == baton.EventLost && !e.Time.Before(since) {
			out = append(out, task)
		}
	}
	slices.Sort(out)
	return out
}

// stillHeld returns the tasks of tasks that instance has neither lost nor
// revoked at or after since, by its events: tasks it may still be
// processing as the owner it was at since.
func stillHeld(events []baton.Event, instance string, tasks []string, since time.Time) []string {
	given := map[string]bool{}
	for _, e := range events {
		if e.Instance == instance && (e.Kind == baton.EventLost || e.Kind == baton.EventRevoked) && !e.Time.Before(since) {
			given[e.Task] = true
		}
	}
	var out []string
	for _, t := range tasks {
		if !given[t] {
			out = append(out, t)
		}
	}
	return out
}

// timedRead is a reading of the offsets (offsetRead) and when it began.
type timedRead struct {
	at   time.Time
	read offsetRead
}

// lostRanges returns the uncommitted work of every task an instance lost
// (EventLost: the group gave the task to another member while this one,
// unaware, kept it; it learns later, and did not commit meanwhile). The
// task's next owner runs it from the group's committed offset as it
// takes it, for as long as the lost instance goes on: the range goes from
// the committed offset read last before that next owner was given the
// task (the loss itself when no other instance was given it first;
// offsets committed only move forward, so the next owner started no
// lower) to the highest end offset read up to the first reading after
// the loss. events and history are in time order. It is pure: the run
// records, this decides.
func lostRanges(start time.Time, events []baton.Event, history []timedRead) []Uncommitted {
	var out []Uncommitted
	given := map[[2]string]time.Time{} // instance, task -> when last assigned
	for k, e := range events {
		key := [2]string{e.Instance, e.Task}
		switch e.Kind {
		case baton.EventAssigned:
			given[key] = e.Time
		case baton.EventLost:
			from, ok := given[key]
			if !ok {
				continue
			}
			taken := e.Time // when the next owner was given the task
			for _, o := range events[:k] {
				if o.Kind == baton.EventAssigned && o.Task == e.Task && o.Instance != e.Instance && o.Time.After(from) {
					taken = o.Time
					break
				}
			}
			// The readings from the last one at or before taken (none:
			// nothing committed then, as far as the run knows) to the
			// first one after the loss.
			first, last := -1, len(history)-1
			for k, h := range history {
				if !h.at.After(taken) {
					first = k
				}
				if h.at.After(e.Time) {
					last = k
					break
				}
			}
			reads := []offsetRead{{committed: map[string]int64{}, end: map[string]int64{}}}
			if first >= 0 {
				reads = nil
			}
			for _, h := range history[max(first, 0) : last+1] {
				reads = append(reads, h.read)
			}
			ranges, err := uncommittedRanges([]string{e.Task}, reads...)
			if err != nil {
				continue
			}
			out = append(out, Uncommitted{Instance: e.Instance, Cause: "lost", At: e.Time.Sub(start), Tasks: ranges})
		}
	}
	return out
}

package chaos

import (
	"maps"
	"slices"
	"time"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/internal/uncommitted"
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

// Range is the offsets of a task's input partition from the group's
// committed offset to the partition's end offset (see uncommitted.Range).
type Range = uncommitted.Range

// Uncommitted is the work an instance lost in a run may have done without
// committing it, work its tasks' next owners do again (see
// uncommitted.Work).
type Uncommitted = uncommitted.Work

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

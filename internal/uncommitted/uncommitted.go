// Package uncommitted bounds what at-least-once may count twice in a
// wordcount run (subtopology 0's task "0_p" splits partition p of the
// lines topic into a repartition topic, subtopology 1's task "1_p" counts
// partition p of that topic) once instances were lost: the input a lost
// task may have processed without committing it (Range, Work; Ranges,
// LostWork), and how many occurrences doing that work again can count a
// second time (DuplicateBound, from the lines read back with ReadLines).
// It also reads what those decisions are made from: the group's committed
// offsets and the two topics' end offsets, once or every 200 ms into a
// history (Poller). The chaos run and `baton demo` both judge their
// counts with it.
//
// The functions that decide are pure: the run records, they decide.
package uncommitted

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/topology"
)

// Range is the offsets of a task's input partition from From (the group's
// committed offset) to To (the partition's end offset), To excluded.
type Range struct {
	From int64 `json:"from"`
	To   int64 `json:"to"`
}

// Work is the work an instance lost in a run may have done without
// committing it, work its tasks' next owners do again: for each task it
// ran as active at the loss, the range of its input partition from the
// group's committed offset to the partition's end offset, read around the
// loss (see Ranges). Subtopology 0's task "0_p" splits partition p of the
// input topic, subtopology 1's task "1_p" counts partition p of the
// repartition topic.
type Work struct {
	Instance string `json:"instance"`
	// Cause is what lost it: an event kind ("crash", "leader-crash",
	// "handover-crash", "cluster-restart", "broker-restart"), "failed"
	// (its Run returned an error) or "lost" (it gave up a task without a
	// commit: see LostWork).
	Cause string           `json:"cause"`
	At    time.Duration    `json:"at"` // since the run began
	Tasks map[string]Range `json:"tasks"`
}

// Offsets is one reading, per task, of the group's committed offset on
// the task's input partition (missing: nothing committed) and of that
// partition's end offset (missing: the partition could not be read, as
// the repartition topic before an instance made it).
type Offsets struct {
	Committed map[string]int64
	End       map[string]int64
}

// Reading is a reading of the offsets and when it began.
type Reading struct {
	At      time.Time
	Offsets Offsets
}

// Ranges returns, for each task, the range from the lowest committed
// offset any read saw (0 when one saw none) to the highest end offset any
// read saw. A lost instance processed nothing past the end offsets after
// its loss (it could no longer fetch), and its next owners start from a
// committed offset at least as high as any read before them: a committed
// offset read earlier, or an end offset read later, only widens a range,
// which keeps the bound it gives sound. A task no read gives an end
// offset for is an error.
func Ranges(tasks []string, reads ...Offsets) (map[string]Range, error) {
	out := map[string]Range{}
	for _, task := range tasks {
		rg := Range{From: -1, To: -1}
		for _, rd := range reads {
			from, ok := rd.Committed[task]
			if !ok || from < 0 {
				from = 0
			}
			if rg.From < 0 || from < rg.From {
				rg.From = from
			}
			if end, ok := rd.End[task]; ok && end > rg.To {
				rg.To = end
			}
		}
		if rg.To < 0 {
			return nil, fmt.Errorf("uncommitted: no end offset for the input partition of task %s", task)
		}
		rg.From = min(rg.From, rg.To)
		out[task] = rg
	}
	return out, nil
}

// Line is a line of the input topic as read back at the end of a run: its
// offset in its partition and how many words it holds.
type Line struct {
	Offset, Words int64
}

// DuplicateBound is the most occurrences the work the lost instances did
// without committing it can count a second time, under at-least-once: a
// lost splitting task's next owner splits the lines in its range again
// (each of their words may be counted once more), a lost counting task's
// next owner counts the repartition records in its range again (each may
// be counted once more). The losses add up: work done again and lost
// again is done a third time. lines holds each input partition's lines in
// offset order (as ReadLines gives them). A task that is not a split or
// count task of the wordcount adds nothing.
func DuplicateBound(ws []Work, lines map[int32][]Line) int64 {
	var bound int64
	for _, w := range ws {
		for task, rg := range w.Tasks {
			sub, p, err := topology.ParseTaskID(task)
			if err != nil || rg.To <= rg.From {
				continue
			}
			switch sub {
			case 0:
				ls := lines[p]
				k, _ := slices.BinarySearchFunc(ls, rg.From, func(l Line, off int64) int { return cmp.Compare(l.Offset, off) })
				for ; k < len(ls) && ls[k].Offset < rg.To; k++ {
					bound += ls[k].Words
				}
			case 1:
				bound += rg.To - rg.From
			}
		}
	}
	return bound
}

// LostWork returns the uncommitted work of every task an instance lost
// (EventLost: the group gave the task to another member while this one,
// unaware, kept it, and it learnt later without committing meanwhile; or
// the task was revoked and its final commit failed), with
// Cause "lost" and At since start. The task's next owner runs it from the
// group's committed offset as it takes it, for as long as the lost
// instance goes on: the range goes from the committed offset read last
// before that next owner was given the task (the loss itself when no
// other instance was given it first; offsets committed only move
// forward, so the next owner started no lower) to the highest end offset
// read up to the first reading after the loss. A loss with no reading
// before the next owner took the task counts from offset 0. history is in
// time order; events are taken in time order (a copy is sorted stably by
// Time: listeners of several instances may deliver them out of order). A
// lost task the instance was never assigned, or whose partition no
// reading gives an end offset for, gives nothing.
func LostWork(start time.Time, events []baton.Event, history []Reading) []Work {
	events = slices.Clone(events)
	slices.SortStableFunc(events, func(a, b baton.Event) int { return a.Time.Compare(b.Time) })
	var out []Work
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
				if !h.At.After(taken) {
					first = k
				}
				if h.At.After(e.Time) {
					last = k
					break
				}
			}
			reads := []Offsets{{Committed: map[string]int64{}, End: map[string]int64{}}}
			if first >= 0 {
				reads = nil
			}
			for _, h := range history[max(first, 0) : last+1] {
				reads = append(reads, h.Offsets)
			}
			ranges, err := Ranges([]string{e.Task}, reads...)
			if err != nil {
				continue
			}
			out = append(out, Work{Instance: e.Instance, Cause: "lost", At: e.Time.Sub(start), Tasks: ranges})
		}
	}
	return out
}

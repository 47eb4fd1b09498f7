package bench

import (
	"slices"
	"sort"
	"time"

	"github.com/baton-streams/baton"
	binstance "github.com/baton-streams/baton/instance"
)

// Window is one scale event in a recording: it starts at Start (the
// action), the group was balanced again at Balanced (zero if never), and
// the figures look at processing up to End. The Baseline before Start is
// the steady state the event is compared with.
type Window struct {
	Event    string        `json:"event"`
	Start    time.Duration `json:"start_ns"`
	Balanced time.Duration `json:"balanced_ns"`
	End      time.Duration `json:"end_ns"`
	Baseline time.Duration `json:"baseline_ns"`
}

// TaskFigures is what one task went through during one event.
type TaskFigures struct {
	Task     string `json:"task"`
	Stateful bool   `json:"stateful"`
	From     string `json:"from"` // owner before the event ("" if it had none)
	To       string `json:"to"`   // owner at the end of the window
	Moved    bool   `json:"moved"`
	// NormalGap is the longest gap between samples showing progress in
	// the baseline; LongestGap the longest one during the event.
	NormalGap  time.Duration `json:"normal_gap_ns"`
	LongestGap time.Duration `json:"longest_gap_ns"`
	// Handover is, for a moved task, the time from the last record the old
	// owner processed to the first the new owner processed; when the new
	// owner processed none before End, to End (a lower bound).
	Handover time.Duration `json:"handover_ns,omitempty"`
	Revoked  bool          `json:"revoked"`
	// AssignedLag is the changelog lag the task had when it became active
	// on its new owner; Replayed what that owner restored before running.
	AssignedLag int64  `json:"assigned_lag"`
	Replayed    int64  `json:"replayed"`
	AssignedAs  string `json:"assigned_as,omitempty"` // warm, cold, caught up, stateless
	// LearnerRestore is, for a task warmed by a learner on its new owner,
	// the time from the learner's start to its readiness.
	LearnerRestore time.Duration `json:"learner_restore_ns,omitempty"`
}

// EventFigures are the figures of one event (design: "Figures that
// matter"), summarized over its tasks.
type EventFigures struct {
	Window
	TimeToBalance time.Duration `json:"time_to_balance_ns"`
	Moved         int           `json:"moved"`
	Unmoved       int           `json:"unmoved"`
	// UnmovedRevoked counts unmoved tasks that were revoked all the same.
	UnmovedRevoked int `json:"unmoved_revoked"`
	// UnmovedPause is the largest LongestGap/NormalGap over unmoved tasks
	// that had a normal gap; UnmovedGap and UnmovedNormal are that task's.
	UnmovedPause  float64       `json:"unmoved_pause_ratio"`
	UnmovedGap    time.Duration `json:"unmoved_gap_ns"`
	UnmovedNormal time.Duration `json:"unmoved_normal_gap_ns"`
	// HandoverMax and HandoverMedian are over moved tasks.
	HandoverMax    time.Duration `json:"handover_max_ns"`
	HandoverMedian time.Duration `json:"handover_median_ns"`
	// Replayed is records restored on the critical path by new owners
	// (EventRestored.Replayed), summed and at most; AssignedLagMax the
	// largest EventAssigned.Lag of a stateful task; Cold the stateful tasks
	// that became active cold.
	ReplayedSum int64 `json:"replayed_sum"`
	ReplayedMax int64 `json:"replayed_max"`
	// LearnerRestoreMax is the longest TaskFigures.LearnerRestore: how
	// long the slowest learner took to restore off the critical path.
	LearnerRestoreMax time.Duration `json:"learner_restore_max_ns"`
	AssignedLagMax    int64         `json:"assigned_lag_max"`
	Cold              int           `json:"cold"`
	// SteadyRate is records/s processed by the group in the baseline;
	// MinRate the lowest 1-second rate during the event; Dip their ratio.
	SteadyRate float64       `json:"steady_rate"`
	MinRate    float64       `json:"min_rate"`
	Dip        float64       `json:"dip"`
	Tasks      []TaskFigures `json:"tasks"`
}

// Analyze computes the figures of one event from a recording. stateful
// tells which task ids have state. It is pure.
func Analyze(rec Recording, w Window, stateful func(task string) bool) EventFigures {
	ef := EventFigures{Window: w}
	if w.Balanced > 0 {
		ef.TimeToBalance = w.Balanced - w.Start
	}
	byTask := map[string][]Progress{}
	for _, p := range rec.Progress {
		if p.At <= w.End {
			byTask[p.Task] = append(byTask[p.Task], p)
		}
	}
	inWindow := func(e baton.Event) bool {
		at := e.Time.Sub(rec.Start)
		return at >= w.Start && at <= w.End
	}
	tasks := make([]string, 0, len(byTask))
	for t := range byTask {
		tasks = append(tasks, t)
	}
	sort.Strings(tasks)
	var handovers []time.Duration
	for _, id := range tasks {
		ps := byTask[id]
		sort.SliceStable(ps, func(i, j int) bool { return ps[i].At < ps[j].At })
		tf := TaskFigures{Task: id, Stateful: stateful(id)}
		for _, p := range ps {
			if p.At <= w.Start {
				tf.From = p.Instance
			}
			tf.To = p.Instance
		}
		// The new owner is the instance it became active on in the window,
		// even one that processed nothing of it before the window closed
		// (with a backlog in front of it, say): that task moved.
		for _, e := range rec.Events {
			if e.Task == id && e.Kind == baton.EventAssigned && inWindow(e) && tf.From != "" && e.Instance != tf.From {
				tf.To = e.Instance
			}
		}
		tf.Moved = tf.From != "" && tf.From != tf.To
		tf.NormalGap = normalGap(ps, w.Start-w.Baseline, w.Start)
		tf.LongestGap = eventGap(ps, w.Start, w.End)
		if tf.Moved {
			tf.Handover = handover(rec, ps, w, id, tf.From, tf.To)
			handovers = append(handovers, tf.Handover)
		}
		learnerAt := time.Duration(-1)
		for _, e := range rec.Events {
			if e.Task != id || !inWindow(e) {
				continue
			}
			switch {
			case e.Kind == baton.EventLearner && e.Instance == tf.To:
				learnerAt = e.Time.Sub(rec.Start)
			case e.Kind == baton.EventLearnerReady && e.Instance == tf.To && learnerAt >= 0 && tf.LearnerRestore == 0:
				tf.LearnerRestore = e.Time.Sub(rec.Start) - learnerAt
			case e.Kind == baton.EventRevoked:
				tf.Revoked = true
			case e.Kind == baton.EventAssigned && e.Instance == tf.To:
				tf.AssignedAs = e.Detail
				if e.Lag != binstance.UnknownLag { // a cold task's lag is known once it restored
					tf.AssignedLag = e.Lag
				}
			case e.Kind == baton.EventRestored && e.Instance == tf.To:
				tf.Replayed += e.Replayed
			}
		}
		if tf.Moved {
			ef.Moved++
		} else {
			ef.Unmoved++
			if tf.Revoked {
				ef.UnmovedRevoked++
			}
			if tf.NormalGap > 0 {
				if r := float64(tf.LongestGap) / float64(tf.NormalGap); r > ef.UnmovedPause {
					ef.UnmovedPause, ef.UnmovedGap, ef.UnmovedNormal = r, tf.LongestGap, tf.NormalGap
				}
			}
		}
		if tf.Stateful {
			ef.ReplayedSum += tf.Replayed
			ef.ReplayedMax = max(ef.ReplayedMax, tf.Replayed)
			ef.LearnerRestoreMax = max(ef.LearnerRestoreMax, tf.LearnerRestore)
			ef.AssignedLagMax = max(ef.AssignedLagMax, tf.AssignedLag)
			if tf.AssignedAs == "cold" {
				ef.Cold++
			}
		}
		ef.Tasks = append(ef.Tasks, tf)
	}
	if len(handovers) > 0 {
		slices.Sort(handovers)
		ef.HandoverMax = handovers[len(handovers)-1]
		ef.HandoverMedian = handovers[len(handovers)/2]
	}
	ef.SteadyRate, ef.MinRate = rates(rec.Progress, w)
	if ef.SteadyRate > 0 {
		ef.Dip = ef.MinRate / ef.SteadyRate
	}
	return ef
}

// normalGap is the longest time between consecutive progress samples
// both within [from, to]: the task's ordinary rhythm.
func normalGap(ps []Progress, from, to time.Duration) time.Duration {
	var longest time.Duration
	prev := time.Duration(-1)
	for _, p := range ps {
		if p.At > to {
			break
		}
		if p.At >= from {
			if prev >= from {
				longest = max(longest, p.At-prev)
			}
			prev = p.At
		}
	}
	return longest
}

// eventGap is the longest time between consecutive progress samples that
// overlaps [from, to]; a task that made no progress since its last sample
// counts as stalled up to to.
func eventGap(ps []Progress, from, to time.Duration) time.Duration {
	var longest time.Duration
	prev := time.Duration(-1)
	for _, p := range ps {
		if p.At > to {
			break
		}
		if prev >= 0 && p.At > from {
			longest = max(longest, p.At-prev)
		}
		prev = p.At
	}
	if prev >= 0 && prev < to {
		longest = max(longest, to-prev)
	}
	return longest
}

// handover is the time from the last record of task the instance from
// processed before to's first record of it (after the event started) to
// that first record. The App's
// first- and last-record events give exact times and are used whenever
// there are some; progress samples are the fallback (a crashed owner
// reports no last record). Samples are only as punctual as the sampler:
// one taken late says the records were processed at the sample's time.
func handover(rec Recording, ps []Progress, w Window, task, from, to string) time.Duration {
	first, last := time.Duration(-1), time.Duration(-1)
	for _, e := range rec.Events {
		if at := e.Time.Sub(rec.Start); e.Kind == baton.EventFirstRecord && e.Task == task && e.Instance == to && at > w.Start && (first < 0 || at < first) {
			first = at
		}
	}
	if first < 0 {
		for _, p := range ps {
			if p.Instance == to && p.At > w.Start {
				first = p.At
				break
			}
		}
	}
	if first < 0 {
		first = w.End // nothing yet: at least until the window closed
	}
	for _, e := range rec.Events {
		if at := e.Time.Sub(rec.Start); e.Kind == baton.EventLastRecord && e.Task == task && e.Instance == from && at >= w.Start-w.Baseline && at <= first {
			last = max(last, at)
		}
	}
	if last < 0 {
		for _, p := range ps {
			if p.Instance == from && p.At < first {
				last = p.At
			}
		}
	}
	if last < 0 {
		return 0
	}
	return first - last
}

// rates returns the group's records/s over the baseline and the lowest
// rate in any 1-second window from the event's start to its end.
func rates(ps []Progress, w Window) (steady, lowest float64) {
	const step = 100 * time.Millisecond
	lo := w.Start - w.Baseline
	n := int((w.End-lo)/step) + 1
	buckets := make([]int64, n)
	for _, p := range ps {
		if p.At >= lo && p.At < w.End {
			buckets[(p.At-lo)/step] += p.N
		}
	}
	base := int(w.Baseline / step)
	var sum int64
	for _, b := range buckets[:base] {
		sum += b
	}
	if w.Baseline > 0 {
		steady = float64(sum) / w.Baseline.Seconds()
	}
	lowest = -1
	for i := base; i+10 <= len(buckets); i++ {
		var s int64
		for _, b := range buckets[i : i+10] {
			s += b
		}
		if lowest < 0 || float64(s) < lowest {
			lowest = float64(s)
		}
	}
	if lowest < 0 {
		lowest = 0
	}
	return steady, lowest
}

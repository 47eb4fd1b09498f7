package bench

import (
	"fmt"
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
	// GapWaiting is the most records the owner had polled for the task
	// and waiting to be processed in a sample inside its longest gap: more
	// than 0, the records were there and waited for the processor (the
	// loop, the workers, the CPU); 0, none had come (the fetch, the
	// broker); -1, no sample fell inside the gap.
	GapWaiting int64 `json:"gap_waiting"`
	// GapFetchWait is the longest the owner had waited for a poll under
	// way, and GapLoopWait the longest since a poll came back with none
	// asked for since, in samples inside that gap (Status.PolledAt and
	// Polling): the first is the fetch's share, the second the loop's.
	// 0 when no sample inside showed that case.
	GapFetchWait time.Duration `json:"gap_fetch_wait_ns"`
	GapLoopWait  time.Duration `json:"gap_loop_wait_ns"`
	// Handover is, for a moved task, the time from the last record the old
	// owner processed to the first the new owner processed; when the new
	// owner processed none before End, to End (a lower bound).
	Handover time.Duration `json:"handover_ns,omitempty"`
	// HandoverParts is where that time went.
	HandoverParts HandoverParts `json:"handover_parts"`
	Revoked       bool          `json:"revoked"`
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
	// UnmovedWaiting is that task's GapWaiting.
	UnmovedWaiting   int64         `json:"unmoved_waiting"`
	UnmovedFetchWait time.Duration `json:"unmoved_fetch_wait_ns"`
	UnmovedLoopWait  time.Duration `json:"unmoved_loop_wait_ns"`
	// InputGap is the longest time during the event between samples that
	// saw more input acknowledged (Recording.Input), and InputNormal the
	// longest in the baseline: every task pauses at least as long as
	// its input does. 0 when the input was not watched.
	InputGap    time.Duration `json:"input_gap_ns"`
	InputNormal time.Duration `json:"input_normal_gap_ns"`
	// SamplerGap is the longest time between two samples of the
	// recorder during the event: a task's gap no longer than it may be
	// the sampler's (the process stalled), not the task's. GCShare is the
	// part of the process's CPU time the garbage collector took during
	// the event (runtime/metrics' estimates).
	SamplerGap time.Duration `json:"sampler_gap_ns"`
	GCShare    float64       `json:"gc_share"`
	// HandoverMax and HandoverMedian are over moved tasks.
	HandoverMax    time.Duration `json:"handover_max_ns"`
	HandoverMedian time.Duration `json:"handover_median_ns"`
	// HandoverTask is the moved task with the longest handover, and
	// HandoverParts where its handover went.
	HandoverTask  string        `json:"handover_task,omitempty"`
	HandoverParts HandoverParts `json:"handover_max_parts"`
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
	SteadyRate float64 `json:"steady_rate"`
	MinRate    float64 `json:"min_rate"`
	Dip        float64 `json:"dip"`
	// UnavailableTaskSeconds is the sum over tasks of the time each was
	// unavailable during the event, and MaxUnavailable the most tasks
	// unavailable at once: a task is unavailable from its last record on
	// an owner that gave it up (or, lacking one, its revoke) until the
	// first record of its next owner (or the window's end). A crashed
	// owner reports nothing: its last progress sample is the last record.
	UnavailableTaskSeconds float64 `json:"unavailable_task_seconds"`
	MaxUnavailable         int     `json:"max_unavailable"`
	// Rounds is the rebalance rounds during the event: the generations
	// for which a leader computed a plan (EventLeader) in the window.
	Rounds int `json:"rounds"`
	// Predicted is the simulator's prediction of the same event, with
	// its ratios to the figures above; nil when none was made.
	Predicted *Prediction   `json:"predicted,omitempty"`
	Tasks     []TaskFigures `json:"tasks"`
}

// Analyze computes the figures of one event from a recording. stateful
// tells which task ids have state. It is pure.
func Analyze(rec Recording, w Window, stateful func(task string) bool) EventFigures {
	ef := EventFigures{Window: w}
	if w.Balanced > 0 {
		ef.TimeToBalance = w.Balanced - w.Start
	}
	ef.SamplerGap, ef.GCShare = processFigures(rec.Runtime, w)
	if len(rec.Input) > 0 {
		ef.InputGap, _ = eventGap(rec.Input, w.Start, w.End)
		ef.InputNormal = normalGap(rec.Input, w.Start-w.Baseline, w.Start)
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
		var gapFrom time.Duration
		tf.LongestGap, gapFrom = eventGap(ps, w.Start, w.End)
		gapTo := gapFrom + tf.LongestGap
		tf.GapWaiting = mostIn(rec.Waiting, rec.Runtime, id, tf.To, gapFrom, gapTo)
		tf.GapFetchWait = time.Duration(max(0, mostIn(rec.FetchWait, rec.Runtime, "", tf.To, gapFrom, gapTo)))
		tf.GapLoopWait = time.Duration(max(0, mostIn(rec.LoopWait, rec.Runtime, "", tf.To, gapFrom, gapTo)))
		if tf.Moved {
			tf.Handover, tf.HandoverParts = handover(rec, ps, w, id, tf.From, tf.To)
			handovers = append(handovers, tf.Handover)
			if tf.Handover >= ef.HandoverMax {
				ef.HandoverMax, ef.HandoverTask, ef.HandoverParts = tf.Handover, id, tf.HandoverParts
			}
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
					ef.UnmovedWaiting, ef.UnmovedFetchWait, ef.UnmovedLoopWait = tf.GapWaiting, tf.GapFetchWait, tf.GapLoopWait
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
		ef.HandoverMedian = handovers[len(handovers)/2]
	}
	var spans []span
	for _, tf := range ef.Tasks {
		spans = append(spans, unavailable(rec, byTask[tf.Task], w, tf)...)
	}
	ef.UnavailableTaskSeconds, ef.MaxUnavailable = sumSpans(spans)
	ef.Rounds = rounds(rec, w)
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
// processFigures is the sampler's longest gap during w and the garbage
// collector's share of the process's CPU time from the last sample before
// w to the last one in it.
func processFigures(rs []RuntimeSample, w Window) (time.Duration, float64) {
	var at []Progress
	first, last := -1, -1
	for i, r := range rs {
		at = append(at, Progress{At: r.At})
		if r.At <= w.Start {
			first = i
		}
		if r.At <= w.End {
			last = i
		}
	}
	share := 0.0
	if first >= 0 && last > first {
		if cpu := rs[last].CPU - rs[first].CPU; cpu > 0 {
			share = (rs[last].GCCPU - rs[first].GCCPU) / cpu
		}
	}
	gap, _ := eventGap(at, w.Start, w.End)
	return gap, share
}

func eventGap(ps []Progress, from, to time.Duration) (longest, start time.Duration) {
	prev := time.Duration(-1)
	for _, p := range ps {
		if p.At > to {
			break
		}
		if prev >= 0 && p.At > from && p.At-prev > longest {
			longest, start = p.At-prev, prev
		}
		prev = p.At
	}
	if prev >= 0 && prev < to && to-prev > longest {
		longest, start = to-prev, prev
	}
	return longest, start
}

// mostIn is the largest N of the samples of task on inst strictly between
// from and to (TaskFigures.GapWaiting, GapPollAge), 0 if samples fell
// there and none of them showed any, -1 if no sample did (the recorder
// samples every instance each time: its runtime samples say when it did).
func mostIn(samples []Progress, runtime []RuntimeSample, task, inst string, from, to time.Duration) int64 {
	most := int64(-1)
	for _, r := range runtime {
		if r.At > from && r.At < to {
			most = 0
			break
		}
	}
	for _, p := range samples {
		if p.Task == task && p.Instance == inst && p.At > from && p.At < to {
			most = max(most, p.N)
		}
	}
	return most
}

// HandoverParts splits a moved task's handover at two events: the old
// owner's revoke (EventRevoked: its commit done and the task given up) and
// the new owner's assignment (EventAssigned: the task active there). Each
// part is -1 when its events are missing (a crashed owner reports no
// revoke) or out of order.
type HandoverParts struct {
	// Release: the old owner's last record to its revoke.
	Release time.Duration `json:"release_ns"`
	// Assign: the revoke to the new owner's assignment (the group's
	// round, and a restore the new owner runs first).
	Assign time.Duration `json:"assign_ns"`
	// First: the assignment to the new owner's first record (its fetch,
	// and the records waiting in front of them).
	First time.Duration `json:"first_ns"`
}

// String is the parts in milliseconds.
func (h HandoverParts) String() string {
	ms := func(d time.Duration) string {
		if d < 0 {
			return "?"
		}
		return fmt.Sprint(d.Round(time.Millisecond).Milliseconds())
	}
	return fmt.Sprintf("release %s + assign %s + first record %s ms", ms(h.Release), ms(h.Assign), ms(h.First))
}

// handover is the time from the last record of task the instance from
// processed before to's first record of it (after the event started) to
// that first record, and where that time went. The App's first- and
// last-record events give exact times and are used whenever
// there are some; progress samples are the fallback (a crashed owner
// reports no last record). Samples are only as punctual as the sampler:
// one taken late says the records were processed at the sample's time.
func handover(rec Recording, ps []Progress, w Window, task, from, to string) (time.Duration, HandoverParts) {
	parts := HandoverParts{Release: -1, Assign: -1, First: -1}
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
		return 0, parts
	}
	revoked, assigned := time.Duration(-1), time.Duration(-1)
	for _, e := range rec.Events {
		at := e.Time.Sub(rec.Start)
		if e.Task != task || at < last || at > first {
			continue
		}
		switch {
		case e.Kind == baton.EventRevoked && e.Instance == from && revoked < 0:
			revoked = at
		case e.Kind == baton.EventAssigned && e.Instance == to:
			assigned = at // the last: the assignment the first record follows
		}
	}
	if revoked >= 0 {
		parts.Release = revoked - last
	}
	if assigned >= 0 {
		parts.First = first - assigned
		if revoked >= 0 && assigned >= revoked {
			parts.Assign = assigned - revoked
		}
	}
	return first - last, parts
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

// span is a time a task was unavailable.
type span struct{ from, to time.Duration }

// unavailable returns the times task tf.Task was unavailable during the
// window, clipped to it and merged. ps are its progress samples, sorted.
// Every revoke or loss of the task starts one: from the owner's last
// record of it (its EventLastRecord, else its last progress sample, else
// the revoke itself) until the first record after that on any instance.
// A moved task whose old owner reported no revoke (it crashed) is
// unavailable from its last sample there until its new owner's first
// record.
func unavailable(rec Recording, ps []Progress, w Window, tf TaskFigures) []span {
	var out []span
	at := func(e baton.Event) time.Duration { return e.Time.Sub(rec.Start) }
	// firstAfter is the first record of the task after t, on any
	// instance. A progress sample of the instance that stopped may show
	// records it processed before t, so only the first-record events
	// count for it.
	firstAfter := func(t time.Duration, stopped string) time.Duration {
		first := time.Duration(-1)
		for _, e := range rec.Events {
			if e.Kind == baton.EventFirstRecord && e.Task == tf.Task && at(e) > t && (first < 0 || at(e) < first) {
				first = at(e)
			}
		}
		for _, p := range ps {
			if p.At > t && p.Instance != stopped && (first < 0 || p.At < first) {
				first = p.At
				break
			}
		}
		if first < 0 || first > w.End {
			return w.End
		}
		return first
	}
	// lastOn is the last moment inst processed the task at or before t,
	// not before floor; -1 if none.
	lastOn := func(inst string, floor, t time.Duration) time.Duration {
		last := time.Duration(-1)
		for _, e := range rec.Events {
			if e.Kind == baton.EventLastRecord && e.Task == tf.Task && e.Instance == inst && at(e) >= floor && at(e) <= t {
				last = max(last, at(e))
			}
		}
		if last >= 0 {
			return last
		}
		for _, p := range ps {
			if p.Instance == inst && p.At >= floor && p.At <= t {
				last = p.At
			}
		}
		return last
	}
	stoppedOnFrom := false
	var floor time.Duration = w.Start - w.Baseline
	var stops []baton.Event
	for _, e := range rec.Events {
		if e.Task == tf.Task && (e.Kind == baton.EventRevoked || e.Kind == baton.EventLost) && at(e) >= w.Start && at(e) <= w.End {
			stops = append(stops, e)
		}
	}
	sort.SliceStable(stops, func(i, j int) bool { return stops[i].Time.Before(stops[j].Time) })
	for _, e := range stops {
		from := lastOn(e.Instance, floor, at(e))
		if from < 0 {
			from = at(e)
		}
		to := firstAfter(from, e.Instance)
		if e.Instance == tf.From {
			stoppedOnFrom = true
		}
		out = append(out, span{from, to})
		floor = to
	}
	if tf.Moved && !stoppedOnFrom {
		// The old owner stopped without a word: a crash.
		if from := lastOn(tf.From, w.Start-w.Baseline, w.End); from >= 0 {
			out = append(out, span{from, firstAfter(from, tf.From)})
		}
	}
	// Clip to the window and merge overlaps.
	var merged []span
	sort.Slice(out, func(i, j int) bool { return out[i].from < out[j].from })
	for _, s := range out {
		s.from = max(s.from, w.Start)
		s.to = min(s.to, w.End)
		if s.to <= s.from {
			continue
		}
		if n := len(merged); n > 0 && s.from <= merged[n-1].to {
			merged[n-1].to = max(merged[n-1].to, s.to)
			continue
		}
		merged = append(merged, s)
	}
	return merged
}

// sumSpans returns the task-seconds the spans cover and the most of them
// that overlap at one instant.
func sumSpans(spans []span) (taskSeconds float64, most int) {
	type edge struct {
		at time.Duration
		d  int
	}
	var edges []edge
	for _, s := range spans {
		taskSeconds += (s.to - s.from).Seconds()
		edges = append(edges, edge{s.from, 1}, edge{s.to, -1})
	}
	// Ends before starts at the same instant: touching spans do not overlap.
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at != edges[j].at {
			return edges[i].at < edges[j].at
		}
		return edges[i].d < edges[j].d
	})
	n := 0
	for _, e := range edges {
		n += e.d
		most = max(most, n)
	}
	return taskSeconds, most
}

// rounds counts the generations for which a leader computed a plan
// during the window.
func rounds(rec Recording, w Window) int {
	gens := map[int32]bool{}
	for _, e := range rec.Events {
		if at := e.Time.Sub(rec.Start); e.Kind == baton.EventLeader && at >= w.Start && at <= w.End {
			gens[e.Generation] = true
		}
	}
	return len(gens)
}

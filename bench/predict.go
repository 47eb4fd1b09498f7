package bench

import (
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/assign"
	binstance "github.com/baton-streams/baton/instance"
	"github.com/baton-streams/baton/sim"
)

// The figures the simulator predicts, as named in Prediction.Ratios.
const (
	FigureTimeToBalance    = "time_to_balance"
	FigureUnavailableSecs  = "unavailable_task_seconds"
	FigureMaxUnavailable   = "max_unavailable"
	FigureRestoredCritical = "restored_critical"
	FigureRounds           = "rounds"
)

// Where a model parameter came from.
const (
	FromEvent   = "event"   // measured in the event's window
	FromRun     = "run"     // measured over the policy's run up to the event's end
	FromAssumed = "assumed" // not measured: the simulator's default
)

// ModelParams are the parameters of the simulator's model that the bench
// measured (or, where it could not, assumed) for one event.
type ModelParams struct {
	// RestoreRate is records/s one restoring instance restored: the
	// records of the learners (from their start to their readiness, the
	// lag they closed plus what their task wrote meanwhile) and of the
	// restores on the critical path (from the pause to the restore, the
	// records replayed), over the time each instance spent restoring.
	RestoreRate    float64       `json:"restore_rate"`
	RestoreRecords int64         `json:"restore_records"`
	RestoreTime    time.Duration `json:"restore_time_ns"`
	RestoreFrom    string        `json:"restore_from"`
	// Join is the median time from the last member's JoinGroup of a
	// round to the leader's plan (the model's JoinGroup), over the rounds
	// in which when every member rejoined is known: follow-up rounds (a
	// member that gave up actives rejoins once it has committed them, at
	// its last revocation; the others at their first heartbeat after
	// their assignment) and, under eager, every round (each member
	// revokes everything, then rejoins). Sync is the median time from a
	// leader's plan to the last member's assignment of that generation
	// (SyncGroup).
	Join     time.Duration `json:"join_ns"`
	JoinFrom string        `json:"join_from"`
	Sync     time.Duration `json:"sync_ns"`
	SyncFrom string        `json:"sync_from"`
	// Start is the median time from when a newly active task may run
	// (its assignment, or the end of its restore) to its first record.
	Start     time.Duration `json:"start_ns"`
	StartFrom string        `json:"start_from"`
	// Heartbeat, Session and Commit are the instances' settings.
	Heartbeat time.Duration `json:"heartbeat_ns"`
	Session   time.Duration `json:"session_ns"`
	Commit    time.Duration `json:"commit_ns"`
}

// Prediction is what the simulator predicts for one event of the bench,
// run in-process on the scenario the bench wrote for it.
type Prediction struct {
	// Scenario is the file written (with ScaleConfig.SimScenarios), or
	// the scenario's name.
	Scenario               string        `json:"scenario"`
	Params                 ModelParams   `json:"params"`
	Balanced               bool          `json:"balanced"`
	TimeToBalance          time.Duration `json:"time_to_balance_ns"`
	UnavailableTaskSeconds float64       `json:"unavailable_task_seconds"`
	MaxUnavailable         int           `json:"max_unavailable"`
	RestoredCritical       float64       `json:"restored_critical"`
	Rounds                 int           `json:"rounds"`
	// Ratios are predicted / measured, by figure (the Figure*
	// constants); a figure measured as 0, or not predicted, has none.
	Ratios map[string]float64 `json:"ratios"`
	Error  string             `json:"error,omitempty"`
}

// groupMember is an instance of the group as it was before an event.
type groupMember struct {
	id     string
	status baton.Status
}

// simEvent is what happens to the group in an event, as a scenario line
// without its time: "join i3", "leave i3", "crash i4".
type simEvent struct {
	kind, instance string
}

// scenarioInput is everything a scenario of one event is written from.
type scenarioInput struct {
	policy string
	event  string
	cfg    ScaleConfig
	before []groupMember
	action simEvent
	rec    Recording
	w      Window
}

// timings returns the instances' heartbeat, session and commit settings.
func (c ScaleConfig) timings() (heartbeat, session, commit time.Duration) {
	heartbeat, session, commit = baton.DefaultHeartbeatInterval, baton.DefaultSessionTimeout, baton.DefaultCommitInterval
	if c.Heartbeat > 0 {
		heartbeat = c.Heartbeat
	}
	if c.Session > 0 {
		session = c.Session
	}
	return heartbeat, session, commit
}

// measureParams measures the model's parameters for the event in w.
func measureParams(in scenarioInput, rates map[string]float64) ModelParams {
	var p ModelParams
	p.Heartbeat, p.Session, p.Commit = in.cfg.timings()
	p.RestoreFrom = FromEvent
	recs, busy := measureRestore(in.rec, in.w.Start, in.w.End, rates)
	if recs == 0 || busy <= 0 {
		p.RestoreFrom = FromRun
		recs, busy = measureRestore(in.rec, 0, in.w.End, rates)
	}
	if recs > 0 && busy > 0 {
		p.RestoreRate, p.RestoreRecords, p.RestoreTime = float64(recs)/busy.Seconds(), recs, busy
	} else {
		p.RestoreRate, p.RestoreFrom = sim.DefaultRestoreRate, FromAssumed
	}
	d := sim.DefaultTiming()
	p.Join, p.JoinFrom, p.Sync, p.SyncFrom = d.Join, FromAssumed, d.Sync, FromAssumed
	rj := rejoins{heartbeat: p.Heartbeat, early: earlyBeat(in.policy), eager: in.policy == string(assign.Eager)}
	joins, syncs := measureRounds(in.rec, in.w.Start, in.w.End, rj)
	runJoins, runSyncs := measureRounds(in.rec, 0, in.w.End, rj)
	p.Start, p.StartFrom = d.Start, FromAssumed
	starts, runStarts := measureStarts(in.rec, in.w.Start, in.w.End), measureStarts(in.rec, 0, in.w.End)
	for _, m := range []struct {
		event, run []time.Duration
		dst        *time.Duration
		from       *string
	}{{joins, runJoins, &p.Join, &p.JoinFrom}, {syncs, runSyncs, &p.Sync, &p.SyncFrom}, {starts, runStarts, &p.Start, &p.StartFrom}} {
		switch {
		case len(m.event) > 0:
			*m.dst, *m.from = median(m.event), FromEvent
		case len(m.run) > 0:
			*m.dst, *m.from = median(m.run), FromRun
		}
	}
	return p
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// measureRestore sums, over the restores that started in [from, to], the
// records restored and each instance's time spent restoring (overlapping
// restores of one instance counted once). rates is each task's changelog
// rate, records/s: a learner also restores what its task writes while it
// catches up. A learner whose lag at its start is unknown counts only
// if its instance never held the task before (it restores from nothing).
func measureRestore(rec Recording, from, to time.Duration, rates map[string]float64) (records int64, busy time.Duration) {
	at := func(e baton.Event) time.Duration { return e.Time.Sub(rec.Start) }
	byInst := map[string][]span{}
	for i, e := range rec.Events {
		if at(e) < from || at(e) > to {
			continue
		}
		var end string
		switch e.Kind {
		case baton.EventLearner:
			end = string(baton.EventLearnerReady)
		case baton.EventPaused:
			end = string(baton.EventRestored)
		default:
			continue
		}
		for _, f := range rec.Events[i+1:] {
			if f.Instance != e.Instance || f.Task != e.Task {
				continue
			}
			if f.Kind == e.Kind {
				break // started again before it finished
			}
			if string(f.Kind) != end || at(f) > to {
				continue
			}
			d := f.Time.Sub(e.Time)
			var n int64
			switch {
			case e.Kind != baton.EventLearner:
				n = f.Replayed
			case f.Lag == binstance.UnknownLag:
			case e.Lag != binstance.UnknownLag:
				n = e.Lag - f.Lag + int64(math.Round(rates[e.Task]*d.Seconds()))
			case !heldBefore(rec, e):
				// A learner's lag is unknown while its stores open; one
				// on an instance that never held the task starts from an
				// empty store and restores the changelog up to its end
				// less its lag when ready.
				n = processedBy(rec, e.Task, at(f)) - f.Lag
			}
			if n > 0 && d > 0 {
				records += n
				byInst[e.Instance] = append(byInst[e.Instance], span{at(e), at(f)})
			}
			break
		}
	}
	for _, spans := range byInst {
		sort.Slice(spans, func(i, j int) bool { return spans[i].from < spans[j].from })
		cur := spans[0]
		for _, s := range spans[1:] {
			if s.from <= cur.to {
				cur.to = max(cur.to, s.to)
				continue
			}
			busy += cur.to - cur.from
			cur = s
		}
		busy += cur.to - cur.from
	}
	return records, busy
}

// heldBefore reports whether e's instance held e's task in some role
// before e.
func heldBefore(rec Recording, e baton.Event) bool {
	for _, f := range rec.Events {
		if f.Instance == e.Instance && f.Task == e.Task && f.Time.Before(e.Time) {
			switch f.Kind {
			case baton.EventAssigned, baton.EventLearner, baton.EventStandby, baton.EventRevoked, baton.EventLost:
				return true
			}
		}
	}
	return false
}

// processedBy is the records task had processed by at, on every
// instance: for a stateful task of wordcount, its changelog's length.
func processedBy(rec Recording, task string, at time.Duration) int64 {
	var n int64
	for _, p := range rec.Progress {
		if p.Task == task && p.At <= at {
			n += p.N
		}
	}
	return n
}

// rejoins is what measureRounds needs to know when members rejoin: their
// heartbeat interval, the cooperative client's early heartbeat (0 under
// eager) and whether the group is eager.
type rejoins struct {
	heartbeat, early time.Duration
	eager            bool
}

// earlyBeat is the early heartbeat after an assignment of a member of a
// group under policy: the simulator's (franz-go's) under the cooperative
// protocol, none under eager.
func earlyBeat(policy string) time.Duration {
	if policy == string(assign.Eager) {
		return 0
	}
	return sim.DefaultTiming().Early
}

// measureRounds returns, for the rounds whose leader planned in [from,
// to], the JoinGroup time of the rounds in which every member's rejoin is
// known and the SyncGroup time of every round (see ModelParams).
func measureRounds(rec Recording, from, to time.Duration, rj rejoins) (joins, syncs []time.Duration) {
	led := map[int32]time.Time{}
	followup := map[int32]bool{}
	assigned := map[int32]time.Time{}
	members := map[int32]map[string]time.Time{} // generation -> instance -> its assignment
	var revokes []baton.Event
	for _, e := range rec.Events {
		switch e.Kind {
		case baton.EventLeader:
			if at := e.Time.Sub(rec.Start); at >= from && at <= to {
				led[e.Generation] = e.Time
				followup[e.Generation] = strings.Contains(e.Detail, "followup=true")
			}
		case baton.EventRebalance:
			if e.Time.After(assigned[e.Generation]) {
				assigned[e.Generation] = e.Time
			}
			if members[e.Generation] == nil {
				members[e.Generation] = map[string]time.Time{}
			}
			members[e.Generation][e.Instance] = e.Time
		case baton.EventRevoked:
			revokes = append(revokes, e)
		}
	}
	// lastRevoke is inst's last revocation (any instance's, for "") in
	// (after, before), or the zero time.
	lastRevoke := func(inst string, after, before time.Time) time.Time {
		var last time.Time
		for _, e := range revokes {
			if (inst == "" || e.Instance == inst) && e.Time.After(after) && e.Time.Before(before) && e.Time.After(last) {
				last = e.Time
			}
		}
		return last
	}
	for _, g := range slices.Sorted(maps.Keys(led)) {
		if a, ok := assigned[g]; ok && a.After(led[g]) {
			syncs = append(syncs, a.Sub(led[g]))
		}
		next, ok := led[g+1]
		if !ok || len(members[g]) == 0 {
			continue
		}
		var last time.Time // the last member's rejoin for round g+1
		switch {
		case followup[g]:
			for inst, a := range members[g] {
				at := lastRevoke(inst, a, next)
				if at.IsZero() {
					d := sim.NextHeartbeat(0, 0, rj.heartbeat, rj.early)
					at = a.Add(d)
				}
				if at.After(last) {
					last = at
				}
			}
		case rj.eager:
			last = lastRevoke("", assigned[g], next)
		}
		if !last.IsZero() && !next.Before(last) {
			joins = append(joins, next.Sub(last))
		}
	}
	return joins, syncs
}

// measureStarts returns, for the first records of newly active tasks in
// [from, to], the time from when each could run on its instance (its
// last assignment there, or its restore after that) to the first record.
func measureStarts(rec Recording, from, to time.Duration) []time.Duration {
	type key struct{ inst, task string }
	ready := map[key]time.Time{}
	var out []time.Duration
	for _, e := range rec.Events {
		k := key{e.Instance, e.Task}
		switch e.Kind {
		case baton.EventAssigned, baton.EventRestored:
			ready[k] = e.Time
		case baton.EventFirstRecord:
			at := e.Time.Sub(rec.Start)
			if r, ok := ready[k]; ok && at >= from && at <= to && !e.Time.Before(r) {
				out = append(out, e.Time.Sub(r))
			}
			delete(ready, k)
		}
	}
	return out
}

// taskFigures returns, for every task seen, the records it had processed
// by at (for a stateful task of wordcount, every record processed wrote
// one changelog record: the changelog's length) and the records/s it
// processed over [from, at].
func taskFigures(rec Recording, from, at time.Duration) (processed map[string]int64, rates map[string]float64) {
	processed, rates = map[string]int64{}, map[string]float64{}
	for _, p := range rec.Progress {
		if p.At <= at {
			processed[p.Task] += p.N
			if p.At > from && at > from {
				rates[p.Task] += float64(p.N) / (at - from).Seconds()
			}
		}
	}
	return processed, rates
}

// writeScenario returns the scenario of one event: the group as it was
// before it (instances, where each task was active or standby, the state
// and changelog rate of every task), the model's parameters and the event
// at 0s.
func writeScenario(in scenarioInput, p ModelParams, processed map[string]int64, rates map[string]float64) string {
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	line("# `baton bench scale`, policy %s, event %q: the group just before the event,", in.policy, in.event)
	line("# with the model's parameters from what the bench measured in the same run.")
	line("# Run it with: baton sim FILE --policy %s", in.policy)
	line("name bench %s: %s", in.policy, in.event)
	standbys := 0
	for _, m := range in.before {
		for _, t := range m.status.Tasks {
			if t.Role == "standby" {
				standbys = 1
			}
		}
	}
	line("config standbys=%d max_learners=%d acceptable_lag=%d", standbys, assign.DefaultMaxLearners, in.cfg.AcceptableLag)
	line("# heartbeat, session and commit: the instances' settings.")
	line("# join: %s.", paramSource(p.JoinFrom, "median, over the rounds in which every member's rejoin is known (follow-up rounds; every round under eager), of the time from the last member's rejoin to the leader's plan"))
	line("# sync: %s.", paramSource(p.SyncFrom, "median, over rounds, of the time from the leader's plan to the last member's assignment"))
	line("# start: %s.", paramSource(p.StartFrom, "median, over the tasks that became active, of the time from their assignment (or restore) to their first record"))
	line("timing heartbeat=%v join=%v sync=%v start=%v session=%v commit=%v", dur(p.Heartbeat), dur(p.Join), dur(p.Sync), dur(p.Start), dur(p.Session), dur(p.Commit))
	if p.RestoreFrom == FromAssumed {
		line("# restore: assumed (the simulator's default): no learner or restore on the critical path was recorded.")
	} else {
		line("# restore: %s: %d records restored in %v of restoring (learners from start to ready, active restores from pause to restored).",
			paramSource(p.RestoreFrom, "measured"), p.RestoreRecords, p.RestoreTime.Round(time.Millisecond))
	}
	line("# state: records the task had processed by the event (one changelog record each);")
	line("# rate: records/s it processed over the %v before. Input: %d lines/s of three words;", in.w.Baseline, in.cfg.Rate)
	line("# there is no `load` line: none of the figures compared depends on processing capacity.")
	var ids []string
	for _, m := range in.before {
		for _, t := range m.status.Tasks {
			if t.Role == "active" {
				ids = append(ids, t.ID)
			}
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	for _, id := range ids {
		if isStateful(id) {
			line("task %s state=%d rate=%.1f", id, processed[id], rates[id])
		} else {
			line("task %s stateless", id)
		}
	}
	disk := onDisk(in, rates)
	if disk != nil {
		line("# disk: state an instance holds in no role (left by an earlier move), records behind: the lag it")
		line("# reported in the leader's last plan before the event, plus what its task wrote since.")
	}
	restore := fmt.Sprintf("%.0f", math.Max(1, p.RestoreRate))
	beats := nextBeats(in, p.Heartbeat)
	if len(beats) > 0 {
		line("# beat: the instance's first heartbeat after the event, from its last assignment before it")
		line("# (its heartbeat timer starts at the assignment and fires every heartbeat).")
	}
	for _, m := range in.before {
		var act, sb []string
		for _, t := range m.status.Tasks {
			switch t.Role {
			case "active":
				act = append(act, t.ID)
			case "standby":
				sb = append(sb, t.ID)
			}
		}
		slices.Sort(act)
		slices.Sort(sb)
		l := fmt.Sprintf("instance %s restore=%s", m.id, restore)
		if b, ok := beats[m.id]; ok {
			l += " beat=" + dur(b)
		}
		if len(act) > 0 {
			l += " active=" + strings.Join(act, ",")
		}
		if len(sb) > 0 {
			l += " standby=" + strings.Join(sb, ",")
		}
		if lags := disk[m.id]; len(lags) > 0 {
			var ds []string
			for _, id := range slices.Sorted(maps.Keys(lags)) {
				ds = append(ds, fmt.Sprintf("%s:%d", id, lags[id]))
			}
			l += " disk=" + strings.Join(ds, ",")
		}
		line("%s", l)
	}
	if in.action.kind == "join" {
		line("at 0s join %s restore=%s", in.action.instance, restore)
	} else {
		line("at 0s %s %s", in.action.kind, in.action.instance)
	}
	line("limit 1h")
	return b.String()
}

// nextBeats returns, per instance of the group before the event, the
// time from the event to its first heartbeat after it, worked out from its
// last assignment before the event as the simulator's model does.
func nextBeats(in scenarioInput, hb time.Duration) map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, m := range in.before {
		var last time.Duration = -1
		for _, e := range in.rec.Events {
			if at := e.Time.Sub(in.rec.Start); e.Kind == baton.EventRebalance && e.Instance == m.id && at <= in.w.Start {
				last = max(last, at)
			}
		}
		if last < 0 {
			continue
		}
		b := sim.NextHeartbeat(last, in.w.Start, hb, earlyBeat(in.policy)) - in.w.Start
		if b <= 0 {
			b = hb // a heartbeat at the event itself: the next one
		}
		out[m.id] = b
	}
	return out
}

// onDisk returns, per instance of the group before the event, the lag of
// each task's state it holds in no role: the lag it reported in the last
// plan a leader among them computed, plus the records the task wrote
// (rates) from that plan to the event. nil when no plan is known.
func onDisk(in scenarioInput, rates map[string]float64) map[string]map[string]int64 {
	var plan *baton.PlanStatus
	for _, m := range in.before {
		if p := m.status.Plan; p != nil && (plan == nil || p.Generation > plan.Generation) {
			plan = p
		}
	}
	if plan == nil {
		return nil
	}
	planAt := time.Duration(-1)
	for _, e := range in.rec.Events {
		if e.Kind == baton.EventLeader && e.Generation == plan.Generation {
			planAt = e.Time.Sub(in.rec.Start)
		}
	}
	out := map[string]map[string]int64{}
	for _, m := range in.before {
		held := map[string]bool{}
		for _, t := range m.status.Tasks {
			held[t.ID] = true
		}
		for task, lag := range plan.Lags[m.id] {
			if held[task] || !isStateful(task) || lag < 0 || lag == binstance.UnknownLag {
				continue
			}
			if planAt >= 0 && planAt < in.w.Start {
				lag += int64(math.Round(rates[task] * (in.w.Start - planAt).Seconds()))
			}
			if out[m.id] == nil {
				out[m.id] = map[string]int64{}
			}
			out[m.id][task] = lag
		}
	}
	return out
}

func paramSource(from, what string) string {
	switch from {
	case FromEvent:
		return what + ", in this event"
	case FromRun:
		return what + ", over the run up to this event (none in the event)"
	}
	return "assumed (the simulator's default; not measured)"
}

// dur prints a duration the scenario parser reads back, to the
// microsecond.
func dur(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	return max(d.Round(time.Microsecond), time.Microsecond).String()
}

// predict writes the event's scenario (to dir, if set), runs the
// simulator on it under the bench's policy and compares it with ef.
func predict(in scenarioInput, ef *EventFigures, dir string) (*Prediction, error) {
	processed, _ := taskFigures(in.rec, 0, in.w.Start)
	_, rates := taskFigures(in.rec, in.w.Start-in.w.Baseline, in.w.Start)
	p := measureParams(in, rates)
	text := writeScenario(in, p, processed, rates)
	name := fmt.Sprintf("%s-%s.txt", in.policy, slug(in.event))
	pr := &Prediction{Scenario: name, Params: p, Ratios: map[string]float64{}}
	if dir != "" {
		pr.Scenario = filepath.Join(dir, name)
		if err := os.WriteFile(pr.Scenario, []byte(text), 0o644); err != nil {
			return pr, fmt.Errorf("bench: writing the sim scenario of %s: %w", in.event, err)
		}
	}
	r, err := sim.RunText(pr.Scenario, text, in.policy)
	if err != nil {
		pr.Error = err.Error()
		return pr, nil
	}
	pr.Balanced, pr.TimeToBalance = r.Balanced, r.TimeToBalance
	pr.UnavailableTaskSeconds, pr.MaxUnavailable = r.UnavailableTaskSeconds, r.MaxUnavailable
	pr.RestoredCritical, pr.Rounds = r.RestoredCritical, r.Rebalances
	ratio := func(name string, pred, meas float64) {
		if meas > 0 && !math.IsNaN(pred) && !math.IsInf(pred, 0) {
			pr.Ratios[name] = pred / meas
		}
	}
	if pr.Balanced && ef.Balanced > 0 {
		ratio(FigureTimeToBalance, pr.TimeToBalance.Seconds(), ef.TimeToBalance.Seconds())
	}
	ratio(FigureUnavailableSecs, pr.UnavailableTaskSeconds, ef.UnavailableTaskSeconds)
	ratio(FigureMaxUnavailable, float64(pr.MaxUnavailable), float64(ef.MaxUnavailable))
	ratio(FigureRestoredCritical, pr.RestoredCritical, float64(ef.ReplayedSum))
	ratio(FigureRounds, float64(pr.Rounds), float64(ef.Rounds))
	return pr, nil
}

// slug makes an event's name a file name: "out 2->3" is "out-2-3".
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}

package bench

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-streams/baton"
	binstance "github.com/baton-streams/baton/instance"
	"github.com/baton-streams/baton/sim"
)

// TestAnalyzeUnavailable checks the unavailability figures and the rounds
// on a hand-made recording: 1_1 moves from a to b (last record on a at
// 10.15s, first on b at 10.65s: 0.5s); 0_2's owner c crashes (its last
// sample at 10.3s, no event) and b runs it from 11.3s (1s); 0_3 is revoked
// on a at 10.2s with no last-record event (its last sample there at
// 10.1s) and a runs it again from 10.4s (0.3s); 1_0 is not touched. All
// three are unavailable together from 10.3s to 10.4s. Leaders planned
// generations 5 and 6 in the window, 4 before it.
func TestAnalyzeUnavailable(t *testing.T) {
	start := time.Unix(1000, 0)
	s, ms := time.Second, time.Millisecond
	var ps []Progress
	ps = append(ps, progressEvery("a", "1_0", 0, 14*s, 100*ms)...)
	// a's sample of 1_1 at 10.2s, after its last record, shows records
	// processed before it: not a first record.
	ps = append(ps, progressEvery("a", "1_1", 0, 10*s+300*ms, 100*ms)...)
	ps = append(ps, progressEvery("b", "1_1", 10*s+700*ms, 14*s, 100*ms)...)
	ps = append(ps, progressEvery("c", "0_2", 0, 10*s+400*ms, 100*ms)...)
	ps = append(ps, progressEvery("b", "0_2", 11*s+300*ms, 14*s, 100*ms)...)
	ps = append(ps, progressEvery("a", "0_3", 0, 10*s+200*ms, 100*ms)...)
	ps = append(ps, progressEvery("a", "0_3", 10*s+500*ms, 14*s, 100*ms)...)
	ev := func(at time.Duration, kind baton.EventKind, inst, task string) baton.Event {
		return baton.Event{Time: start.Add(at), Kind: kind, Instance: inst, Task: task}
	}
	leader := func(at time.Duration, gen int32, followup bool) baton.Event {
		e := ev(at, baton.EventLeader, "a", "")
		e.Generation = gen
		e.Detail = "revoked=1 learners=0 followup=false"
		if followup {
			e.Detail = "revoked=1 learners=0 followup=true"
		}
		return e
	}
	rec := Recording{Start: start, Progress: sortProgress(ps), Events: []baton.Event{
		leader(9*s, 4, false),
		ev(10*s+150*ms, baton.EventLastRecord, "a", "1_1"),
		ev(10*s+160*ms, baton.EventRevoked, "a", "1_1"),
		ev(10*s+200*ms, baton.EventRevoked, "a", "0_3"),
		leader(10*s+200*ms, 5, true),
		ev(10*s+400*ms, baton.EventFirstRecord, "a", "0_3"),
		leader(10*s+500*ms, 6, false),
		ev(10*s+600*ms, baton.EventAssigned, "b", "1_1"),
		ev(10*s+650*ms, baton.EventFirstRecord, "b", "1_1"),
		ev(11*s+200*ms, baton.EventAssigned, "b", "0_2"),
		ev(11*s+300*ms, baton.EventFirstRecord, "b", "0_2"),
	}}
	w := Window{Event: EventOut, Start: 10 * s, Balanced: 12 * s, End: 13 * s, Baseline: 5 * s}
	ef := Analyze(rec, w, isStateful)
	if math.Abs(ef.UnavailableTaskSeconds-1.8) > 1e-9 {
		t.Errorf("unavailable task-seconds %v, want 1.8 (0.5 + 1 + 0.3)", ef.UnavailableTaskSeconds)
	}
	if ef.MaxUnavailable != 3 {
		t.Errorf("most unavailable at once %d, want 3 (from 10.3s to 10.4s)", ef.MaxUnavailable)
	}
	if ef.Rounds != 2 {
		t.Errorf("rounds %d, want 2 (generations 5 and 6)", ef.Rounds)
	}
}

// TestSpansTouching: spans that only touch do not count as overlapping.
func TestSpansTouching(t *testing.T) {
	s := time.Second
	secs, most := sumSpans([]span{{0, s}, {s, 2 * s}, {5 * s, 6 * s}})
	if secs != 3 || most != 1 {
		t.Errorf("sumSpans = %v task-seconds, %d at once; want 3 and 1", secs, most)
	}
	secs, most = sumSpans([]span{{0, 2 * s}, {s, 3 * s}, {2 * s, 4 * s}})
	if secs != 6 || most != 2 {
		t.Errorf("sumSpans = %v task-seconds, %d at once; want 6 and 2", secs, most)
	}
}

// TestMeasureParams: the restore rate from two overlapping learners on b
// (990 records from 10.05s to 10.15s, 515 from 10.1s to 10.25s, their
// task writing 100 records/s) and a cold restore on c (300 records
// replayed from 10s to 10.5s): 1805 records over 0.2s + 0.5s. The
// SyncGroup times of generations 5 (plan at 10.2s, last assignment at
// 10.3s) and 6 (10.35s, 10.38s), and the JoinGroup time of the follow-up
// round 6 (10.3s to 10.35s).
func TestMeasureParams(t *testing.T) {
	start := time.Unix(1000, 0)
	s, ms := time.Second, time.Millisecond
	ev := func(at time.Duration, kind baton.EventKind, inst, task string, lag int64) baton.Event {
		return baton.Event{Time: start.Add(at), Kind: kind, Instance: inst, Task: task, Lag: lag}
	}
	gen := func(e baton.Event, g int32, detail string) baton.Event {
		e.Generation, e.Detail = g, detail
		return e
	}
	restored := ev(10*s+500*ms, baton.EventRestored, "c", "1_3", 0)
	restored.Replayed = 300
	rec := Recording{Start: start, Events: []baton.Event{
		ev(10*s, baton.EventPaused, "c", "1_3", 0),
		ev(10*s+50*ms, baton.EventLearner, "b", "1_1", 1000),
		ev(10*s+100*ms, baton.EventLearner, "b", "1_2", 500),
		ev(10*s+150*ms, baton.EventLearnerReady, "b", "1_1", 20),
		gen(ev(10*s+200*ms, baton.EventLeader, "a", "", 0), 5, "revoked=1 learners=0 followup=true"),
		ev(10*s+250*ms, baton.EventLearnerReady, "b", "1_2", 0),
		gen(ev(10*s+250*ms, baton.EventRebalance, "a", "", 0), 5, ""),
		gen(ev(10*s+300*ms, baton.EventRebalance, "b", "", 0), 5, ""),
		ev(10*s+260*ms, baton.EventRevoked, "a", "1_1", 0),
		ev(10*s+320*ms, baton.EventRevoked, "b", "0_1", 0),
		gen(ev(10*s+350*ms, baton.EventLeader, "a", "", 0), 6, "revoked=0 learners=0 followup=false"),
		gen(ev(10*s+380*ms, baton.EventRebalance, "b", "", 0), 6, ""),
		ev(10*s+380*ms, baton.EventAssigned, "b", "0_1", 0),
		ev(10*s+420*ms, baton.EventFirstRecord, "b", "0_1", 0),
		restored,
		ev(10*s+520*ms, baton.EventFirstRecord, "c", "1_3", 0),
	}}
	rates := map[string]float64{"1_1": 100, "1_2": 100}
	recs, busy := measureRestore(rec, 10*s, 11*s, rates)
	if recs != 1805 || busy != 700*ms {
		t.Errorf("restored %d records in %v, want 1805 in 700ms", recs, busy)
	}
	// Learners whose lag at the start is unknown: d never held 1_4, so it
	// restored all of 1_4's changelog (1030 records processed by 10.2s)
	// but the 5 it lacked when ready; b held 1_5 as a standby before, so
	// where its learner started is not known: not counted.
	withUnknown := rec
	withUnknown.Progress = progressEvery("a", "1_4", 0, 10*s+500*ms, 100*ms)
	withUnknown.Events = append(slices.Clone(rec.Events),
		ev(5*s, baton.EventStandby, "b", "1_5", 0),
		ev(10*s, baton.EventLearner, "d", "1_4", binstance.UnknownLag),
		ev(10*s+50*ms, baton.EventLearner, "b", "1_5", binstance.UnknownLag),
		ev(10*s+200*ms, baton.EventLearnerReady, "d", "1_4", 5),
		ev(10*s+300*ms, baton.EventLearnerReady, "b", "1_5", 5))
	recs, busy = measureRestore(withUnknown, 10*s, 11*s, rates)
	if recs != 1805+1025 || busy != 900*ms {
		t.Errorf("with unknown start lags: restored %d records in %v, want 2830 in 900ms", recs, busy)
	}
	// Both members revoked in the follow-up: they rejoined at their last
	// revocation, b last at 10.32s.
	coop := rejoins{heartbeat: 200 * ms, early: 500 * ms}
	joins, syncs := measureRounds(rec, 10*s, 11*s, coop)
	if len(joins) != 1 || joins[0] != 30*ms {
		t.Errorf("joins %v, want [30ms]", joins)
	}
	// Without a's revocation a rejoins at its first heartbeat, 200ms after
	// its assignment at 10.25s, after the plan at 10.35s: nothing known.
	noA := rec
	noA.Events = slices.DeleteFunc(slices.Clone(rec.Events), func(e baton.Event) bool { return e.Kind == baton.EventRevoked && e.Instance == "a" })
	if joins, _ := measureRounds(noA, 10*s, 11*s, coop); len(joins) != 0 {
		t.Errorf("joins without a's revocation %v, want none", joins)
	}
	// Under eager every round counts, from the last revocation after the
	// previous generation's assignments (only those of 5 before 6 here).
	if joins, _ := measureRounds(rec, 10*s, 11*s, rejoins{heartbeat: 200 * ms, eager: true}); len(joins) != 1 || joins[0] != 30*ms {
		t.Errorf("eager joins %v, want [30ms]", joins)
	}
	if len(syncs) != 2 || syncs[0] != 100*ms || syncs[1] != 30*ms {
		t.Errorf("syncs %v, want [100ms 30ms]", syncs)
	}
	in := scenarioInput{cfg: SmokeScaleConfig(), rec: rec, w: Window{Start: 10 * s, End: 11 * s}}
	p := measureParams(in, rates)
	if p.RestoreFrom != FromEvent || math.Abs(p.RestoreRate-1805/0.7) > 1e-6 || p.JoinFrom != FromEvent || p.Join != 30*ms || p.Sync != 100*ms {
		t.Errorf("params %+v", p)
	}
	// b's 0_1: assigned at 10.38s, first record 40ms later; c's 1_3:
	// restored at 10.5s, first record 20ms later. The median of two is
	// the larger.
	if st := measureStarts(rec, 10*s, 11*s); !slices.Equal(st, []time.Duration{40 * ms, 20 * ms}) || p.Start != 40*ms || p.StartFrom != FromEvent {
		t.Errorf("starts %v, start %v (%s); want [40ms 20ms], 40ms from the event", st, p.Start, p.StartFrom)
	}
	if p.Session != time.Second || p.Heartbeat != baton.DefaultHeartbeatInterval {
		t.Errorf("session %v heartbeat %v, want the smoke config's 1s and baton's default", p.Session, p.Heartbeat)
	}
	// Nothing measured in an empty window, nor before it: assumed.
	in.w = Window{Start: 20 * s, End: 21 * s}
	in.rec.Events = nil
	p = measureParams(in, rates)
	if p.RestoreFrom != FromAssumed || p.RestoreRate != sim.DefaultRestoreRate || p.JoinFrom != FromAssumed || p.SyncFrom != FromAssumed {
		t.Errorf("params with nothing recorded %+v, want every one assumed", p)
	}
}

// TestPredict writes the scenario of a scale-out from a hand-made
// recording (two instances running six tasks each, a learner restoring at
// 10,000 records/s), reads it back as the simulator does and checks the
// prediction: the group, the parameters and the event are those of the
// bench, the figures exist and the ratios are predicted / measured.
func TestPredict(t *testing.T) {
	start := time.Unix(1000, 0)
	s, ms := time.Second, time.Millisecond
	cfg := SmokeScaleConfig()
	var ps []Progress
	var before []groupMember
	for i, inst := range []string{"i1", "i2"} {
		st := baton.Status{Instance: inst}
		for p := i * 3; p < i*3+3; p++ {
			for _, sub := range []string{"0_", "1_"} {
				id := sub + string(rune('0'+p))
				st.Tasks = append(st.Tasks, baton.TaskStatus{ID: id, Role: "active"})
				ps = append(ps, progressEvery(inst, id, 0, 12*s, 100*ms)...)
			}
		}
		before = append(before, groupMember{id: inst, status: st})
	}
	// i1 led generation 7 at 9.5s; i1 reported 1_3's state on its disk 40
	// records behind: 90 at the event, the task writing 100 records/s.
	before[0].status.Plan = &baton.PlanStatus{Generation: 7, Lags: map[string]map[string]int64{
		"i1": {"1_0": 0, "1_3": 40}, "i2": {"1_3": 0, "0_3": 0}}}
	plan := baton.Event{Time: start.Add(9*s + 500*ms), Kind: baton.EventLeader, Instance: "i1", Generation: 7}
	learner := baton.Event{Time: start.Add(10*s + 100*ms), Kind: baton.EventLearner, Instance: "i3", Task: "1_0", Lag: 1000}
	ready := baton.Event{Time: start.Add(10*s + 200*ms), Kind: baton.EventLearnerReady, Instance: "i3", Task: "1_0", Lag: 0}
	rec := Recording{Start: start, Progress: sortProgress(ps), Events: []baton.Event{plan, learner, ready}}
	w := Window{Event: EventOut, Start: 10 * s, Balanced: 11 * s, End: 12 * s, Baseline: s}
	ef := Analyze(rec, w, isStateful)
	ef.UnavailableTaskSeconds, ef.MaxUnavailable, ef.Rounds = 0.5, 2, 4
	dir := t.TempDir()
	pr, err := predict(scenarioInput{policy: "smooth", event: EventOut, cfg: cfg, before: before, action: simEvent{"join", "i3"}, rec: rec, w: w}, &ef, dir)
	if err != nil || pr.Error != "" {
		t.Fatalf("predict: %v %q", err, pr.Error)
	}
	if pr.Scenario != filepath.Join(dir, "smooth-out-2-3.txt") {
		t.Errorf("scenario written to %s", pr.Scenario)
	}
	text, err := os.ReadFile(pr.Scenario)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"instance i1 restore=10100 active=0_0,0_1,0_2,1_0,1_1,1_2 disk=1_3:90\n", "instance i2 restore=10100 active=0_3,0_4,0_5,1_3,1_4,1_5\n", "at 0s join i3 restore=10100\n",
		"task 1_0 state=1010 rate=100.0\n", "task 0_5 stateless\n", "session=1s", "acceptable_lag=50", "config standbys=0"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("scenario lacks %q:\n%s", want, text)
		}
	}
	sc, err := sim.Parse(pr.Scenario, strings.NewReader(string(text)))
	if err != nil {
		t.Fatal(err)
	}
	if len(sc.Instances) != 2 || len(sc.Tasks) != 12 || len(sc.Events) != 1 || sc.Events[0].Kind != sim.EventJoin {
		t.Errorf("scenario: %d instances, %d tasks, events %+v", len(sc.Instances), len(sc.Tasks), sc.Events)
	}
	if !pr.Balanced || pr.TimeToBalance <= 0 || pr.Rounds == 0 || pr.MaxUnavailable == 0 || pr.UnavailableTaskSeconds <= 0 {
		t.Errorf("prediction %+v: a scale-out of 2 to 3 moves tasks in some rounds", pr)
	}
	if got, want := pr.Ratios[FigureRounds], float64(pr.Rounds)/4; got != want {
		t.Errorf("rounds ratio %v, want %v", got, want)
	}
	if got, want := pr.Ratios[FigureTimeToBalance], pr.TimeToBalance.Seconds(); got != want {
		t.Errorf("time to balance ratio %v, want %v (measured 1s)", got, want)
	}
	if _, ok := pr.Ratios[FigureRestoredCritical]; ok {
		t.Errorf("a ratio to a measured 0 records restored: %v", pr.Ratios)
	}
}

// TestSimScenariosBadDir: a directory for the scenarios that cannot be
// made is an error naming it, before anything runs.
func TestSimScenariosBadDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(file, "scenarios")
	_, err := RunScale(context.Background(), ScaleConfig{SimScenarios: bad})
	if err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("RunScale with SimScenarios %s: %v, want an error naming it", bad, err)
	}
}

// TestPrintPredictions: the table shows each prediction beside the
// measured figure with its ratio, "-" where the measured figure is 0, and
// the error of a prediction that failed.
func TestPrintPredictions(t *testing.T) {
	ms := time.Millisecond
	ok := EventFigures{Window: Window{Event: EventOut, Balanced: 1}, TimeToBalance: 500 * ms, UnavailableTaskSeconds: 0.5, MaxUnavailable: 2, Rounds: 4,
		Predicted: &Prediction{Balanced: true, TimeToBalance: 800 * ms, UnavailableTaskSeconds: 0.75, MaxUnavailable: 2, Rounds: 3,
			Ratios: map[string]float64{FigureTimeToBalance: 1.6, FigureUnavailableSecs: 1.5, FigureMaxUnavailable: 1, FigureRounds: 0.75},
			Params: ModelParams{RestoreRate: 20000, RestoreFrom: FromEvent, Join: 201 * ms, JoinFrom: FromRun, Sync: ms / 2, SyncFrom: FromAssumed, Start: 30 * ms, StartFrom: FromEvent}}}
	bad := EventFigures{Window: Window{Event: EventIn, Balanced: 1}, Predicted: &Prediction{Error: "sim: no owner"}}
	res := &ScaleResult{Runs: []PolicyRun{{Policy: "smooth", Events: []EventFigures{ok, bad}}}}
	var b strings.Builder
	if err := PrintScale(&b, res); err != nil {
		t.Fatal(err)
	}
	var outLine, inLine string
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.Contains(l, "sim/meas") || !strings.Contains(l, "smooth") {
			continue
		}
		switch {
		case strings.Contains(l, EventOut) && strings.Contains(l, "1.60"):
			outLine = l
		case strings.Contains(l, EventIn) && strings.Contains(l, "sim: no owner"):
			inLine = l
		}
	}
	want := []string{"0.5s", "0.8s", "1.60", "0.50", "0.75", "1.50", "20000 e", "201.0ms r", "0.5ms a", "30.0ms e"}
	for _, w := range want {
		if !strings.Contains(outLine, w) {
			t.Errorf("prediction line %q lacks %q:\n%s", outLine, w, b.String())
		}
	}
	// Fields: "out", "2->3", the policy, then three per figure.
	if f := strings.Fields(outLine); len(f) < 18 || f[12] != "0" || f[13] != "0" || f[14] != "-" {
		t.Errorf("restored on the critical path measured 0: want 0, 0 and no ratio; line %q", outLine)
	}
	if inLine == "" {
		t.Errorf("no line with the failed prediction's error:\n%s", b.String())
	}
}

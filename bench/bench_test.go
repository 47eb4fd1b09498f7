package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/assign"
	"github.com/baton-streams/baton/internal/kafkatest"
	"github.com/baton-streams/baton/sim"
	"github.com/baton-streams/baton/state"
	"github.com/cockroachdb/pebble/v2"
)

// progressEvery returns samples of task on inst every step in [from, to).
func progressEvery(inst, task string, from, to, step time.Duration) []Progress {
	var out []Progress
	for at := from; at < to; at += step {
		out = append(out, Progress{At: at, Instance: inst, Task: task, N: 10})
	}
	return out
}

// TestAnalyze checks the figures on a hand-made recording: task 1_0
// stays on a and pauses once for 300ms; task 1_1 moves from a to b with a
// 500ms handover (exact times from the first- and last-record events) and
// 40 records replayed; throughput halves for a second.
func TestAnalyze(t *testing.T) {
	start := time.Unix(1000, 0)
	s := time.Second
	ms := time.Millisecond
	var ps []Progress
	ps = append(ps, progressEvery("a", "1_0", 0, 10*s, 100*ms)...)
	ps = append(ps, progressEvery("a", "1_0", 10*s+300*ms, 14*s, 100*ms)...)
	ps = append(ps, progressEvery("a", "1_1", 0, 10*s+200*ms, 100*ms)...)
	ps = append(ps, progressEvery("b", "1_1", 10*s+700*ms, 14*s, 100*ms)...)
	rec := Recording{Start: start, Progress: sortProgress(ps), Events: []baton.Event{
		{Time: start.Add(10*s + 150*ms), Kind: baton.EventLastRecord, Instance: "a", Task: "1_1"},
		// b warmed 1_1 as a learner from 10.05s to 10.12s; a learner of
		// 1_0 on c that never became its owner counts for nothing.
		{Time: start.Add(10*s + 50*ms), Kind: baton.EventLearner, Instance: "b", Task: "1_1"},
		{Time: start.Add(10*s + 60*ms), Kind: baton.EventLearner, Instance: "c", Task: "1_0"},
		{Time: start.Add(10*s + 120*ms), Kind: baton.EventLearnerReady, Instance: "b", Task: "1_1"},
		{Time: start.Add(10*s + 900*ms), Kind: baton.EventLearnerReady, Instance: "c", Task: "1_0"},
		{Time: start.Add(10*s + 160*ms), Kind: baton.EventRevoked, Instance: "a", Task: "1_1"},
		{Time: start.Add(10*s + 600*ms), Kind: baton.EventAssigned, Instance: "b", Task: "1_1", Lag: 40, Detail: "warm"},
		{Time: start.Add(10*s + 640*ms), Kind: baton.EventRestored, Instance: "b", Task: "1_1", Replayed: 40},
		{Time: start.Add(10*s + 650*ms), Kind: baton.EventFirstRecord, Instance: "b", Task: "1_1"},
		// Another task's records on the same instances say nothing of
		// 1_1's handover.
		{Time: start.Add(10*s + 100*ms), Kind: baton.EventFirstRecord, Instance: "b", Task: "0_7"},
		{Time: start.Add(10*s + 180*ms), Kind: baton.EventLastRecord, Instance: "a", Task: "0_8"},
	}}
	w := Window{Event: EventOut, Start: 10 * s, Balanced: 11 * s, End: 13 * s, Baseline: 5 * s}
	ef := Analyze(rec, w, isStateful)
	if ef.Moved != 1 || ef.Unmoved != 1 {
		t.Fatalf("moved %d unmoved %d, want 1 and 1", ef.Moved, ef.Unmoved)
	}
	if ef.TimeToBalance != s {
		t.Errorf("time to balance %v, want 1s", ef.TimeToBalance)
	}
	if ef.HandoverMax != 500*ms {
		t.Errorf("handover %v, want 500ms (last record at 10.15s, first at 10.65s)", ef.HandoverMax)
	}
	if want := (HandoverParts{Release: 10 * ms, Assign: 440 * ms, First: 50 * ms}); ef.HandoverTask != "1_1" || ef.HandoverParts != want {
		t.Errorf("longest handover %s: %s, want 1_1: %s (revoked at 10.16s, assigned at 10.6s)", ef.HandoverTask, ef.HandoverParts, want)
	}
	if ef.UnmovedNormal != 100*ms || ef.UnmovedGap != 400*ms {
		t.Errorf("unmoved gap %v vs normal %v, want 400ms vs 100ms", ef.UnmovedGap, ef.UnmovedNormal)
	}
	if ef.UnmovedRevoked != 0 {
		t.Errorf("unmoved revoked %d, want 0", ef.UnmovedRevoked)
	}
	if ef.ReplayedSum != 40 || ef.ReplayedMax != 40 || ef.AssignedLagMax != 40 || ef.Cold != 0 {
		t.Errorf("replayed %d/%d lag %d cold %d, want 40/40 40 0", ef.ReplayedSum, ef.ReplayedMax, ef.AssignedLagMax, ef.Cold)
	}
	if ef.LearnerRestoreMax != 70*ms {
		t.Errorf("learner restore %v, want 70ms (b's learner of 1_1)", ef.LearnerRestoreMax)
	}
	// Steady: 2 tasks x 10 records per 100ms = 200/s; the second after
	// 10s holds 12 samples: 120/s.
	if ef.SteadyRate != 200 {
		t.Errorf("steady rate %v, want 200", ef.SteadyRate)
	}
	if ef.MinRate != 120 || ef.Dip != 0.6 {
		t.Errorf("lowest rate %v (dip %v), want 120 (0.6)", ef.MinRate, ef.Dip)
	}
	var moved TaskFigures
	for _, tf := range ef.Tasks {
		if tf.Task == "1_1" {
			moved = tf
		}
	}
	if moved.From != "a" || moved.To != "b" || !moved.Revoked || moved.AssignedAs != "warm" {
		t.Errorf("moved task figures %+v", moved)
	}
}

func sortProgress(ps []Progress) []Progress {
	out := slices.Clone(ps)
	slices.SortStableFunc(out, func(a, b Progress) int { return cmp.Compare(a.At, b.At) })
	return out
}

func TestGaps(t *testing.T) {
	ps := []Progress{{At: 100}, {At: 200}, {At: 250}, {At: 600}}
	if g := normalGap(ps, 150, 600); g != 350 {
		t.Errorf("normalGap = %v, want 350 (gaps inside the window only)", g)
	}
	if g, from := eventGap(ps, 300, 1000); g != 400 || from != 600 {
		t.Errorf("eventGap = %v from %v, want 400 from 600 (stalled from 600 to the end)", g, from)
	}
	if g, from := eventGap(ps, 210, 500); g != 250 || from != 250 {
		t.Errorf("eventGap = %v from %v, want 250 from 250 (stalled from 250 to the end of the window)", g, from)
	}
	if g, from := eventGap(ps, 150, 700); g != 350 || from != 250 {
		t.Errorf("eventGap = %v from %v, want 350 from 250", g, from)
	}
}

// TestWaitingIn: records waiting in a sample inside the gap say the
// task's records were there; samples without them say none had come; no
// sample inside says nothing.
func TestWaitingIn(t *testing.T) {
	rt := []RuntimeSample{{At: 100}, {At: 200}, {At: 300}, {At: 400}, {At: 900}}
	w := []Progress{
		{At: 200, Instance: "a", Task: "1_0", N: 7},
		{At: 300, Instance: "a", Task: "1_0", N: 40},
		{At: 300, Instance: "b", Task: "1_0", N: 99},  // another owner
		{At: 300, Instance: "a", Task: "1_1", N: 99},  // another task
		{At: 400, Instance: "a", Task: "1_0", N: 500}, // the gap's end
	}
	for _, c := range []struct {
		from, to time.Duration
		want     int64
	}{
		{150, 400, 40},
		{100, 200, -1}, // no sample strictly inside
		{400, 900, -1},
		{350, 450, 500},
		{450, 1000, 0}, // a sample at 900, nothing waiting
	} {
		if got := mostIn(w, rt, "1_0", "a", c.from, c.to); got != c.want {
			t.Errorf("waiting in (%v, %v) = %d, want %d", c.from, c.to, got, c.want)
		}
	}
}

// TestScaleSmoke runs the scale script under smooth and eager on tiny
// state and checks what must hold whatever the timing: every event
// balanced, counts verified, every figure measured (none is 0 for want
// of samples), smooth never revoked a task that stayed and restored at
// most the acceptable lag on the critical path when scaling out and in,
// eager revoked unmoved tasks in every event, in every event the tasks
// smooth did not move paused less than those eager did not move, and the
// figures were written and drawn.
func TestScaleSmoke(t *testing.T) {
	skipShort(t)
	cfg := SmokeScaleConfig()
	cfg.Policies = []assign.Policy{assign.Smooth, assign.Eager}
	cfg.SimScenarios = t.TempDir()
	// Every store takes a second to open, as a large one does: on tiny
	// state a stop-the-world that closes and reopens the stores of the
	// tasks it keeps would last about one rebalance round, within the
	// gaps between samples, and smooth's unmoved tasks could not be told
	// from eager's. Neither policy's moved tasks wait for it on the
	// critical path more than the other's.
	cfg.Options = append(cfg.Options, baton.WithStoreOptions(state.WithPebbleOptions(func(*pebble.Options) { time.Sleep(openDelay) })))
	if testing.Verbose() {
		cfg.Log = os.Stderr
	}
	res, err := RunScale(context.Background(), cfg)
	if err != nil {
		// The events measured before the failure are still checked.
		t.Error(err)
		if res == nil {
			t.FailNow()
		}
	}
	for _, r := range res.Runs {
		for _, ef := range r.Events {
			t.Logf("%s %s: %d unmoved, gap %v (normal %v, x%.2f), %d revoked; handover max %v", r.Policy, ef.Event, ef.Unmoved,
				ef.UnmovedGap, ef.UnmovedNormal, ef.UnmovedPause, ef.UnmovedRevoked, ef.HandoverMax)
		}
		if len(r.Events) != 4 {
			t.Errorf("%s: %d events, want 4", r.Policy, len(r.Events))
		}
		if r.Words < cfg.Keys {
			t.Errorf("%s: verified %d words, want at least %d", r.Policy, r.Words, cfg.Keys)
		}
		for _, ef := range r.Events {
			if ef.Balanced == 0 || ef.Moved == 0 || ef.Moved+ef.Unmoved != int(2*cfg.Partitions) {
				t.Errorf("%s %s: balanced at %v, %d moved + %d unmoved, want balanced and %d tasks", r.Policy, ef.Event, ef.Balanced, ef.Moved, ef.Unmoved, 2*cfg.Partitions)
			}
			if ef.SteadyRate <= 0 {
				t.Errorf("%s %s: no steady throughput measured", r.Policy, ef.Event)
			}
			// A figure of 0 here means nothing was measured: no unmoved
			// task had samples before and during the event, or no moved
			// task was seen on both owners.
			if ef.Unmoved == 0 || ef.UnmovedNormal <= 0 || ef.UnmovedGap <= 0 || ef.HandoverMax <= 0 {
				t.Errorf("%s %s: unmoved gap %v (normal %v) over %d tasks, handover %v: a figure was not measured",
					r.Policy, ef.Event, ef.UnmovedGap, ef.UnmovedNormal, ef.Unmoved, ef.HandoverMax)
			}
			// Every event moves tasks: some were unavailable, in some rounds.
			if ef.UnavailableTaskSeconds <= 0 || ef.MaxUnavailable == 0 || ef.Rounds == 0 {
				t.Errorf("%s %s: unavailable %v task-s, at most %d at once, %d rounds: a figure was not measured",
					r.Policy, ef.Event, ef.UnavailableTaskSeconds, ef.MaxUnavailable, ef.Rounds)
			}
			checkPrediction(t, r.Policy, ef)
			if r.Policy == string(assign.Eager) && ef.UnmovedRevoked == 0 {
				t.Errorf("eager %s: no unmoved task was revoked, but eager revokes every task", ef.Event)
			}
			if r.Policy != string(assign.Smooth) {
				continue
			}
			if ef.UnmovedRevoked != 0 {
				t.Errorf("smooth %s: %d unmoved tasks were revoked", ef.Event, ef.UnmovedRevoked)
			}
			// A number, not only a comparison with eager: a task that was
			// stopped and started again waits at least openDelay for its
			// stores, and a loop that blocked across the rebalance stalls
			// every task, so a pause that long means an unmoved task
			// noticed the event. Smooth's measured about 40-140 ms.
			if g := unmovedLongest(ef); g >= openDelay {
				t.Errorf("smooth %s: a task that did not move paused %v, as long as reopening its stores takes (%v): it noticed the event", ef.Event, g, openDelay)
			}
			if ef.Event == EventOut && ef.LearnerRestoreMax <= 0 {
				t.Errorf("smooth %s: no learner restore measured, but the new instance warms its stateful tasks as learners", ef.Event)
			}
			if (ef.Event == EventOut || ef.Event == EventIn) && (ef.ReplayedMax > cfg.AcceptableLag || ef.Cold > 0) {
				t.Errorf("smooth %s: replayed up to %d (acceptable lag %d), %d cold", ef.Event, ef.ReplayedMax, cfg.AcceptableLag, ef.Cold)
			}
		}
	}
	// The unmoved tasks' longest gap, smooth against eager, event by
	// event: smooth never stops a task it does not move, eager stops
	// them all and reopens their stores.
	if len(res.Runs) == 2 {
		for i, ef := range res.Runs[0].Events {
			if i >= len(res.Runs[1].Events) {
				break
			}
			if res.Runs[1].Events[i].Event != ef.Event {
				t.Fatalf("event %d is %q under smooth, %q under eager", i, ef.Event, res.Runs[1].Events[i].Event)
			}
			smooth, eager := unmovedLongest(ef), unmovedLongest(res.Runs[1].Events[i])
			t.Logf("%s: unmoved tasks' longest gap %v under smooth, %v under eager", ef.Event, smooth, eager)
			if smooth >= eager {
				t.Errorf("%s: smooth's unmoved tasks paused %v, not less than eager's %v", ef.Event, smooth, eager)
			}
		}
	}
	dir := t.TempDir()
	if _, err := WriteJSON(dir, "scale.json", res); err != nil {
		t.Fatal(err)
	}
	var back ScaleResult
	b, err := os.ReadFile(filepath.Join(dir, "scale.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &back); err != nil || len(back.Runs) != 2 {
		t.Fatalf("scale.json does not read back: %v", err)
	}
	svg := filepath.Join(dir, "scale.svg")
	if err := PlotScale(res, svg); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(svg); err != nil || !strings.Contains(string(b), "<svg") {
		t.Fatalf("scale.svg: %v", err)
	}
	var table strings.Builder
	if err := PrintScale(&table, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), EventCrashStandby) {
		t.Errorf("table lacks the last event:\n%s", table.String())
	}
	if !strings.Contains(table.String(), "sim/meas") {
		t.Errorf("table lacks the predictions:\n%s", table.String())
	}
	t.Logf("\n%s", table.String())
}

// openDelay is how long every store takes to open in TestScaleSmoke.
const openDelay = time.Second

// unmovedLongest is the longest gap in the progress of any task an event
// did not move.
func unmovedLongest(ef EventFigures) time.Duration {
	var d time.Duration
	for _, tf := range ef.Tasks {
		if !tf.Moved {
			d = max(d, tf.LongestGap)
		}
	}
	return d
}

// checkPrediction checks that the simulator predicted every figure of an
// event of the smoke run, from a scenario the bench wrote, and that every
// figure and ratio is a finite number. How close the prediction is is not
// checked: it depends on the machine's load.
func checkPrediction(t *testing.T, policy string, ef EventFigures) {
	t.Helper()
	p := ef.Predicted
	if p == nil || p.Error != "" {
		t.Errorf("%s %s: no prediction: %+v", policy, ef.Event, p)
		return
	}
	b, err := os.ReadFile(p.Scenario)
	if err != nil {
		t.Errorf("%s %s: scenario not written: %v", policy, ef.Event, err)
	} else if _, err := sim.Parse(p.Scenario, bytes.NewReader(b)); err != nil {
		t.Errorf("%s %s: the scenario written does not parse: %v", policy, ef.Event, err)
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 }
	if !p.Balanced || !finite(p.UnavailableTaskSeconds) || !finite(p.RestoredCritical) || !finite(p.Params.RestoreRate) || p.Params.RestoreRate <= 0 {
		t.Errorf("%s %s: prediction %+v", policy, ef.Event, p)
	}
	if p.Rounds == 0 {
		t.Errorf("%s %s: the simulator predicts no rebalance round", policy, ef.Event)
	}
	for _, fig := range []string{FigureTimeToBalance, FigureUnavailableSecs, FigureMaxUnavailable, FigureRounds} {
		v, ok := p.Ratios[fig]
		if !ok || !finite(v) {
			t.Errorf("%s %s: ratio of %s: %v (present %v)", policy, ef.Event, fig, v, ok)
		}
	}
	for fig, v := range p.Ratios {
		if !finite(v) {
			t.Errorf("%s %s: ratio of %s is %v", policy, ef.Event, fig, v)
		}
	}
}

func TestRestoreSmoke(t *testing.T) {
	skipShort(t)
	cfg := SmokeRestoreConfig()
	if kafkatest.Real(t) {
		// On Apache Kafka (BATON_KAFKA=real), the run's own topics and
		// group on the shared cluster.
		cfg.Brokers = kafkatest.ForTest(t).Brokers
	}
	res, err := RunRestore(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.RestoreCPU <= 0 {
		t.Errorf("restore CPU not measured: %v", res.RestoreCPU)
	}
	if runtime.GOOS == "linux" && (res.StartRSS <= 0 || res.PeakRSS < res.StartRSS) {
		t.Errorf("resident set sizes not measured: start %d, peak %d", res.StartRSS, res.PeakRSS)
	}
	if res.Changelog < int64(res.Config.Keys) || res.Restored != res.Changelog {
		t.Errorf("changelog %d records, restored %d, want both >= %d and equal", res.Changelog, res.Restored, res.Config.Keys)
	}
	if len(res.Tasks) != int(res.Config.Partitions) || res.RestoreRate <= 0 || res.RawRate <= 0 || res.Ratio <= 0 {
		t.Errorf("figures missing: %+v", res)
	}
}

func TestThroughputSmoke(t *testing.T) {
	skipShort(t)
	res, err := RunThroughput(context.Background(), SmokeThroughputConfig())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Plain.Verified || res.Plain.LinesPS <= 0 {
		t.Errorf("plain consumer: %+v", res.Plain)
	}
	if want := len(res.Config.Workers) * len(res.Config.Guarantees); len(res.Baton) != want || want != 4 {
		t.Fatalf("%d baton runs, want %d (2 worker counts x 2 guarantees)", len(res.Baton), want)
	}
	for _, r := range res.Baton {
		if !r.Verified || r.LinesPS <= 0 || r.VsPlain <= 0 {
			t.Errorf("baton, %s, %d workers: %+v", r.Guarantee, r.Workers, r)
		}
	}
}

func TestHeartbeatSmoke(t *testing.T) {
	skipShort(t)
	res, err := RunHeartbeat(context.Background(), SmokeHeartbeatConfig())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 2 {
		t.Fatalf("%d runs, want 2", len(res.Runs))
	}
	fast, slow := res.Runs[0], res.Runs[1]
	for _, r := range res.Runs {
		if r.HeartbeatsPS <= 0 || r.CoordinatorPS < r.HeartbeatsPS || r.Out.Moved == 0 {
			t.Errorf("heartbeat %v: %+v", r.Interval, r)
		}
	}
	// Five times the interval is five times fewer heartbeats; allow for
	// the rounding of a short window.
	if fast.HeartbeatsPS < 2*slow.HeartbeatsPS {
		t.Errorf("heartbeats/s at %v = %.1f, at %v = %.1f: want the faster interval to send clearly more",
			fast.Interval, fast.HeartbeatsPS, slow.Interval, slow.HeartbeatsPS)
	}
}

// skipShort skips the runs on a cluster under -short (CI's race pass):
// they take a minute together and the normal pass runs them.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("a bench run on the embedded cluster; skipped with -short")
	}
}

// TestAnalyzeMoveBehindBacklog: a task revoked on a and assigned to b,
// which processed nothing of it before the window closed (a backlog in
// front of it), moved: it is neither an unmoved task nor a revoked
// unmoved one, and its handover runs to the window's end at least.
func TestAnalyzeMoveBehindBacklog(t *testing.T) {
	start := time.Unix(1000, 0)
	s, ms := time.Second, time.Millisecond
	var ps []Progress
	ps = append(ps, progressEvery("a", "1_0", 0, 14*s, 100*ms)...)
	ps = append(ps, progressEvery("a", "1_1", 0, 10*s+200*ms, 100*ms)...)
	rec := Recording{Start: start, Progress: sortProgress(ps), Events: []baton.Event{
		{Time: start.Add(10*s + 150*ms), Kind: baton.EventLastRecord, Instance: "a", Task: "1_1"},
		{Time: start.Add(10*s + 160*ms), Kind: baton.EventRevoked, Instance: "a", Task: "1_1"},
		{Time: start.Add(10*s + 600*ms), Kind: baton.EventAssigned, Instance: "b", Task: "1_1", Detail: "warm"},
	}}
	w := Window{Event: EventOut, Start: 10 * s, Balanced: 11 * s, End: 13 * s, Baseline: 5 * s}
	ef := Analyze(rec, w, isStateful)
	if ef.Moved != 1 || ef.Unmoved != 1 || ef.UnmovedRevoked != 0 {
		t.Fatalf("moved %d unmoved %d (revoked %d), want 1, 1 and 0", ef.Moved, ef.Unmoved, ef.UnmovedRevoked)
	}
	for _, tf := range ef.Tasks {
		if tf.Task == "1_1" && (tf.From != "a" || tf.To != "b" || tf.Handover != 13*s-(10*s+150*ms)) {
			t.Errorf("1_1: %+v, want a to b with a handover from its last record on a to the window's end", tf)
		}
	}
}

// TestProcessFigures: the sampler's longest gap in the event's window,
// and the collector's share of the CPU time over it.
func TestProcessFigures(t *testing.T) {
	ms := time.Millisecond
	var rs []RuntimeSample
	cpu, gc := 0.0, 0.0
	for at := time.Duration(0); at <= 3000*ms; at += 50 * ms {
		if at > 1000*ms && at < 1300*ms {
			continue // the sampler stalled from 1.0s to 1.3s
		}
		if at > 1000*ms && at <= 2000*ms {
			cpu, gc = cpu+0.1, gc+0.025 // a quarter of the CPU in the event
		} else {
			cpu, gc = cpu+0.1, gc+0.001
		}
		rs = append(rs, RuntimeSample{At: at, CPU: cpu, GCCPU: gc})
	}
	gap, share := processFigures(rs, Window{Start: 1000 * ms, End: 2000 * ms})
	if gap != 300*ms {
		t.Errorf("sampler gap %v, want 300ms", gap)
	}
	if share < 0.249 || share > 0.251 {
		t.Errorf("GC share %.3f, want 0.25", share)
	}
	if gap, share := processFigures(nil, Window{Start: 1000 * ms, End: 2000 * ms}); gap != 0 || share != 0 {
		t.Errorf("no samples: %v %v, want 0 0", gap, share)
	}
}

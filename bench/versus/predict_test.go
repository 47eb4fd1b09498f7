package versus

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-streams/baton/sim"
)

func scaleOutRun(conf string) Run {
	rec := synthetic()
	ev := Event{Name: "scale-out", At: 10 * time.Second, Steady: 5 * time.Second, After: 8 * time.Second, Live: []string{"a", "b", "c"}}
	return Run{Configuration: conf, Event: ev.Name, AppID: "wc-" + conf, Recording: &rec, Window: ev, Figures: Analyze(rec, ev)}
}

// TestMeasureFromOutside: partition 3 is silent from 11 s to 13 s against
// a 10 ms rhythm; a second stall on partition 2 overlapping it makes two
// at once.
func TestMeasureFromOutside(t *testing.T) {
	r := scaleOutRun("baton-smooth")
	m := measure(r)
	if math.Abs(m.UnavailableSeconds-1.99) > 1e-9 || m.MaxUnavailable != 1 {
		t.Errorf("unavailable %.3f task-s, %d at once; want 1.99 (2 s less the 10 ms normal gap) and 1", m.UnavailableSeconds, m.MaxUnavailable)
	}
	if m.Restored != nil {
		t.Errorf("restored %d, want not observed (no status line reports it)", *m.Restored)
	}
	if m.Until != 10*time.Second || !m.Balanced {
		t.Errorf("until %v (want 10s: the last arrival of every partition), balanced %v", m.Until, m.Balanced)
	}
	var arr []Arrival
	for _, a := range r.Recording.Arrivals {
		if a.Partition == 2 && a.At > 12*time.Second && a.At < 12500*ms {
			continue
		}
		arr = append(arr, a)
	}
	r.Recording.Arrivals = arr
	m = measure(r)
	if math.Abs(m.UnavailableSeconds-(1.99+0.49)) > 1e-9 || m.MaxUnavailable != 2 {
		t.Errorf("with partition 2 silent 12-12.5s: unavailable %.3f task-s, %d at once; want 2.48 and 2", m.UnavailableSeconds, m.MaxUnavailable)
	}
	// A stall that began before the event counts from the event.
	ev := r.Window
	ev.At = 12 * time.Second
	r.Window = ev
	m = measure(r)
	if math.Abs(m.UnavailableSeconds-(0.99+0.49)) > 1e-9 {
		t.Errorf("event at 12s: unavailable %.3f task-s, want 1.48 (partition 3 from 12s, partition 2 whole)", m.UnavailableSeconds)
	}
}

func TestMeasureRestore(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	st := []Status{
		{At: 9 * time.Second, Line: StatusLine{Instance: "a", Restored: n(0)}},
		{At: 10 * time.Second, Line: StatusLine{Instance: "a", Restored: n(100)}},   // before the window
		{At: 10500 * ms, Line: StatusLine{Instance: "b", Restored: n(0)}},           // b's first line: no interval
		{At: 11 * time.Second, Line: StatusLine{Instance: "a", Restored: n(5100)}},  // +5000 in 1 s
		{At: 11500 * ms, Line: StatusLine{Instance: "b", Restored: n(3000)}},        // +3000 in 1 s
		{At: 12 * time.Second, Line: StatusLine{Instance: "a", Restored: n(5100)}},  // idle
		{At: 12500 * ms, Line: StatusLine{Instance: "b", Restored: n(4000)}},        // +1000 in 1 s
		{At: 13 * time.Second, Line: StatusLine{Instance: "a", Restored: n(99999)}}, // after the window
	}
	recs, busy, clocked := measureRestore(st, 10*time.Second, 12500*ms)
	if recs != 9000 || busy != 3*time.Second || clocked {
		t.Errorf("measureRestore = %d records in %v (clocked %v), want 9000 in 3s, not clocked", recs, busy, clocked)
	}
	// With restore_ms, the time is what the instances spent restoring:
	// a's 5000 records in 200 ms, b's 3000 in 150 ms and 1000 in 50 ms.
	for i, v := range []int64{0, 0, 0, 200, 150, 200, 200, 900} {
		st[i].Line.RestoreMS = n(v)
	}
	recs, busy, clocked = measureRestore(st, 10*time.Second, 12500*ms)
	if recs != 9000 || busy != 400*time.Millisecond || !clocked {
		t.Errorf("with restore_ms: %d records in %v (clocked %v), want 9000 in 400ms, clocked", recs, busy, clocked)
	}
	// One line without it: that interval counts whole.
	st[4].Line.RestoreMS = nil
	if _, busy, clocked = measureRestore(st, 10*time.Second, 12500*ms); busy != 200*time.Millisecond+2*time.Second || clocked {
		t.Errorf("b without restore_ms at 11.5s: %v (clocked %v), want 2.2s, not clocked", busy, clocked)
	}
}

func TestModelOf(t *testing.T) {
	for _, tc := range []struct {
		conf, guarantee string
		want            Model
		err             string
	}{
		{conf: "baton-smooth", want: Model{Policy: "smooth", Heartbeat: 200 * ms, Session: 6 * time.Second, Commit: 200 * ms, AcceptableLag: 10000, MaxLearners: 2}},
		{conf: "baton-eager", want: Model{Policy: "eager", Heartbeat: 200 * ms, Session: 6 * time.Second, Commit: 200 * ms, AcceptableLag: 10000, MaxLearners: 2}},
		{conf: "kstreams", want: Model{Policy: "probing", Heartbeat: 3 * time.Second, Session: 45 * time.Second, Commit: 30 * time.Second, Probing: 10 * time.Minute, AcceptableLag: 10000, MaxLearners: 2}},
		{conf: "kstreams-probe1m", guarantee: "exactly-once", want: Model{Policy: "probing", Heartbeat: 3 * time.Second, Session: 45 * time.Second, Commit: 100 * ms, Probing: time.Minute, AcceptableLag: 10000, MaxLearners: 2}},
		{conf: "kstreams-streams", err: "not the streams protocol's broker-side assignor"},
		{conf: "goka", err: "no model of goka"},
	} {
		c, ok := findConfiguration(tc.conf)
		if !ok {
			t.Fatalf("no configuration %s", tc.conf)
		}
		g := tc.guarantee
		if g == "" {
			g = "at-least-once"
		}
		m, err := ModelOf(c, g)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one saying %q", tc.conf, err, tc.err)
		case tc.err == "" && (err != nil || m != tc.want):
			t.Errorf("%s: %+v, %v; want %+v", tc.conf, m, err, tc.want)
		}
	}
	bad := Configuration{Name: "x", Engine: "kstreams", Args: []string{"--probing-interval-ms", "soon"}}
	if _, err := ModelOf(bad, "at-least-once"); err == nil || !strings.Contains(err.Error(), `"soon"`) {
		t.Errorf("a probing interval of soon: %v, want an error naming it", err)
	}
}

// TestPredictScaleOut: the scenario written for each run describes the
// group at the event and reads back; baton's smooth policy balances
// within seconds, Kafka Streams' probing model not before its probing
// interval; the streams protocol has no model and says so.
func TestPredictScaleOut(t *testing.T) {
	// 19,000 lines processed by the event (a's and b's last status lines)
	// of 1,000 words: 4.75M records per count task, which grows by 2,500
	// records/s (10 lines/s). c's share of the 4 is one: its learner
	// restores at the assumed 100,000 records/s and catches up after
	// 4.75M / 97,500 = 48.7 s.
	res := &Result{Config: Config{Partitions: 4, WordsPerLine: 1000, Rate: 10, Guarantee: "at-least-once"}}
	for _, name := range []string{"baton-smooth", "kstreams-probe1m", "kstreams-streams"} {
		c, _ := findConfiguration(name)
		res.Config.Configurations = append(res.Config.Configurations, c)
		res.Runs = append(res.Runs, scaleOutRun(name))
	}
	dir := t.TempDir()
	if err := Predict(res, dir); err != nil {
		t.Fatal(err)
	}
	smooth, probing, streams := res.Runs[0].Prediction, res.Runs[1].Prediction, res.Runs[2].Prediction
	if smooth == nil || probing == nil || streams == nil {
		t.Fatal("a run has no prediction")
	}
	if streams.Error == "" {
		t.Errorf("kstreams-streams: predicted %+v, want no model", streams)
	}
	for _, p := range []*Prediction{smooth, probing} {
		if p.Error != "" {
			t.Fatalf("%s: %s", p.Scenario, p.Error)
		}
		text, err := os.ReadFile(p.Scenario)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Dir(p.Scenario) != dir {
			t.Errorf("scenario written to %s, want in %s", p.Scenario, dir)
		}
		for _, want := range []string{"task 1_3 state=4750000 rate=2500.0", "task 0_0 stateless",
			"instance a restore=100000 beat=", "active=0_0,0_1,1_0,1_1", "active=0_2,0_3,1_2,1_3", "at 0s join c restore=100000"} {
			if !strings.Contains(string(text), want) {
				t.Errorf("%s lacks %q:\n%s", p.Scenario, want, text)
			}
		}
		if _, err := sim.ParseString(p.Scenario, string(text)); err != nil {
			t.Errorf("%s does not read back: %v", p.Scenario, err)
		}
		if p.Params.RestoreFrom != FromAssumed {
			t.Errorf("%s: restore from %s, want assumed (no status line reports restored)", p.Scenario, p.Params.RestoreFrom)
		}
		if _, ok := p.Ratios[FigureTimeToBalance]; !ok || !p.Balanced {
			t.Errorf("%s: balanced %v, ratios %v: want a time-to-balance ratio", p.Scenario, p.Balanced, p.Ratios)
		}
	}
	if !strings.Contains(mustRead(t, probing.Scenario), "probing=1m0s") {
		t.Errorf("kstreams-probe1m's scenario lacks its probing interval")
	}
	if smooth.TimeToBalance < 48*time.Second || smooth.TimeToBalance >= 55*time.Second {
		t.Errorf("smooth: predicted balanced after %v, want soon after the learner catches up (48.7 s)", smooth.TimeToBalance)
	}
	if probing.TimeToBalance < time.Minute {
		t.Errorf("probing every minute: predicted balanced after %v, want not before the first probing rebalance after the warm-up caught up (1 min)", probing.TimeToBalance)
	}
	var out strings.Builder
	if err := Print(&out, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"baton sim beside the run", "kstreams-streams: no prediction", "probing"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the tables lack %q:\n%s", want, out.String())
		}
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestScenarioProcessIDs: the process ids Kafka Streams' status lines
// give (its assignor orders clients by them) reach the scenario, the
// joining instance's too, and the scenario reads back; an engine that
// gives none writes none.
func TestScenarioProcessIDs(t *testing.T) {
	ids := map[string]string{"a": "7c0e4b2a-0000-4000-8000-000000000002", "b": "1f3d9a10-0000-4000-8000-000000000001", "c": "f0aa0000-0000-4000-8000-000000000003"}
	res := &Result{Config: Config{Partitions: 4, WordsPerLine: 1000, Rate: 10, Guarantee: "at-least-once"}}
	for _, name := range []string{"kstreams-probe1m", "baton-smooth"} {
		c, _ := findConfiguration(name)
		res.Config.Configurations = append(res.Config.Configurations, c)
		r := scaleOutRun(name)
		if name == "kstreams-probe1m" {
			for i := range r.Recording.Status {
				r.Recording.Status[i].Line.Process = ids[r.Recording.Status[i].Line.Instance]
			}
		}
		res.Runs = append(res.Runs, r)
	}
	if err := Predict(res, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	ks, smooth := res.Runs[0].Prediction, res.Runs[1].Prediction
	if ks.Error != "" || smooth.Error != "" {
		t.Fatalf("predictions: %+v, %+v", ks, smooth)
	}
	text := mustRead(t, ks.Scenario)
	for _, want := range []string{"instance a restore=", "process=" + ids["a"], "process=" + ids["b"], "at 0s join c restore=100000 process=" + ids["c"]} {
		if !strings.Contains(text, want) {
			t.Errorf("%s lacks %q:\n%s", ks.Scenario, want, text)
		}
	}
	sc, err := sim.ParseString(ks.Scenario, text)
	if err != nil {
		t.Fatalf("%s does not read back: %v", ks.Scenario, err)
	}
	for _, in := range sc.Instances {
		if in.Process != ids[in.ID] {
			t.Errorf("instance %s: process %q, want %q", in.ID, in.Process, ids[in.ID])
		}
	}
	if s := mustRead(t, smooth.Scenario); strings.Contains(s, "process=") {
		t.Errorf("baton's scenario names process ids:\n%s", s)
	}
}

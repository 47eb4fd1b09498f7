package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-streams/baton/bench/versus"
	"github.com/baton-streams/baton/internal/kafkatest"
)

// TestBenchVersusShort runs `baton bench versus --short` on the real
// cluster for baton and every peer whose compare/<peer>/build.sh is in the
// tree, and checks that each counted every word exactly: the peers never
// rot unnoticed. Figures are not checked (no timing thresholds).
func TestBenchVersusShort(t *testing.T) {
	if !kafkatest.Real(t) {
		t.Skipf("%s is not real: bench versus measures engines on Apache Kafka only (run with %s=real)", kafkatest.EnvMode, kafkatest.EnvMode)
	}
	if testing.Short() {
		t.Skip("-short: bench versus --short takes a minute per engine")
	}
	compare, err := filepath.Abs(filepath.Join("..", "..", "compare"))
	if err != nil {
		t.Fatal(err)
	}
	engines := []string{"baton-smooth"}
	for _, peer := range []string{"kstreams", "goka"} {
		if versus.PeerAvailable(compare, peer) {
			engines = append(engines, peer)
		} else {
			t.Logf("peer %s: no compare/%s/build.sh in this tree; not run", peer, peer)
		}
	}
	tg := kafkatest.ForTest(t)
	out, scen := t.TempDir(), t.TempDir()
	stdout, stderr, code := runBaton(t, "", "bench", "versus", "--short", "--brokers", tg.Bootstrap(),
		"--engines", strings.Join(engines, ","), "--compare", compare, "--out", out, "--sim-scenarios", scen, "-v")
	t.Logf("stdout:\n%s", stdout)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, "versus.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res versus.Result
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	ran := map[string]bool{}
	for _, r := range res.Runs {
		ran[r.Configuration] = true
		if r.Error != "" || !r.Counts.Exact() || r.Counts.Words == 0 {
			t.Errorf("%s %s: error %q, counts %+v", r.Configuration, r.Event, r.Error, r.Counts)
		}
		// baton and Kafka Streams serve queries (a load of --short's 2
		// clients); goka does not. baton's answers are never wrong nor
		// older than their client saw; Kafka Streams' are what they are.
		switch q := r.Queries; {
		case r.Configuration == "goka":
			if q != nil {
				t.Errorf("goka %s: query figures %+v, but goka serves no queries", r.Event, q)
			}
		case q == nil || q.Steady.Reads == 0 || q.During.Reads == 0:
			t.Errorf("%s %s: no query figures (%+v)", r.Configuration, r.Event, q)
		case strings.HasPrefix(r.Configuration, "baton") && q.Steady.Wrong+q.During.Wrong+q.Steady.Back+q.During.Back > 0:
			t.Errorf("%s %s: wrong or back-in-time answers: %+v", r.Configuration, r.Event, q)
		default:
			t.Logf("%s %s: queries steady %+v during %+v", r.Configuration, r.Event, q.Steady, q.During)
		}
		// The simulator models baton and Kafka Streams' classic protocol:
		// their runs get a scenario and a prediction.
		if r.Configuration == "goka" {
			continue
		}
		switch p := r.Prediction; {
		case p == nil || p.Error != "":
			t.Errorf("%s %s: prediction %+v", r.Configuration, r.Event, p)
		case filepath.Dir(p.Scenario) != scen:
			t.Errorf("%s %s: scenario %s not in %s", r.Configuration, r.Event, p.Scenario, scen)
		}
	}
	for _, tp := range res.Throughput {
		if tp.Error != "" || tp.FromStart <= 0 || !tp.Counts.Exact() || tp.Counts.Words == 0 {
			t.Errorf("%s backlog: %+v", tp.Configuration, tp)
		}
	}
	for _, e := range engines {
		if !ran[e] {
			t.Errorf("%s: no run in versus.json", e)
		}
	}
}

// TestBenchVersusPredictFrom reads a saved run back and prints the
// simulator's predictions beside it; bad uses are refused by name.
func TestBenchVersusPredictFrom(t *testing.T) {
	dir := t.TempDir()
	rec := versus.Recording{Partitions: 3}
	for at := time.Duration(0); at <= 20*time.Second; at += 20 * time.Millisecond {
		for p := range int32(3) {
			if p == 2 && at > 10*time.Second && at < 11*time.Second {
				continue // 1_2 moves to c
			}
			rec.Arrivals = append(rec.Arrivals, versus.Arrival{Partition: p, At: at, Latency: 5 * time.Millisecond})
		}
	}
	for at := time.Duration(0); at <= 20*time.Second; at += time.Second {
		b := []string{"0_2", "1_2"}
		if at > 10*time.Second {
			b = nil
			rec.Status = append(rec.Status, versus.Status{At: at, Line: versus.StatusLine{Engine: "baton", Instance: "c", Active: []string{"0_2", "1_2"}}})
		}
		rec.Status = append(rec.Status,
			versus.Status{At: at, Line: versus.StatusLine{Engine: "baton", Instance: "a", Active: []string{"0_0", "0_1", "1_0", "1_1"}, Processed: int64(at / time.Millisecond)}},
			versus.Status{At: at, Line: versus.StatusLine{Engine: "baton", Instance: "b", Active: b, Processed: int64(at / time.Millisecond)}})
	}
	ev := versus.Event{Name: "scale-out", At: 10 * time.Second, Steady: 5 * time.Second, After: 5 * time.Second, Live: []string{"a", "b", "c"}}
	cfg := versus.ShortConfig()
	cfg.Partitions = 3
	cfg.Configurations, _ = versus.ParseConfigurations("baton-smooth")
	run := versus.Run{Configuration: "baton-smooth", Event: "scale-out", AppID: "wc", Window: ev, Figures: versus.Analyze(rec, ev)}
	res := versus.Result{Config: cfg, Runs: []versus.Run{run}}
	for name, v := range map[string]any{"versus.json": res, versus.RecordingFile(run): rec} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	scen := filepath.Join(t.TempDir(), "scenarios")
	stdout, stderr, code := runBaton(t, "", "bench", "versus", "--predict-from", dir, "--sim-scenarios", scen)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{"scale-out: baton sim beside the run", "baton-smooth", "smooth", " x"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if _, err := os.Stat(filepath.Join(scen, "baton-smooth-scale-out.txt")); err != nil {
		t.Errorf("scenario not written: %v", err)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--predict-from", filepath.Join(dir, "none")}, "versus.json"},
		{[]string{"--predict-from", dir, "--engines", "goka"}, "--engines do not apply"},
	} {
		_, stderr, code := runBaton(t, "", append([]string{"bench", "versus"}, bad.args...)...)
		if code != 2 || !strings.Contains(stderr, bad.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", bad.args, code, stderr, bad.want)
		}
	}
}

// TestBenchVersusBaseline: a --baseline that is no executable file is
// refused, naming it, before any cluster starts.
func TestBenchVersusBaseline(t *testing.T) {
	dir := t.TempDir()
	for _, exe := range []string{filepath.Join(dir, "missing"), dir} {
		_, stderr, code := runBaton(t, "", "bench", "versus", "--baseline", exe, "--brokers", "127.0.0.1:1", "--short")
		if code == 0 || !strings.Contains(stderr, "baton binary "+exe+": not an executable file") {
			t.Errorf("--baseline %s: exit %d, stderr %q; want an error naming it", exe, code, stderr)
		}
	}
}

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	out := t.TempDir()
	stdout, stderr, code := runBaton(t, "", "bench", "versus", "--short", "--brokers", tg.Bootstrap(),
		"--engines", strings.Join(engines, ","), "--compare", compare, "--out", out, "-v")
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
	}
	for _, tp := range res.Throughput {
		if tp.Error != "" || tp.FromStart <= 0 {
			t.Errorf("%s backlog: %+v", tp.Configuration, tp)
		}
	}
	for _, e := range engines {
		if !ran[e] {
			t.Errorf("%s: no run in versus.json", e)
		}
	}
}

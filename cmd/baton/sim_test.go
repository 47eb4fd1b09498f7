package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimAutoscale runs the small spike under both autoscalers, side by
// side, with a plot.
func TestSimAutoscale(t *testing.T) {
	plot := filepath.Join(t.TempDir(), "spike.svg")
	out, errOut, code := runBaton(t, "", "sim", "--quiet", "--autoscaler", "both", "--plot", plot, "../../scenarios/autoscale-spike-small.txt")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"autoscaler", "baton", "lag-threshold", "spike to new instances processing", "peak lag (records)", "instance-count changes"} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q:\n%s", want, out)
		}
	}
	svg, err := os.ReadFile(plot)
	if err != nil || !strings.Contains(string(svg), "instances") || !strings.Contains(string(svg), "total lag") {
		t.Errorf("plot: %v\n%.300s", err, svg)
	}
	// One autoscaler, with its timeline.
	out, _, code = runBaton(t, "", "sim", "--detail=false", "--autoscaler", "lag", "../../scenarios/autoscale-spike-small.txt")
	if code != 0 || !strings.Contains(out, "autoscaler lag-threshold)") || !strings.Contains(out, "autoscale  lag-threshold: ") || strings.Contains(out, "autoscale  baton: ") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

func TestSimAutoscaleBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.txt")
	os.WriteFile(bad, []byte("tasks stateful=2\ninstances 1\nlimit 1h\nload 100\n"), 0o644)
	noScaler := filepath.Join(dir, "plain.txt")
	os.WriteFile(noScaler, []byte("tasks stateful=2\ninstances 1\nlimit 1m\nconfig worker_rate=10\nload 100\n"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sim", bad}, "bad.txt:4: load needs the rate a worker processes"},
		{[]string{"sim", "--autoscaler", "magic", "../../scenarios/autoscale-spike-small.txt"}, `--autoscaler "magic"`},
		{[]string{"sim", "--autoscaler", "baton", noScaler}, "no `autoscale baton` line"},
	} {
		out, errOut, code := runBaton(t, "", c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want 2 and %q\n%s", c.args, code, errOut, c.want, out)
		}
	}
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchScaleBadSimScenarios: a --sim-scenarios directory that cannot
// be made is bad input (exit 2) named in the error, before anything runs.
func TestBenchScaleBadSimScenarios(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(file, "scenarios")
	out, errOut, code := runBaton(t, "", "bench", "scale", "--smoke", "--sim-scenarios", bad)
	if code != 2 || !strings.Contains(errOut, "--sim-scenarios") || !strings.Contains(errOut, bad) {
		t.Errorf("exit %d, stderr %q, stdout %q: want exit 2 and an error naming --sim-scenarios %s", code, errOut, out, bad)
	}
}

// TestBenchProfiles: --allocprofile and --blockprofile write pprof
// profiles of the run (gzipped protocol buffers, with samples), and a path
// that cannot be written is refused, named, before the run.
func TestBenchProfiles(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs bench throughput --smoke")
	}
	dir := t.TempDir()
	allocs, block := filepath.Join(dir, "allocs.prof"), filepath.Join(dir, "block.prof")
	_, errOut, code := runBaton(t, "", "bench", "throughput", "--smoke", "--workers", "1", "--guarantee", "at-least-once",
		"--allocprofile", allocs, "--blockprofile", block)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errOut)
	}
	for _, p := range []string{allocs, block} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 100 || b[0] != 0x1f || b[1] != 0x8b {
			t.Errorf("%s: %d bytes, not a gzipped profile with samples", p, len(b))
		}
	}
	bad := filepath.Join(dir, "missing", "block.prof")
	_, errOut, code = runBaton(t, "", "bench", "throughput", "--smoke", "--blockprofile", bad)
	if code == 0 || !strings.Contains(errOut, "--blockprofile") || !strings.Contains(errOut, bad) {
		t.Errorf("--blockprofile %s: exit %d, stderr %q; want an error naming it", bad, code, errOut)
	}
}

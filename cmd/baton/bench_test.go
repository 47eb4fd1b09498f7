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

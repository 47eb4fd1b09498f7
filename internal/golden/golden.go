// Package golden compares test output with golden files, and rewrites
// them when a test runs with -update.
package golden

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Check compares got with the file at path; with update it writes got
// there instead. A difference fails t with the first differing line and
// how to accept the change (rerun with -update after review).
func Check(t testing.TB, path string, got []byte, update bool) {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (rerun with -update after checking the change):\n%s", path, FirstDiff(string(want), string(got)))
	}
}

// FirstDiff shows the first line where two texts differ, or "" if none.
func FirstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d:\n  want: %s\n  got:  %s", i+1, w, g)
		}
	}
	return ""
}

// Scripts runs every script matching pattern (say
// "testdata/scenarios/*.txt") as a subtest named after the file: run turns
// the script into a trace, which is compared with the .golden file next to
// the script (rewritten with update). A script error fails the subtest
// with the trace so far.
func Scripts(t *testing.T, pattern string, run func(script string) (string, error), update bool) {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts match %s: %v", pattern, err)
	}
	for _, file := range files {
		base := strings.TrimSuffix(file, filepath.Ext(file))
		t.Run(filepath.Base(base), func(t *testing.T) {
			script, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			trace, err := run(string(script))
			if err != nil {
				t.Fatalf("%s: %v\ntrace so far:\n%s", file, err, trace)
			}
			Check(t, base+".golden", []byte(trace), update)
		})
	}
}

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestFaultsFindTheirText: every fault's text is found once in its file,
// so the list follows the code it breaks without a mutate run (which
// takes minutes per fault) to notice that it moved.
func TestFaultsFindTheirText(t *testing.T) {
	names := map[string]bool{}
	for _, f := range faults {
		if names[f.name] {
			t.Errorf("fault %s: listed twice", f.name)
		}
		names[f.name] = true
		src, err := os.ReadFile(filepath.Join("..", "..", f.file))
		if err != nil {
			t.Errorf("fault %s: %v", f.name, err)
			continue
		}
		if n := bytes.Count(src, []byte(f.old)); n != 1 {
			t.Errorf("fault %s: its text is found %d times in %s, want once: the code moved; update the fault", f.name, n, f.file)
		}
		if len(f.tests) == 0 {
			t.Errorf("fault %s: no test named to catch it", f.name)
		}
	}
}

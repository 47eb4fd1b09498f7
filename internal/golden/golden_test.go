package golden

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestFirstDiff(t *testing.T) {
	if d := FirstDiff("a\nb\n", "a\nb\n"); d != "" {
		t.Errorf("equal texts: %q", d)
	}
	if d := FirstDiff("a\nb\nc", "a\nx\nc"); !strings.Contains(d, "line 2") || !strings.Contains(d, "x") {
		t.Errorf("FirstDiff = %q, want line 2 with x", d)
	}
	if d := FirstDiff("a", "a\nextra"); !strings.Contains(d, "line 2") {
		t.Errorf("longer text: %q", d)
	}
}

func TestCheckUpdateThenMatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "x.golden")
	Check(t, path, []byte("hello\n"), true)
	Check(t, path, []byte("hello\n"), false)
}

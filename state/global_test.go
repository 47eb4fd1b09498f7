package state

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// TestOpenGlobal: a global store lives in <state-dir>/.global/<store>,
// keeps its data and checkpoint across a close, is not listed as a task's
// state, and refuses names that are not one path element.
func TestOpenGlobal(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	s, err := OpenGlobal(dir, "ref", log)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, GlobalDir, "ref"); s.Dir() != want {
		t.Errorf("dir %s, want %s", s.Dir(), want)
	}
	var b Batch
	b.Put([]byte("k"), []byte("v"))
	if err := s.Apply(&b, 7); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenGlobal(dir, "ref", log); !errors.Is(err, ErrLocked) {
		t.Errorf("second open: %v, want ErrLocked", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	local, err := ListLocal(dir)
	if err != nil || len(local) != 0 {
		t.Errorf("ListLocal = %v, %v; want no task state", local, err)
	}
	s, err = OpenGlobal(dir, "ref", log)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, ok, err := s.Get([]byte("k")); err != nil || !ok || string(v) != "v" {
		t.Errorf("Get after reopen = %q, %v, %v", v, ok, err)
	}
	if cp, ok, err := s.Checkpoint(); err != nil || !ok || cp != 7 {
		t.Errorf("Checkpoint after reopen = %d, %v, %v", cp, ok, err)
	}
	for _, bad := range []string{"", ".x", "a/b"} {
		if _, err := OpenGlobal(dir, bad, log); !errors.Is(err, ErrInvalidName) {
			t.Errorf("OpenGlobal(%q): %v, want ErrInvalidName", bad, err)
		}
	}
}

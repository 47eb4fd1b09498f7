package state

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

func openT(t *testing.T, stateDir, task, store string, opts ...Option) *PebbleStore {
	t.Helper()
	s, err := OpenPebble(stateDir, task, store, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func closeT(t *testing.T, s Store) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestPebbleReopenKeepsDataAndCheckpoint(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, "1_3", "counts")
	apply(t, s, 41, "hello=1", "world=2")
	if got := s.Dir(); got != filepath.Join(dir, "1_3", "counts") {
		t.Errorf("Dir() = %s, want <state-dir>/<task>/<store>", got)
	}
	closeT(t, s)

	s = openT(t, dir, "1_3", "counts")
	defer closeT(t, s)
	if off, ok := checkpoint(t, s); !ok || off != 41 {
		t.Errorf("checkpoint after reopen = %d, %v; want 41", off, ok)
	}
	if got := scan(t, s, nil, nil); !slices.Equal(got, []string{"hello=1", "world=2"}) {
		t.Errorf("data after reopen: %v", got)
	}
	// A second store of the same task is a separate database.
	other := openT(t, dir, "1_3", "totals")
	defer closeT(t, other)
	if _, ok := checkpoint(t, other); ok {
		t.Error("a new store of the same task has a checkpoint")
	}
}

func TestPebbleWipeSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, "0_0", "s")
	apply(t, s, 9, "a=1")
	if err := s.Wipe(); err != nil {
		t.Fatal(err)
	}
	closeT(t, s)
	s = openT(t, dir, "0_0", "s")
	defer closeT(t, s)
	if _, ok := checkpoint(t, s); ok || len(scan(t, s, nil, nil)) != 0 {
		t.Error("wiped store came back with data or checkpoint")
	}
}

func TestPebbleStoreOpenTwiceIsLocked(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, "0_0", "s")
	_, err := OpenPebble(dir, "0_0", "s")
	if !errors.Is(err, ErrLocked) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("second open: err = %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), filepath.Join(dir, "0_0", "s")) || !strings.Contains(err.Error(), "0_0") {
		t.Errorf("error does not name the task and directory: %v", err)
	}
	// OpenOrWipe must not wipe a store that is merely open.
	if _, err := OpenOrWipe(dir, "0_0", "s", slog.New(slog.DiscardHandler)); !errors.Is(err, ErrLocked) {
		t.Errorf("OpenOrWipe on an open store: err = %v, want ErrLocked", err)
	}
	closeT(t, s)
	closeT(t, openT(t, dir, "0_0", "s"))
}

func TestPebbleInvalidNames(t *testing.T) {
	for _, c := range [][2]string{{"", "s"}, {"..", "s"}, {"0_0", "../x"}, {"a/b", "s"}, {".lock", "s"}, {"0_0", ""}, {"0 0", "s"}} {
		if _, err := OpenPebble(t.TempDir(), c[0], c[1]); !errors.Is(err, ErrInvalidName) {
			t.Errorf("OpenPebble(task %q, store %q): err = %v, want ErrInvalidName", c[0], c[1], err)
		}
	}
}

// newStoreOnDisk makes a closed store with some data and returns the
// state dir and the store's dir.
func newStoreOnDisk(t *testing.T, task string) (stateDir, dir string) {
	t.Helper()
	stateDir = t.TempDir()
	s := openT(t, stateDir, task, "counts")
	apply(t, s, 7, "a=1", "b=2")
	closeT(t, s)
	return stateDir, s.Dir()
}

func rewriteFiles(t *testing.T, dir, prefix string, edit func(data []byte) []byte) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, edit(data), 0o644); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n == 0 {
		t.Fatalf("no %s* file in %s", prefix, dir)
	}
}

// rawPebble writes records straight into the database in dir, bypassing
// the store, to fake damage that passes Pebble's own checks.
func rawPebble(t *testing.T, dir string, write func(db *pebble.DB) error) {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{Logger: storeLogger{&PebbleStore{}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := write(db); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestPebbleCorruption(t *testing.T) {
	cases := []struct {
		name    string
		damage  func(t *testing.T, stateDir, dir string)
		inError string
	}{
		{"garbage manifest", func(t *testing.T, _, dir string) {
			rewriteFiles(t, dir, "MANIFEST", func([]byte) []byte { return []byte("this is not a manifest, not at all") })
		}, "manifest"},
		{"truncated manifest", func(t *testing.T, _, dir string) {
			rewriteFiles(t, dir, "MANIFEST", func(b []byte) []byte { return b[:len(b)/2] })
		}, "manifest"},
		{"missing manifest", func(t *testing.T, _, dir string) {
			ents, _ := filepath.Glob(filepath.Join(dir, "MANIFEST-*"))
			for _, p := range ents {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
			}
		}, "MANIFEST"},
		{"garbage options file", func(t *testing.T, _, dir string) {
			rewriteFiles(t, dir, "OPTIONS", func([]byte) []byte { return []byte("[[[ garbage") })
		}, "garbage"},
		{"garbled table file", func(t *testing.T, stateDir, dir string) {
			// Flush the records into an sstable, then damage its blocks:
			// Pebble opens the table lazily, so the damage is found when
			// Open reads the marker and checkpoint records back.
			s := openT(t, stateDir, "2_5", "counts")
			if err := s.db.Flush(); err != nil {
				t.Fatal(err)
			}
			closeT(t, s)
			tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
			if len(tables) != 1 {
				t.Fatalf("want one table after a flush, have %v", tables)
			}
			rewriteFiles(t, dir, filepath.Base(tables[0]), func(b []byte) []byte {
				for i := 0; i < len(b)/2; i++ {
					b[i] ^= 0x5a
				}
				return b
			})
		}, "checksum mismatch"},
		{"unreadable checkpoint record", func(t *testing.T, _, dir string) {
			rawPebble(t, dir, func(db *pebble.DB) error { return db.Set(checkpointKey, []byte{1, 2, 3}, pebble.Sync) })
		}, "unreadable checkpoint record 010203"},
		{"negative checkpoint", func(t *testing.T, _, dir string) {
			rawPebble(t, dir, func(db *pebble.DB) error { return db.Set(checkpointKey, checkpointValue(-5), pebble.Sync) })
		}, "unreadable checkpoint"},
		{"marker of another task", func(t *testing.T, stateDir, dir string) {
			rawPebble(t, dir, func(db *pebble.DB) error { return db.Set(markerKey, markerValue("9_9", "counts"), pebble.Sync) })
		}, `marker record is "baton-state/1\x009_9\x00counts"`},
		{"not a baton store", func(t *testing.T, stateDir, dir string) {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			rawPebble(t, dir, func(db *pebble.DB) error { return db.Set([]byte("foreign"), []byte("x"), pebble.Sync) })
		}, "no baton marker"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			stateDir, dir := newStoreOnDisk(t, "2_5")
			c.damage(t, stateDir, dir)
			_, err := OpenPebble(stateDir, "2_5", "counts")
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("open: err = %v, want ErrCorrupt", err)
			}
			for _, want := range []string{"task 2_5", dir, c.inError} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}

			var log bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&log, nil))
			s, err := OpenOrWipe(stateDir, "2_5", "counts", logger)
			if err != nil {
				t.Fatalf("OpenOrWipe: %v", err)
			}
			defer closeT(t, s)
			if _, ok := checkpoint(t, s); ok || len(scan(t, s, nil, nil)) != 0 {
				t.Error("OpenOrWipe kept data or checkpoint of a corrupt store")
			}
			lines := strings.Split(strings.TrimSpace(log.String()), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "task=2_5") || !strings.Contains(lines[0], "store=counts") {
				t.Errorf("want one warning naming task and store, got:\n%s", log.String())
			}
			apply(t, s, 1, "fresh=1") // the new store works
		})
	}
}

// Damage found while the store is open fails its operations with
// ErrCorrupt (instead of Pebble's default, exiting the process), and Wipe
// cures it.
func TestPebbleCorruptionWhileOpenThenWipe(t *testing.T) {
	stateDir := t.TempDir()
	s := openT(t, stateDir, "4_0", "counts")
	defer s.Close()
	apply(t, s, 3, "a=1", "b=2")
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	tables, _ := filepath.Glob(filepath.Join(s.Dir(), "*.sst"))
	if len(tables) != 1 {
		t.Fatalf("want one table, have %v", tables)
	}
	rewriteFiles(t, s.Dir(), filepath.Base(tables[0]), func(b []byte) []byte {
		for i := range b {
			b[i] ^= 0xff
		}
		return b
	})
	_, _, err := s.Get([]byte("a"))
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "task 4_0") {
		t.Fatalf("get from a damaged table: err = %v, want ErrCorrupt naming the task", err)
	}
	if err := s.Apply(&Batch{}, 4); !errors.Is(err, ErrCorrupt) {
		t.Errorf("apply after corruption: err = %v, want ErrCorrupt", err)
	}
	if err := s.Wipe(); err != nil {
		t.Fatalf("wipe: %v", err)
	}
	if _, ok := checkpoint(t, s); ok || len(scan(t, s, nil, nil)) != 0 {
		t.Error("wipe left data or checkpoint")
	}
	apply(t, s, 1, "a=restored")
	if v, _ := get(t, s, "a"); v != "restored" {
		t.Errorf("a = %q after wipe and restore", v)
	}
	if tables, _ := filepath.Glob(filepath.Join(s.Dir(), "*.sst")); len(tables) != 0 {
		t.Errorf("wipe left tables behind: %v", tables)
	}
}

// A wipe interrupted after moving the directory aside leaves trash that the
// next open removes; the trash is never mistaken for a store.
func TestPebbleWipeTrashIsCleanedUp(t *testing.T) {
	stateDir, dir := newStoreOnDisk(t, "0_0")
	trash := filepath.Join(stateDir, "0_0", ".counts.wiping")
	if err := os.Rename(dir, trash); err != nil {
		t.Fatal(err)
	}
	if got, err := ListLocal(stateDir); err != nil || len(got) != 0 {
		t.Errorf("ListLocal with only trash = %v, %v; want nothing", got, err)
	}
	s := openT(t, stateDir, "0_0", "counts")
	defer closeT(t, s)
	if _, ok := checkpoint(t, s); ok {
		t.Error("store opened after an interrupted wipe has a checkpoint")
	}
	if _, err := os.Stat(trash); !os.IsNotExist(err) {
		t.Errorf("trash not removed: %v", err)
	}
}

func TestOpenOrWipeLeavesHealthyStoresAlone(t *testing.T) {
	stateDir, _ := newStoreOnDisk(t, "0_3")
	var log bytes.Buffer
	s, err := OpenOrWipe(stateDir, "0_3", "counts", slog.New(slog.NewTextHandler(&log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer closeT(t, s)
	if off, ok := checkpoint(t, s); !ok || off != 7 || log.Len() != 0 {
		t.Errorf("healthy store: checkpoint %d, %v, log %q", off, ok, log.String())
	}
}

// An I/O error is not corruption: wiping would not cure it and would
// throw good state away.
func TestPebbleIOErrorIsNotCorrupt(t *testing.T) {
	mem := vfs.NewMem()
	s := openT(t, "/state", "0_0", "s", WithFS(mem))
	apply(t, s, 3, "a=1")
	closeT(t, s)

	failing := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpOpen && strings.Contains(op.Path, "MANIFEST") {
			return syscall.EIO
		}
		return nil
	}))
	var log bytes.Buffer
	_, err := OpenOrWipe("/state", "0_0", "s", slog.New(slog.NewTextHandler(&log, nil)), WithFS(failing))
	if err == nil || errors.Is(err, ErrCorrupt) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("open with EIO: err = %v, want EIO and not ErrCorrupt", err)
	}
	if log.Len() != 0 {
		t.Errorf("logged a wipe: %s", log.String())
	}
	s = openT(t, "/state", "0_0", "s", WithFS(mem))
	defer closeT(t, s)
	if off, ok := checkpoint(t, s); !ok || off != 3 {
		t.Errorf("state lost after an I/O error: checkpoint %d, %v", off, ok)
	}
}

func TestListLocal(t *testing.T) {
	stateDir := t.TempDir()
	unlock, err := LockDir(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	for _, c := range []struct {
		task, store string
		offset      int64 // -1: no checkpoint
	}{{"0_1", "counts", 12}, {"0_1", "totals", 30}, {"1_0", "counts", 0}, {"1_2", "counts", -1}} {
		s := openT(t, stateDir, c.task, c.store)
		if c.offset >= 0 {
			apply(t, s, c.offset, "k=v")
		}
		closeT(t, s)
	}
	// A corrupt store, a store still open, and stray files are left out.
	_, corruptDir := newStoreOnDisk(t, "x")
	if err := os.Rename(corruptDir, filepath.Join(stateDir, "0_1", "broken")); err != nil {
		t.Fatal(err)
	}
	open := openT(t, stateDir, "3_3", "counts")
	apply(t, open, 5, "k=v")
	defer closeT(t, open)
	if err := os.WriteFile(filepath.Join(stateDir, "README"), []byte("hi"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(stateDir, "2_2", "empty"), 0o755); err != nil {
		t.Fatal(err)
	}

	got, err := ListLocal(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]int64{"0_1": {"counts": 12, "totals": 30}, "1_0": {"counts": 0}}
	if !mapsEqual(got, want) {
		t.Errorf("ListLocal = %v, want %v", got, want)
	}
	// Listing opened nothing for good: every listed store opens again.
	closeT(t, openT(t, stateDir, "0_1", "counts"))
	if _, err := os.Stat(filepath.Join(stateDir, "2_2", "empty", "MANIFEST-000001")); err == nil {
		t.Error("ListLocal created a database in an empty directory")
	}

	if got, err := ListLocal(filepath.Join(stateDir, "missing")); err != nil || len(got) != 0 {
		t.Errorf("missing state dir: %v, %v", got, err)
	}
}

func mapsEqual(a, b map[string]map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, av := range a {
		bv, ok := b[k]
		if !ok || len(av) != len(bv) {
			return false
		}
		for s, o := range av {
			if bo, ok := bv[s]; !ok || bo != o {
				return false
			}
		}
	}
	return true
}

func TestRemoveTask(t *testing.T) {
	stateDir := t.TempDir()
	a := openT(t, stateDir, "0_1", "counts")
	b := openT(t, stateDir, "0_2", "counts")
	closeT(t, b)
	if err := RemoveTask(stateDir, "0_1"); !errors.Is(err, ErrLocked) {
		t.Errorf("removing a task whose store is open: err = %v, want ErrLocked", err)
	}
	if _, err := os.Stat(a.Dir()); err != nil {
		t.Errorf("refused RemoveTask removed files: %v", err)
	}
	closeT(t, a)
	for _, task := range []string{"0_1", "0_2", "9_9"} {
		if err := RemoveTask(stateDir, task); err != nil {
			t.Errorf("RemoveTask(%s): %v", task, err)
		}
		if _, err := os.Stat(filepath.Join(stateDir, task)); !os.IsNotExist(err) {
			t.Errorf("task %s still on disk: %v", task, err)
		}
	}
	if err := RemoveTask(stateDir, "../etc"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("RemoveTask(../etc): err = %v, want ErrInvalidName", err)
	}
}

// A disk that fails every write while the store is open: Pebble would
// panic (a log file it cannot create) or end the process. Apply instead
// returns an error wrapping ErrFailed and the I/O error, naming the task
// and store; every later operation fails the same way; nothing panics.
// Reopened on a working disk, the store is at a checkpoint it applied
// before the failure, with exactly that checkpoint's data.
func TestPebbleWriteErrorFailsStore(t *testing.T) {
	mem := vfs.NewMem()
	failing := &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return syscall.EIO
		}
		return nil
	})}
	s := openT(t, "/state", "1_2", "counts", WithFS(errorfs.Wrap(mem, failing)))
	value := bytes.Repeat([]byte("v"), 1000)
	applyN := func(offset int64) error {
		b := &Batch{}
		for i := range 100 {
			b.Put(fmt.Appendf(nil, "key-%d", i), value)
		}
		b.Put([]byte("offset"), fmt.Appendf(nil, "%d", offset))
		return s.Apply(b, offset)
	}
	if err := applyN(1); err != nil {
		t.Fatal(err)
	}
	closeT(t, s) // offset 1 is on disk
	s = openT(t, "/state", "1_2", "counts", WithFS(errorfs.Wrap(mem, failing)))
	failing.On()
	var err error
	offset := int64(1)
	for offset < 1000 && err == nil { // 100 KB a batch: Pebble writes its log within a few
		offset++
		err = applyN(offset)
	}
	if !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "task 1_2 store counts") {
		t.Fatalf("apply on a failing disk: %v; want ErrFailed wrapping EIO, naming the task and store", err)
	}
	if _, _, gerr := s.Get([]byte("offset")); !errors.Is(gerr, ErrFailed) {
		t.Errorf("get after the failure: %v; want ErrFailed", gerr)
	}
	if cerr := s.Close(); !errors.Is(cerr, ErrFailed) {
		t.Errorf("close after the failure: %v; want ErrFailed", cerr)
	}
	failing.Off()
	s = openT(t, "/state", "1_2", "counts", WithFS(mem))
	defer closeT(t, s)
	cp, ok := checkpoint(t, s)
	if !ok || cp < 1 || cp >= offset {
		t.Fatalf("reopened: checkpoint %d, %v; want one applied before the failure (1..%d)", cp, ok, offset-1)
	}
	v, ok, gerr := s.Get([]byte("offset"))
	if gerr != nil || !ok || string(v) != fmt.Sprint(cp) {
		t.Errorf("reopened at checkpoint %d: offset key %q, %v, %v; want the data of that checkpoint", cp, v, ok, gerr)
	}
}

// TestPebbleSharedBlockCache: stores opened with one block cache read
// their tables' blocks through it, and a second read of a block hits it.
func TestPebbleSharedBlockCache(t *testing.T) {
	dir := t.TempDir()
	c := pebble.NewCache(64 << 20)
	defer c.Unref()
	var stores []*PebbleStore
	for _, task := range []string{"0_0", "0_1"} {
		s := openT(t, dir, task, "counts", WithBlockCache(c))
		defer closeT(t, s)
		apply(t, s, 7, "k1=1", "k2=2")
		if err := s.db.Flush(); err != nil { // into a table on disk
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	for round := range 2 {
		for i, s := range stores {
			before := c.Metrics()
			if v, ok, err := s.Get([]byte("k2")); err != nil || !ok || string(v) != "2" {
				t.Fatalf("store %d: Get(k2) = %q, %v, %v", i, v, ok, err)
			}
			after := c.Metrics()
			switch {
			case round == 0 && after.Misses == before.Misses:
				t.Errorf("store %d's first read of its table did not go through the shared cache: before %+v, after %+v", i, before, after)
			case round == 1 && after.Hits == before.Hits:
				t.Errorf("store %d's second read found nothing in the shared cache: before %+v, after %+v", i, before, after)
			}
		}
	}
}

package state

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// lockFileName is the state directory's lock file (see LockDir). Names
// starting with a dot are never task ids.
const lockFileName = ".lock"

// checkName accepts task ids and store names that are safe as one path
// element on every OS: letters, digits, '.', '_', '-', not starting with
// '.', at most 200 bytes.
func checkName(kind, name string) error {
	if name == "" || len(name) > 200 || name[0] == '.' {
		return fmt.Errorf("%w: %s %q: want 1 to 200 of [A-Za-z0-9._-], not starting with '.'", ErrInvalidName, kind, name)
	}
	for _, c := range []byte(name) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %s %q: byte %q not allowed (want [A-Za-z0-9._-])", ErrInvalidName, kind, name, c)
		}
	}
	return nil
}

// storeDir returns <stateDir>/<task>/<store> after checking the names.
func storeDir(fs vfs.FS, stateDir, task, store string) (string, error) {
	if err := checkName("task id", task); err != nil {
		return "", err
	}
	if err := checkName("store name", store); err != nil {
		return "", err
	}
	return fs.PathJoin(stateDir, task, store), nil
}

// OpenOrWipe is OpenPebble, except that a corrupt store is wiped and
// created afresh, with one warning on logger naming the task, store,
// directory and cause. The caller then restores it from the changelog (its
// Checkpoint says there is none). Errors other than ErrCorrupt are
// returned as they are.
func OpenOrWipe(stateDir, task, store string, logger *slog.Logger, opts ...Option) (*PebbleStore, error) {
	s, err := OpenPebble(stateDir, task, store, opts...)
	if !errors.Is(err, ErrCorrupt) {
		return s, err
	}
	o := buildOptions(opts)
	dir, _ := storeDir(o.fs, stateDir, task, store) // names were checked by OpenPebble
	if rerr := o.fs.RemoveAll(dir); rerr != nil {
		return nil, fmt.Errorf("state: task %s store %s: wiping corrupt %s: %w (after: %w)", task, store, dir, rerr, err)
	}
	logger.Warn("state store corrupt; wiped it, will restore from the changelog",
		"task", task, "store", store, "dir", dir, "cause", err)
	return OpenPebble(stateDir, task, store, opts...)
}

// ListLocal reports, for every store under stateDir that has a checkpoint,
// its task, name and checkpointed changelog offset: map[task][store]offset.
// It opens each store read-only and closes it again. Stores it cannot read
// are left out, as if they had no state: corrupt ones (OpenOrWipe will
// wipe them), ones without a checkpoint, and ones open at the time (in this
// process or another), so the caller adds the checkpoints of the stores it
// has open itself. A missing stateDir yields an empty map.
//
// A task's lag is then the changelog end offset minus this offset, per
// store.
func ListLocal(stateDir string, opts ...Option) (map[string]map[string]int64, error) {
	o := buildOptions(opts)
	out := map[string]map[string]int64{}
	tasks, err := o.fs.List(stateDir)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state: list state dir %s: %w", stateDir, err)
	}
	slices.Sort(tasks)
	for _, task := range tasks {
		if checkName("task id", task) != nil || !isDir(o.fs, o.fs.PathJoin(stateDir, task)) {
			continue
		}
		stores, err := o.fs.List(o.fs.PathJoin(stateDir, task))
		if err != nil {
			return nil, fmt.Errorf("state: list task %s in %s: %w", task, stateDir, err)
		}
		slices.Sort(stores)
		for _, store := range stores {
			dir := o.fs.PathJoin(stateDir, task, store)
			if checkName("store name", store) != nil || !isDir(o.fs, dir) {
				continue
			}
			s := &PebbleStore{task: task, store: store, dir: dir, o: o, readOnly: true}
			if err := s.open(); err != nil {
				continue
			}
			off, ok, _ := s.Checkpoint()
			if cerr := s.Close(); cerr != nil {
				return nil, cerr
			}
			if ok {
				if out[task] == nil {
					out[task] = map[string]int64{}
				}
				out[task][store] = off
			}
		}
	}
	return out, nil
}

func isDir(fs vfs.FS, path string) bool {
	fi, err := fs.Stat(path)
	return err == nil && fi.IsDir()
}

// RemoveTask deletes all state of task under stateDir, for a task this
// instance will not run again. It fails with ErrLocked, removing nothing,
// if any of the task's stores is open. Removing a task without state is not
// an error.
func RemoveTask(stateDir, task string, opts ...Option) error {
	o := buildOptions(opts)
	if err := checkName("task id", task); err != nil {
		return err
	}
	dir := o.fs.PathJoin(stateDir, task)
	stores, err := o.fs.List(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("state: remove task %s: list %s: %w", task, dir, err)
	}
	var locks []*pebble.Lock
	defer func() {
		for _, l := range locks {
			_ = l.Close()
		}
	}()
	for _, store := range stores {
		sdir := o.fs.PathJoin(dir, store)
		if !isDir(o.fs, sdir) {
			continue
		}
		l, err := pebble.LockDirectory(sdir, o.fs)
		if err != nil {
			return fmt.Errorf("%w: remove task %s: store %s in %s is open: %v", ErrLocked, task, store, sdir, err)
		}
		locks = append(locks, l)
	}
	if err := o.fs.RemoveAll(dir); err != nil {
		return fmt.Errorf("state: remove task %s: %w", task, err)
	}
	return nil
}

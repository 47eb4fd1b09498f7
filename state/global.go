package state

import (
	"errors"
	"fmt"
	"log/slog"
)

// GlobalDir is the directory, under a state directory, of the global
// stores: <state-dir>/.global/<store>/. Its name starts with a dot, which
// no task id does, so ListLocal and RemoveTask never take it for a task.
const GlobalDir = ".global"

// globalTask is the task a global store's marker record names.
const globalTask = "global"

// OpenGlobal opens the global store named store under stateDir, in
// <state-dir>/.global/<store>/, creating it if missing. A global store is
// a PebbleStore held by the instance rather than by a task; everything
// said of PebbleStore holds. A corrupt store is wiped and created afresh,
// with one warning on logger, as OpenOrWipe does. The caller should hold
// LockDir(stateDir).
func OpenGlobal(stateDir, store string, logger *slog.Logger, opts ...Option) (*PebbleStore, error) {
	if err := checkName("store name", store); err != nil {
		return nil, err
	}
	o := buildOptions(opts)
	dir := o.fs.PathJoin(stateDir, GlobalDir, store)
	open := func() (*PebbleStore, error) {
		if err := o.fs.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("state: global store %s: create %s: %w", store, dir, err)
		}
		s := &PebbleStore{task: globalTask, store: store, dir: dir, o: o}
		if err := s.open(); err != nil {
			return nil, err
		}
		if err := o.fs.RemoveAll(trashDir(o.fs, dir)); err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("state: global store %s: remove %s: %w", store, trashDir(o.fs, dir), err)
		}
		return s, nil
	}
	s, err := open()
	if !errors.Is(err, ErrCorrupt) {
		return s, err
	}
	if rerr := o.fs.RemoveAll(dir); rerr != nil {
		return nil, fmt.Errorf("state: global store %s: wiping corrupt %s: %w (after: %w)", store, dir, rerr, err)
	}
	logger.Warn("global store corrupt; wiped it, will read its topic again", "store", store, "dir", dir, "cause", err)
	return open()
}

//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// LockDir takes an exclusive lock on the state directory dir (creating it
// if missing) through flock(2) on dir/.lock, and writes this process's id
// into that file. While it is held, LockDir on the same dir fails at once,
// in this process or any other, with an error wrapping ErrLocked that names
// the directory and the holder's pid. The lock ends when unlock is called
// or the process dies, however it dies. unlock may be called more than
// once; later calls return nil.
func LockDir(dir string) (unlock func() error, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("state: create state dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("state: open lock file %s: %w", path, err)
	}
	// flock locks belong to the open file description, so a second
	// OpenFile in this process conflicts as another process would.
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		holder, _ := os.ReadFile(path)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			pid := strings.TrimSpace(string(holder))
			if pid == "" {
				pid = "unknown"
			}
			return nil, fmt.Errorf("%w: state dir %s is in use by another baton instance (pid %s); stop it or choose another state dir", ErrLocked, dir, pid)
		}
		return nil, fmt.Errorf("state: lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	var once sync.Once
	return func() error {
		err := error(nil)
		once.Do(func() { err = f.Close() })
		return err
	}, nil
}

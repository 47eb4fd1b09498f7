//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package state

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// LockDir takes an exclusive lock on the state directory dir (creating it
// if missing) through Pebble's file lock on dir/.lock. While it is held,
// LockDir on the same dir fails at once with an error wrapping ErrLocked
// that names the directory. unlock may be called more than once.
func LockDir(dir string) (unlock func() error, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("state: create state dir %s: %w", dir, err)
	}
	var c io.Closer
	c, err = vfs.Default.Lock(filepath.Join(dir, lockFileName))
	if err != nil {
		return nil, fmt.Errorf("%w: state dir %s is in use by another baton instance; stop it or choose another state dir (%v)", ErrLocked, dir, err)
	}
	var once sync.Once
	return func() error {
		err := error(nil)
		once.Do(func() { err = c.Close() })
		return err
	}, nil
}

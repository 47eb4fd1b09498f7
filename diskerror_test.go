package baton

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/baton-streams/baton/state"
)

// withStateFS makes the App's stores use fs.
func withStateFS(fs vfs.FS) Option { return WithStoreOptions(state.WithFS(fs)) }

// TestDiskErrorWhileRunning: while records flow through two instances,
// every write to one instance's state directory starts failing with EIO
// (a disk gone bad or read-only). That instance stops: Run returns an
// error naming a task, its store and the I/O error, and nothing panics.
// The other instance takes over every task and no count is lost (exact
// under exactly-once): what the failing instance accepted is in the
// changelogs and the input offsets it committed.
func TestDiskErrorWhileRunning(t *testing.T) {
	for _, g := range guarantees {
		t.Run(g.String(), func(t *testing.T) {
			h := newHarness(t, 4)
			h.prefill(500)
			dir := t.TempDir()
			failing := &errorfs.Toggle{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
				if op.Kind.ReadOrWrite() == errorfs.OpIsWrite && strings.HasPrefix(op.Path, dir) {
					return syscall.EIO
				}
				return nil
			})}
			a := h.start("a", WithGuarantee(g))
			b := h.start("b", WithGuarantee(g), WithStateDir(dir), withStateFS(errorfs.Wrap(vfs.Default, failing)))
			h.eventually(60*time.Second, "a and b to share the tasks", func() bool { return balanced(a, b) })
			h.checkCounts(g, 60*time.Second)
			f := h.startFlow(20 * time.Millisecond)
			h.eventually(60*time.Second, "b to process the flow", func() bool {
				for _, ts := range b.app.Status().Tasks {
					if strings.HasPrefix(ts.ID, "1_") && ts.Role == "active" && ts.Processed > 0 {
						return true
					}
				}
				return false
			})
			failing.On()
			// New words fill Pebble's log blocks: it writes them, and
			// learns of the failure, block by block.
			func() {
				h.wmu.Lock() // the flow writes words too
				defer h.wmu.Unlock()
				h.prefill(20000)
			}()
			var err error
			select {
			case err = <-b.done:
				b.done <- err
			case <-time.After(60 * time.Second):
				t.Fatal("b still runs 60 s after its state directory started failing every write")
			}
			if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "task 1_") || !strings.Contains(err.Error(), "store counts") {
				t.Fatalf("b stopped with %v; want the I/O error, naming a task and its store", err)
			}
			t.Logf("b: %v", err)
			h.eventually(60*time.Second, "a to run every task", func() bool { _, all := owners(a); return all })
			f.stop()
			h.checkCounts(g, 60*time.Second)
			alive(t, a)
		})
	}
}

package state

import (
	"os"
	"slices"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// failFS is the file system a PebbleStore gives Pebble. Pebble cannot go
// on when a write of its own fails: it panics (a log file it cannot
// create or write) or ends the process through its logger (a manifest it
// cannot sync), and the process dies without a word to the store's
// owner. failFS turns the first failed write, sync or file creation into
// a failure of the store (PebbleStore.failed) and freezes the store's
// files as they were then, as a crash at that moment would: from then on
// writes to existing files are dropped, removals and renames of them do
// nothing, and new files live in memory. Pebble sees every write succeed
// and runs on until the store is closed; the store refuses every
// operation after the failure, so its owner gets an error naming the
// task and store, and its files reopen later (on a working disk) at the
// last checkpoint written before the failure.
type failFS struct {
	vfs.FS
	s   *PebbleStore
	mem vfs.FS // files created after the failure
}

func newFailFS(fs vfs.FS, s *PebbleStore) *failFS {
	return &failFS{FS: fs, s: s, mem: vfs.NewMem()}
}

func (f *failFS) failed() bool { return f.s.failed.Load() != nil }

// note fails the store if err is not nil.
func (f *failFS) note(err error) bool {
	if err != nil {
		f.s.fail(err)
	}
	return err != nil
}

func (f *failFS) inMem(name string) bool {
	_, err := f.mem.Stat(name)
	return err == nil
}

// memCreate creates name in memory, with its directory.
func (f *failFS) memCreate(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if err := f.mem.MkdirAll(f.mem.PathDir(name), 0o755); err != nil {
		return nil, err
	}
	return f.mem.Create(name, category)
}

func (f *failFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if !f.failed() {
		file, err := f.FS.Create(name, category)
		if !f.note(err) {
			return &failFile{File: file, fs: f}, nil
		}
	}
	return f.memCreate(name, category)
}

func (f *failFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	if f.inMem(name) {
		return f.mem.OpenReadWrite(name, category, opts...)
	}
	if !f.failed() {
		file, err := f.FS.OpenReadWrite(name, category, opts...)
		if !f.note(err) {
			return &failFile{File: file, fs: f}, nil
		}
	}
	return f.memCreate(name, category)
}

func (f *failFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if !f.failed() {
		file, err := f.FS.ReuseForWrite(oldname, newname, category)
		if !f.note(err) {
			return &failFile{File: file, fs: f}, nil
		}
	}
	return f.memCreate(newname, category)
}

func (f *failFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	if f.inMem(name) {
		return f.mem.Open(name, opts...)
	}
	return f.FS.Open(name, opts...)
}

func (f *failFS) OpenDir(name string) (vfs.File, error) {
	file, err := f.FS.OpenDir(name)
	if err != nil {
		return nil, err // a read: Pebble reports it
	}
	return &failFile{File: file, fs: f}, nil
}

func (f *failFS) Stat(name string) (vfs.FileInfo, error) {
	if fi, err := f.mem.Stat(name); err == nil {
		return fi, nil
	}
	return f.FS.Stat(name)
}

func (f *failFS) List(dir string) ([]string, error) {
	names, err := f.FS.List(dir)
	if err != nil {
		return nil, err
	}
	if extra, merr := f.mem.List(dir); merr == nil {
		for _, n := range extra {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	return names, nil
}

func (f *failFS) Link(oldname, newname string) error {
	if f.inMem(oldname) {
		return f.mem.Link(oldname, newname)
	}
	if !f.failed() {
		f.note(f.FS.Link(oldname, newname))
	}
	return nil
}

func (f *failFS) Rename(oldname, newname string) error {
	if f.inMem(oldname) {
		return f.mem.Rename(oldname, newname)
	}
	if !f.failed() {
		f.note(f.FS.Rename(oldname, newname))
	}
	return nil
}

func (f *failFS) Remove(name string) error {
	if f.inMem(name) {
		return f.mem.Remove(name)
	}
	if f.failed() {
		return nil
	}
	return f.FS.Remove(name)
}

func (f *failFS) RemoveAll(name string) error {
	if f.inMem(name) {
		return f.mem.RemoveAll(name)
	}
	if f.failed() {
		return nil
	}
	return f.FS.RemoveAll(name)
}

func (f *failFS) MkdirAll(dir string, perm os.FileMode) error {
	if f.failed() {
		return f.mem.MkdirAll(dir, perm)
	}
	return f.FS.MkdirAll(dir, perm)
}

// failFile is a file of the store on disk: its writes and syncs fail the
// store when they fail, and are dropped once it failed.
type failFile struct {
	vfs.File
	fs *failFS
}

func (f *failFile) Write(p []byte) (int, error) {
	if !f.fs.failed() {
		n, err := f.File.Write(p)
		if !f.fs.note(err) {
			return n, nil
		}
	}
	return len(p), nil
}

func (f *failFile) WriteAt(p []byte, off int64) (int, error) {
	if !f.fs.failed() {
		n, err := f.File.WriteAt(p, off)
		if !f.fs.note(err) {
			return n, nil
		}
	}
	return len(p), nil
}

func (f *failFile) Preallocate(offset, length int64) error {
	if !f.fs.failed() {
		f.fs.note(f.File.Preallocate(offset, length))
	}
	return nil
}

func (f *failFile) Sync() error {
	if !f.fs.failed() {
		f.fs.note(f.File.Sync())
	}
	return nil
}

func (f *failFile) SyncData() error {
	if !f.fs.failed() {
		f.fs.note(f.File.SyncData())
	}
	return nil
}

func (f *failFile) SyncTo(length int64) (bool, error) {
	if !f.fs.failed() {
		full, err := f.File.SyncTo(length)
		if !f.fs.note(err) {
			return full, nil
		}
	}
	return true, nil
}

func (f *failFile) Close() error {
	err := f.File.Close()
	if f.fs.failed() {
		return nil
	}
	return err
}

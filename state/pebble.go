package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Key layout inside each Pebble DB. User keys are stored behind a one-byte
// prefix so that no user key can collide with the store's own records.
const (
	metaPrefix byte = 0x00 // the store's own records
	userPrefix byte = 0x01 // user key k is stored as 0x01 k
)

var (
	markerKey     = []byte{metaPrefix, 'm', 'a', 'r', 'k', 'e', 'r'}
	checkpointKey = []byte{metaPrefix, 'c', 'h', 'e', 'c', 'k', 'p', 'o', 'i', 'n', 't'}
	userLower     = []byte{userPrefix}
	userUpper     = []byte{userPrefix + 1}
)

// The marker record identifies a baton store and the task and store it
// belongs to; it is written once, when the store is created.
const markerMagic = "baton-state/1"

func markerValue(task, store string) []byte {
	return []byte(markerMagic + "\x00" + task + "\x00" + store)
}

// The checkpoint record: a format byte, then the offset as int64 big-endian.
const checkpointFormat byte = 1

func checkpointValue(offset int64) []byte {
	return binary.BigEndian.AppendUint64([]byte{checkpointFormat}, uint64(offset))
}

// parseCheckpoint reads a checkpoint record; false if it is not one.
func parseCheckpoint(v []byte) (int64, bool) {
	if len(v) != 9 || v[0] != checkpointFormat || int64(binary.BigEndian.Uint64(v[1:])) < 0 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(v[1:])), true
}

// options are set by Option values.
type options struct {
	fs         vfs.FS
	sync       bool
	cache      *pebble.Cache
	tunePebble func(*pebble.Options)
}

// Option configures OpenPebble, OpenOrWipe, ListLocal and RemoveTask.
type Option func(*options)

// WithFS makes the store use fs instead of the operating system's file
// system (vfs.Default). Tests use vfs.NewMem and error-injecting wrappers.
func WithFS(fs vfs.FS) Option { return func(o *options) { o.fs = fs } }

// WithSyncWrites makes every Apply wait for an fsync of Pebble's
// write-ahead log. The default is not to: a write is atomic either way, and
// Pebble's log replays as a prefix, so after a crash a store is at some
// earlier checkpoint with exactly the data of that checkpoint; the cost is
// only more changelog to replay after a machine (not process) crash. Close
// always syncs.
func WithSyncWrites() Option { return func(o *options) { o.sync = true } }

// WithBlockCache makes every store opened with it use c as its Pebble
// block cache, shared with the others, instead of a cache of its own
// (Pebble's default: 8 MiB per store). Each open store holds a reference
// to c; the caller keeps its own until it no longer opens stores with it,
// then calls c.Unref. WithPebbleOptions may still set another.
func WithBlockCache(c *pebble.Cache) Option { return func(o *options) { o.cache = c } }

// DefaultMemTableSize is a store's memtable size unless WithPebbleOptions
// sets another. Pebble starts a store's memtables at 256 KiB and doubles
// each new one up to this size, so a store written slowly stays small; a
// store restoring or written fast holds up to two at this size (one being
// flushed), besides the block cache (Pebble's default is 8 MiB per store;
// WithBlockCache shares one among stores).
// Pebble's own default (4 MiB) made a cold restore of 10 million records
// spend most of its CPU compacting the many small tables it flushed
// (docs/benchmarks.md, "Restore rate").
const DefaultMemTableSize = 16 << 20

// WithPebbleOptions lets the caller tune Pebble (cache, memtable size) by
// editing its options before Open. It must not set FS, Lock or ReadOnly.
func WithPebbleOptions(tune func(*pebble.Options)) Option {
	return func(o *options) { o.tunePebble = tune }
}

func buildOptions(opts []Option) options {
	o := options{fs: vfs.Default}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// PebbleStore is a Store in one Pebble database on local disk, in
// <state-dir>/<task-id>/<store-name>/.
type PebbleStore struct {
	task, store, dir string
	o                options
	readOnly         bool // opened by ListLocal

	// db and lock are replaced by Wipe, which the caller never runs
	// concurrently with other methods, Read excepted.
	db   *pebble.DB
	lock *pebble.Lock
	// readers is held shared by Read, the one method other goroutines
	// call, and exclusively by Wipe and Close while they close or
	// replace db: a query's read ends before the database goes.
	readers sync.RWMutex

	ckpt      atomic.Int64 // -1: none; written only by Apply and Wipe
	closed    atomic.Bool
	corrupted atomic.Pointer[string] // first corruption Pebble reported
	// failed is the first write to the store's files that failed (a disk
	// error, a full disk; see failFS), or the first error Pebble took for
	// fatal. The store fails every later operation with it, and its owner
	// restores the task elsewhere from the changelog.
	failed atomic.Pointer[error]
}

var _ Store = (*PebbleStore)(nil)

// OpenPebble opens the store named store of task task under stateDir,
// creating it if missing. A store whose files or records are damaged, or
// that was created for another task or store, returns an error wrapping
// ErrCorrupt; one that is open elsewhere returns an error wrapping
// ErrLocked. The caller should hold LockDir(stateDir).
func OpenPebble(stateDir, task, store string, opts ...Option) (*PebbleStore, error) {
	o := buildOptions(opts)
	dir, err := storeDir(o.fs, stateDir, task, store)
	if err != nil {
		return nil, err
	}
	if err := o.fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("state: task %s store %s: create %s: %w", task, store, dir, err)
	}
	s := &PebbleStore{task: task, store: store, dir: dir, o: o}
	if err := s.open(); err != nil {
		return nil, err
	}
	// A wipe that crashed half-way leaves its trash behind.
	if err := o.fs.RemoveAll(trashDir(o.fs, dir)); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("state: task %s store %s: remove %s: %w", task, store, trashDir(o.fs, dir), err)
	}
	return s, nil
}

// trashDir is where Wipe moves a store's directory before deleting it. Its
// name starts with a dot, which no store name does.
func trashDir(fs vfs.FS, dir string) string {
	return fs.PathJoin(fs.PathDir(dir), "."+fs.PathBase(dir)+".wiping")
}

// open opens the database in s.dir and checks its records. Read-only opens
// never create anything.
func (s *PebbleStore) open() error {
	lock, err := pebble.LockDirectory(s.dir, s.o.fs)
	if err != nil {
		return fmt.Errorf("%w: task %s store %s: %s is open elsewhere (another process, or an open store in this one): %v", ErrLocked, s.task, s.store, s.dir, err)
	}
	popts := &pebble.Options{Logger: storeLogger{s}, MemTableSize: DefaultMemTableSize, Cache: s.o.cache}
	if s.o.tunePebble != nil {
		s.o.tunePebble(popts)
	}
	popts.FS = newFailFS(s.o.fs, s)
	popts.Lock = lock
	popts.ReadOnly = s.readOnly
	popts.ErrorIfNotExists = s.readOnly
	// Pebble's default is to exit the process on corruption; a corrupt
	// store must instead fail its own operations so that it can be wiped.
	popts.EventListener = &pebble.EventListener{
		DataCorruption: func(info pebble.DataCorruptionInfo) { s.noteCorruption(info.String()) },
		BackgroundError: func(err error) {
			if pebble.IsCorruptionError(err) {
				s.noteCorruption(err.Error())
			}
		},
	}
	s.corrupted.Store(nil)
	s.failed.Store(nil)
	db, err := pebble.Open(s.dir, popts)
	if err != nil {
		_ = lock.Close()
		if s.readOnly && errors.Is(err, pebble.ErrDBDoesNotExist) {
			return err
		}
		if isEnvironmental(err) {
			return fmt.Errorf("state: task %s store %s: open %s: %w", s.task, s.store, s.dir, err)
		}
		return corrupt(s.task, s.store, s.dir, err)
	}
	s.db, s.lock = db, lock
	if err := s.checkRecords(); err != nil {
		_ = db.Close()
		_ = lock.Close()
		return err
	}
	return nil
}

func (s *PebbleStore) noteCorruption(what string) {
	s.corrupted.CompareAndSwap(nil, &what)
}

// usable returns the error every operation returns once the store is
// closed or known to be corrupt.
func (s *PebbleStore) usable() error {
	if s.closed.Load() {
		return s.errClosed()
	}
	if c := s.corrupted.Load(); c != nil {
		return corrupt(s.task, s.store, s.dir, errors.New(*c))
	}
	if f := s.failed.Load(); f != nil {
		return fmt.Errorf("%w: task %s store %s in %s: %w", ErrFailed, s.task, s.store, s.dir, *f)
	}
	return nil
}

// fail records the first fatal failure of the store's database.
func (s *PebbleStore) fail(err error) {
	s.failed.CompareAndSwap(nil, &err)
}

// isEnvironmental tells errors about the machine (permissions, a full
// disk) from errors about the files' contents; only the latter make a
// store corrupt, since wiping would not cure the former.
func isEnvironmental(err error) bool {
	if pebble.IsCorruptionError(err) {
		return false
	}
	for _, e := range []error{fs.ErrPermission, syscall.ENOSPC, syscall.EROFS, syscall.EIO, syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func corrupt(task, store, dir string, cause error) error {
	why := strings.ReplaceAll(strings.TrimSpace(cause.Error()), "\n", "; ")
	return fmt.Errorf("%w: task %s store %s in %s: %s; wipe it and restore from the changelog", ErrCorrupt, task, store, dir, why)
}

// checkRecords reads the marker and checkpoint records. A new, empty
// database gets its marker; anything else that is not a baton store of this
// task and store is corrupt.
func (s *PebbleStore) checkRecords() error {
	marker, ok, err := s.getRaw(markerKey)
	if err != nil {
		return corrupt(s.task, s.store, s.dir, err)
	}
	want := markerValue(s.task, s.store)
	switch {
	case !ok:
		empty, err := s.isEmpty()
		if err != nil {
			return corrupt(s.task, s.store, s.dir, err)
		}
		if !empty {
			return corrupt(s.task, s.store, s.dir, errors.New("records present but no baton marker record"))
		}
		if !s.readOnly {
			if err := s.db.Set(markerKey, want, pebble.Sync); err != nil {
				return fmt.Errorf("state: task %s store %s: write marker in %s: %w", s.task, s.store, s.dir, err)
			}
		}
	case !bytes.Equal(marker, want):
		return corrupt(s.task, s.store, s.dir, fmt.Errorf("marker record is %q, want %q (was the directory moved or damaged?)", marker, want))
	}

	v, ok, err := s.getRaw(checkpointKey)
	if err != nil {
		return corrupt(s.task, s.store, s.dir, err)
	}
	s.ckpt.Store(-1)
	if ok {
		c, valid := parseCheckpoint(v)
		if !valid {
			return corrupt(s.task, s.store, s.dir, fmt.Errorf("unreadable checkpoint record %x", v))
		}
		s.ckpt.Store(c)
	}
	return nil
}

func (s *PebbleStore) isEmpty() (bool, error) {
	it, err := s.db.NewIter(nil)
	if err != nil {
		return false, err
	}
	valid := it.First()
	return !valid, errors.Join(it.Error(), it.Close())
}

// getRaw reads an internal key and copies its value.
func (s *PebbleStore) getRaw(key []byte) ([]byte, bool, error) { return getCopy(s.db, key) }

func (s *PebbleStore) errClosed() error {
	return fmt.Errorf("%w: task %s store %s", ErrClosed, s.task, s.store)
}

func (s *PebbleStore) wrap(op string, err error) error {
	if pebble.IsCorruptionError(err) {
		return fmt.Errorf("%w: task %s store %s in %s: %s: %v", ErrCorrupt, s.task, s.store, s.dir, op, err)
	}
	return fmt.Errorf("state: task %s store %s in %s: %s: %w", s.task, s.store, s.dir, op, err)
}

func (s *PebbleStore) writeOptions() *pebble.WriteOptions {
	if s.o.sync {
		return pebble.Sync
	}
	return pebble.NoSync
}

// Task, Name and Dir say which store this is.
func (s *PebbleStore) Task() string { return s.task }
func (s *PebbleStore) Name() string { return s.store }
func (s *PebbleStore) Dir() string  { return s.dir }

// Get implements Store.
func (s *PebbleStore) Get(key []byte) ([]byte, bool, error) {
	if err := s.usable(); err != nil {
		return nil, false, err
	}
	v, ok, err := s.getRaw(append([]byte{userPrefix}, key...))
	if err != nil {
		return nil, false, s.wrap("get", err)
	}
	return v, ok, nil
}

// Read implements Store: the value and the checkpoint come from one
// Pebble snapshot.
func (s *PebbleStore) Read(key []byte) ([]byte, bool, int64, error) {
	s.readers.RLock()
	defer s.readers.RUnlock()
	if err := s.usable(); err != nil {
		return nil, false, 0, err
	}
	snap := s.db.NewSnapshot()
	defer snap.Close()
	ckpt, err := s.snapCheckpoint(snap)
	if err != nil {
		return nil, false, 0, err
	}
	v, found, err := getCopy(snap, append([]byte{userPrefix}, key...))
	if err != nil {
		return nil, false, 0, s.wrap("read", err)
	}
	return v, found, ckpt, nil
}

// ReadRange implements Store: the pairs and the checkpoint come from one
// Pebble snapshot.
func (s *PebbleStore) ReadRange(start, end []byte, limit int, fn func(key, value []byte) error) (int64, error) {
	s.readers.RLock()
	defer s.readers.RUnlock()
	if err := s.usable(); err != nil {
		return 0, err
	}
	snap := s.db.NewSnapshot()
	defer snap.Close()
	ckpt, err := s.snapCheckpoint(snap)
	if err != nil {
		return 0, err
	}
	return ckpt, s.iterate(snap, "read range", start, end, limit, func(k, v []byte) error {
		return fn(bytes.Clone(k), bytes.Clone(v))
	})
}

// snapCheckpoint reads the checkpoint record of snap: 0 when there is
// none.
func (s *PebbleStore) snapCheckpoint(snap *pebble.Snapshot) (int64, error) {
	raw, ok, err := getCopy(snap, checkpointKey)
	if err != nil {
		return 0, s.wrap("read", err)
	}
	if !ok {
		return 0, nil
	}
	c, ok := parseCheckpoint(raw)
	if !ok {
		return 0, corrupt(s.task, s.store, s.dir, fmt.Errorf("unreadable checkpoint record %x", raw))
	}
	return c, nil
}

// getCopy reads key from r and copies its value.
func getCopy(r pebble.Reader, key []byte) ([]byte, bool, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	out := append([]byte{}, v...)
	return out, true, closer.Close()
}

// Iterate implements Store.
func (s *PebbleStore) Iterate(start, end []byte, fn func(key, value []byte) error) error {
	if err := s.usable(); err != nil {
		return err
	}
	return s.iterate(s.db, "iterate", start, end, 0, fn)
}

// iterate calls fn for the user keys in [start, end) of r, at most limit
// of them (limit <= 0: all); op names it in errors.
func (s *PebbleStore) iterate(r pebble.Reader, op string, start, end []byte, limit int, fn func(key, value []byte) error) error {
	bounds := &pebble.IterOptions{LowerBound: userLower, UpperBound: userUpper}
	if start != nil {
		bounds.LowerBound = append([]byte{userPrefix}, start...)
	}
	if end != nil {
		bounds.UpperBound = append([]byte{userPrefix}, end...)
	}
	if bytes.Compare(bounds.LowerBound, bounds.UpperBound) >= 0 {
		return nil
	}
	it, err := r.NewIter(bounds)
	if err != nil {
		return s.wrap(op, err)
	}
	n := 0
	for valid := it.First(); valid && (limit <= 0 || n < limit); valid = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return s.wrap(op, err)
		}
		if err := fn(it.Key()[1:], v); err != nil {
			_ = it.Close()
			return err
		}
		n++
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return s.wrap(op, err)
	}
	return nil
}

// Apply implements Store: the batch's writes and the checkpoint record go
// in one Pebble batch.
func (s *PebbleStore) Apply(b *Batch, changelogOffset int64) error {
	if err := s.usable(); err != nil {
		return err
	}
	what := fmt.Sprintf("task %s store %s", s.task, s.store)
	if err := checkOffset(s.ckpt.Load(), changelogOffset, what); err != nil {
		return err
	}
	pb := s.db.NewBatch()
	defer pb.Close()
	key := make([]byte, 0, 64)
	err := b.each(func(del bool, k, v []byte) error {
		key = append(append(key[:0], userPrefix), k...)
		if del {
			return pb.Delete(key, nil)
		}
		return pb.Set(key, v, nil)
	})
	if err == nil {
		err = pb.Set(checkpointKey, checkpointValue(changelogOffset), nil)
	}
	if err == nil {
		err = pb.Commit(s.writeOptions())
	}
	if err == nil {
		if ferr := s.usable(); ferr != nil {
			return ferr // a write failed during the commit
		}
	}
	if err != nil {
		return s.wrap(fmt.Sprintf("apply %d writes at offset %d", b.Len(), changelogOffset), err)
	}
	s.ckpt.Store(changelogOffset)
	return nil
}

// Checkpoint implements Store. It reads no file: the offset is kept in
// memory from Open and Apply.
func (s *PebbleStore) Checkpoint() (int64, bool, error) {
	if err := s.usable(); err != nil {
		return 0, false, err
	}
	c := s.ckpt.Load()
	if c < 0 {
		return 0, false, nil
	}
	return c, true, nil
}

// Wipe implements Store by replacing the database: it closes it, renames
// its directory aside, deletes that, and creates an empty database in its
// place. A crash part-way leaves either the old store or none, never a
// mixture. Wipe also cures a store that reported ErrCorrupt, and frees the
// disk space at once. If the new database cannot be created the store is
// left closed.
func (s *PebbleStore) Wipe() error {
	if s.closed.Load() {
		return s.errClosed()
	}
	if s.readOnly {
		return fmt.Errorf("state: task %s store %s: wipe of a read-only store", s.task, s.store)
	}
	fs := s.o.fs
	trash := trashDir(fs, s.dir)
	s.readers.Lock()
	defer s.readers.Unlock()
	err := errors.Join(s.db.Close(), s.lock.Close())
	if pebble.IsCorruptionError(err) {
		err = nil // the reason to wipe, not a reason to stop
	}
	if err == nil {
		err = fs.RemoveAll(trash)
	}
	if err == nil {
		err = fs.Rename(s.dir, trash)
	}
	if err == nil {
		err = fs.RemoveAll(trash)
	}
	if err == nil {
		err = fs.MkdirAll(s.dir, 0o755)
	}
	if err == nil {
		err = s.open()
	}
	if err != nil {
		s.closed.Store(true)
		return fmt.Errorf("state: task %s store %s: wipe %s: %w", s.task, s.store, s.dir, err)
	}
	s.ckpt.Store(-1)
	return nil
}

// Close implements Store. It syncs Pebble's log, so everything applied
// before Close survives a machine crash.
func (s *PebbleStore) Close() error {
	s.readers.Lock()
	defer s.readers.Unlock()
	if !s.closed.CompareAndSwap(false, true) {
		return s.errClosed()
	}
	var syncErr error
	failed := s.failed.Load()
	if !s.readOnly && s.corrupted.Load() == nil && failed == nil {
		syncErr = s.db.LogData(nil, pebble.Sync)
	}
	err := errors.Join(syncErr, s.db.Close(), s.lock.Close())
	if failed != nil {
		return fmt.Errorf("%w: task %s store %s in %s: %w", ErrFailed, s.task, s.store, s.dir, *failed)
	}
	if err != nil && s.corrupted.Load() == nil {
		return s.wrap("close", err)
	}
	return nil
}

// storeLogger drops Pebble's informational lines and logs its errors
// where Pebble's default logger does. A fatal error, which Pebble's
// logger ends the process with, fails the store instead (see failed):
// Pebble reports them from background work too (a manifest it could not
// sync after a flush), where the process would end with no word to the
// store's owner.
type storeLogger struct{ s *PebbleStore }

func (storeLogger) Infof(string, ...any)           {}
func (storeLogger) Errorf(format string, a ...any) { pebble.DefaultLogger.Errorf(format, a...) }
func (l storeLogger) Fatalf(format string, a ...any) {
	pebble.DefaultLogger.Errorf(format, a...)
	var cause error
	for _, v := range a {
		if e, ok := v.(error); ok {
			cause = e
			break
		}
	}
	l.s.fail(fatalError{msg: strings.TrimSpace(fmt.Sprintf(format, a...)), cause: cause})
}

// fatalError is a fatal error Pebble logged, wrapping the error among its
// arguments (an I/O error, say).
type fatalError struct {
	msg   string
	cause error
}

func (e fatalError) Error() string { return e.msg }
func (e fatalError) Unwrap() error { return e.cause }

package state

import "errors"

// Store is one state store of one task: an ordered map from byte keys to
// byte values, plus the changelog offset the data reflects.
//
// The data and the offset change together, in Apply, so that at every
// moment (and after any crash) the store holds exactly the effect of the
// changelog records before its checkpoint offset, and nothing else.
type Store interface {
	// Get returns a copy of the value stored under key, and false if there
	// is none.
	Get(key []byte) (value []byte, ok bool, err error)

	// Iterate calls fn for each key in [start, end) in ascending byte
	// order; a nil start or end leaves that side unbounded. It sees the
	// store as it was when Iterate began, even if fn applies batches. key
	// and value are valid only until fn returns and must not be modified.
	// An error from fn stops the iteration and is returned as is.
	Iterate(start, end []byte, fn func(key, value []byte) error) error

	// Apply writes the batch and sets the checkpoint to changelogOffset,
	// atomically: after a crash either both or neither are visible. The
	// offset is the next changelog offset to read (Kafka's committed-offset
	// convention), so lag = changelog end offset - checkpoint. It must be
	// >= 0 and not below the current checkpoint (else ErrOffsetRegressed);
	// an empty or nil batch only moves the checkpoint. The batch is not
	// modified and may be reused after Apply returns.
	Apply(b *Batch, changelogOffset int64) error

	// Checkpoint returns the offset of the last Apply, and false if the
	// store has none (it is new or was wiped).
	Checkpoint() (offset int64, ok bool, err error)

	// Read returns a copy of the value stored under key and the
	// checkpoint that value belongs to, both as of one moment (0 when the
	// store has none): the value is the effect of exactly the changelog
	// records before checkpoint. Unlike the other methods, Read may be
	// called from any goroutine while the store's owner applies, wipes
	// or closes it; once the store is closed it returns ErrClosed. It is
	// what queries from outside the task read.
	Read(key []byte) (value []byte, found bool, checkpoint int64, err error)

	// ReadRange is Read for the keys in [start, end) (nil: unbounded), in
	// ascending order, at most limit of them (limit <= 0: all): fn gets
	// copies it may keep. The pairs and the checkpoint returned are of
	// one moment. An error from fn stops the read and is returned.
	ReadRange(start, end []byte, limit int, fn func(key, value []byte) error) (checkpoint int64, err error)

	// Wipe removes every key and the checkpoint, atomically, for a restore
	// from scratch. The store stays open.
	Wipe() error

	// Close releases the store. Later calls return ErrClosed.
	Close() error
}

// Errors that callers test for with errors.Is. Every error the package
// returns names the task, store or directory concerned.
var (
	// ErrCorrupt: a store's files cannot be opened or its records do not
	// read back. OpenOrWipe handles it by wiping the store.
	ErrCorrupt = errors.New("state: store is corrupt")
	// ErrLocked: a state directory or store is in use by another process
	// or another open in this one.
	ErrLocked = errors.New("state: locked")
	// ErrFailed: the store's database failed for good while open (its
	// log or manifest could not be written: a disk error, a full disk).
	// It answers nothing more; close it and restore the task from the
	// changelog, on a working disk.
	ErrFailed = errors.New("state: store failed")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("state: store is closed")
	// ErrOffsetRegressed: Apply was given an offset below the checkpoint.
	ErrOffsetRegressed = errors.New("state: changelog offset below checkpoint")
	// ErrInvalidName: a task id or store name that cannot be a directory
	// name.
	ErrInvalidName = errors.New("state: invalid name")
)

// Package state holds tasks' local state: key-value stores whose data
// travels together with the changelog offset it reflects, on local disk
// (Pebble) or in memory (for tests), plus the state directory's lock and a
// listing of what state is left on disk.
//
// # Layout
//
// One Pebble database per task per store:
//
//	<state-dir>/.lock                  LockDir's lock file (holder's pid inside)
//	<state-dir>/<task-id>/<store>/     one PebbleStore
//	<state-dir>/.global/<store>/       one global store (OpenGlobal)
//
// A database per store keeps each store's checkpoint next to its own
// changelog's data, and makes wiping a store, or dropping a task that moved
// away, a matter of one directory. Inside a database, user keys are stored
// behind a 0x01 byte; the store's own records (a marker naming the task and
// store, and the checkpoint) live behind 0x00, so no user key can touch
// them.
//
// # Lifecycle
//
// An instance calls LockDir(stateDir) before anything else and keeps the
// lock until it exits. It calls ListLocal to report the checkpoints of
// state left on disk (the leader turns them into lags). For each task it
// runs it opens the task's stores with OpenOrWipe, restores them from
// their changelogs from Checkpoint onwards, then processes, calling Apply;
// it closes them when the task is revoked, and calls RemoveTask for state
// it will not need again.
//
// # The checkpoint and the caller's duties
//
// The checkpoint is the next changelog offset to read (Kafka's
// committed-offset convention): a fresh store has none and restores from
// the start, and lag = changelog end offset - checkpoint. Apply writes a
// batch and the checkpoint in one atomic Pebble batch, so the store always
// holds exactly the changelog records before its checkpoint. To keep that
// true the caller applies only what the changelog holds: records read while
// restoring (with offset = last record's offset + 1), or an active task's
// writes once the changelog has acknowledged them. Offsets never go back
// (ErrOffsetRegressed); to start over, Wipe.
//
// # Durability
//
// Apply does not fsync by default. The guarantee above still holds after a
// crash, because Pebble's log replays as a prefix of whole batches: the
// store comes back at an earlier checkpoint with exactly the data of that
// checkpoint, and the caller replays a little more changelog. Pebble
// buffers up to a 32 KiB log block before writing it, so even a process
// crash can lose the last writes. WithSyncWrites makes each Apply wait for
// an fsync instead; Close always syncs.
//
// # Corruption
//
// A store whose files Pebble cannot open, whose marker is missing or names
// another task or store, whose checkpoint record does not decode, or whose
// data fails Pebble's checksums, fails with an error wrapping ErrCorrupt
// that names the task, store and directory: at open, or at any later
// operation once Pebble has reported corruption (Pebble's default, exiting
// the process, is replaced). OpenOrWipe wipes such a store with one log
// line and opens it empty; Wipe cures an open one. Errors of the machine
// (permission, full disk, EIO) are not corruption and wipe nothing.
//
// # Disk failures
//
// Pebble cannot go on once a write of its own fails: it panics or ends
// the process. A PebbleStore gives Pebble a file system that, at the
// first write, sync or file creation that fails, fails the store and
// freezes its files as a crash at that moment would leave them (later
// writes are dropped, new files live in memory until Close). The store's
// operations from then on, Close included, return an error wrapping
// ErrFailed and the cause, naming the task, store and directory; nothing
// panics. Opened again on a working disk the store is at some checkpoint
// applied before the failure, as after a crash.
//
// # Locks
//
// LockDir uses flock(2), which the kernel releases when the process dies,
// however it dies. Each store also holds Pebble's own lock while open, so
// opening a store twice fails with ErrLocked.
//
// # Thread safety
//
// MemoryStore's methods are safe for concurrent use. A PebbleStore's Get,
// Iterate and Checkpoint are safe concurrently with each other and with
// Apply; Apply calls must not overlap (one writer, the task's worker), and
// Wipe and Close must not overlap any other call. A Batch is not safe for
// concurrent use. Values from Get belong to the caller; slices passed to an
// Iterate callback are valid only until it returns.
package state

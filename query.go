package baton

import (
	"context"
	"net/http"
	"time"

	"github.com/baton-streams/baton/internal/query"
)

// Errors returned by App.Get.
var (
	// ErrNoStore: the application has no store of that name that
	// queries read (global stores are read where they are held).
	ErrNoStore = query.ErrNoStore
	// ErrUnavailable: no copy of the task met the read's bounds before
	// its timeout; the error names the task and the lowest lag seen.
	ErrUnavailable = query.ErrUnavailable
	// ErrBadQuery: an option of the read is not valid.
	ErrBadQuery = query.ErrBadRequest
)

// QueryOption bounds a read of a store (App.Get).
type QueryOption func(*query.Bounds)

// MaxLag lets any copy of the task (the active, a learner or a standby)
// answer when it is at most n records behind its changelog's end; the
// active answers first when it meets the bounds. Without it only the
// active answers, once it has restored.
func MaxLag(n int64) QueryOption { return func(b *query.Bounds) { b.MaxLag = n } }

// MinOffset makes the answer reflect the task's changelog at least up
// to offset: pass an earlier Answer's Offset, and the read never returns
// older data, even after the task moved between the two reads.
func MinOffset(offset int64) QueryOption { return func(b *query.Bounds) { b.MinOffset = offset } }

// QueryTimeout is how long a read waits for a copy that meets its
// bounds, for example while the task is handed over. Default 5s, at
// most 5m.
func QueryTimeout(d time.Duration) QueryOption { return func(b *query.Bounds) { b.Timeout = d } }

// Answer is a read of one key.
type Answer struct {
	Store string
	Key   []byte
	// Found is false when the key has no value.
	Found bool
	// Value is the stored bytes (for wordcount the count in decimal).
	Value []byte
	// Task is the task whose store holds the key; Instance and Role say
	// which copy answered ("active", "learner" or "standby").
	Task, Instance, Role string
	// Lag is how many records the copy was behind its changelog's end
	// (0 for an active that has restored).
	Lag int64
	// Offset is the changelog position the answer reflects: the next
	// changelog offset the copy would apply. Pass it to MinOffset for
	// reads that never go back in time.
	Offset int64
}

// Get reads key from the named store wherever its task runs: the key
// goes to its task with the topology's partitioner, and the read to this
// instance's copy of the task when it meets the bounds, else to another
// instance's, over HTTP (each instance serves QueryHandler at the
// endpoint it gave WithEndpoint). The active serves, once it has
// restored, unless MaxLag allows a warm copy; while no copy meets the
// bounds, for example during a handover, Get waits up to QueryTimeout
// and then returns an error wrapping ErrUnavailable. An unknown store is
// ErrNoStore, an invalid option ErrBadQuery. An active answers from what
// its commits have written to the store: its updates of the last commit
// interval are not seen yet. docs/queries.md says what a read promises.
func (a *App) Get(ctx context.Context, store string, key []byte, opts ...QueryOption) (Answer, error) {
	r, err := a.q.Get(ctx, store, key, bounds(opts), false)
	return publicAnswer(r), err
}

func publicAnswer(r query.Answer) Answer {
	return Answer{Store: r.Store, Key: r.Key, Found: r.Found, Value: r.Value, Task: r.Task, Instance: r.Instance, Role: r.Role, Lag: r.Lag, Offset: r.Offset}
}

// QueryLimit bounds the entries of a range or window read. Default 1000,
// at most 100,000.
func QueryLimit(n int) QueryOption { return func(b *query.Bounds) { b.Limit = n } }

// MinOffsets is MinOffset per task, for a range read: pass an earlier
// RangeAnswer's offsets (RangeAnswer.Offsets).
func MinOffsets(offsets map[string]int64) QueryOption {
	return func(b *query.Bounds) { b.MinOffsets = offsets }
}

// Entry is one key of a range or window read.
type Entry struct {
	Key, Value []byte
	// Task is the task whose store holds it.
	Task string
	// WindowStart is the start of the entry's window in a window read
	// (Windows); Key is then the record key.
	WindowStart time.Time
}

// RangeAnswer is a range or window read.
type RangeAnswer struct {
	Store string
	// Entries are in key order (window reads: window start order).
	Entries []Entry
	// Tasks are the copies that answered, one per task read, with their
	// instance, role, lag and offset (Key, Found and Value unset).
	Tasks []Answer
	// Truncated: the range held more entries than the limit (QueryLimit).
	Truncated bool
}

// Offsets returns the changelog offset each task's answer reflects, for
// MinOffsets.
func (r RangeAnswer) Offsets() map[string]int64 {
	out := make(map[string]int64, len(r.Tasks))
	for _, t := range r.Tasks {
		out[t.Task] = t.Offset
	}
	return out
}

// Range reads the keys in [from, to) of the named store (nil: unbounded
// on that side), in byte order, the first QueryLimit of them: every task
// of the store is read through a copy that meets the bounds, as Get
// reads one (MinOffsets bounds each task), all within one QueryTimeout.
// Each task's entries are of one moment of its store; different tasks'
// may be of different moments.
func (a *App) Range(ctx context.Context, store string, from, to []byte, opts ...QueryOption) (RangeAnswer, error) {
	r, err := a.q.Range(ctx, store, from, to, bounds(opts), false, "")
	return publicRange(r), err
}

// Windows reads the windows of key in a windowed store (a windowed
// aggregation's, topology.WindowedBy) whose start is in [from, to), in
// start order: one task holds them all, the one key's records go to, and
// it is read as Get reads a key. The store keeps windows by start, then
// key: a read goes over every key's windows in [from, to) of that task.
func (a *App) Windows(ctx context.Context, store string, key []byte, from, to time.Time, opts ...QueryOption) (RangeAnswer, error) {
	r, err := a.q.Windows(ctx, store, key, from, to, bounds(opts), false)
	return publicRange(r), err
}

func publicRange(r query.RangeAnswer) RangeAnswer {
	out := RangeAnswer{Store: r.Store, Truncated: r.Truncated}
	for _, e := range r.Entries {
		out.Entries = append(out.Entries, Entry(e))
	}
	for _, t := range r.Tasks {
		out.Tasks = append(out.Tasks, publicAnswer(t))
	}
	return out
}

// bounds applies opts; the Router checks them (ErrBadQuery).
func bounds(opts []QueryOption) query.Bounds {
	b := query.ActiveOnly
	for _, o := range opts {
		o(&b)
	}
	return b
}

// Stores returns the names of the stores Get reads, sorted.
func (a *App) Stores() []string { return a.e.StoreNames() }

// QueryHandler serves GET /query/STORE/KEY for this instance, as
// docs/queries.md describes: the HTTP face of Get, which other instances
// ask too. Serve it at the endpoint given WithEndpoint (package web
// mounts it). KEY and STORE are path-escaped; the parameters are max-lag,
// min-offset and timeout.
func (a *App) QueryHandler() http.Handler { return query.Handler(a.q) }

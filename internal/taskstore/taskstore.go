// Package taskstore holds a task's store as the runtime sees it: the
// local state.Store, the writes processing made that are not durable yet
// (pending, then sealed per commit until written) and the changelog
// checkpoint the stored data has reached. Reads (Get, Iterate) see those
// writes over the stored data.
//
// A Store belongs to the runtime's loop. The task's worker stages writes
// and reads while the loop lets it process, never at the same time as the
// loop touches the Store; Acked is written from produce callbacks; a store
// write off the loop (WriteSealed, ApplyChangelog) touches only the
// state.Store.
package taskstore

import (
	"fmt"
	"maps"
	"slices"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/state"
)

// Store is one store of a task: the local state.Store plus, while
// active, the writes not yet applied (they wait for the changelog's
// acknowledgement).
type Store struct {
	Name      string
	Changelog string
	State     state.Store
	// Checkpoint is the next changelog offset the store's data lacks.
	Checkpoint int64
	// Session is the restorer's Session reading the changelog into the
	// store; 0 when none does.
	Session uint64

	pending map[string]Write
	// pendingKeys are pending's keys: in ascending order up to
	// sortedKeys, then in the order first written since (sortPending
	// sorts them, for Iterate and Seal). A backlog of distinct keys
	// appends instead of inserting into a sorted slice per new key.
	pendingKeys []string
	sortedKeys  int
	// last is the last changelog record of the pending writes; sealed
	// holds earlier writes waiting for their commit (at-least-once).
	last   *kgo.Record
	Sealed []Sealed
	// Writing counts the first sealed writes handed to a commit's store
	// write under way (commitWrite); the loop drops them once written.
	Writing int
	// Acked is the next offset after the highest changelog write the
	// cluster acknowledged; written from produce callbacks.
	Acked atomic.Int64
	// InDoubt, under exactly-once, is acked when a transaction with
	// writes to this store was rolled back: its outcome is known once the
	// changelog's last stable offset passes it (see catchUpStores).
	InDoubt int64

	// Source: the changelog is an input topic of the task (a table's,
	// topology.StoreSpec.Source). Processing writes nothing to it: the
	// store's checkpoint is the input offset. A restore stops at limit,
	// the group's committed offset of that input (-1: not known yet),
	// since the active task processes again from there and must find the
	// store as it was then; parked says the restore stopped there and
	// starts again from the checkpoint once limit passes it.
	Source bool
	Limit  int64
	Parked bool
}

// Limited returns, of changelog records p read for a restore of a store
// whose changelog is an input topic (Source), those it may take: those
// before its Limit. end is the end to report (the limit; -1 while it is
// not known), and park says the restore must stop here and wait for a
// later limit (SetLimit).
func (s *Store) Limited(recs []*kgo.Record) (take []*kgo.Record, end int64, park bool) {
	if s.Limit < 0 {
		return nil, -1, true
	}
	for i, r := range recs {
		if r.Offset >= s.Limit {
			return recs[:i], s.Limit, true
		}
	}
	return recs, s.Limit, false
}

// SetLimit takes the limit of a Source store's restore (the group's
// committed offset of its input), and reports whether a restore parked
// at the old one may go on (from the checkpoint): reading says its
// task's changelogs are still being read.
func (s *Store) SetLimit(limit int64, reading bool) (resume bool) {
	s.Limit = limit
	if s.Parked && reading && limit > s.Checkpoint {
		s.Parked = false
		return true
	}
	return false
}

type Write struct {
	Value []byte // nil: delete
}

// ApplyChangelog applies changelog records at or past the checkpoint to
// the store, in one batch with the new checkpoint, and returns how far
// the checkpoint moved. Transaction markers move it without data.
func (s *Store) ApplyChangelog(recs []*kgo.Record) (int64, error) {
	return s.ApplyChangelogWith(&state.Batch{}, recs)
}

// ApplyChangelogWith is applyChangelog building its writes in b, which it
// leaves reset: a caller applying many fetches can keep one b.
func (s *Store) ApplyChangelogWith(b *state.Batch, recs []*kgo.Record) (int64, error) {
	next, err := ApplyChangelog(s.State, b, s.Checkpoint, recs)
	if err != nil {
		return 0, err
	}
	return s.Advance(next), nil
}

// Advance moves the checkpoint to next, if that is further, and returns
// how far it moved.
func (s *Store) Advance(next int64) int64 {
	if next <= s.Checkpoint {
		return 0
	}
	n := next - s.Checkpoint
	s.Checkpoint = next
	s.Acked.Store(next)
	return n
}

// ApplyChangelog writes to st, in one batch built in b (left reset) with
// the new checkpoint, the changelog records at or past from, and returns
// the checkpoint after them (from when there were none). It touches
// nothing but st, so it may run off the loop while the loop keeps the
// store's other fields.
func ApplyChangelog(st state.Store, b *state.Batch, from int64, recs []*kgo.Record) (int64, error) {
	defer b.Reset()
	ops, size := 0, 0
	for _, r := range recs {
		if r.Offset >= from {
			ops++
			size += len(r.Key) + len(r.Value)
		}
	}
	b.Grow(ops, size)
	next := from
	for _, r := range recs {
		if r.Offset < next {
			continue
		}
		next = r.Offset + 1
		switch {
		case r.Attrs.IsControl():
		case r.Value == nil:
			b.Delete(r.Key)
		default:
			b.Put(r.Key, r.Value)
		}
	}
	if next == from {
		return from, nil
	}
	if err := st.Apply(b, next); err != nil {
		return from, fmt.Errorf("applying up to changelog offset %d: %w", next, err)
	}
	return next, nil
}

// New returns the Store of store name, kept in st and logged to
// changelog (source: an input topic of the task, Source).
func New(name, changelog string, st state.Store, source bool) *Store {
	return &Store{Name: name, Changelog: changelog, State: st, pending: map[string]Write{}, Source: source, Limit: -1}
}

// Stage adds a pending write of key, carried by the changelog record rec
// (for a source store, the input record being processed).
func (s *Store) Stage(key string, w Write, rec *kgo.Record) {
	if _, ok := s.pending[key]; !ok {
		s.pendingKeys = append(s.pendingKeys, key)
	}
	s.pending[key] = w
	s.last = rec
}

// sortPending sorts pending's keys and returns them: the keys first
// written since the last sort are sorted and merged into the sorted ones,
// one insertion each when they are few (a processor that writes a key
// and iterates, record after record), in one merge otherwise.
func (s *Store) sortPending() []string {
	n := len(s.pendingKeys)
	if s.sortedKeys == n {
		return s.pendingKeys
	}
	head, tail := s.pendingKeys[:s.sortedKeys], s.pendingKeys[s.sortedKeys:]
	slices.Sort(tail)
	switch {
	case len(head) == 0:
	case len(tail) <= 8:
		var few [8]string
		added := few[:copy(few[:], tail)]
		keys := head
		for _, k := range added {
			i, _ := slices.BinarySearch(keys, k)
			keys = slices.Insert(keys, i, k)
		}
		s.pendingKeys = keys
	default:
		merged := make([]string, 0, n)
		i, j := 0, 0
		for i < len(head) && j < len(tail) {
			if head[i] < tail[j] {
				merged = append(merged, head[i])
				i++
			} else {
				merged = append(merged, tail[j])
				j++
			}
		}
		merged = append(append(merged, head[i:]...), tail[j:]...)
		s.pendingKeys = merged
	}
	s.sortedKeys = n
	return s.pendingKeys
}

// Ack records that the changelog holds everything before next (a produce
// acknowledged, or a source record processed). Safe from any goroutine.
func (s *Store) Ack(next int64) {
	for {
		cur := s.Acked.Load()
		if next <= cur || s.Acked.CompareAndSwap(cur, next) {
			return
		}
	}
}

// Pending is the number of keys written since the last seal.
func (s *Store) Pending() int { return len(s.pending) }

// ClearPending forgets the pending writes.
func (s *Store) ClearPending() {
	clear(s.pending)
	s.pendingKeys, s.sortedKeys = s.pendingKeys[:0], 0
}

// Get reads key: its newest write not yet applied, or else the stored
// value.
func (s *Store) Get(key []byte) ([]byte, bool, error) {
	if w, ok := s.pending[string(key)]; ok {
		return w.Value, w.Value != nil, nil
	}
	for i := len(s.Sealed) - 1; i >= 0; i-- {
		if w, ok := s.Sealed[i].writes[string(key)]; ok {
			return w.Value, w.Value != nil, nil
		}
	}
	return s.State.Get(key)
}

// Iterate merges the task's writes not yet applied (the sealed ones, then
// the pending ones, the newest winning) with the store's data, in key
// order. The writes are snapshotted first, so fn may write.
func (s *Store) Iterate(start, end []byte, fn func(key, value []byte) error) error {
	in := func(k string) bool {
		return (start == nil || k >= string(start)) && (end == nil || k < string(end))
	}
	over := map[string]Write{}
	// Each layer's keys in [start, end), from its sorted keys.
	layer := func(sorted []string, writes map[string]Write) {
		i := 0
		if start != nil {
			i, _ = slices.BinarySearch(sorted, string(start))
		}
		for ; i < len(sorted) && in(sorted[i]); i++ {
			over[sorted[i]] = writes[sorted[i]]
		}
	}
	for _, sl := range s.Sealed {
		layer(sl.keys, sl.writes)
	}
	layer(s.sortPending(), s.pending)
	keys := slices.Sorted(maps.Keys(over))
	i := 0
	// flush visits the overlay's keys below limit ("" with all: every one).
	flush := func(limit []byte, all bool) error {
		for ; i < len(keys) && (all || keys[i] < string(limit)); i++ {
			if w := over[keys[i]]; w.Value != nil {
				if err := fn([]byte(keys[i]), w.Value); err != nil {
					return err
				}
			}
		}
		return nil
	}
	err := s.State.Iterate(start, end, func(key, value []byte) error {
		if err := flush(key, false); err != nil {
			return err
		}
		if i < len(keys) && keys[i] == string(key) {
			i++ // the overlay's write replaces it (or deletes it)
			if w := over[string(key)]; w.Value != nil {
				return fn(key, w.Value)
			}
			return nil
		}
		return fn(key, value)
	})
	if err != nil {
		return err
	}
	return flush(nil, true)
}

// Sealed is a store's writes of one commit, waiting to be written to
// the store: at-least-once, a commit epoch's writes waiting for their
// acknowledgement (last is the last changelog record among them);
// exactly-once, a committed transaction's writes (at is the acknowledged
// end of the changelog then).
type Sealed struct {
	Epoch  uint64
	writes map[string]Write
	keys   []string // writes' keys, sorted
	last   *kgo.Record
	At     int64
}

// Checkpoint is the changelog offset a store holds once it has w.
func (w Sealed) Checkpoint() int64 {
	if w.At > 0 {
		return w.At
	}
	return w.last.Offset + 1
}

// Seal moves the store's pending writes into the commit of epoch.
func (s *Store) Seal(epoch uint64) { s.SealAt(epoch, 0) }

// SealAt seals the pending writes to be written with checkpoint at (0:
// the offset after their last changelog record).
func (s *Store) SealAt(epoch uint64, at int64) {
	if len(s.pending) == 0 {
		return
	}
	s.Sealed = append(s.Sealed, Sealed{Epoch: epoch, writes: s.pending, keys: s.sortPending(), last: s.last, At: at})
	s.pending, s.pendingKeys, s.sortedKeys, s.last = map[string]Write{}, nil, 0, nil
}

// WriteSealed writes entries to st, oldest first, in one batch built in
// b (left reset) with checkpoint cp.
func WriteSealed(st state.Store, b *state.Batch, entries []Sealed, cp int64) error {
	defer b.Reset()
	for _, e := range entries {
		for _, k := range e.keys {
			if v := e.writes[k].Value; v == nil {
				b.Delete([]byte(k))
			} else {
				b.Put([]byte(k), v)
			}
		}
	}
	return st.Apply(b, cp)
}

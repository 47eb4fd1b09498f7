package state

import (
	"fmt"
	"slices"
	"sync"
)

// MemoryStore is a Store held in memory, with the same semantics as
// PebbleStore minus durability. It is meant for tests and simulations.
type MemoryStore struct {
	name string // for errors

	mu struct {
		sync.Mutex
		closed bool
		data   map[string][]byte // values are never modified in place
		keys   []string          // sorted keys of data when !dirty
		dirty  bool
		ckpt   int64 // -1: none
	}
}

var _ Store = (*MemoryStore)(nil)

// NewMemory returns an empty store with no checkpoint. name appears in
// errors; it may be empty.
func NewMemory(name string) *MemoryStore {
	m := &MemoryStore{name: name}
	m.mu.data = map[string][]byte{}
	m.mu.ckpt = -1
	return m
}

func (m *MemoryStore) errClosed() error {
	return fmt.Errorf("%w: memory store %q", ErrClosed, m.name)
}

// Get implements Store.
func (m *MemoryStore) Get(key []byte) ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return nil, false, m.errClosed()
	}
	v, ok := m.mu.data[string(key)]
	if !ok {
		return nil, false, nil
	}
	return append([]byte{}, v...), true, nil
}

// Iterate implements Store. It copies the pairs in range under the lock,
// then calls fn without it, which gives fn a snapshot.
func (m *MemoryStore) Iterate(start, end []byte, fn func(key, value []byte) error) error {
	pairs, _, err := m.snapshot(start, end)
	if err != nil {
		return err
	}
	for _, p := range pairs {
		if err := fn([]byte(p.k), p.v); err != nil {
			return err
		}
	}
	return nil
}

type kv struct {
	k string
	v []byte // never modified in place
}

// snapshot copies the pairs in [start, end) and the checkpoint (0: none)
// under the lock.
func (m *MemoryStore) snapshot(start, end []byte) ([]kv, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return nil, 0, m.errClosed()
	}
	m.sortKeysLocked()
	keys := m.mu.keys
	lo, hi := 0, len(keys)
	if start != nil {
		lo, _ = slices.BinarySearch(keys, string(start))
	}
	if end != nil {
		hi, _ = slices.BinarySearch(keys, string(end))
	}
	var pairs []kv
	for i := lo; i < hi; i++ {
		pairs = append(pairs, kv{keys[i], m.mu.data[keys[i]]})
	}
	return pairs, max(m.mu.ckpt, 0), nil
}

func (m *MemoryStore) sortKeysLocked() {
	if !m.mu.dirty {
		return
	}
	m.mu.keys = m.mu.keys[:0]
	for k := range m.mu.data {
		m.mu.keys = append(m.mu.keys, k)
	}
	slices.Sort(m.mu.keys)
	m.mu.dirty = false
}

// Apply implements Store.
func (m *MemoryStore) Apply(b *Batch, changelogOffset int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return m.errClosed()
	}
	if err := checkOffset(m.mu.ckpt, changelogOffset, "memory store "+m.name); err != nil {
		return err
	}
	_ = b.each(func(del bool, key, value []byte) error {
		k := string(key)
		if del {
			if _, ok := m.mu.data[k]; ok {
				delete(m.mu.data, k)
				m.mu.dirty = true
			}
			return nil
		}
		if _, ok := m.mu.data[k]; !ok {
			m.mu.dirty = true
		}
		m.mu.data[k] = append([]byte{}, value...)
		return nil
	})
	m.mu.ckpt = changelogOffset
	return nil
}

// Read implements Store.
func (m *MemoryStore) Read(key []byte) ([]byte, bool, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return nil, false, 0, m.errClosed()
	}
	v, ok := m.mu.data[string(key)]
	return append([]byte(nil), v...), ok, max(m.mu.ckpt, 0), nil
}

// ReadRange implements Store: it copies the pairs under the lock.
func (m *MemoryStore) ReadRange(start, end []byte, limit int, fn func(key, value []byte) error) (int64, error) {
	pairs, ckpt, err := m.snapshot(start, end)
	if err != nil {
		return 0, err
	}
	for i, p := range pairs {
		if limit > 0 && i >= limit {
			break
		}
		if err := fn([]byte(p.k), slices.Clone(p.v)); err != nil {
			return ckpt, err
		}
	}
	return ckpt, nil
}

// Checkpoint implements Store.
func (m *MemoryStore) Checkpoint() (int64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return 0, false, m.errClosed()
	}
	if m.mu.ckpt < 0 {
		return 0, false, nil
	}
	return m.mu.ckpt, true, nil
}

// Wipe implements Store.
func (m *MemoryStore) Wipe() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return m.errClosed()
	}
	clear(m.mu.data)
	m.mu.keys = m.mu.keys[:0]
	m.mu.dirty = false
	m.mu.ckpt = -1
	return nil
}

// Close implements Store.
func (m *MemoryStore) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.closed {
		return m.errClosed()
	}
	m.mu.closed = true
	m.mu.data = nil
	m.mu.keys = nil
	return nil
}

// checkOffset enforces Apply's rule on changelog offsets.
func checkOffset(current, next int64, what string) error {
	if next < 0 {
		return fmt.Errorf("state: %s: negative changelog offset %d", what, next)
	}
	if next < current {
		return fmt.Errorf("%w: %s: offset %d is below checkpoint %d; wipe the store to restore from an earlier offset", ErrOffsetRegressed, what, next, current)
	}
	return nil
}

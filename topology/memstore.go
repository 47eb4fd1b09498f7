package topology

import (
	"bytes"
	"slices"
)

// MemStore is a Store in memory, for unit tests of processors. It copies
// keys and values in and out, so tests see what a processor really stored.
// The zero value is an empty store. It is not safe for concurrent use.
type MemStore struct {
	m    map[string][]byte
	keys []string // m's keys, sorted
}

// Get returns a copy of key's value.
func (s *MemStore) Get(key []byte) ([]byte, bool, error) {
	v, ok := s.m[string(key)]
	return bytes.Clone(v), ok, nil
}

// Put stores a copy of value under key.
func (s *MemStore) Put(key, value []byte) error {
	if s.m == nil {
		s.m = map[string][]byte{}
	}
	if value == nil {
		value = []byte{} // keep "present" distinct from missing
	}
	k := string(key)
	if _, ok := s.m[k]; !ok {
		i, _ := slices.BinarySearch(s.keys, k)
		s.keys = slices.Insert(s.keys, i, k)
	}
	s.m[k] = bytes.Clone(value)
	return nil
}

// Delete removes key; deleting a missing key is not an error.
func (s *MemStore) Delete(key []byte) error {
	k := string(key)
	if _, ok := s.m[k]; ok {
		delete(s.m, k)
		i, _ := slices.BinarySearch(s.keys, k)
		s.keys = slices.Delete(s.keys, i, i+1)
	}
	return nil
}

// Iterate calls fn for each key in [start, end) in ascending byte order
// (nil bounds are open), over a snapshot taken when it begins, so fn may
// write to the store.
func (s *MemStore) Iterate(start, end []byte, fn func(key, value []byte) error) error {
	i := 0
	if start != nil {
		i, _ = slices.BinarySearch(s.keys, string(start))
	}
	type pair struct{ k, v []byte }
	var snap []pair
	for ; i < len(s.keys) && (end == nil || s.keys[i] < string(end)); i++ {
		snap = append(snap, pair{[]byte(s.keys[i]), bytes.Clone(s.m[s.keys[i]])})
	}
	for _, p := range snap {
		if err := fn(p.k, p.v); err != nil {
			return err
		}
	}
	return nil
}

// Len returns the number of keys.
func (s *MemStore) Len() int { return len(s.m) }

// Keys returns the keys in ascending byte order.
func (s *MemStore) Keys() []string { return slices.Clone(s.keys) }

package taskstore

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/baton-streams/baton/state"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestIterate checks the merged iteration a processor sees (the
// store's data under sealed and pending writes) against a plain map, on
// random writes spread over the three layers and random bounds.
func TestIterate(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		model := map[string]string{}
		st := state.NewMemory("t")
		key := func() string { return fmt.Sprintf("k%02d", rng.IntN(30)) }
		// Layer 1: applied data.
		var b state.Batch
		for range rng.IntN(20) {
			k, v := key(), fmt.Sprint(rng.IntN(100))
			b.Put([]byte(k), []byte(v))
			model[k] = v
		}
		if err := st.Apply(&b, 1); err != nil {
			t.Fatal(err)
		}
		ts := New("s", "c", st, false)
		write := func() {
			k := key()
			if rng.IntN(3) == 0 {
				ts.Stage(k, Write{}, nil)
				delete(model, k)
				return
			}
			v := fmt.Sprint(rng.IntN(100))
			ts.Stage(k, Write{Value: []byte(v)}, nil)
			model[k] = v
		}
		// Layer 2: sealed commits, oldest first; layer 3: pending.
		for e := range rng.IntN(3) {
			for range rng.IntN(10) {
				write()
			}
			ts.Seal(uint64(e))
		}
		for range rng.IntN(10) {
			write()
		}
		var start, end []byte
		if rng.IntN(2) == 0 {
			start = []byte(key())
		}
		if rng.IntN(2) == 0 {
			end = []byte(key())
		}
		var want []string
		for _, k := range slices.Sorted(maps.Keys(model)) {
			if (start == nil || k >= string(start)) && (end == nil || k < string(end)) {
				want = append(want, k+"="+model[k])
			}
		}
		var got []string
		err := ts.Iterate(start, end, func(k, val []byte) error {
			got = append(got, string(k)+"="+string(val))
			// Writing while iterating (as Put does, into pending) must
			// not change what is visited.
			ts.Stage(key(), Write{Value: []byte("x")}, nil)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d, [%q, %q):\n got %v\nwant %v", seed, start, end, got, want)
		}
	}
}

// BenchmarkStageNewKeys stages n keys that are all new since the last
// seal (a backlog of distinct words), then seals them: the cost per key
// of the write buffer as the number of keys in one commit grows.
//
//	go test -run '^$' -bench StageNewKeys ./internal/taskstore
func BenchmarkStageNewKeys(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		keys := randomKeys(n, 1)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s := New("s", "c", state.NewMemory("s"), false)
			value := []byte("1")
			b.ReportAllocs()
			for b.Loop() {
				for _, k := range keys {
					s.Stage(k, Write{Value: value}, nil)
				}
				s.Seal(1)
				s.Sealed = s.Sealed[:0]
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
		})
	}
}

// BenchmarkStageThenIterate stages a new key and iterates a short range
// after each, as a processor that writes and scans per record does (a
// window's aggregation), with up to n keys pending.
//
//	go test -run '^$' -bench StageThenIterate ./internal/taskstore
func BenchmarkStageThenIterate(b *testing.B) {
	for _, n := range []int{100, 1_000, 10_000} {
		keys := randomKeys(n, 3)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s := New("s", "c", state.NewMemory("s"), false)
			value := []byte("1")
			visit := func(_, _ []byte) error { return nil }
			b.ReportAllocs()
			for b.Loop() {
				for _, k := range keys {
					s.Stage(k, Write{Value: value}, nil)
					if err := s.Iterate([]byte(k), []byte(k+"~"), visit); err != nil {
						b.Fatal(err)
					}
				}
				s.ClearPending()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
		})
	}
}

// TestIterateBetweenWrites: reads between bursts of writes of every size
// (a few keys, many keys, none) see the pending writes in order, so the
// sort of the keys written since the last read, and its merge with those
// sorted before, are checked against a plain map.
func TestIterateBetweenWrites(t *testing.T) {
	for seed := range uint64(100) {
		rng := rand.New(rand.NewPCG(seed, 11))
		s := New("s", "c", state.NewMemory("s"), false)
		model := map[string]string{}
		for round := range 30 {
			for range []int{0, 1, 3, 8, 9, 40}[rng.IntN(6)] {
				k, v := fmt.Sprintf("k%03d", rng.IntN(400)), fmt.Sprint(round)
				s.Stage(k, Write{Value: []byte(v)}, nil)
				model[k] = v
			}
			// A range, so that reads find its start in the sorted keys.
			lo, hi := fmt.Sprintf("k%03d", rng.IntN(400)), fmt.Sprintf("k%03d", rng.IntN(400))
			lo, hi = min(lo, hi), max(lo, hi)
			var want, got []string
			for _, k := range slices.Sorted(maps.Keys(model)) {
				if k >= lo && k < hi {
					want = append(want, k+"="+model[k])
				}
			}
			if err := s.Iterate([]byte(lo), []byte(hi), func(k, v []byte) error { got = append(got, string(k)+"="+string(v)); return nil }); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d round %d, [%s, %s):\n got %v\nwant %v", seed, round, lo, hi, got, want)
			}
			if rng.IntN(10) == 0 {
				s.Seal(uint64(round))
			}
		}
	}
}

// randomKeys returns n keys drawn at random from a billion, by seed.
func randomKeys(n int, seed uint64) []string {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("w%09d", rng.IntN(1_000_000_000))
	}
	return keys
}

// TestRestoreLimit: a store whose changelog is an input topic restores
// only up to the group's committed offset of that input: nothing while
// it is unknown, the records before it, and it parks there until a
// later limit lets it go on from its checkpoint.
func TestRestoreLimit(t *testing.T) {
	st := New("s", "in", state.NewMemory("s"), true)
	recs := []*kgo.Record{{Offset: 4}, {Offset: 5}, {Offset: 6}}
	if take, end, park := st.Limited(recs); len(take) != 0 || end != -1 || !park {
		t.Fatalf("limit unknown: took %d, end %d, park %v; want none, -1, parked", len(take), end, park)
	}
	st.Parked = true
	if st.SetLimit(6, true) != true || st.Parked {
		t.Fatal("a limit past the checkpoint (0) does not resume the parked restore")
	}
	if take, end, park := st.Limited(recs); len(take) != 2 || end != 6 || !park {
		t.Fatalf("limit 6: took %d, end %d, park %v; want 2, 6, parked", len(take), end, park)
	}
	st.Parked, st.Checkpoint = true, 6
	if st.SetLimit(6, true) || !st.Parked {
		t.Error("a limit at the checkpoint resumed the restore")
	}
	if st.SetLimit(9, false) || !st.Parked {
		t.Error("a restore resumed for a task whose changelogs are no longer read")
	}
	if take, end, park := st.Limited(recs); len(take) != 3 || end != 9 || park {
		t.Fatalf("limit 9: took %d, end %d, park %v; want 3, 9, not parked", len(take), end, park)
	}
}

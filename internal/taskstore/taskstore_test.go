package taskstore

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/baton-streams/baton/state"
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

package baton

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/state"
)

// TestStoreViewIterate checks the merged iteration a processor sees (the
// store's data under sealed and pending writes) against a plain map, on
// random writes spread over the three layers and random bounds.
func TestStoreViewIterate(t *testing.T) {
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
		ts := &taskStore{name: "s", st: st, pending: map[string]pendingWrite{}}
		write := func() {
			k := key()
			if rng.IntN(3) == 0 {
				ts.put(k, pendingWrite{})
				delete(model, k)
				return
			}
			v := fmt.Sprint(rng.IntN(100))
			ts.put(k, pendingWrite{value: []byte(v)})
			model[k] = v
		}
		// Layer 2: sealed commits, oldest first; layer 3: pending.
		for e := range rng.IntN(3) {
			for range rng.IntN(10) {
				write()
			}
			ts.seal(uint64(e))
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
		v := &storeView{s: ts}
		var got []string
		err := v.Iterate(start, end, func(k, val []byte) error {
			got = append(got, string(k)+"="+string(val))
			// Writing while iterating (as Put does, into pending) must
			// not change what is visited.
			ts.put(key(), pendingWrite{value: []byte("x")})
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

// recordingCommitter keeps what a store view produces, for tests of the
// view alone.
type recordingCommitter struct {
	committer
	recs []*kgo.Record
}

func (c *recordingCommitter) produce(r *kgo.Record, _ func(*kgo.Record, error)) {
	c.recs = append(c.recs, r)
}

// TestStoreViewEmptyValue: a Put of an empty value is a value (Get finds
// it, Iterate visits it, the changelog gets an empty value and not a
// tombstone); a Delete is a delete.
func TestStoreViewEmptyValue(t *testing.T) {
	rc := &recordingCommitter{}
	a := &App{membership: &membership{commit: rc}}
	tk := &task{id: "0_0"}
	ts := &taskStore{name: "s", changelog: "c", st: state.NewMemory("s"), pending: map[string]pendingWrite{}}
	v := &storeView{c: &taskContext{a: a, t: tk}, s: ts}
	for _, k := range []string{"empty", "nil"} {
		var val []byte
		if k == "empty" {
			val = []byte{}
		}
		if err := v.Put([]byte(k), val); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.Delete([]byte("gone")); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"empty", "nil"} {
		if _, ok, err := v.Get([]byte(k)); err != nil || !ok {
			t.Errorf("Get(%q) after a Put of an empty value: ok %v, err %v", k, ok, err)
		}
	}
	var seen []string
	if err := v.Iterate(nil, nil, func(k, _ []byte) error { seen = append(seen, string(k)); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seen, []string{"empty", "nil"}) {
		t.Errorf("Iterate visited %q", seen)
	}
	for _, r := range rc.recs {
		if tomb := r.Value == nil; tomb != (string(r.Key) == "gone") {
			t.Errorf("changelog record %q: tombstone %v", r.Key, tomb)
		}
	}
}

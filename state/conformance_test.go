package state

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// implementations lists every Store the conformance suite runs against.
// open returns a fresh, empty store; the test closes it.
var implementations = []struct {
	name string
	open func(t *testing.T) Store
}{
	{"memory", func(t *testing.T) Store { return NewMemory(t.Name()) }},
	{"pebble", func(t *testing.T) Store {
		s, err := OpenPebble(t.TempDir(), "0_1", "counts")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}},
	{"pebble-memfs", func(t *testing.T) Store {
		s, err := OpenPebble("/state", "0_1", "counts", WithFS(vfs.NewMem()), WithSyncWrites())
		if err != nil {
			t.Fatal(err)
		}
		return s
	}},
}

func forEachStore(t *testing.T, test func(t *testing.T, s Store)) {
	for _, impl := range implementations {
		t.Run(impl.name, func(t *testing.T) {
			s := impl.open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil && !errors.Is(err, ErrClosed) {
					t.Errorf("close: %v", err)
				}
			})
			test(t, s)
		})
	}
}

func get(t *testing.T, s Store, key string) (string, bool) {
	t.Helper()
	v, ok, err := s.Get([]byte(key))
	if err != nil {
		t.Fatalf("get %q: %v", key, err)
	}
	return string(v), ok
}

func apply(t *testing.T, s Store, offset int64, ops ...string) {
	t.Helper()
	var b Batch
	for _, op := range ops { // "k=v" puts, "-k" deletes
		if k, ok := bytes.CutPrefix([]byte(op), []byte("-")); ok {
			b.Delete(k)
			continue
		}
		k, v, _ := bytes.Cut([]byte(op), []byte("="))
		b.Put(k, v)
	}
	if err := s.Apply(&b, offset); err != nil {
		t.Fatalf("apply %v at %d: %v", ops, offset, err)
	}
}

func checkpoint(t *testing.T, s Store) (int64, bool) {
	t.Helper()
	off, ok, err := s.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	return off, ok
}

// scan returns "k=v" for every pair Iterate gives in [start, end).
func scan(t *testing.T, s Store, start, end []byte) []string {
	t.Helper()
	var out []string
	if err := s.Iterate(start, end, func(k, v []byte) error {
		out = append(out, string(k)+"="+string(v))
		return nil
	}); err != nil {
		t.Fatalf("iterate: %v", err)
	}
	return out
}

func TestStoreFresh(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		if off, ok := checkpoint(t, s); ok {
			t.Errorf("fresh store has checkpoint %d", off)
		}
		if _, ok := get(t, s, "a"); ok {
			t.Error("fresh store has key a")
		}
		if got := scan(t, s, nil, nil); got != nil {
			t.Errorf("fresh store iterates %v", got)
		}
	})
}

func TestStoreApply(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		apply(t, s, 10, "a=1", "b=2", "a=3", "c=", "-b", "-nothing")
		if off, ok := checkpoint(t, s); !ok || off != 10 {
			t.Errorf("checkpoint = %d, %v; want 10", off, ok)
		}
		for k, want := range map[string]string{"a": "3", "c": ""} {
			if v, ok := get(t, s, k); !ok || v != want {
				t.Errorf("get %s = %q, %v; want %q", k, v, ok, want)
			}
		}
		if v, ok, _ := s.Get([]byte("c")); v == nil || !ok {
			t.Errorf("empty value reads as nil (%v, %v); want a non-nil empty slice", v, ok)
		}
		if _, ok := get(t, s, "b"); ok {
			t.Error("deleted key b is present")
		}
		// An empty batch only moves the checkpoint; a nil one too.
		apply(t, s, 12)
		if err := s.Apply(nil, 12); err != nil {
			t.Errorf("nil batch at the same offset: %v", err)
		}
		if off, _ := checkpoint(t, s); off != 12 {
			t.Errorf("checkpoint = %d, want 12", off)
		}
		if got := scan(t, s, nil, nil); !slices.Equal(got, []string{"a=3", "c="}) {
			t.Errorf("scan = %v", got)
		}
	})
}

func TestStoreOffsetRules(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		apply(t, s, 5, "a=1")
		var b Batch
		b.Put([]byte("a"), []byte("2"))
		err := s.Apply(&b, 4)
		if !errors.Is(err, ErrOffsetRegressed) {
			t.Fatalf("apply below checkpoint: err = %v, want ErrOffsetRegressed", err)
		}
		if v, _ := get(t, s, "a"); v != "1" {
			t.Errorf("a rejected apply wrote data: a = %q", v)
		}
		if err := s.Apply(&b, -1); err == nil {
			t.Error("negative offset accepted")
		}
		if off, _ := checkpoint(t, s); off != 5 {
			t.Errorf("checkpoint moved to %d by rejected applies", off)
		}
		apply(t, s, 0+5, "a=3") // equal offset is allowed
	})
}

func TestStoreKeysAreBytes(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		keys := [][]byte{{}, {0}, {0, 0}, {0x00, 0xff}, {0x01}, {0xff}, {0xff, 0xff}, []byte("checkpoint"), []byte("\x00checkpoint"), []byte("\x00marker")}
		var b Batch
		for i, k := range keys {
			b.Put(k, []byte{byte(i)})
		}
		if err := s.Apply(&b, 1); err != nil {
			t.Fatal(err)
		}
		var got [][]byte
		if err := s.Iterate(nil, nil, func(k, v []byte) error {
			got = append(got, bytes.Clone(k))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		want := slices.Clone(keys)
		slices.SortFunc(want, bytes.Compare)
		if !slices.EqualFunc(got, want, bytes.Equal) {
			t.Errorf("keys in order:\n got %q\nwant %q", got, want)
		}
		for i, k := range keys {
			if v, ok, err := s.Get(k); err != nil || !ok || !bytes.Equal(v, []byte{byte(i)}) {
				t.Errorf("get %q = %v, %v, %v", k, v, ok, err)
			}
		}
		// User keys that look like internal records do not touch them.
		if off, ok := checkpoint(t, s); !ok || off != 1 {
			t.Errorf("checkpoint = %d, %v after writing look-alike keys", off, ok)
		}
	})
}

func TestStoreIterateBounds(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		apply(t, s, 1, "a=1", "b=2", "bb=3", "c=4")
		for _, c := range []struct {
			start, end string
			nilStart   bool
			nilEnd     bool
			want       []string
		}{
			{nilStart: true, nilEnd: true, want: []string{"a=1", "b=2", "bb=3", "c=4"}},
			{start: "b", nilEnd: true, want: []string{"b=2", "bb=3", "c=4"}},
			{nilStart: true, end: "bb", want: []string{"a=1", "b=2"}},
			{start: "b", end: "c", want: []string{"b=2", "bb=3"}},
			{start: "ba", end: "bz", want: []string{"bb=3"}},
			{start: "c", end: "b", want: nil},
			{start: "b", end: "b", want: nil},
			{start: "", end: "a", want: nil},
		} {
			var start, end []byte
			if !c.nilStart {
				start = []byte(c.start)
			}
			if !c.nilEnd {
				end = []byte(c.end)
			}
			if got := scan(t, s, start, end); !slices.Equal(got, c.want) {
				t.Errorf("iterate [%q, %q) = %v, want %v", start, end, got, c.want)
			}
		}
	})
}

func TestStoreIterateStopsAndSnapshots(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		apply(t, s, 1, "a=1", "b=2", "c=3")
		stop := errors.New("stop")
		n := 0
		err := s.Iterate(nil, nil, func(k, v []byte) error {
			n++
			if string(k) == "b" {
				return stop
			}
			return nil
		})
		if err != stop || n != 2 {
			t.Errorf("iterate returned %v after %d calls; want the callback's error after 2", err, n)
		}
		// Writes made during an iteration are not seen by it.
		var seen []string
		err = s.Iterate(nil, nil, func(k, v []byte) error {
			seen = append(seen, string(k)+"="+string(v))
			if string(k) == "a" {
				var b Batch
				b.Put([]byte("b"), []byte("new"))
				b.Put([]byte("bb"), []byte("new"))
				b.Delete([]byte("c"))
				return s.Apply(&b, 2)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(seen, []string{"a=1", "b=2", "c=3"}) {
			t.Errorf("iteration saw %v, want the snapshot a=1 b=2 c=3", seen)
		}
		if got := scan(t, s, nil, nil); !slices.Equal(got, []string{"a=1", "b=new", "bb=new"}) {
			t.Errorf("after: %v", got)
		}
	})
}

func TestStoreCopiesMemory(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		var b Batch
		k, v := []byte("key"), []byte("value")
		b.Put(k, v)
		k[0], v[0] = 'X', 'X' // the batch copied them
		if err := s.Apply(&b, 1); err != nil {
			t.Fatal(err)
		}
		b.Reset()
		b.Put([]byte("key"), []byte("other")) // reusing the batch leaves the store alone
		got, _, _ := s.Get([]byte("key"))
		if string(got) != "value" {
			t.Fatalf("get = %q, want value", got)
		}
		got[0] = 'X' // the caller owns what Get returns
		if again, _ := get(t, s, "key"); again != "value" {
			t.Errorf("modifying Get's result changed the store: %q", again)
		}
	})
}

func TestStoreWipe(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		apply(t, s, 100, "a=1", "b=2")
		if err := s.Wipe(); err != nil {
			t.Fatal(err)
		}
		if off, ok := checkpoint(t, s); ok {
			t.Errorf("checkpoint %d survived Wipe", off)
		}
		if got := scan(t, s, nil, nil); got != nil {
			t.Errorf("data survived Wipe: %v", got)
		}
		apply(t, s, 3, "c=3") // a wiped store restarts from any offset
		if got := scan(t, s, nil, nil); !slices.Equal(got, []string{"c=3"}) {
			t.Errorf("after wipe and apply: %v", got)
		}
	})
}

func TestStoreClosed(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		var b Batch
		for name, err := range map[string]error{
			"get":        func() error { _, _, err := s.Get(nil); return err }(),
			"iterate":    s.Iterate(nil, nil, func(k, v []byte) error { return nil }),
			"apply":      s.Apply(&b, 1),
			"checkpoint": func() error { _, _, err := s.Checkpoint(); return err }(),
			"read":       func() error { _, _, _, err := s.Read(nil); return err }(),
			"read range": func() error { _, err := s.ReadRange(nil, nil, 0, func(k, v []byte) error { return nil }); return err }(),
			"wipe":       s.Wipe(),
			"close":      s.Close(),
		} {
			if !errors.Is(err, ErrClosed) {
				t.Errorf("%s after close: err = %v, want ErrClosed", name, err)
			}
		}
	})
}

// TestStoreReadFromOutside reads from other goroutines while the owner
// applies batches, wipes the store and closes it: every read (of one key,
// and of a range) sees values and a checkpoint of the same moment (the
// keys hold the offset they were written at, minus one), and after the
// close every read says ErrClosed instead of failing otherwise.
func TestStoreReadFromOutside(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		var wg sync.WaitGroup
		reads := make([]atomic.Int64, 4)
		for r := range reads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					var got []string
					var ckpt int64
					var err error
					if r%2 == 0 {
						var v []byte
						var found bool
						v, found, ckpt, err = s.Read([]byte("k"))
						if found {
							got = append(got, string(v))
						}
					} else {
						ckpt, err = s.ReadRange([]byte("j"), nil, 5, func(k, v []byte) error {
							got = append(got, string(v))
							return nil
						})
					}
					if errors.Is(err, ErrClosed) {
						return
					}
					if err != nil {
						t.Errorf("read: %v", err)
						return
					}
					var want []string
					if ckpt > 0 {
						want = append(want, strconv.FormatInt(ckpt-1, 10))
						if r%2 == 1 {
							want = append(want, want[0]) // j and k
						}
					}
					if !slices.Equal(got, want) {
						t.Errorf("reader %d at checkpoint %d: %q, want %q", r, ckpt, got, want)
						return
					}
					reads[r].Add(1)
				}
			}()
		}
		// The batches are spaced out, so that the readers run between
		// them (without, the owner may write them all before any reader
		// starts).
		for off := int64(1); off <= 300; off++ {
			v := strconv.FormatInt(off-1, 10)
			apply(t, s, off, "j="+v, "k="+v)
			if off%5 == 0 {
				time.Sleep(50 * time.Microsecond)
			}
			if off == 150 {
				if err := s.Wipe(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if _, _, _, err := s.Read([]byte("k")); !errors.Is(err, ErrClosed) {
			t.Errorf("read after close: %v, want ErrClosed", err)
		}
		if _, err := s.ReadRange(nil, nil, 0, func(k, v []byte) error { return nil }); !errors.Is(err, ErrClosed) {
			t.Errorf("range read after close: %v, want ErrClosed", err)
		}
		t.Logf("reads per reader: %d %d %d %d", reads[0].Load(), reads[1].Load(), reads[2].Load(), reads[3].Load())
	})
}

// TestStoreReadRange reads ranges with bounds and limits.
func TestStoreReadRange(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		apply(t, s, 7, "a=1", "b=2", "c=3", "d=4")
		for _, c := range []struct {
			start, end []byte
			limit      int
			want       []string
		}{
			{nil, nil, 0, []string{"a=1", "b=2", "c=3", "d=4"}},
			{[]byte("b"), []byte("d"), 0, []string{"b=2", "c=3"}},
			{[]byte("b"), nil, 2, []string{"b=2", "c=3"}},
			{[]byte("d"), []byte("b"), 0, nil},
		} {
			var got []string
			ckpt, err := s.ReadRange(c.start, c.end, c.limit, func(k, v []byte) error {
				got = append(got, string(k)+"="+string(v))
				return nil
			})
			if err != nil || ckpt != 7 || !slices.Equal(got, c.want) {
				t.Errorf("[%q, %q) limit %d: %q at %d (%v), want %q at 7", c.start, c.end, c.limit, got, ckpt, err, c.want)
			}
		}
	})
}

// TestStoreAgainstModel applies random batches to each store and to a
// plain map, and compares reads after every batch.
func TestStoreAgainstModel(t *testing.T) {
	seed := rand.Uint64()
	forEachStore(t, func(t *testing.T, s Store) {
		t.Logf("seed %d", seed)
		r := rand.New(rand.NewPCG(seed, 1))
		model := map[string]string{}
		key := func() string { return fmt.Sprintf("k%02d", r.IntN(30)) }
		offset := int64(0)
		for step := range 300 {
			var b Batch
			for range r.IntN(8) {
				k := key()
				if r.IntN(3) == 0 {
					b.Delete([]byte(k))
					delete(model, k)
				} else {
					v := fmt.Sprintf("v%d", r.IntN(1000))
					b.Put([]byte(k), []byte(v))
					model[k] = v
				}
			}
			offset += int64(r.IntN(5))
			if err := s.Apply(&b, offset); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			k := key()
			v, ok := get(t, s, k)
			if mv, mok := model[k]; v != mv || ok != mok {
				t.Fatalf("seed %d step %d: get %s = %q, %v; model %q, %v", seed, step, k, v, ok, mv, mok)
			}
			lo, hi := key(), key()
			var want []string
			for _, mk := range slices.Sorted(maps.Keys(model)) {
				if lo <= mk && mk < hi {
					want = append(want, mk+"="+model[mk])
				}
			}
			if got := scan(t, s, []byte(lo), []byte(hi)); !slices.Equal(got, want) {
				t.Fatalf("seed %d step %d: iterate [%s, %s) = %v, model %v", seed, step, lo, hi, got, want)
			}
		}
		if off, _ := checkpoint(t, s); off != offset {
			t.Errorf("seed %d: checkpoint %d, want %d", seed, off, offset)
		}
	})
}

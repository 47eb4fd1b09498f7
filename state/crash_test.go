package state

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// crashBatch is the batch applied at step i: deterministic, so the
// expected contents after any prefix of steps can be recomputed.
func crashBatch(i int) *Batch {
	var b Batch
	b.Put(fmt.Appendf(nil, "k%d", i%7), fmt.Appendf(nil, "v%d", i))
	b.Put([]byte("last"), fmt.Appendf(nil, "%d", i))
	// Padding fills Pebble's 32 KiB log blocks, which it writes out
	// without waiting for a sync; a crash clone can then catch any of them.
	b.Put([]byte("pad"), make([]byte, (i*397)%4000))
	if i%5 == 0 {
		b.Delete(fmt.Appendf(nil, "k%d", (i+3)%7))
	}
	return &b
}

// modelAfter is the store's expected contents after steps [0, n).
func modelAfter(n int) []string {
	m := NewMemory("model")
	for i := range n {
		_ = m.Apply(crashBatch(i), int64(i+1))
	}
	return summary(m)
}

// summary lists k=v for every key, with the padding's length only.
func summary(s Store) []string {
	var out []string
	err := s.Iterate(nil, nil, func(k, v []byte) error {
		if string(k) == "pad" {
			out = append(out, fmt.Sprintf("pad=%d bytes", len(v)))
		} else {
			out = append(out, string(k)+"="+string(v))
		}
		return nil
	})
	if err != nil {
		out = append(out, "error: "+err.Error())
	}
	return out
}

// TestCrashKeepsDataAndCheckpointTogether crashes a store that applies
// without fsync at random moments, keeping a random part of the unsynced
// writes, and checks that the reopened store holds exactly the data of the
// checkpoint it reports: the offset never claims more (or less) than the
// data.
func TestCrashKeepsDataAndCheckpointTogether(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 2))
	fs := vfs.NewCrashableMem()
	s, err := OpenPebble("/state", "1_0", "counts", WithFS(fs))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	models := map[int][]string{0: nil}
	corrupt, recovered := 0, map[int64]bool{}
	for i := range 400 {
		if err := s.Apply(crashBatch(i), int64(i+1)); err != nil {
			t.Fatal(err)
		}
		if r.IntN(10) != 0 {
			continue
		}
		crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: r.IntN(101), RNG: rand.New(rand.NewPCG(r.Uint64(), 0))})
		c, err := OpenPebble("/state", "1_0", "counts", WithFS(crashed))
		if errors.Is(err, ErrCorrupt) {
			corrupt++ // allowed: OpenOrWipe starts over; never silently wrong
			continue
		}
		if err != nil {
			t.Fatalf("seed %d step %d: reopen after crash: %v", seed, i, err)
		}
		off, ok, _ := c.Checkpoint()
		n := 0
		if ok {
			n = int(off)
		}
		if off > int64(i+1) {
			t.Fatalf("seed %d step %d: checkpoint %d is beyond the last apply", seed, i, off)
		}
		if _, seen := models[n]; !seen {
			models[n] = modelAfter(n)
		}
		if got := summary(c); !slices.Equal(got, models[n]) {
			t.Fatalf("seed %d step %d: after crash, checkpoint %d (%v) but data\n%v\nwant\n%v", seed, i, off, ok, got, models[n])
		}
		recovered[off] = true
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("recovered at %d distinct checkpoints %v; %d clones corrupt", len(recovered), slices.Sorted(maps.Keys(recovered)), corrupt)
	if len(recovered) < 2 {
		t.Errorf("seed %d: crashes recovered at only %v; the test is not exercising partial recovery", seed, recovered)
	}
}

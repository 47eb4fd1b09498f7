package state

import (
	"encoding/binary"
	"testing"
)

// BenchmarkApply compares the stores side by side: each op applies one
// batch of 100 puts (16-byte keys, 100-byte values) and moves the
// checkpoint. Pebble runs with its default (no fsync per Apply) and with
// WithSyncWrites.
func BenchmarkApply(b *testing.B) {
	for _, impl := range []struct {
		name string
		open func(b *testing.B) Store
	}{
		{"memory", func(b *testing.B) Store { return NewMemory("bench") }},
		{"pebble", func(b *testing.B) Store {
			s, err := OpenPebble(b.TempDir(), "0_0", "bench")
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
		{"pebble-sync", func(b *testing.B) Store {
			s, err := OpenPebble(b.TempDir(), "0_0", "bench", WithSyncWrites())
			if err != nil {
				b.Fatal(err)
			}
			return s
		}},
	} {
		b.Run(impl.name, func(b *testing.B) {
			s := impl.open(b)
			defer s.Close()
			var batch Batch
			key := make([]byte, 16)
			value := make([]byte, 100)
			b.SetBytes(100 * int64(len(key)+len(value)))
			b.ReportAllocs()
			n := uint64(0)
			for i := 0; b.Loop(); i++ {
				batch.Reset()
				for range 100 {
					n++
					binary.BigEndian.PutUint64(key, n*0x9e3779b97f4a7c15) // spread keys
					binary.BigEndian.PutUint64(value, n)
					batch.Put(key, value)
				}
				if err := s.Apply(&batch, int64(i+1)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

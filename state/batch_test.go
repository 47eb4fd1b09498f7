package state

import "testing"

// TestBatchGrow: a batch grown for its operations allocates its room once
// (two allocations, for the bytes and the operations) and never while
// they are added; Reset keeps that room.
func TestBatchGrow(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's instrumentation allocates: the counts mean nothing under it")
	}
	key, value := []byte("key-0001"), []byte("value-0001")
	fill := func(b *Batch) {
		for range 100 {
			b.Put(key, value)
		}
		b.Delete(key)
	}
	if n := testing.AllocsPerRun(10, func() {
		var b Batch
		b.Grow(101, 100*(len(key)+len(value))+len(key))
		fill(&b)
	}); n > 2 {
		t.Errorf("a grown batch allocated %v times as it filled, want 2 (its room)", n)
	}
	var b Batch
	b.Grow(101, 100*(len(key)+len(value))+len(key))
	fill(&b)
	if n := testing.AllocsPerRun(10, func() { b.Reset(); fill(&b) }); n != 0 {
		t.Errorf("refilling a reset batch allocated %v times, want 0", n)
	}
	if b.Len() != 101 {
		t.Errorf("Len %d, want 101", b.Len())
	}
	var got []string
	_ = b.each(func(del bool, k, v []byte) error {
		if del {
			got = append(got, "del "+string(k))
		} else if len(got) == 0 {
			got = append(got, string(k)+"="+string(v))
		}
		return nil
	})
	if len(got) != 2 || got[0] != "key-0001=value-0001" || got[1] != "del key-0001" {
		t.Errorf("batch holds %v", got)
	}
}

package global

import (
	"slices"
	"strings"
	"testing"

	"github.com/baton-streams/baton/state"
	"github.com/baton-streams/baton/topology"
)

// TestView: a task cannot write to a global store, and reads its records
// without the partitions' offsets kept beside them.
func TestView(t *testing.T) {
	st := state.NewMemory("ref")
	v := globalView{&globalStore{spec: topology.GlobalStoreSpec{Name: "ref", Topic: "ref-topic"}, st: st}}
	for _, err := range []error{v.Put([]byte("k"), []byte("v")), v.Delete([]byte("k"))} {
		if err == nil || !strings.Contains(err.Error(), "global store ref is read-only") {
			t.Errorf("write to a global store: %v, want a read-only error", err)
		}
	}
	var b state.Batch
	b.Put(append([]byte{globalDataPrefix}, "a"...), []byte("1"))
	b.Put(append([]byte{globalDataPrefix}, "b"...), []byte("2"))
	b.Put(globalOffsetKey(0), []byte("12345678"))
	if err := st.Apply(&b, 1); err != nil {
		t.Fatal(err)
	}
	var seen []string
	if err := v.Iterate(nil, nil, func(k, val []byte) error { seen = append(seen, string(k)+"="+string(val)); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seen, []string{"a=1", "b=2"}) {
		t.Errorf("Iterate saw %q, want the records only, without the offsets", seen)
	}
}

package baton

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/taskstore"
	"github.com/baton-streams/baton/state"
)

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
	ts := taskstore.New("s", "c", state.NewMemory("s"), false)
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

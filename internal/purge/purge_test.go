package purge

import (
	"errors"
	"maps"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestPurgerOffsets: the purger keeps only repartition topics' offsets,
// the highest per partition, and sends a partition again only when its
// offset moved.
func TestPurgerOffsets(t *testing.T) {
	p := New([]string{"r"}, 0, nil)
	eo := func(o int64) kgo.EpochOffset { return kgo.EpochOffset{Epoch: -1, Offset: o} }
	p.Committed(map[string]map[int32]kgo.EpochOffset{"r": {0: eo(5), 1: eo(0)}, "input": {0: eo(9)}}, nil)
	p.Committed(map[string]map[int32]kgo.EpochOffset{"r": {0: eo(3), 2: eo(7)}}, nil)
	p.Committed(map[string]map[int32]kgo.EpochOffset{"r": {0: eo(100)}}, errors.New("commit failed"))
	got := offsetsAt(p.take())
	if want := map[string]int64{"r/0": 5, "r/2": 7}; !maps.Equal(got, want) {
		t.Fatalf("first purge %v, want %v", got, want)
	}
	p.purged["r"] = map[int32]int64{0: 5, 2: 7}
	p.Committed(map[string]map[int32]kgo.EpochOffset{"r": {0: eo(5), 2: eo(8)}}, nil)
	if got, want := offsetsAt(p.take()), map[string]int64{"r/2": 8}; !maps.Equal(got, want) {
		t.Fatalf("second purge %v, want %v", got, want)
	}
	if New(nil, 0, nil) != nil {
		t.Error("a topology without repartition topics got a purger")
	}
	var none *Purger
	none.Committed(map[string]map[int32]kgo.EpochOffset{"r": {0: eo(1)}}, nil)
	none.Start(nil)
	none.Close()
	p.Close() // never started
}

func offsetsAt(o kadm.Offsets) map[string]int64 {
	out := map[string]int64{}
	o.Each(func(o kadm.Offset) { out[o.Topic+"/"+strconv.Itoa(int(o.Partition))] = o.At })
	return out
}

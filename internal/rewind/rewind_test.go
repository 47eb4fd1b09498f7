package rewind

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestRewindOffsets: after an abort, a partition goes back to its
// committed offset, or to its start only when the group committed none.
// A committed offset that cannot be read (UNSTABLE_OFFSET_COMMIT while the
// broker writes abort markers) is an error to retry, never "no commit".
func TestRewindOffsets(t *testing.T) {
	parts := map[string][]int32{"in": {0}}
	starts := kadm.ListedOffsets{"in": {0: {Topic: "in", Partition: 0, Offset: 7}}}
	committedAt := func(at int64, err error) kadm.OffsetResponses {
		return kadm.OffsetResponses{"in": {0: {Offset: kadm.Offset{Topic: "in", Partition: 0, At: at}, Err: err}}}
	}
	for _, c := range []struct {
		name      string
		committed kadm.OffsetResponses
		starts    kadm.ListedOffsets
		want      int64 // -1: an error
	}{
		{"committed", committedAt(42, nil), starts, 42},
		{"none committed", kadm.OffsetResponses{}, starts, 7},
		{"committed -1", committedAt(-1, nil), starts, 7},
		{"unstable offset commit", committedAt(-1, kerr.UnstableOffsetCommit), starts, -1},
		{"coordinator loading", committedAt(-1, kerr.CoordinatorLoadInProgress), starts, -1},
		{"start unknown", kadm.OffsetResponses{}, kadm.ListedOffsets{}, -1},
		{"start error", kadm.OffsetResponses{}, kadm.ListedOffsets{"in": {0: {Topic: "in", Err: kerr.NotLeaderForPartition}}}, -1},
	} {
		set, err := offsets(parts, c.committed, c.starts)
		switch {
		case c.want < 0 && err == nil:
			t.Errorf("%s: rewinds to %v, want an error", c.name, set["in"][0].Offset)
		case c.want >= 0 && err != nil:
			t.Errorf("%s: %v, want offset %d", c.name, err, c.want)
		case c.want >= 0 && set["in"][0].Offset != c.want:
			t.Errorf("%s: rewinds to %d, want %d", c.name, set["in"][0].Offset, c.want)
		}
	}
}

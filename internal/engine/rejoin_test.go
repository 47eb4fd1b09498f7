package engine

import (
	"testing"
	"time"
)

// TestRoundSettled: a forced rebalance waits for a round under way and
// for the session's offset fetch, which a rebalance would cancel, but
// never for long.
func TestRoundSettled(t *testing.T) {
	ms := int64(time.Millisecond)
	reb := 10 * time.Second
	for _, c := range []struct {
		name                           string
		now, joined, assigned, fetched int64
		want                           bool
	}{
		{"never joined", 5 * ms, 0, 0, 0, true},
		{"joined, not assigned yet", 100 * ms, 50 * ms, 0, 0, false},
		{"a round under way after a session", 500 * ms, 400 * ms, 300 * ms, 310 * ms, false},
		{"a round under way for a rebalance timeout", 10_400 * ms, 400 * ms, 300 * ms, 310 * ms, true},
		{"assigned, offsets not fetched", 120 * ms, 50 * ms, 100 * ms, 0, false},
		{"assigned, offsets fetched", 120 * ms, 50 * ms, 100 * ms, 101 * ms, true},
		{"a session that fetches nothing, settleMax later", 100*ms + int64(settleMax), 50 * ms, 100 * ms, 0, true},
		{"offsets fetched for an earlier session only", 320 * ms, 250 * ms, 300 * ms, 101 * ms, false},
	} {
		if got := roundSettled(c.now, c.joined, c.assigned, c.fetched, reb); got != c.want {
			t.Errorf("%s: settled %v, want %v", c.name, got, c.want)
		}
	}
}

package engine

import (
	"testing"
	"time"
)

func TestConfirmation(t *testing.T) {
	now := time.Unix(1000, 0)
	at := func(d time.Duration) int64 { return now.Add(-d).UnixNano() }
	for _, c := range []struct {
		name                     string
		heard, assigned, failed  int64
		wantUnconfirmed, wantSet bool
	}{
		{"never a member", 0, 0, 0, false, false},
		{"heartbeats answered", at(time.Second), at(time.Minute), 0, false, true},
		{"no heartbeat for a session", at(7 * time.Second), at(time.Minute), 0, true, true},
		{"assigned just now, no heartbeat yet", 0, at(time.Second), 0, false, true},
		{"lost after the last heartbeat", at(2 * time.Second), at(time.Minute), at(time.Second), true, true},
		{"heartbeat of a new session after the loss", at(time.Second), at(time.Minute), at(2 * time.Second), false, true},
	} {
		a := &App{cfg: Config{Session: 6 * time.Second}}
		a.heardAt.Store(c.heard)
		a.assignedAt.Store(c.assigned)
		a.groupErrAt.Store(c.failed)
		last, unconfirmed := a.confirmation(now)
		if unconfirmed != c.wantUnconfirmed || last.IsZero() == c.wantSet {
			t.Errorf("%s: confirmation = %v, %v; want unconfirmed %v, a time %v", c.name, last, unconfirmed, c.wantUnconfirmed, c.wantSet)
		}
	}
}

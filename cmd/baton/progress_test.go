package main

import (
	"bytes"
	"testing"

	"github.com/baton-streams/baton"
)

func TestProgressBars(t *testing.T) {
	var out bytes.Buffer
	pg := newProgress(&out)
	st := func(lag int64) baton.Status {
		return baton.Status{Instance: "i3", Tasks: []baton.TaskStatus{{ID: "1_2", Role: "learner", Lag: lag}, {ID: "0_1", Role: "active"}}}
	}
	pg.update(st(1000))
	if len(pg.bars) != 1 {
		t.Fatalf("bars = %d, want one for the restoring learner only", len(pg.bars))
	}
	pg.update(st(400))
	if b := pg.bars["1_2 learner"]; b == nil || b.bar.Current() != 600 {
		t.Fatalf("after lag 1000 -> 400 the bar should stand at 600")
	}
	pg.update(st(0))
	if len(pg.bars) != 0 {
		t.Errorf("a caught-up learner's bar must complete")
	}
	pg.update(st(50))
	if len(pg.bars) != 1 {
		t.Errorf("a learner that falls behind again gets a new bar")
	}
	pg.stop()
}

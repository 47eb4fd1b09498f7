package engine

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/measure"
	"github.com/baton-streams/baton/internal/topics"
	"github.com/baton-streams/baton/internal/work"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func TestPosition(t *testing.T) {
	tp := topics.Partition{Topic: "in", Part: 2}
	committed := map[string]map[int32]kgo.EpochOffset{"in": {2: {Offset: 40}, 3: {Offset: -1}}}
	processed := &work.Task{Offsets: map[string]kgo.EpochOffset{"in": {Offset: 55}}}
	fresh := &work.Task{Offsets: map[string]kgo.EpochOffset{}}
	if got := position(processed, tp, committed, 7); got != 55 {
		t.Errorf("after processing: %d, want 55 (the next offset to process)", got)
	}
	if got := position(fresh, tp, committed, 7); got != 40 {
		t.Errorf("nothing processed: %d, want 40 (the committed offset)", got)
	}
	if got := position(fresh, topics.Partition{Topic: "in", Part: 3}, committed, 7); got != 7 {
		t.Errorf("nothing committed: %d, want 7 (the partition's start)", got)
	}
}

func TestObserve(t *testing.T) {
	a0, a1, a2 := topics.Partition{Topic: "a", Part: 0}, topics.Partition{Topic: "a", Part: 1}, topics.Partition{Topic: "a", Part: 2}
	rates := measure.NewRates[topics.Partition](30 * time.Second)
	rates.Observe(at(0), map[topics.Partition]int64{a0: 0, a1: 0, a2: 0})
	r := inputRead{at: at(10),
		ends:      map[topics.Partition]int64{a0: 1000, a1: 300, a2: 50},
		starts:    map[topics.Partition]int64{a0: 0, a1: 0, a2: 20},
		committed: map[topics.Partition]int64{a0: 900, a1: 300}}
	rates.Observe(r.at, r.ends)
	plan := &PlanStatus{Instances: []PlanInstance{
		{ID: "x", Learner: []string{"0_1"}, Revoked: []string{"0_2"}},
		{ID: "y", Learner: []string{"0_0"}},
	}}
	o := observe(r, rates, plan, 4, 250)
	// Lag: 100 behind the commit on a0, none on a1, 30 from the start on
	// a2 (nothing committed).
	if o.Now != r.at || o.Instances != 2 || o.WorkersPerInstance != 4 || o.WorkerRate != 250 ||
		o.InputRate != 135 || o.Lag != 130 || o.Moves != 3 {
		t.Errorf("observe = %+v", o)
	}
	plan.Instances = append(plan.Instances, PlanInstance{ID: "z", Leaving: true, Active: []string{"0_3"}})
	if o := observe(r, rates, plan, 4, 250); o.Instances != 2 {
		t.Errorf("with a member leaving: %d instances observed, want 2 (the members that stay)", o.Instances)
	}
	if o := observe(r, rates, &PlanStatus{}, 1, 0); o.Instances != 1 {
		t.Errorf("a plan with no instances observed as %d instances, want 1", o.Instances)
	}
}

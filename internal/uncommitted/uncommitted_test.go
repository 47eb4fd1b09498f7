package uncommitted

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/cluster"
)

// TestDuplicateBound: the words of the lines in the lost splitting
// tasks' ranges, plus the repartition records in the lost counting
// tasks' ranges, every loss adding its own.
func TestDuplicateBound(t *testing.T) {
	// Partition 0 holds lines at offsets 0..9 of 2 words each; partition 1
	// lines at offsets 0, 2, 4 (a gap) of 3 words.
	lines := map[int32][]Line{1: {{0, 3}, {2, 3}, {4, 3}}}
	for o := range int64(10) {
		lines[0] = append(lines[0], Line{o, 2})
	}
	ws := []Work{
		{Instance: "i1", Cause: "crash", Tasks: map[string]Range{"0_0": {From: 3, To: 7}, "1_2": {From: 100, To: 130}}},
		{Instance: "i2", Cause: "cluster-restart", Tasks: map[string]Range{"0_0": {From: 5, To: 20}, "0_1": {From: 1, To: 4}, "1_0": {From: 7, To: 7}}},
		{Instance: "i3", Cause: "failed", Tasks: map[string]Range{"0_3": {From: 0, To: 50}}}, // no line read back there
		{Instance: "i4", Cause: "lost", Tasks: map[string]Range{"2_0": {From: 0, To: 50}, "bogus": {From: 0, To: 9}}},
	}
	// i1: lines 3..6 of partition 0 (4 lines, 8 words) and 30 records; i2:
	// lines 5..9 of partition 0 (10 words) and line 2 of partition 1 (3);
	// i4's tasks are no wordcount task's.
	if got, want := DuplicateBound(ws, lines), int64(8+30+10+3); got != want {
		t.Errorf("DuplicateBound = %d, want %d", got, want)
	}
	if got := DuplicateBound(nil, lines); got != 0 {
		t.Errorf("no loss: DuplicateBound = %d, want 0", got)
	}
}

// TestRanges: from the lowest committed offset any reading saw (0 for
// none) to the highest end offset.
func TestRanges(t *testing.T) {
	before := Offsets{Committed: map[string]int64{"0_0": 40, "1_0": 10}, End: map[string]int64{"0_0": 50, "1_0": 30, "0_1": 5}}
	after := Offsets{Committed: map[string]int64{"0_0": 45, "1_0": 8, "0_1": 2}, End: map[string]int64{"0_0": 60, "1_0": 29, "0_1": 6}}
	got, err := Ranges([]string{"0_0", "1_0", "0_1"}, before, after)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Range{"0_0": {40, 60}, "1_0": {8, 30}, "0_1": {0, 6}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Ranges = %v, want %v", got, want)
	}
	if _, err := Ranges([]string{"1_3"}, before, after); err == nil {
		t.Error("a task with no end offset: no error")
	}
}

// TestLostWork: the work an instance may have done twice on a task the
// group gave away without its knowing, from the offsets read while the
// input flowed.
func TestLostWork(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	read := func(s float64, committed, end int64) Reading {
		return Reading{At: at(s), Offsets: Offsets{Committed: map[string]int64{"0_2": committed}, End: map[string]int64{"0_2": end}}}
	}
	history := []Reading{read(0.5, 10, 20), read(1.5, 12, 30), read(3, 25, 60), read(6, 40, 90), read(7, 41, 100)}
	events := []baton.Event{
		{Time: at(1), Kind: baton.EventAssigned, Instance: "i4", Task: "0_2"},
		{Time: at(3.5), Kind: baton.EventAssigned, Instance: "i2", Task: "0_2"}, // the group gave it to i2
		{Time: at(5), Kind: baton.EventLost, Instance: "i4", Task: "0_2"},
		{Time: at(5), Kind: baton.EventLost, Instance: "i5", Task: "0_2"}, // never given it: nothing
	}
	got := LostWork(t0, events, history)
	want := []Work{{Instance: "i4", Cause: "lost", At: 5 * time.Second, Tasks: map[string]Range{"0_2": {From: 25, To: 90}}}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("LostWork:\n got %v\nwant %v", got, want)
	}
	// Delivered out of order (the loss before the assignments): the same.
	if got := LostWork(t0, []baton.Event{events[2], events[1], events[0]}, history); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("LostWork of events out of order:\n got %v\nwant %v", got, want)
	}
	// Nobody else given it before the loss: from the reading before the
	// loss.
	got = LostWork(t0, []baton.Event{events[0], events[2]}, history)
	if len(got) != 1 || got[0].Tasks["0_2"] != (Range{From: 25, To: 90}) {
		t.Errorf("taken by nobody: %v, want 0_2 [25, 90)", got)
	}
	// No reading after the loss: up to the last reading.
	got = LostWork(t0, events[:3], history[:4])
	if len(got) != 1 || got[0].Tasks["0_2"] != (Range{From: 25, To: 90}) {
		t.Errorf("no reading after the loss: %v, want 0_2 [25, 90)", got)
	}
	// No reading at all: nothing to bound it with.
	if got := LostWork(t0, events[:3], nil); len(got) != 0 {
		t.Errorf("no reading: %v, want nothing", got)
	}
	// Given to another before the first reading: nothing committed then,
	// as far as the run knows.
	events[1].Time = at(0.2)
	events[0].Time = at(0.1)
	got = LostWork(t0, events[:3], history)
	if len(got) != 1 || got[0].Tasks["0_2"] != (Range{From: 0, To: 90}) {
		t.Errorf("taken before the first reading: %v, want 0_2 [0, 90)", got)
	}
}

// TestPoller reads a group's committed offsets and the end offsets of a
// lines topic and a repartition topic from an embedded cluster: before
// the repartition topic exists, its tasks have no end offset; readings
// go into the history in time order; and the lines read back carry their
// offsets and numbers of words.
func TestPoller(t *testing.T) {
	c, err := cluster.Start("127.0.0.1:0", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "lines"); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for k, line := range []string{"a b", "c", "d e f"} {
		recs = append(recs, &kgo.Record{Topic: "lines", Partition: int32(k % 2), Value: []byte(line)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	commit := kadm.Offsets{"lines": {0: {Topic: "lines", Partition: 0, At: 1, LeaderEpoch: -1}}}
	if _, err := adm.CommitOffsets(ctx, "g", commit); err != nil {
		t.Fatal(err)
	}

	p := NewPoller(adm, "g", "lines", "g-words-repartition")
	rd, err := p.ReadOnce(ctx)
	if err != nil {
		t.Fatalf("ReadOnce before the repartition topic exists: %v", err)
	}
	if got, want := fmt.Sprint(rd.Committed, rd.End), fmt.Sprint(map[string]int64{"0_0": 1}, map[string]int64{"0_0": 2, "0_1": 1}); got != want {
		t.Errorf("ReadOnce = %s, want %s", got, want)
	}

	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "g-words-repartition"); err != nil {
		t.Fatal(err)
	}
	// A client that read the topic missing may answer from that metadata
	// for a few seconds more: read on through a fresh one.
	cl2, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	p = NewPoller(kadm.NewClient(cl2), "g", "lines", "g-words-repartition")
	if err := p.Record(ctx); err != nil {
		t.Fatal(err)
	}
	pctx, stop := context.WithTimeout(ctx, 700*time.Millisecond)
	p.Poll(pctx)
	stop()
	h := p.History()
	if len(h) < 2 {
		t.Fatalf("%d readings after Record and 700 ms of Poll, want at least 2", len(h))
	}
	for k, r := range h {
		if k > 0 && r.At.Before(h[k-1].At) {
			t.Errorf("reading %d at %v is before reading %d at %v", k, r.At, k-1, h[k-1].At)
		}
		if got, want := fmt.Sprint(r.Offsets.End), fmt.Sprint(map[string]int64{"0_0": 2, "0_1": 1, "1_0": 0, "1_1": 0}); got != want {
			t.Errorf("reading %d: end offsets %s, want %s", k, got, want)
		}
	}

	var words int
	lines, err := ReadLines(ctx, c.Addrs(), "lines", func(_ *kgo.Record, ws []string) { words += len(ws) })
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(lines), fmt.Sprint(map[int32][]Line{0: {{0, 2}, {1, 3}}, 1: {{0, 1}}}); got != want || words != 6 {
		t.Errorf("ReadLines = %s (%d words seen), want %s (6)", got, words, want)
	}
}

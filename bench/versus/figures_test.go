package versus

import (
	"slices"
	"testing"
	"time"
)

const ms = time.Millisecond

// synthetic builds a recording of 4 output partitions: arrivals every
// 10ms on each (latency 5ms), with partition 3 silent from 11s to 13s
// with 300ms latency after it; a and b print status lines every second
// from 0 to 20s, c from 10.5s. 1_3 moves from b to c at 13s.
func synthetic() Recording {
	rec := Recording{Partitions: 4}
	for at := time.Duration(0); at <= 20*time.Second; at += 10 * ms {
		for p := range int32(4) {
			lat := 5 * ms
			if p == 3 {
				if at > 11*time.Second && at < 13*time.Second {
					continue
				}
				if at >= 13*time.Second && at < 13100*ms {
					lat = 300 * ms
				}
			}
			rec.Arrivals = append(rec.Arrivals, Arrival{Partition: p, At: at, Latency: lat})
		}
	}
	for at := time.Duration(0); at <= 20*time.Second; at += time.Second {
		aTasks := []string{"0_0", "0_1", "1_0", "1_1"}
		bTasks := []string{"0_2", "0_3", "1_2", "1_3"}
		if at >= 13*time.Second {
			bTasks = []string{"0_2", "0_3", "1_2"}
		}
		rec.Status = append(rec.Status,
			Status{At: at, Line: StatusLine{Engine: "e", Instance: "a", Active: aTasks, Processed: int64(at / ms)}},
			Status{At: at + 10*ms, Line: StatusLine{Engine: "e", Instance: "b", Active: bTasks, Processed: int64(at / ms)}})
		if at >= 11*time.Second {
			var cTasks []string
			if at >= 13*time.Second {
				cTasks = []string{"1_3"}
			}
			rec.Status = append(rec.Status, Status{At: at + 500*ms, Line: StatusLine{Engine: "e", Instance: "c", Active: cTasks, Warmup: []string{"1_3"}}})
		}
	}
	slices.SortStableFunc(rec.Status, func(x, y Status) int { return int(x.At - y.At) })
	return rec
}

func TestAnalyzeScaleOut(t *testing.T) {
	ev := Event{Name: "scale-out", At: 10 * time.Second, Steady: 5 * time.Second, After: 8 * time.Second, Live: []string{"a", "b", "c"}}
	ef := Analyze(synthetic(), ev)
	if ef.Moved != 1 || ef.Unmoved != 3 {
		t.Fatalf("moved %d unmoved %d, want 1 and 3", ef.Moved, ef.Unmoved)
	}
	p3 := ef.Partitions[3]
	if !p3.Moved || p3.From != "b" || p3.To != "c" {
		t.Fatalf("partition 3: %+v", p3)
	}
	// Last arrival before the silence at 11.00s, next at 13.00s.
	if ef.MovedLongestGap != 2*time.Second || ef.Stalled != 1 {
		t.Fatalf("moved longest gap %v stalled %d, want 2s and 1", ef.MovedLongestGap, ef.Stalled)
	}
	if ef.UnmovedLongestGap != 10*ms || ef.UnmovedSteadyGap != 10*ms || ef.UnmovedSteadyMedian != 10*ms {
		t.Fatalf("unmoved gaps %v (steady %v, median %v), want 10ms", ef.UnmovedLongestGap, ef.UnmovedSteadyGap, ef.UnmovedSteadyMedian)
	}
	if ef.Steady.P50 != 5*ms || ef.Steady.Max != 5*ms || ef.After.Max != 300*ms || ef.After.P50 != 5*ms {
		t.Fatalf("latency steady %+v after %+v", ef.Steady, ef.After)
	}
	// c's first line with its share (4/3 = 1 task) is at 13.5s.
	if !ef.Balanced || ef.TimeToBalance != 3500*ms {
		t.Fatalf("balanced %v after %v, want 3.5s", ef.Balanced, ef.TimeToBalance)
	}
}

func TestAnalyzeNotBalanced(t *testing.T) {
	// d never prints: the group never runs its share on d.
	ev := Event{Name: "x", At: 10 * time.Second, Steady: 5 * time.Second, After: 8 * time.Second, Live: []string{"a", "b", "d"}}
	if ef := Analyze(synthetic(), ev); ef.Balanced {
		t.Fatalf("balanced after %v without d", ef.TimeToBalance)
	}
}

func TestAnalyzeKilledOwner(t *testing.T) {
	// b stops printing at 10s (killed); a takes its count tasks at 15s.
	rec := Recording{Partitions: 2}
	for at := time.Duration(0); at <= 20*time.Second; at += 100 * ms {
		rec.Arrivals = append(rec.Arrivals, Arrival{Partition: 0, At: at, Latency: ms})
		if at < 10*time.Second || at >= 15*time.Second {
			rec.Arrivals = append(rec.Arrivals, Arrival{Partition: 1, At: at, Latency: ms})
		}
	}
	for at := time.Duration(0); at <= 20*time.Second; at += time.Second {
		a := []string{"1_0"}
		if at >= 15*time.Second {
			a = []string{"1_0", "1_1"}
		}
		rec.Status = append(rec.Status, Status{At: at, Line: StatusLine{Instance: "a", Active: a}})
		if at < 10*time.Second {
			rec.Status = append(rec.Status, Status{At: at, Line: StatusLine{Instance: "b", Active: []string{"1_1"}}})
		}
	}
	ef := Analyze(rec, Event{At: 10 * time.Second, Steady: 5 * time.Second, After: 10 * time.Second, Live: []string{"a"}})
	if ef.Moved != 1 || ef.Partitions[1].To != "a" || ef.Partitions[1].From != "b" {
		t.Fatalf("partition 1: %+v", ef.Partitions[1])
	}
	if ef.MovedLongestGap != 5100*ms || ef.Stalled != 1 || !ef.Balanced || ef.TimeToBalance != 5*time.Second {
		t.Fatalf("figures %+v", ef)
	}
	// A window that ends before the move still sees it: ownership is read
	// until the group balanced.
	short := Analyze(rec, Event{At: 10 * time.Second, Steady: 5 * time.Second, After: 3 * time.Second, Live: []string{"a"}})
	if short.Moved != 1 || short.Partitions[1].To != "a" || short.MovedLongestGap != 3*time.Second+100*ms {
		t.Fatalf("short window: partition 1 %+v", short.Partitions[1])
	}
	// At 14s b's last line (9s) is stale: nobody runs 1_1.
	if o := ActiveOwners(rec.Status, 14*time.Second); o["1_1"] != "" {
		t.Fatalf("owner of 1_1 at 14s: %q", o["1_1"])
	}
}

func TestLongestGap(t *testing.T) {
	s := time.Second
	cases := []struct {
		ats      []time.Duration
		from, to time.Duration
		want     time.Duration
	}{
		{nil, 10 * s, 20 * s, 10 * s},                           // silent all along
		{[]time.Duration{9 * s, 12 * s}, 10 * s, 20 * s, 8 * s}, // silent after 12s
		{[]time.Duration{9 * s, 13 * s, 20 * s}, 10 * s, 20 * s, 7 * s},
		{[]time.Duration{5 * s, 19 * s, 25 * s}, 10 * s, 20 * s, 14 * s}, // the gap into from counts whole
	}
	for i, c := range cases {
		if got := LongestGap(c.ats, c.from, c.to); got != c.want {
			t.Errorf("case %d: %v, want %v", i, got, c.want)
		}
	}
}

func TestSummarize(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*ms)
	}
	l := Summarize(ds)
	if l.N != 100 || l.P50 != 50*ms || l.P99 != 99*ms || l.Max != 100*ms {
		t.Fatalf("%+v", l)
	}
	if (Summarize(nil) != Latency{}) {
		t.Fatal("empty input: not zero")
	}
}

func TestCheckCounts(t *testing.T) {
	truth := map[string]int64{"a": 3, "b": 2, "c": 1}
	c := CheckCounts(truth, map[string]int64{"a": 3, "b": 1, "c": 2, "zz": 1})
	if c.Words != 3 || c.Lost != 1 || c.Over != 2 || c.Exact() || len(c.Example) != 2 {
		t.Fatalf("%+v", c)
	}
	if !CheckCounts(truth, map[string]int64{"a": 3, "b": 2, "c": 1}).Exact() {
		t.Fatal("equal counts: not exact")
	}
	// Lost words are named before over-counted ones, whatever their order.
	c = CheckCounts(map[string]int64{"a": 1, "b": 1, "c": 1, "d": 1, "z": 2}, map[string]int64{"a": 2, "b": 2, "c": 2, "d": 2, "z": 1})
	if len(c.Example) != 3 || c.Example[0] != "z: 1 counted, 2 in the input" {
		t.Fatalf("examples %q: want the lost word z first", c.Example)
	}
}

func TestProcessed(t *testing.T) {
	st := []Status{
		{At: 1 * time.Second, Line: StatusLine{Instance: "a", Processed: 10}},
		{At: 2 * time.Second, Line: StatusLine{Instance: "b", Processed: 5}},
		{At: 3 * time.Second, Line: StatusLine{Instance: "a", Processed: 30}},
		{At: 4 * time.Second, Line: StatusLine{Instance: "b", Processed: 20}},
	}
	if n := ProcessedAt(st, 3500*ms); n != 35 {
		t.Fatalf("processed at 3.5s: %d", n)
	}
	if at, ok := FirstProcessed(st, 40); !ok || at != 4*time.Second {
		t.Fatalf("first 40 at %v %v", at, ok)
	}
	if _, ok := FirstProcessed(st, 51); ok {
		t.Fatal("51 reached")
	}
}

func TestAnalyzeRestored(t *testing.T) {
	// a restored 100 records before the event and 50 more at 12s; b
	// nothing; c, which starts during the event, 800 once 1_3 is active
	// on it and 100 more after the window.
	rec := synthetic()
	for i := range rec.Status {
		s := &rec.Status[i]
		var n int64
		switch s.Line.Instance {
		case "a":
			n = 100
			if s.At >= 12*time.Second {
				n = 150
			}
		case "c":
			if s.At >= 13*time.Second {
				n = 800
			}
			if s.At >= 19*time.Second {
				n = 900
			}
		}
		s.Line.Restored = &n
	}
	ev := Event{Name: "scale-out", At: 10 * time.Second, Steady: 5 * time.Second, After: 8 * time.Second, Live: []string{"a", "b", "c"}}
	ef := Analyze(rec, ev)
	if ef.Restored == nil || *ef.Restored != 850 {
		t.Fatalf("restored %v, want 850", ef.Restored)
	}
	// One engine that does not report it: not observed.
	rec.Status[len(rec.Status)/2].Line.Restored = nil
	if ef := Analyze(rec, ev); ef.Restored != nil {
		t.Fatalf("a line without restored: restored %d, want not observed", *ef.Restored)
	}
	if ef := Analyze(synthetic(), ev); ef.Restored != nil {
		t.Fatalf("no line reports restored: restored %d, want not observed", *ef.Restored)
	}
}

func TestRestoredIn(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	st := []Status{
		{At: 1 * time.Second, Line: StatusLine{Instance: "a", Restored: n(10)}},
		{At: 2 * time.Second, Line: StatusLine{Instance: "a", Restored: n(30)}},
		{At: 3 * time.Second, Line: StatusLine{Instance: "a", Restored: n(5)}}, // started again
		{At: 4 * time.Second, Line: StatusLine{Instance: "a", Restored: n(7)}},
	}
	if got, ok := RestoredIn(st, 1500*ms, 4*time.Second); !ok || got != 27 {
		t.Fatalf("restored %d %v, want 20 then a restart's 7", got, ok)
	}
	if _, ok := RestoredIn(st, 5*time.Second, 6*time.Second); ok {
		t.Fatal("no line in the window: observed")
	}
}

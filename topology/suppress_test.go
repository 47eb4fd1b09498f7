package topology

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// process runs one record through proc and returns what it sent, each as
// "topic key=value" with windows as key@start (time windows) or
// key@[start,end] (sessions), in seconds.
func processSent(t *testing.T, proc Processor, ctx *logCtx, i int, key string, sec int64, sessions bool) []string {
	t.Helper()
	before := len(ctx.sent)
	ctx.input = i
	if err := proc.Process(ctx, Record{Topic: "in", Offset: int64(i), Key: []byte(key), Value: []byte("x"), Timestamp: time.Unix(sec, 0)}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range ctx.sent[before:] {
		if sessions {
			w, err := SessionWindowedCodec(String).Decode(r.key)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%s %s@[%d,%d]=%s", r.topic, w.Key, w.Start.Unix(), w.End.Unix(), r.value))
			continue
		}
		w, err := WindowedCodec(String, time.Minute).Decode(r.key)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s %s@%d=%s", r.topic, w.Key, w.Start.Unix(), r.value))
	}
	return got
}

// Clicks per user per minute with a grace of 10 s: every update goes to
// "all", and each window's count goes to "final" once, when the stream
// time reaches its end plus the grace.
func TestSuppressTimeWindows(t *testing.T) {
	b := NewBuilder("app")
	in := FromTopic(b, "in", String, String)
	counts := WindowCount(WindowedBy(GroupByKey(in, "unused"), TumblingWindows(time.Minute).Grace(10*time.Second)), "counts")
	counts.ToStream().To("all")
	SuppressUntilWindowCloses(counts, "final-counts").ToStream().To("final")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if stores := topo.Subtopologies()[0].Stores; len(stores) != 2 || stores[1].Changelog != "app-final-counts-changelog" {
		t.Fatalf("stores %v: want the buffer with its changelog", stores)
	}
	proc := topo.Subtopologies()[0].NewProcessor("0_0", 0)
	ctx := newLogCtx()
	for i, s := range []struct {
		key  string
		sec  int64
		want []string
	}{
		{"ana", 5, []string{"all ana@0=1"}},
		{"ana", 40, []string{"all ana@0=2"}},
		{"bob", 50, []string{"all bob@0=1"}},
		{"ana", 65, []string{"all ana@60=1"}},
		{"ana", 69, []string{"all ana@60=2"}}, // [0,60) is open until 70
		{"bob", 70, []string{"all bob@60=1", "final ana@0=2", "final bob@0=1"}},
		{"ana", 30, nil}, // late: [0,60) is closed and was sent
		{"bob", 75, []string{"all bob@60=2"}},
		{"ana", 200, []string{"all ana@180=1", "final ana@60=2", "final bob@60=2"}},
	} {
		if got := processSent(t, proc, ctx, i, s.key, s.sec, false); !slices.Equal(got, s.want) {
			t.Fatalf("%s at %d: sent\n%v\nwant\n%v", s.key, s.sec, got, s.want)
		}
	}
	// What was sent left the buffer: only the open window waits.
	var left []string
	ctx.stores["final-counts"].Iterate(nil, nil, func(k, v []byte) error {
		left = append(left, fmt.Sprintf("%s=%s", k[8:len(k)-8], v))
		return nil
	})
	if want := []string{"ana=1"}; !slices.Equal(left, want) {
		t.Fatalf("buffer holds %v, want %v", left, want)
	}
}

// Sessions with a gap of 10 s and a grace of 10 s: the sessions a record
// merges are never sent, only the merged one, once it closes (past its
// end by more than 20 s).
func TestSuppressSessions(t *testing.T) {
	b := NewBuilder("app")
	in := FromTopic(b, "in", String, String)
	counts := SessionCount(SessionWindowedBy(GroupByKey(in, "unused"), InactivityGap(10*time.Second).Grace(10*time.Second)), "counts")
	SuppressUntilWindowCloses(counts, "final-counts").ToStream().To("final")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	proc := topo.Subtopologies()[0].NewProcessor("0_0", 0)
	ctx := newLogCtx()
	for i, s := range []struct {
		key  string
		sec  int64
		want []string
	}{
		{"ana", 0, nil},
		{"ana", 8, nil},
		{"ana", 26, nil},
		{"ana", 17, nil}, // [0,8] and [26,26] merge into [0,26]
		{"bob", 40, nil},
		{"bob", 46, nil}, // [0,26] is open at 46: a record at 36 could still extend it
		{"carl", 47, []string{"final ana@[0,26]=4"}},
		{"bob", 90, []string{"final bob@[40,46]=2", "final carl@[47,47]=1"}},
	} {
		if got := processSent(t, proc, ctx, i, s.key, s.sec, true); !slices.Equal(got, s.want) {
			t.Fatalf("%s at %d: sent\n%v\nwant\n%v", s.key, s.sec, got, s.want)
		}
	}
}

// TestSuppressExactlyOnce runs random streams through a windowed
// aggregation (hopping windows or sessions) sending every update to
// "all" and its suppressed table to "final", and crashes the task now
// and then as exactly-once sees it: what was sent and written since the
// last commit is aborted, the stores are rebuilt from their changelogs as
// committed, and the records since the commit are processed again. In
// the committed output, each window whose stream time passed its close
// is in "final" exactly once, with its last update's value, sent while
// processing the first record whose stream time reached the close, and
// after its last update; no other window is.
func TestSuppressExactlyOnce(t *testing.T) {
	crashes := 0
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 3))
		sessions := rng.IntN(2) == 0
		b := NewBuilder("app")
		var table Table[Windowed[string], string]
		var closeAfter, span int64
		var desc string
		if sessions {
			gap, grace := int64(1+rng.IntN(20)), int64(rng.IntN(15))
			table = listSessions(b, InactivityGap(time.Duration(gap)*time.Millisecond).Grace(time.Duration(grace)*time.Millisecond))
			closeAfter, span = gap+grace+1, gap+grace
			desc = fmt.Sprintf("seed %d: sessions (gap %d, grace %d)", seed, gap, grace)
		} else {
			size := int64(5 + rng.IntN(30))
			adv := int64(1 + rng.IntN(int(size)))
			grace := int64(rng.IntN(15))
			in := FromTopic(b, "in", String, String)
			table = WindowAggregate(WindowedBy(GroupByKey(in, "unused"), HoppingWindows(time.Duration(size)*time.Millisecond, time.Duration(adv)*time.Millisecond).Grace(time.Duration(grace)*time.Millisecond)),
				"windows", func() string { return "" }, func(_, v, agg string) string { return agg + v + ";" }, String)
			closeAfter, span = grace, size+grace
			desc = fmt.Sprintf("seed %d: windows (size %d, advance %d, grace %d)", seed, size, adv, grace)
		}
		table.ToTopic("all")
		SuppressUntilWindowCloses(table, "buffer").ToTopic("final")
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		sub := topo.Subtopologies()[0]
		keys := table.keys

		type input struct {
			key string
			ts  int64
		}
		var ins []input
		base := int64(rng.IntN(200)) - 100
		for range 100 + rng.IntN(200) {
			base += int64(rng.IntN(8))
			ts := base - int64(rng.IntN(int(2*span)+1))*int64(rng.IntN(2))
			ins = append(ins, input{string(rune('a' + rng.IntN(3))), ts})
		}

		ctx := newLogCtx()
		proc := sub.NewProcessor("0_0", 0)
		committed, committedSent, committedLogs := 0, 0, map[string]int{}
		for i := 0; i < len(ins); {
			if rng.IntN(8) == 0 {
				committed, committedSent = i, len(ctx.sent)
				clear(committedLogs)
				for name, st := range ctx.stores {
					committedLogs[name] = len(st.log)
				}
			}
			if rng.IntN(20) == 0 {
				crashes++
				ctx.sent = ctx.sent[:committedSent]
				for name, st := range ctx.stores {
					ctx.stores[name] = restoreStore(st.log, committedLogs[name])
				}
				proc = sub.NewProcessor("0_0", 0)
				i = committed
				continue
			}
			ctx.input = i
			r := ins[i]
			err := proc.Process(ctx, Record{Topic: "in", Offset: int64(i), Key: []byte(r.key), Value: []byte(fmt.Sprint(i)), Timestamp: time.UnixMilli(r.ts)})
			if err != nil {
				t.Fatalf("%s: %v", desc, err)
			}
			i++
		}

		// The stream time after each input.
		stream := make([]int64, len(ins))
		for i, r := range ins {
			stream[i] = r.ts
			if i > 0 {
				stream[i] = max(r.ts, stream[i-1])
			}
		}
		type window struct {
			last     string // the last update's value; "" once deleted
			lastAt   int    // the input that sent it
			closesAt int64
		}
		windows := map[string]*window{}
		finals := map[string]int{}
		for _, r := range ctx.sent {
			w, err := keys.Decode(r.key)
			if err != nil {
				t.Fatal(err)
			}
			id := fmt.Sprintf("%s@[%d,%d]", w.Key, w.Start.UnixMilli(), w.End.UnixMilli())
			switch r.topic {
			case "all":
				win := windows[id]
				if win == nil {
					win = &window{closesAt: w.End.UnixMilli() + closeAfter}
					windows[id] = win
				}
				if _, sent := finals[id]; sent {
					t.Fatalf("%s: %s updated at input %d after its final value was sent", desc, id, r.input)
				}
				win.last, win.lastAt = string(r.value), r.input
			case "final":
				win := windows[id]
				switch {
				case win == nil || win.last == "":
					t.Fatalf("%s: %s sent as final, but it has no value", desc, id)
				case string(r.value) != win.last:
					t.Fatalf("%s: %s final %q, but its last update was %q", desc, id, r.value, win.last)
				case finals[id] > 0:
					t.Fatalf("%s: %s sent twice as final", desc, id)
				case stream[r.input] < win.closesAt || (r.input > 0 && stream[r.input-1] >= win.closesAt):
					t.Fatalf("%s: %s (closes at %d) sent at input %d, at stream time %d", desc, id, win.closesAt, r.input, stream[r.input])
				}
				finals[id]++
			}
		}
		for id, win := range windows {
			closed := stream[len(stream)-1] >= win.closesAt
			if closed && win.last != "" && finals[id] != 1 {
				t.Fatalf("%s: %s closed with value %q, but was not sent as final", desc, id, win.last)
			}
			if (!closed || win.last == "") && finals[id] != 0 {
				t.Fatalf("%s: %s sent as final, but it is open or was merged away", desc, id)
			}
		}
	}
	if crashes == 0 {
		t.Fatal("no crash: the test misses restores")
	}
}

func TestSuppressMistakes(t *testing.T) {
	b := NewBuilder("app")
	in := FromTopic(b, "in", String, String)
	plain := Map(in, func(k, v string) (Windowed[string], string) { return Windowed[string]{Key: k}, v })
	table := Reduce(GroupBy(plain, func(w Windowed[string], _ string) Windowed[string] { return w }, WindowedCodec(String, time.Second), "g"), "r",
		func(a, _ string) string { return a })
	SuppressUntilWindowCloses(table, "buf")
	counts := WindowCount(WindowedBy(GroupByKey(in, "g2"), TumblingWindows(time.Second)), "counts")
	SuppressUntilWindowCloses(counts, "counts")
	_, err := b.Build()
	for _, want := range []string{
		`SuppressUntilWindowCloses into store "buf": the table of reduce#`,
		`is not the result of a windowed aggregation`,
		`SuppressUntilWindowCloses into store "counts": store "counts" is already used`,
	} {
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("Build: %v; want it to say %q", err, want)
		}
	}
}

// Clicks regrouped by user through a repartition topic into sessions,
// each sent once when it closes, run by the driver over three tasks that
// all move halfway (new processors over the same stores). In time order
// no click is late, so each user's sessions are the runs of their clicks
// at most the gap apart, and a last click per user long after closes
// them all.
func TestSuppressedSessionsThroughRepartition(t *testing.T) {
	b := NewBuilder("app")
	clicks := FromTopic(b, "clicks", String, String) // page -> user
	byUser := GroupBy(clicks, func(_, user string) string { return user }, String, "by-user")
	counts := SessionCount(SessionWindowedBy(byUser, InactivityGap(10*time.Second).Grace(5*time.Second)), "sessions")
	SuppressUntilWindowCloses(counts, "closed-sessions").ToTopic("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	subs := topo.Subtopologies()
	if got := fmt.Sprint(subs[1].Stores); got != "[{closed-sessions app-closed-sessions-changelog false internal} {sessions app-sessions-changelog false session}]" {
		t.Fatalf("stores %s", got)
	}
	d := newDriver(t, topo, map[string]int32{"clicks": 3, "out": 2})
	rng := rand.New(rand.NewPCG(7, 7))
	times := map[string][]int64{} // by user, in order
	sec := int64(0)
	for i := range 300 {
		if i == 150 {
			for id := range d.tasks {
				sub, p, _ := ParseTaskID(id)
				d.tasks[id] = subs[sub].NewProcessor(id, p)
			}
		}
		sec += int64(rng.IntN(4))
		user := fmt.Sprintf("u%d", rng.IntN(5))
		times[user] = append(times[user], sec)
		page := fmt.Sprintf("/p%d", rng.IntN(10))
		d.inputAt("clicks", Partition([]byte(page), 3), []byte(page), []byte(user), time.Unix(sec, 0))
		if err := d.run(); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for user, ts := range times {
		start, n := ts[0], 0
		for i, at := range ts {
			if at-ts[max(i-1, 0)] > 10 {
				want = append(want, fmt.Sprintf("%s@[%d,%d]=%d", user, start, ts[i-1], n))
				start, n = at, 0
			}
			n++
		}
		want = append(want, fmt.Sprintf("%s@[%d,%d]=%d", user, start, ts[len(ts)-1], n))
	}
	for user := range times { // closes every session of the user's task
		d.inputAt("clicks", 0, []byte("/last"), []byte(user), time.Unix(sec+1000, 0))
	}
	if err := d.run(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for p := range int32(2) {
		for _, r := range d.records("out", p) {
			w, err := SessionWindowedCodec(String).Decode(r.Key)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%s@[%d,%d]=%s", w.Key, w.Start.Unix(), w.End.Unix(), r.Value))
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("sent\n%v\nwant\n%v", got, want)
	}
	if len(d.late) != 0 {
		t.Fatalf("late records %v, want none", d.late)
	}
}

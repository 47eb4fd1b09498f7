package topology

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// joinCtx is a one-task Context whose stores keep changelogs, collecting
// what is sent with its timestamp and the input in process.
type joinCtx struct {
	stores map[string]*logStore
	sent   []string // "input i: key result at ms"
	late   map[string]int
	stamp  time.Time
	input  int
}

func newJoinCtx() *joinCtx { return &joinCtx{stores: map[string]*logStore{}, late: map[string]int{}} }

func (c *joinCtx) TaskID() string            { return "0_0" }
func (c *joinCtx) Partition() int32          { return 0 }
func (c *joinCtx) SetTimestamp(ts time.Time) { c.stamp = ts }
func (c *joinCtx) LateRecord(store string)   { c.late[store]++ }
func (c *joinCtx) Store(name string) Store {
	s := c.stores[name]
	if s == nil {
		s = &logStore{}
		c.stores[name] = s
	}
	return s
}
func (c *joinCtx) Send(topic string, k, v []byte) error {
	c.sent = append(c.sent, fmt.Sprintf("input %d: %s %s at %d", c.input, k, v, c.stamp.UnixMilli()))
	return nil
}

// joinKinds are the three stream-stream joins, with the sides each
// keeps unmatched.
var joinKinds = []struct {
	name  string
	outer [2]bool
	build func(l, r Stream[string, string], w JoinWindows) Stream[string, string]
}{
	{"inner", [2]bool{}, func(l, r Stream[string, string], w JoinWindows) Stream[string, string] {
		return JoinStreams(l, r, w, "j", func(_, v1, v2 string) string { return v1 + "&" + v2 })
	}},
	{"left", [2]bool{true, false}, func(l, r Stream[string, string], w JoinWindows) Stream[string, string] {
		return LeftJoinStreams(l, r, w, "j", func(_, v1, v2 string, found bool) string {
			if !found {
				if v2 != "" {
					panic("LeftJoinStreams: a value for the missing side")
				}
				v2 = "-"
			}
			return v1 + "&" + v2
		})
	}},
	{"outer", [2]bool{true, true}, func(l, r Stream[string, string], w JoinWindows) Stream[string, string] {
		return OuterJoinStreams(l, r, w, "j", func(_, v1, v2 string, has1, has2 bool) string {
			if !has1 && !has2 {
				panic("OuterJoinStreams: neither side")
			}
			if !has1 {
				v1 = "-"
			}
			if !has2 {
				v2 = "-"
			}
			return v1 + "&" + v2
		})
	}},
}

// TestStreamJoinsMatchModel runs random pairs of streams, out of order
// and with late records, through the inner, left and outer joins, and
// crashes the task now and then as exactly-once sees it: what was sent
// and written since the last commit is aborted, the stores are rebuilt
// from their changelogs as committed, and the records since the commit
// are processed again (now and then the task also moves without a
// crash: a new processor over the same stores). The committed output
// must be, input by input, what the definition gives: each pair when its
// second record comes, stamped with the later time; each record of a
// kept side that never pairs sent once, stamped with its own time, while
// processing the first input whose stream time passes its time plus
// twice the window plus the grace, in order of time, then left before
// right, then arrival; late records dropped and counted.
func TestStreamJoinsMatchModel(t *testing.T) {
	crashes, pairs, unmatched, waiting := 0, 0, 0, 0
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 7))
		kind := joinKinds[seed%3]
		d, g := int64(rng.IntN(30)), int64(rng.IntN(20))
		b := NewBuilder("app")
		l := FromTopic(b, "l", String, String)
		r := FromTopic(b, "r", String, String)
		kind.build(l, r, JoinWithin(time.Duration(d)*time.Millisecond).Grace(time.Duration(g)*time.Millisecond)).To("out")
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		sub := topo.Subtopologies()[0]
		wantStores := 2
		if kind.outer[0] {
			wantStores = 3
		}
		if len(sub.Stores) != wantStores {
			t.Fatalf("%s join: stores %v", kind.name, sub.Stores)
		}
		for _, s := range sub.Stores {
			if s.Changelog != "app-"+s.Name+"-changelog" || s.Kind != InternalStore {
				t.Fatalf("%s join: store %v: want an internal store with a changelog", kind.name, s)
			}
		}

		type input struct {
			side   int
			key, v string
			ts     int64
		}
		var ins []input
		nkeys := 1 + rng.IntN(6)
		base := int64(rng.IntN(100))
		for i := range 40 + rng.IntN(160) {
			base += int64(rng.IntN(6))
			ts := base - int64(rng.IntN(int(2*(d+g))+2))*int64(rng.IntN(2))
			ins = append(ins, input{rng.IntN(2), string(rune('a' + rng.IntN(nkeys))), fmt.Sprint(i), ts})
		}
		// A last record long after closes every window before it.
		ins = append(ins, input{rng.IntN(2), "z", "last", base + 2*d + g + 10})

		// The model.
		type kept struct {
			input
			seq           int // arrival among its side's kept records
			matched, sent bool
		}
		var all []*kept
		var want []string
		var stream int64
		seen, late := false, 0
		nseq := [2]int{}
		pending := 0
		for i, in := range ins {
			if seen && in.ts < stream-d-g {
				late++
				continue
			}
			if !seen || in.ts > stream {
				stream, seen = in.ts, true
			}
			var partners []*kept
			for _, o := range all {
				if o.side != in.side && o.key == in.key && o.ts >= in.ts-d && o.ts <= in.ts+d {
					partners = append(partners, o)
				}
			}
			sort.SliceStable(partners, func(i, j int) bool { return partners[i].ts < partners[j].ts })
			for _, o := range partners {
				lv, rv := in.v, o.v
				if in.side == 1 {
					lv, rv = o.v, in.v
				}
				want = append(want, fmt.Sprintf("input %d: %s %s&%s at %d", i, in.key, lv, rv, max(in.ts, o.ts)))
				o.matched = true
				pairs++
			}
			all = append(all, &kept{input: in, seq: nseq[in.side], matched: len(partners) > 0})
			nseq[in.side]++
			var closed []*kept
			for _, o := range all {
				if kind.outer[o.side] && !o.matched && !o.sent && o.ts+2*d+g < stream {
					closed = append(closed, o)
				}
			}
			sort.Slice(closed, func(i, j int) bool {
				a, b := closed[i], closed[j]
				if a.ts != b.ts {
					return a.ts < b.ts
				}
				if a.side != b.side {
					return a.side < b.side
				}
				return a.seq < b.seq
			})
			for _, o := range closed {
				lv, rv := o.v, "-"
				if o.side == 1 {
					lv, rv = "-", o.v
				}
				want = append(want, fmt.Sprintf("input %d: %s %s&%s at %d", i, o.key, lv, rv, o.ts))
				o.sent = true
				unmatched++
			}
		}
		for _, o := range all {
			if kind.outer[o.side] && !o.matched && !o.sent {
				pending++
			}
		}
		waiting += pending

		// The join, with crashes.
		ctx := newJoinCtx()
		proc := sub.NewProcessor("0_0", 0)
		committed, committedSent, committedLate := 0, 0, 0
		committedLogs := map[string]int{}
		for i := 0; i < len(ins); {
			switch rng.IntN(20) {
			case 0, 1, 2:
				committed, committedSent, committedLate = i, len(ctx.sent), ctx.late["j-left"]+ctx.late["j-right"]
				clear(committedLogs)
				for name, st := range ctx.stores {
					committedLogs[name] = len(st.log)
				}
			case 3:
				crashes++
				ctx.sent = ctx.sent[:committedSent]
				for name, st := range ctx.stores {
					ctx.stores[name] = restoreStore(st.log, committedLogs[name])
				}
				clear(ctx.late)
				ctx.late["j-left"] = committedLate
				proc = sub.NewProcessor("0_0", 0)
				i = committed
				continue
			case 4:
				proc = sub.NewProcessor("0_0", 0)
			}
			ctx.input = i
			in := ins[i]
			topic := []string{"l", "r"}[in.side]
			err := proc.Process(ctx, Record{Topic: topic, Offset: int64(i), Key: []byte(in.key), Value: []byte(in.v), Timestamp: time.UnixMilli(in.ts)})
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			i++
		}
		desc := fmt.Sprintf("seed %d: %s join (within %d, grace %d)", seed, kind.name, d, g)
		if !slices.Equal(ctx.sent, want) {
			i := firstDiff(ctx.sent, want)
			around := func(s []string) []string { return s[max(i-3, 0):min(i+3, len(s))] }
			t.Fatalf("%s: output differs at %d:\n got ...%q\nwant ...%q", desc, i, around(ctx.sent), around(want))
		}
		if l := ctx.late["j-left"] + ctx.late["j-right"]; l != late {
			t.Fatalf("%s: %d late records counted, want %d", desc, l, late)
		}
		// The unmatched store lists exactly the records still waiting,
		// none of them closed.
		if st := ctx.stores["j-unmatched"]; st != nil || pending > 0 {
			if st == nil || st.Len() != pending {
				t.Fatalf("%s: the unmatched store holds %v, want %d records", desc, st, pending)
			}
			for _, k := range st.Keys() {
				if at := int64(binary.BigEndian.Uint64([]byte(k)) ^ (1 << 63)); at+2*d+g < stream {
					t.Fatalf("%s: the unmatched store keeps a record of time %d at stream time %d", desc, at, stream)
				}
			}
		}
	}
	t.Logf("%d pairs, %d unmatched records sent, %d waiting at the end, %d crashes", pairs, unmatched, waiting, crashes)
	if crashes == 0 || pairs == 0 || unmatched == 0 || waiting == 0 {
		t.Fatal("the test misses restores, pairs or unmatched records")
	}
}

func TestOuterJoinStreamsMistakes(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func(b *Builder)
		want  string
	}{
		{"nil left fn", func(b *Builder) {
			LeftJoinStreams[string, string, string, string](FromTopic(b, "a", String, String), FromTopic(b, "b", String, String),
				JoinWithin(time.Second), "j", nil).To("out")
		}, `LeftJoinStreams "j" on the stream of fromTopic#1: nil function`},
		{"nil outer fn", func(b *Builder) {
			OuterJoinStreams[string, string, string, string](FromTopic(b, "a", String, String), FromTopic(b, "b", String, String),
				JoinWithin(time.Second), "j", nil).To("out")
		}, `OuterJoinStreams "j" on the stream of fromTopic#1: nil function`},
		{"bad grace", func(b *Builder) {
			OuterJoinStreams(FromTopic(b, "a", String, String), FromTopic(b, "b", String, String), JoinWithin(time.Second).Grace(time.Microsecond), "j",
				func(_, x, y string, _, _ bool) string { return x + y }).To("out")
		}, `OuterJoinStreams "j": join grace period 1µs must be`},
		{"after SelectKey", func(b *Builder) {
			a := SelectKey(FromTopic(b, "a", String, String), func(_, v string) string { return v })
			LeftJoinStreams(a, FromTopic(b, "b", String, String), JoinWithin(time.Second), "j",
				func(_, x, y string, _ bool) string { return x + y }).To("out")
		}, `LeftJoinStreams "j": a stream may have a new key`},
		{"unmatched store taken", func(b *Builder) {
			Count(GroupByKey(FromTopic(b, "c", String, String), "g"), "j-unmatched")
			LeftJoinStreams(FromTopic(b, "a", String, String), FromTopic(b, "b", String, String), JoinWithin(time.Second), "j",
				func(_, x, y string, _ bool) string { return x + y }).To("out")
		}, `LeftJoinStreams "j": store "j-unmatched" is already used`},
	} {
		b := NewBuilder("app")
		c.build(b)
		_, err := b.Build()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Build: %v\nwant it to say %q", c.name, err, c.want)
		}
	}
}

// Clicks joined with purchases of the same user within 10 ms, with a
// grace of 5 ms, run by the driver step by step: each step's output is
// checked as it comes, so that an unmatched record sent too early or too
// late fails. Halfway, the task is rebuilt from its stores' contents (as
// a new owner restores them from their compacted changelogs) with a new
// processor.
func TestLeftAndOuterJoinStreamsStepByStep(t *testing.T) {
	type step struct {
		topic, key, value string
		at                int64
		left, outer       []string // what each join sends, "key=value at ms"
	}
	steps := []step{
		{"clicks", "a", "c1", 100, nil, nil},
		{"buys", "a", "b1", 105, []string{"a=c1&b1 at 105"}, []string{"a=c1&b1 at 105"}},
		{"clicks", "b", "c2", 110, nil, nil},
		{"clicks", "c", "c3", 120, nil, nil},
		// b's click closes when the stream time passes 110 + 2*10 + 5.
		{"buys", "x", "bx", 135, nil, nil},
		{"rebuild", "", "", 0, nil, nil},
		{"clicks", "y", "cy", 136, []string{"b=c2&- at 110"}, []string{"b=c2&- at 110"}},
		// More than the window plus the grace behind: late.
		{"clicks", "b", "late", 115, nil, nil},
		// Out of order but on time: c's click pairs.
		{"buys", "c", "b3", 125, []string{"c=c3&b3 at 125"}, []string{"c=c3&b3 at 125"}},
		{"rebuild", "", "", 0, nil, nil},
		{"buys", "a", "b4", 160, nil, nil},
		{"clicks", "z", "cz", 200, []string{"y=cy&- at 136"}, []string{"x=-&bx at 135", "y=cy&- at 136", "a=-&b4 at 160"}},
		{"clicks", "z", "cz2", 200, nil, nil},
	}
	for _, kind := range []string{"left", "outer"} {
		b := NewBuilder("app")
		clicks := FromTopic(b, "clicks", String, String)
		buys := FromTopic(b, "buys", String, String)
		w := JoinWithin(10 * time.Millisecond).Grace(5 * time.Millisecond)
		show := func(v string, has bool) string {
			if !has {
				return "-"
			}
			return v
		}
		if kind == "left" {
			LeftJoinStreams(clicks, buys, w, "cb", func(_, c, p string, found bool) string { return c + "&" + show(p, found) }).To("out")
		} else {
			OuterJoinStreams(clicks, buys, w, "cb", func(_, c, p string, hasC, hasP bool) string { return show(c, hasC) + "&" + show(p, hasP) }).To("out")
		}
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		d := newDriver(t, topo, map[string]int32{"clicks": 1, "buys": 1, "out": 1})
		sent := 0
		for i, s := range steps {
			if s.topic == "rebuild" {
				sub := topo.Subtopologies()[0]
				for name, st := range d.stores["0_0"] {
					restored := &MemStore{}
					st.Iterate(nil, nil, func(k, v []byte) error { return restored.Put(k, v) })
					d.stores["0_0"][name] = restored
				}
				d.tasks["0_0"] = sub.NewProcessor("0_0", 0)
				continue
			}
			d.inputAt(s.topic, 0, []byte(s.key), []byte(s.value), time.UnixMilli(s.at))
			if err := d.run(); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range d.records("out", 0)[sent:] {
				got = append(got, fmt.Sprintf("%s=%s at %d", r.Key, r.Value, r.Timestamp.UnixMilli()))
			}
			sent += len(got)
			want := s.left
			if kind == "outer" {
				want = s.outer
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s join, step %d (%s %s=%s at %d): sent %q, want %q", kind, i, s.topic, s.key, s.value, s.at, got, want)
			}
		}
		if d.late["cb-left"] != 1 {
			t.Errorf("%s join: late records %v, want one click", kind, d.late)
		}
		if n := d.store("0_0", "cb-unmatched").Len(); n != 2 {
			t.Errorf("%s join: %d records wait unmatched, want z's two clicks", kind, n)
		}
	}
}

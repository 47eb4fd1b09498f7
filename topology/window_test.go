package topology

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// winCtx is a one-task Context with MemStores, collecting what is sent
// and the late records counted.
type winCtx struct {
	stores map[string]*MemStore
	sent   []string // "topic key=value at ms"
	late   map[string]int
	stamp  time.Time // what Send stamps records with
}

func (c *winCtx) SetTimestamp(ts time.Time) { c.stamp = ts }

func newWinCtx() *winCtx { return &winCtx{stores: map[string]*MemStore{}, late: map[string]int{}} }

func (c *winCtx) TaskID() string   { return "0_0" }
func (c *winCtx) Partition() int32 { return 0 }
func (c *winCtx) Store(name string) Store {
	s := c.stores[name]
	if s == nil {
		s = &MemStore{}
		c.stores[name] = s
	}
	return s
}
func (c *winCtx) Send(topic string, k, v []byte) error {
	c.sent = append(c.sent, fmt.Sprintf("%s %x=%s at %d", topic, k, v, c.stamp.UnixMilli()))
	return nil
}
func (c *winCtx) LateRecord(store string) { c.late[store]++ }

// winModel is the reference: the definition of windowed aggregation
// applied record by record, with nothing shared with the implementation.
type winModel struct {
	size, adv, grace, ret int64
	stream                int64
	seen                  bool
	wins                  map[string][]string // "key@start" -> the values added, in order
	late                  int
	out                   []string // "key@start: values"
}

func (m *winModel) add(key string, ts int64, v string) {
	if !m.seen || ts > m.stream {
		m.stream, m.seen = ts, true
	}
	added := false
	// Every window start: a multiple of adv (negative ones too) with
	// start <= ts < start+size, oldest first.
	lo := ts - m.size + 1
	first := lo / m.adv * m.adv
	for first > lo {
		first -= m.adv
	}
	for first+m.adv <= lo {
		first += m.adv
	}
	for s := first; s <= ts; s += m.adv {
		if s < lo || s+m.size+m.grace <= m.stream {
			continue
		}
		added = true
		id := fmt.Sprintf("%s@%d", key, s)
		m.wins[id] = append(m.wins[id], v)
		m.out = append(m.out, id+": "+strings.Join(m.wins[id], ","))
	}
	if !added {
		m.late++
	}
	for id := range m.wins {
		var s int64
		fmt.Sscanf(id[strings.IndexByte(id, '@')+1:], "%d", &s)
		if s < m.stream-m.ret {
			delete(m.wins, id)
		}
	}
}

// TestWindowAggregateMatchesModel runs random streams, out of order and
// with late records, through a windowed aggregation whose aggregate is
// the list of values added (so order and membership both show), and
// compares every update sent, the late count and the store's final
// windows with the model. Halfway through, the task moves: a new
// processor carries on over the same store, as a new owner does over its
// restored state.
func TestWindowAggregateMatchesModel(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 11))
		size := int64(5 + rng.IntN(40))
		adv := size
		if rng.IntN(2) == 0 {
			adv = int64(1 + rng.IntN(int(size)))
		}
		grace := int64(rng.IntN(30))
		ret := size + grace
		w := HoppingWindows(time.Duration(size)*time.Millisecond, time.Duration(adv)*time.Millisecond).Grace(time.Duration(grace) * time.Millisecond)
		if rng.IntN(2) == 0 {
			ret += int64(rng.IntN(50))
			w = w.Retain(time.Duration(ret) * time.Millisecond)
		}

		b := NewBuilder("app")
		in := FromTopic(b, "in", String, String)
		list := WindowAggregate(WindowedBy(GroupByKey(in, "unused"), w), "lists",
			func() string { return "" },
			func(_ string, v string, agg string) string {
				if agg == "" {
					return v
				}
				return agg + "," + v
			}, String)
		list.ToStream().To("out")
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		sub := topo.Subtopologies()[0]
		ctx := newWinCtx()
		proc := sub.NewProcessor("0_0", 0)
		m := &winModel{size: size, adv: adv, grace: grace, ret: ret, wins: map[string][]string{}}
		var want []string
		base := int64(rng.IntN(200)) - 100 // negative times too
		n := 50 + rng.IntN(200)
		for i := range n {
			if i == n/2 {
				proc = sub.NewProcessor("0_0", 0)
			}
			base += int64(rng.IntN(8))
			ts := base - int64(rng.IntN(int(2*(size+grace))+1))*int64(rng.IntN(2))
			key := string(rune('a' + rng.IntN(3)))
			v := fmt.Sprint(i)
			before := len(m.out)
			m.add(key, ts, v)
			want = append(want, m.out[before:]...)
			err := proc.Process(ctx, Record{Topic: "in", Offset: int64(i), Key: []byte(key), Value: []byte(v), Timestamp: time.UnixMilli(ts)})
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
		}
		codec := WindowedCodec(String, time.Duration(size)*time.Millisecond)
		var got []string
		for _, s := range ctx.sent {
			var k, v []byte
			fmt.Sscanf(s, "out %x=%s", &k, &v)
			wk, err := codec.Decode(k)
			if err != nil {
				t.Fatal(err)
			}
			if wk.End.Sub(wk.Start) != time.Duration(size)*time.Millisecond {
				t.Fatalf("window %v is not %dms long", wk, size)
			}
			got = append(got, fmt.Sprintf("%s@%d: %s", wk.Key, wk.Start.UnixMilli(), v))
		}
		desc := fmt.Sprintf("seed %d (size %d, advance %d, grace %d, retention %d)", seed, size, adv, grace, ret)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: updates differ at %d:\n got %v\nwant %v", desc, firstDiff(got, want), got, want)
		}
		if ctx.late["lists"] != m.late {
			t.Fatalf("%s: %d late records counted, want %d", desc, ctx.late["lists"], m.late)
		}
		// The store holds the stream time and exactly the model's windows.
		var stored []string
		err = ctx.stores["lists"].Iterate(nil, nil, func(k, v []byte) error {
			if string(k) == string(windowMetaKey) {
				if st := int64(binary.BigEndian.Uint64(v)); st != m.stream {
					t.Errorf("%s: stored stream time %d, want %d", desc, st, m.stream)
				}
				return nil
			}
			start := int64(binary.BigEndian.Uint64(k[:8]) ^ (1 << 63))
			stored = append(stored, fmt.Sprintf("%s@%d=%s", k[8:], start, v))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var kept []string
		for id, vs := range m.wins {
			kept = append(kept, id+"="+strings.Join(vs, ","))
		}
		slices.Sort(stored)
		slices.Sort(kept)
		if !slices.Equal(stored, kept) {
			t.Fatalf("%s: store holds\n%v\nwant\n%v", desc, stored, kept)
		}
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestWindowCountAndReduce(t *testing.T) {
	b := NewBuilder("app")
	in := FromTopic(b, "in", String, Int64)
	tw := WindowedBy(GroupByKey(in, "unused"), TumblingWindows(time.Minute).Grace(10*time.Second))
	WindowCount(tw, "counts").ToStream().To("counts")
	WindowReduce(tw, "max", func(a, v int64) int64 { return max(a, v) }).ToStream().To("max")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	proc := topo.Subtopologies()[0].NewProcessor("0_0", 0)
	ctx := newWinCtx()
	at := func(s int) time.Time { return time.Unix(int64(s), 0) }
	for i, r := range []struct {
		sec int
		v   string
	}{{5, "3"}, {30, "9"}, {65, "1"}, {59, "4"}, {75, "2"}, {50, "7"}} {
		// 59 is inside the grace of [0,60) (stream time 65 < 60+10);
		// 50 comes at stream time 75, past it: late.
		if err := proc.Process(ctx, Record{Topic: "in", Offset: int64(i), Key: []byte("k"), Value: []byte(r.v), Timestamp: at(r.sec)}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	codec := WindowedCodec(String, time.Minute)
	for _, s := range ctx.sent {
		var topic string
		var k, v []byte
		fmt.Sscanf(s, "%s %x=%s", &topic, &k, &v)
		wk, _ := codec.Decode(k)
		got = append(got, fmt.Sprintf("%s %s@%d=%s", topic, wk.Key, wk.Start.Unix(), v))
	}
	want := []string{
		"counts k@0=1", "max k@0=3",
		"counts k@0=2", "max k@0=9",
		"counts k@60=1", "max k@60=1",
		"counts k@0=3", "max k@0=9",
		"counts k@60=2", "max k@60=2",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got\n%v\nwant\n%v", got, want)
	}
	if ctx.late["counts"] != 1 || ctx.late["max"] != 1 {
		t.Fatalf("late counts %v, want one per store", ctx.late)
	}
}

func TestWindowMistakes(t *testing.T) {
	for _, c := range []struct {
		w    Windows
		want string
	}{
		{Windows{}, "zero Windows"},
		{TumblingWindows(0), "window size 0s must be a positive"},
		{TumblingWindows(1500 * time.Microsecond), "whole number of milliseconds"},
		{HoppingWindows(time.Second, 2*time.Second), "window advance 2s"},
		{TumblingWindows(time.Second).Grace(-time.Second), "grace period -1s"},
		{TumblingWindows(time.Second).Grace(time.Second).Retain(time.Second), "retention 1s must be"},
	} {
		b := NewBuilder("app")
		in := FromTopic(b, "in", String, String)
		WindowCount(WindowedBy(GroupByKey(in, "g"), c.w), "counts").ToStream().To("out")
		_, err := b.Build()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `store "counts"`) {
			t.Errorf("%+v: Build: %v; want it to say %q", c.w, err, c.want)
		}
	}
}

func TestWindowedCodec(t *testing.T) {
	c := WindowedCodec(String, time.Minute)
	w := Windowed[string]{Key: "user-7", Start: time.UnixMilli(-120000), End: time.UnixMilli(-60000)}
	b, err := c.Encode(w)
	if err != nil {
		t.Fatal(err)
	}
	// Kafka Streams' layout: the key, then the start as 8 bytes.
	if string(b[:6]) != "user-7" || int64(binary.BigEndian.Uint64(b[6:])) != -120000 {
		t.Fatalf("encoded %x", b)
	}
	got, err := c.Decode(b)
	if err != nil || got.Key != w.Key || !got.Start.Equal(w.Start) || !got.End.Equal(w.End) {
		t.Fatalf("decoded %v, %v", got, err)
	}
	if _, err := c.Decode([]byte("short")); err == nil || !strings.Contains(err.Error(), "shorter than its 8-byte window start") {
		t.Fatalf("short key: %v", err)
	}
}

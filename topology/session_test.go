package topology

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// logStore is a MemStore that keeps its changelog: every Put and Delete,
// in order, as the runtime writes them to the store's changelog topic.
type logStore struct {
	MemStore
	log []logEntry
}

type logEntry struct {
	key, value []byte
	del        bool
}

func (s *logStore) Put(key, value []byte) error {
	s.log = append(s.log, logEntry{key: bytes.Clone(key), value: bytes.Clone(value)})
	return s.MemStore.Put(key, value)
}

func (s *logStore) Delete(key []byte) error {
	s.log = append(s.log, logEntry{key: bytes.Clone(key), del: true})
	return s.MemStore.Delete(key)
}

// restoreStore rebuilds a store from the first n records of a changelog,
// as a learner or a restarted task does.
func restoreStore(log []logEntry, n int) *logStore {
	s := &logStore{}
	for _, e := range log[:n] {
		if e.del {
			s.MemStore.Delete(e.key)
		} else {
			s.MemStore.Put(e.key, e.value)
		}
	}
	s.log = slices.Clone(log[:n])
	return s
}

// logCtx is a one-task Context whose stores keep changelogs, collecting
// what is sent (a nil value is a tombstone) and the late records counted.
type logCtx struct {
	stores map[string]*logStore
	sent   []sentRecord
	late   map[string]int
	input  int // the index of the input record in process
}

type sentRecord struct {
	topic      string
	key, value []byte
	input      int
}

func newLogCtx() *logCtx { return &logCtx{stores: map[string]*logStore{}, late: map[string]int{}} }

func (c *logCtx) TaskID() string   { return "0_0" }
func (c *logCtx) Partition() int32 { return 0 }
func (c *logCtx) Store(name string) Store {
	s := c.stores[name]
	if s == nil {
		s = &logStore{}
		c.stores[name] = s
	}
	return s
}
func (c *logCtx) Send(topic string, k, v []byte) error {
	c.sent = append(c.sent, sentRecord{topic: topic, key: bytes.Clone(k), value: bytes.Clone(v), input: c.input})
	return nil
}
func (c *logCtx) LateRecord(store string) { c.late[store]++ }

// sessionOut decodes a session-keyed record as "key@[start,end]=value",
// or "key@[start,end] deleted" for a tombstone.
func sessionOut(t testing.TB, r sentRecord) string {
	t.Helper()
	w, err := SessionWindowedCodec(String).Decode(r.key)
	if err != nil {
		t.Fatalf("decode %x: %v", r.key, err)
	}
	id := fmt.Sprintf("%s@[%d,%d]", w.Key, w.Start.UnixMilli(), w.End.UnixMilli())
	if r.value == nil {
		return id + " deleted"
	}
	return id + "=" + string(r.value)
}

// sessModel is the reference: session windows by their definition,
// applied record by record to every session ever made (it deletes none
// for retention), sharing nothing with the implementation.
type sessModel struct {
	t                testing.TB
	gap, grace, ret  int64
	stream           int64
	seen             bool
	sess             map[string][]*modelSession // by key, in time order
	late             int
	out              []string
	acceptedOutOfGap int // accepted records more than the grace behind
}

type modelSession struct {
	start, end int64
	vals       []string
}

func (m *sessModel) closed(s *modelSession) bool { return m.stream-s.end > m.gap+m.grace }

func (m *sessModel) add(key string, ts int64, v string) {
	if !m.seen || ts > m.stream {
		m.stream, m.seen = ts, true
	}
	// At most the grace behind, or within an open session or the gap
	// after it.
	ok := m.stream-ts <= m.grace
	inOpen := false
	for _, s := range m.sess[key] {
		if s.start <= ts && ts <= s.end+m.gap && !m.closed(s) {
			inOpen = true
		}
	}
	if !ok && !inOpen {
		m.late++
		return
	}
	if !ok {
		m.acceptedOutOfGap++
	}
	merged := &modelSession{start: ts, end: ts}
	var keep []*modelSession
	var touched []*modelSession
	for _, s := range m.sess[key] {
		if s.start-m.gap <= ts && ts <= s.end+m.gap {
			if m.closed(s) {
				m.t.Fatalf("model: accepted record at %d of %s changes closed session [%d,%d] at stream time %d", ts, key, s.start, s.end, m.stream)
			}
			touched = append(touched, s)
			merged.start, merged.end = min(merged.start, s.start), max(merged.end, s.end)
			merged.vals = append(merged.vals, s.vals...)
		} else {
			keep = append(keep, s)
		}
	}
	merged.vals = append(merged.vals, v)
	for _, s := range touched {
		if s.start != merged.start || s.end != merged.end {
			m.out = append(m.out, fmt.Sprintf("%s@[%d,%d] deleted", key, s.start, s.end))
		}
	}
	m.out = append(m.out, fmt.Sprintf("%s@[%d,%d]=%s", key, merged.start, merged.end, strings.Join(merged.vals, ",")))
	keep = append(keep, merged)
	slices.SortFunc(keep, func(a, b *modelSession) int { return int(a.start - b.start) })
	for i := 1; i < len(keep); i++ {
		if keep[i].start-keep[i-1].end <= m.gap {
			m.t.Fatalf("model: sessions [%d,%d] and [%d,%d] of %s are within the gap", keep[i-1].start, keep[i-1].end, keep[i].start, keep[i].end, key)
		}
	}
	m.sess[key] = keep
}

// listSessions is a session aggregation whose aggregate is the list of
// values added, merged in time order, so that order, membership and
// merges all show in what it sends.
func listSessions(b *Builder, w SessionWindows) Table[Windowed[string], string] {
	in := FromTopic(b, "in", String, String)
	return SessionAggregate(SessionWindowedBy(GroupByKey(in, "unused"), w), "sessions",
		func() string { return "" },
		func(_ string, v string, agg string) string {
			if agg == "" {
				return v
			}
			return agg + "," + v
		},
		func(_ string, a, b string) string { return a + "," + b }, String)
}

// TestSessionAggregateMatchesModel runs random streams, out of order and
// with late records, through a session aggregation and compares every
// update and tombstone sent, the late count and the store's sessions with
// the model. Halfway through, the task moves: a new processor carries on
// over the store rebuilt from its changelog, as a new owner does.
func TestSessionAggregateMatchesModel(t *testing.T) {
	outOfGap := 0
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 37))
		gap := int64(1 + rng.IntN(20))
		grace := int64(rng.IntN(15))
		ret := gap + grace
		w := InactivityGap(time.Duration(gap) * time.Millisecond).Grace(time.Duration(grace) * time.Millisecond)
		if rng.IntN(2) == 0 {
			ret += int64(rng.IntN(50))
			w = w.Retain(time.Duration(ret) * time.Millisecond)
		}
		b := NewBuilder("app")
		listSessions(b, w).ToTopic("out")
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		sub := topo.Subtopologies()[0]
		ctx := newLogCtx()
		proc := sub.NewProcessor("0_0", 0)
		m := &sessModel{t: t, gap: gap, grace: grace, ret: ret, sess: map[string][]*modelSession{}}
		desc := fmt.Sprintf("seed %d (gap %d, grace %d, retention %d)", seed, gap, grace, ret)
		base := int64(rng.IntN(200)) - 100 // negative times too
		n := 50 + rng.IntN(200)
		for i := range n {
			if i == n/2 {
				st := ctx.stores["sessions"]
				ctx.stores["sessions"] = restoreStore(st.log, len(st.log))
				proc = sub.NewProcessor("0_0", 0)
			}
			base += int64(rng.IntN(int(gap) + 3))
			ts := base - int64(rng.IntN(int(2*(gap+grace))+1))*int64(rng.IntN(2))
			key := string(rune('a' + rng.IntN(3)))
			v := fmt.Sprint(i)
			m.add(key, ts, v)
			ctx.input = i
			if err := proc.Process(ctx, Record{Topic: "in", Offset: int64(i), Key: []byte(key), Value: []byte(v), Timestamp: time.UnixMilli(ts)}); err != nil {
				t.Fatalf("%s: %v", desc, err)
			}
		}
		var got []string
		for _, r := range ctx.sent {
			got = append(got, sessionOut(t, r))
		}
		if !slices.Equal(got, m.out) {
			t.Fatalf("%s: updates differ at %d:\n got %v\nwant %v", desc, firstDiff(got, m.out), got, m.out)
		}
		if ctx.late["sessions"] != m.late {
			t.Fatalf("%s: %d late records counted, want %d", desc, ctx.late["sessions"], m.late)
		}
		outOfGap += m.acceptedOutOfGap
		// The store holds every session of the model not yet past the
		// retention, and no other but expired ones a sweep has yet to
		// delete.
		var stored, kept []string
		err = ctx.stores["sessions"].Iterate(nil, nil, func(k, v []byte) error {
			start, end, ok := parseSessionKey(k)
			if !ok {
				return nil
			}
			if m.stream-end > ret+gap+grace {
				t.Errorf("%s: session [%d,%d] of %q is still stored at stream time %d, a sweep after its retention", desc, start, end, k[4:len(k)-16], m.stream)
			}
			if m.stream-end <= ret {
				stored = append(stored, fmt.Sprintf("%s@[%d,%d]=%s", k[4:len(k)-16], start, end, v))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for key, ss := range m.sess {
			for _, s := range ss {
				if m.stream-s.end <= ret {
					kept = append(kept, fmt.Sprintf("%s@[%d,%d]=%s", key, s.start, s.end, strings.Join(s.vals, ",")))
				}
			}
		}
		slices.Sort(stored)
		slices.Sort(kept)
		if !slices.Equal(stored, kept) {
			t.Fatalf("%s: store holds\n%v\nwant\n%v", desc, stored, kept)
		}
	}
	if outOfGap == 0 {
		t.Fatal("no run accepted a record more than the grace behind within an open session: the test misses that case")
	}
}

// One user's sessions with a gap of 10 s and a grace of 10 s, step by
// step: a session grows, two merge, a record inside one updates it, late
// records are dropped and counted, an out-of-order one within the grace
// starts a session, and an old session is deleted past its retention.
func TestSessionCountAndReduce(t *testing.T) {
	b := NewBuilder("app")
	in := FromTopic(b, "in", String, Int64)
	sw := SessionWindowedBy(GroupByKey(in, "unused"), InactivityGap(10*time.Second).Grace(10*time.Second))
	SessionCount(sw, "counts").ToTopic("counts")
	SessionReduce(sw, "max", func(a, v int64) int64 { return max(a, v) }).ToStream().To("max")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	proc := topo.Subtopologies()[0].NewProcessor("0_0", 0)
	ctx := newLogCtx()
	steps := []struct {
		key  string
		sec  int64
		v    string
		want []string // "counts ..." and "max ..." records sent
	}{
		{"ana", 0, "3", []string{"counts ana@[0,0]=1", "max ana@[0,0]=3"}},
		{"ana", 8, "1", []string{"counts ana@[0,0] deleted", "counts ana@[0,8]=2", "max ana@[0,8]=3"}},
		{"ana", 26, "5", []string{"counts ana@[26,26]=1", "max ana@[26,26]=5"}},
		// 17 is within the gap of both: one session of four.
		{"ana", 17, "2", []string{"counts ana@[0,8] deleted", "counts ana@[26,26] deleted", "counts ana@[0,26]=4", "max ana@[0,26]=5"}},
		{"ana", 22, "9", []string{"counts ana@[0,26]=5", "max ana@[0,26]=9"}},
		{"bob", 60, "1", []string{"counts bob@[60,60]=1", "max bob@[60,60]=1"}},
		// 45: 15 s behind, more than the grace, and no session near.
		{"ana", 45, "1", nil},
		// 36: within the gap after [0,26], which closed at 46.
		{"ana", 36, "1", nil},
		// 52: 8 s behind, within the grace.
		{"ana", 52, "4", []string{"counts ana@[52,52]=1", "max ana@[52,52]=4"}},
	}
	for i, s := range steps {
		before := len(ctx.sent)
		ctx.input = i
		if err := proc.Process(ctx, Record{Topic: "in", Offset: int64(i), Key: []byte(s.key), Value: []byte(s.v), Timestamp: time.Unix(s.sec, 0)}); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range ctx.sent[before:] {
			w, err := SessionWindowedCodec(String).Decode(r.key)
			if err != nil {
				t.Fatal(err)
			}
			rs := fmt.Sprintf("%s %s@[%d,%d]", r.topic, w.Key, w.Start.Unix(), w.End.Unix())
			if r.value == nil {
				rs += " deleted"
			} else {
				rs += "=" + string(r.value)
			}
			got = append(got, rs)
		}
		if !slices.Equal(got, s.want) {
			t.Fatalf("%s at %d: sent\n%v\nwant\n%v", s.key, s.sec, got, s.want)
		}
	}
	if ctx.late["counts"] != 2 || ctx.late["max"] != 2 {
		t.Fatalf("late counts %v, want 2 per store", ctx.late)
	}
	// bob at 60 swept the store: ana's [0,26] was more than the retention
	// (gap plus grace, 20 s) behind, and is gone, with a tombstone in the
	// changelog.
	var left []string
	st := ctx.stores["counts"]
	st.Iterate(nil, nil, func(k, _ []byte) error {
		if start, end, ok := parseSessionKey(k); ok {
			left = append(left, fmt.Sprintf("%s@[%d,%d]", k[4:len(k)-16], start/1000, end/1000))
		}
		return nil
	})
	if want := []string{"ana@[52,52]", "bob@[60,60]"}; !slices.Equal(left, want) {
		t.Fatalf("store holds %v, want %v", left, want)
	}
	tombstone := slices.ContainsFunc(st.log, func(e logEntry) bool {
		start, end, ok := parseSessionKey(e.key)
		return ok && e.del && string(e.key[4:len(e.key)-16]) == "ana" && start == 0 && end == 26000
	})
	if !tombstone {
		t.Fatalf("no tombstone of ana@[0,26] in the changelog")
	}
}

func TestSessionMistakes(t *testing.T) {
	for _, c := range []struct {
		w    SessionWindows
		want string
	}{
		{SessionWindows{}, "zero SessionWindows"},
		{InactivityGap(0), "inactivity gap 0s must be a positive"},
		{InactivityGap(1500 * time.Microsecond), "whole number of milliseconds"},
		{InactivityGap(time.Second).Grace(-time.Second), "grace period -1s"},
		{InactivityGap(time.Second).Grace(time.Second).Retain(time.Second), "retention 1s must be"},
	} {
		b := NewBuilder("app")
		in := FromTopic(b, "in", String, String)
		SessionCount(SessionWindowedBy(GroupByKey(in, "g"), c.w), "counts").ToTopic("out")
		_, err := b.Build()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), `store "counts"`) {
			t.Errorf("%+v: Build: %v; want it to say %q", c.w, err, c.want)
		}
	}
}

func TestSessionWindowedCodec(t *testing.T) {
	c := SessionWindowedCodec(String)
	w := Windowed[string]{Key: "user-7", Start: time.UnixMilli(-120000), End: time.UnixMilli(5000)}
	b, err := c.Encode(w)
	if err != nil {
		t.Fatal(err)
	}
	// Kafka Streams' layout: the key, then the end and the start, 8 bytes
	// each.
	want := append([]byte("user-7"), 0, 0, 0, 0, 0, 0, 0x13, 0x88, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, 0x2b, 0x40)
	if !bytes.Equal(b, want) {
		t.Fatalf("encoded %x, want %x", b, want)
	}
	got, err := c.Decode(b)
	if err != nil || got.Key != w.Key || !got.Start.Equal(w.Start) || !got.End.Equal(w.End) {
		t.Fatalf("decoded %v, %v", got, err)
	}
	if _, err := c.Decode([]byte("fifteen bytes!!")); err == nil || !strings.Contains(err.Error(), "shorter than its 16 bytes") {
		t.Fatalf("short key: %v", err)
	}
}

// A stored session that does not decode stops the task with ErrDecode,
// naming the store.
func TestSessionStoreDecodeError(t *testing.T) {
	b := NewBuilder("app")
	in := FromTopic(b, "in", String, String)
	SessionCount(SessionWindowedBy(GroupByKey(in, "g"), InactivityGap(time.Second)), "counts").ToTopic("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx := newLogCtx()
	ctx.Store("counts").Put(sessionKey(sessionPrefix([]byte("k")), 0, 0), []byte("not a number"))
	err = topo.Subtopologies()[0].NewProcessor("0_0", 0).Process(ctx, Record{Topic: "in", Key: []byte("k"), Value: []byte("v"), Timestamp: time.UnixMilli(500)})
	if !errors.Is(err, ErrDecode) || !strings.Contains(err.Error(), `store "counts"`) {
		t.Fatalf("Process: %v", err)
	}
}

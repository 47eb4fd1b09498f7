package topology

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestPageViewsShape(t *testing.T) {
	topo, err := PageViews("pv", "views", "users", "out", time.Minute, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rep := RepartitionTopic("pv", "views-by-region")
	var got []string
	for _, s := range topo.Subtopologies() {
		got = append(got, fmt.Sprint(s.ID, s.Sources, s.Sinks, s.Stores, s.Stateful()))
	}
	want := []string{
		fmt.Sprint(0, []string{"users", "views"}, []string{rep}, []StoreSpec{{Name: "users", Changelog: "users", Source: true, Kind: KeyValueStore}}, true),
		fmt.Sprint(1, []string{rep}, []string{"out"}, []StoreSpec{{Name: "views-per-region", Changelog: ChangelogTopic("pv", "views-per-region"), Kind: WindowStore}}, true),
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("subtopologies:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestPageViewsBadWindows(t *testing.T) {
	for _, c := range []struct {
		window, grace time.Duration
		want          string
	}{
		{0, 0, "window size 0s must be a positive whole number of milliseconds"},
		{-time.Second, 0, "window size -1s must be"},
		{1500 * time.Microsecond, 0, "window size 1.5ms must be"},
		{time.Second, -time.Second, "grace period -1s must be"},
		{time.Second, time.Microsecond, "grace period 1µs must be"},
	} {
		_, err := PageViews("pv", "views", "users", "out", c.window, c.grace)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("PageViews(window %v, grace %v): %v, want an error containing %q", c.window, c.grace, err, c.want)
		}
	}
}

// TestPageViewsMatchesModel runs PageViews on three partitions with the
// task-per-partition runtime below: users (one deleted by a tombstone),
// then views whose event times jump back by up to 1.5 s against windows
// of 1 s and a grace of 0.2 s, so some are late. Every region window's output history must be
// exactly 1..n of what a model counts: the model joins each view with
// its user's region ("unknown" for none) and keeps, per window task
// (the partition of the region), the largest view time seen, dropping a
// view whose window ended at least the grace before it.
func TestPageViewsMatchesModel(t *testing.T) {
	const parts = 3
	window, grace := time.Second, 200*time.Millisecond
	topo, err := PageViews("pv", "views", "users", "out", window, grace)
	if err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(testSeed(t), 0))
	rt := newTimedRuntime(t, topo, parts)
	regions := []string{"eu", "us", "asia", "africa"}
	region := map[string]string{}
	for i := range 40 {
		u := "u" + strconv.Itoa(i)
		region[u] = regions[rnd.IntN(len(regions))]
		rt.input("users", []byte(u), []byte(region[u]), time.Time{})
	}
	rt.input("users", []byte("u0"), nil, time.Time{})
	delete(region, "u0")

	streamTime := map[int32]int64{}
	want := map[string][]string{} // windowed key -> counts, in order
	late := 0
	ts := int64(1_700_000_000_000)
	for n := range 3000 {
		ts += rnd.Int64N(40)
		at := ts
		if n%50 == 49 {
			at -= rnd.Int64N(1500)
		}
		u := "u" + strconv.Itoa(rnd.IntN(45))
		r, ok := region[u]
		if !ok {
			r = UnknownRegion
		}
		rt.input("views", []byte(u), []byte("/p"), time.UnixMilli(at))
		q := Partition([]byte(r), parts)
		streamTime[q] = max(streamTime[q], at)
		start := at - at%window.Milliseconds()
		if start+window.Milliseconds()+grace.Milliseconds() <= streamTime[q] {
			late++
			continue
		}
		k := string(binary.BigEndian.AppendUint64([]byte(r), uint64(start)))
		want[k] = append(want[k], strconv.Itoa(len(want[k])+1))
	}
	if err := rt.run(); err != nil {
		t.Fatal(err)
	}
	if late == 0 {
		t.Fatal("the model dropped no view as late: the test does not cover lateness")
	}
	got := map[string][]string{}
	for p := range int32(parts) {
		for _, r := range rt.logs["out"][p] {
			got[string(r.Key)] = append(got[string(r.Key)], string(r.Value))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if !slices.Equal(got[k], want[k]) {
			w, _ := WindowedCodec(String, window).Decode([]byte(k))
			t.Errorf("%s: counts %v, want 1..%d", w, got[k], len(want[k]))
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d region windows in the output, want %d", len(got), len(want))
	}
	t.Logf("%d region windows, %d late views", len(want), late)
}

// timedRuntime runs a Topology in memory as the runtime does, one
// Processor per task, with record timestamps: what a task sends carries
// the timestamp of the record it processes. Records are processed in the
// order they are written.
type timedRuntime struct {
	t      *testing.T
	parts  int32
	reader map[string]Subtopology
	tasks  map[string]Processor
	stores map[string]map[string]*MemStore
	logs   map[string][][]Record
	queue  []Record
}

func newTimedRuntime(t *testing.T, topo *Topology, parts int32) *timedRuntime {
	rt := &timedRuntime{t: t, parts: parts, reader: map[string]Subtopology{}, tasks: map[string]Processor{},
		stores: map[string]map[string]*MemStore{}, logs: map[string][][]Record{}}
	for _, s := range topo.Subtopologies() {
		for _, topic := range s.Sources {
			rt.reader[topic] = s
		}
	}
	return rt
}

func (rt *timedRuntime) input(topic string, key, value []byte, ts time.Time) {
	if rt.logs[topic] == nil {
		rt.logs[topic] = make([][]Record, rt.parts)
	}
	p := Partition(key, rt.parts)
	rec := Record{Topic: topic, Partition: p, Offset: int64(len(rt.logs[topic][p])), Key: bytes.Clone(key), Value: bytes.Clone(value), Timestamp: ts}
	rt.logs[topic][p] = append(rt.logs[topic][p], rec)
	if _, ok := rt.reader[topic]; ok {
		rt.queue = append(rt.queue, rec)
	}
}

func (rt *timedRuntime) run() error {
	for len(rt.queue) > 0 {
		rec := rt.queue[0]
		rt.queue = rt.queue[1:]
		s := rt.reader[rec.Topic]
		id := s.TaskID(rec.Partition)
		if rt.tasks[id] == nil {
			rt.tasks[id] = s.NewProcessor(id, rec.Partition)
			rt.stores[id] = map[string]*MemStore{}
			for _, spec := range s.Stores {
				rt.stores[id][spec.Name] = &MemStore{}
			}
		}
		if err := rt.tasks[id].Process(&timedCtx{rt: rt, task: id, rec: rec}, rec); err != nil {
			return err
		}
	}
	return nil
}

type timedCtx struct {
	rt   *timedRuntime
	task string
	rec  Record
}

func (c *timedCtx) TaskID() string   { return c.task }
func (c *timedCtx) Partition() int32 { return c.rec.Partition }

func (c *timedCtx) Store(name string) Store {
	if s := c.rt.stores[c.task][name]; s != nil {
		return s
	}
	return nil
}

func (c *timedCtx) Send(topic string, key, value []byte) error {
	c.rt.input(topic, key, value, c.rec.Timestamp)
	return nil
}

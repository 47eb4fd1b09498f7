package topology

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func pass(ctx NodeContext, rec Record) error { return ctx.Forward(rec) }

func TestBuilderErrors(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func(b *Builder)
		want  []string // substrings of the error, each required
	}{
		{"unknown parent", func(b *Builder) {
			b.AddSource("src", "in")
			b.AddProcessor("p", ProcessorFunc(pass), "nope")
			b.AddSink("sink", "out", "p")
		}, []string{`processor "p": unknown parent "nope"`}},
		{"duplicate node", func(b *Builder) {
			b.AddSource("x", "in")
			b.AddProcessor("x", ProcessorFunc(pass), "x")
		}, []string{`duplicate node name "x" (a source and a processor)`}},
		{"duplicate parent", func(b *Builder) {
			b.AddSource("src", "in")
			b.AddSink("sink", "out", "src", "src")
		}, []string{`parent "src" given twice`}},
		{"no parent", func(b *Builder) {
			b.AddSource("src", "in")
			b.AddProcessor("p", ProcessorFunc(pass))
		}, []string{`processor "p" has no parent`}},
		{"sink as parent", func(b *Builder) {
			b.AddSource("src", "in")
			b.AddSink("sink", "out", "src")
			b.AddProcessor("p", ProcessorFunc(pass), "sink")
		}, []string{`parent "sink" is a sink`}},
		{"cycle", func(b *Builder) {
			b.AddSource("src", "in")
			b.AddProcessor("a", ProcessorFunc(pass), "src", "c")
			b.AddProcessor("b", ProcessorFunc(pass), "a")
			b.AddProcessor("c", ProcessorFunc(pass), "b")
			b.AddSink("sink", "out", "c")
		}, []string{`cycle through nodes "a", "b", "c", "sink"`}},
		{"store not connected", func(b *Builder) {
			b.AddSource("src", "in")
			b.AddSink("sink", "out", "src")
			b.AddStore("lonely")
		}, []string{`store "lonely" is not connected to any processor`}},
		{"store on unknown processor", func(b *Builder) {
			b.AddSource("src", "in")
			b.AddSink("sink", "out", "src")
			b.AddStore("s", "ghost")
		}, []string{`store "s": unknown processor "ghost"`}},
		{"store on a sink", func(b *Builder) {
			b.AddSource("src", "in")
			b.AddSink("sink", "out", "src")
			b.AddStore("s", "sink")
		}, []string{`store "s": "sink" is a sink; only processors have stores`}},
		{"bad store name", func(b *Builder) {
			b.AddSource("src", "in")
			b.AddProcessor("p", ProcessorFunc(pass), "src")
			b.AddStore("my store", "p")
		}, []string{`store name "my store" does not make a valid changelog topic name`}},
		{"empty app id", func(b *Builder) {
			*b = *NewBuilder("")
			b.AddSource("src", "in")
		}, []string{"empty app id"}},
		{"bad app id", func(b *Builder) {
			*b = *NewBuilder("my app")
			b.AddSource("src", "in")
		}, []string{`app id "my app" must be usable in topic names`}},
		{"bad topic names", func(b *Builder) {
			b.AddSource("src", "in", "", "..", "a/b", strings.Repeat("t", 250))
			b.AddSink("sink", "ü", "src")
		}, []string{`source "src": empty topic name`, `topic name ".." is not allowed`, `topic name "a/b" has '/'`,
			"is 250 characters long", `sink "sink": topic name "ü" has`}},
		{"source without topics", func(b *Builder) {
			b.AddSource("src")
		}, []string{`source "src" reads no topic`}},
		{"topic read twice", func(b *Builder) {
			b.AddSource("s1", "in")
			b.AddSource("s2", "in")
		}, []string{`topic "in" is read by two sources, "s1" and "s2"`}},
		{"unused repartition topic", func(b *Builder) {
			rep := b.AddRepartitionTopic("r")
			b.AddSource("src", "in")
			b.AddSink("sink", rep, "src")
		}, []string{`repartition topic "app-r-repartition" must be written by a sink and read by a source (written: true, read: false)`}},
		{"subtopology reads what it writes", func(b *Builder) {
			b.AddSource("src", "loop")
			b.AddSink("sink", "loop", "src")
		}, []string{`cycle: topic "loop" is both written and read by the subtopology of node "src"`}},
		{"cycle between subtopologies", func(b *Builder) {
			b.AddSource("a-in", "a")
			b.AddSink("a-out", "b", "a-in")
			b.AddSource("b-in", "b")
			b.AddSink("b-out", "a", "b-in")
		}, []string{`cycle between subtopologies through topics "a", "b"`}},
		{"nil supplier", func(b *Builder) {
			b.AddSource("src", "in")
			b.AddProcessor("p", nil, "src")
		}, []string{`processor "p" has a nil supplier`}},
		{"no nodes", func(b *Builder) {}, []string{"no nodes"}},
		{"processor under a DSL stream", func(b *Builder) {
			FromTopic(b, "in", String, String)
			b.AddProcessor("p", ProcessorFunc(pass), "fromTopic#1")
		}, []string{`processor "p" cannot take the output of "fromTopic#1": it takes Records, "fromTopic#1" gives kvPort[string,string]`}},
		{"To without codecs", func(b *Builder) {
			s := FromTopic(b, "in", String, String)
			Map(s, func(k, v string) (int, int) { return len(k), len(v) }).To("out")
		}, []string{`To("out"): the stream of map#2 has no codecs`}},
		{"GroupByKey without codecs", func(b *Builder) {
			s := FromTopic(b, "in", String, String)
			Count(GroupByKey(Map(s, func(k, v string) (int, string) { return len(k), v }), "r"), "n")
		}, []string{`repartition "r": the stream of map#2 has no codecs`}},
		{"nil codec", func(b *Builder) {
			FromTopic[string, string](b, "in", nil, String)
		}, []string{`FromTopic("in"): nil codec`}},
		{"store used twice", func(b *Builder) {
			g := GroupByKey(FromTopic(b, "in", String, String), "r")
			Count(g, "n")
			Count(g, "n")
		}, []string{`count: store "n" is already used`}},
		{"bad repartition name", func(b *Builder) {
			GroupBy(FromTopic(b, "in", String, String), func(k, v string) string { return v }, String, "by value")
		}, []string{`repartition name "by value" does not make a valid topic name`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := NewBuilder("app")
			c.build(b)
			topo, err := b.Build()
			if topo != nil || err == nil {
				t.Fatalf("Build() = %v, %v; want an error", topo, err)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %q does not wrap ErrInvalid", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// The Processor API: stores, per-task suppliers, topic boundaries, and
// IDs that follow the data whatever the order nodes were added in.
func TestProcessorAPI(t *testing.T) {
	b := NewBuilder("app")
	rep := b.AddRepartitionTopic("by-value")
	// Added downstream first, to check that IDs follow the data.
	b.AddSource("rep-in", rep)
	b.AddProcessor("last", SupplierFunc(func(taskID string, _ int32) Node {
		seen := 0 // per task
		return ProcessorFunc(func(ctx NodeContext, rec Record) error {
			seen++
			st := ctx.Store("last-seen")
			if st == nil {
				return errors.New("no store last-seen")
			}
			if ctx.Store("counts") != nil {
				return errors.New("store counts is not connected to this node but was visible")
			}
			if err := st.Put(rec.Key, []byte(fmt.Sprintf("%s#%d", taskID, seen))); err != nil {
				return err
			}
			return ctx.Forward(rec)
		})
	}), "rep-in")
	b.AddStore("last-seen", "last")
	b.AddSink("out", "out", "last")

	b.AddSource("in", "in-a", "in-b")
	b.AddProcessor("swap", ProcessorFunc(func(ctx NodeContext, rec Record) error {
		if string(rec.Value) == "fail" {
			return errors.New("told to fail")
		}
		rec.Key, rec.Value = rec.Value, rec.Key
		return ctx.Forward(rec)
	}), "in")
	b.AddProcessor("count", ProcessorFunc(func(ctx NodeContext, rec Record) error {
		st := ctx.Store("counts")
		v, _, err := st.Get(rec.Key)
		if err != nil {
			return err
		}
		return st.Put(rec.Key, append(v, '|'))
	}), "swap")
	b.AddStore("counts", "count")
	b.AddSink("to-rep", rep, "swap")

	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	subs := topo.Subtopologies()
	want := []Subtopology{
		{ID: 0, Sources: []string{"in-a", "in-b"}, Sinks: []string{rep}, Repartition: []string{rep},
			Stores: []StoreSpec{{Name: "counts", Changelog: "app-counts-changelog", Kind: KeyValueStore}}, Processors: []string{"count", "swap"}},
		{ID: 1, Sources: []string{rep}, Sinks: []string{"out"}, Repartition: []string{rep},
			Stores: []StoreSpec{{Name: "last-seen", Changelog: "app-last-seen-changelog", Kind: KeyValueStore}}, Processors: []string{"last"}},
	}
	for i := range subs {
		subs[i].NewProcessor = nil
	}
	if !reflect.DeepEqual(subs, want) {
		t.Fatalf("subtopologies:\n%+v\nwant\n%+v\n%s", subs, want, topo)
	}
	golden(t, "processor-api.txt", topo.String())

	d := newDriver(t, topo, map[string]int32{"in-a": 2, "in-b": 2, "out": 3})
	d.input("in-a", 0, []byte("k1"), []byte("x"))
	d.input("in-b", 1, []byte("k2"), []byte("x"))
	d.input("in-a", 1, []byte("k3"), []byte("y"))
	if err := d.run(); err != nil {
		t.Fatal(err)
	}
	px, py := Partition([]byte("x"), 2), Partition([]byte("y"), 2)
	for _, c := range []struct{ task, store, key, want string }{
		{"0_0", "counts", "x", "|"},
		{"0_1", "counts", "x", "|"},
		{"0_1", "counts", "y", "|"},
		{TaskID(1, px), "last-seen", "x", TaskID(1, px) + "#2"},
		{TaskID(1, py), "last-seen", "y", fmt.Sprintf("%s#%d", TaskID(1, py), map[bool]int{true: 3, false: 1}[px == py])},
	} {
		v, ok, _ := d.store(c.task, c.store).Get([]byte(c.key))
		if !ok || string(v) != c.want {
			t.Errorf("task %s store %s[%s] = %q, %t; want %q", c.task, c.store, c.key, v, ok, c.want)
		}
	}
	out := 0
	for p := range int32(3) {
		out += len(d.records("out", p))
	}
	if out != 3 {
		t.Errorf("%d records on out, want 3", out)
	}

	// A failing node is named, with the input record.
	d.input("in-b", 1, []byte("k9"), []byte("fail"))
	err = d.run()
	var pe *ProcessError
	if !errors.As(err, &pe) {
		t.Fatalf("run() = %v, want a *ProcessError", err)
	}
	if pe.TaskID != "0_1" || pe.Topic != "in-b" || pe.Partition != 1 || pe.Offset != 1 || pe.Node != "swap" {
		t.Errorf("ProcessError = %+v", pe)
	}
	if want := `topology: task 0_1: record in-b[1]@1: node "swap": told to fail`; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}

	// A record from a topic the task does not read.
	err = topo.Subtopologies()[0].NewProcessor("0_0", 0).Process(nil, Record{Topic: "other", Offset: 7})
	if !errors.Is(err, ErrUnknownTopic) || !strings.Contains(err.Error(), `record other[0]@7`) {
		t.Errorf("unknown topic: %v", err)
	}
}

// An error is attributed to the node it began at, not to the parents that
// pass it on, even when they wrap it.
func TestProcessErrorNode(t *testing.T) {
	boom := errors.New("boom")
	b := NewBuilder("app")
	b.AddSource("src", "in")
	b.AddProcessor("wrap", ProcessorFunc(func(ctx NodeContext, rec Record) error {
		if err := ctx.Forward(rec); err != nil {
			return fmt.Errorf("wrapped: %w", err)
		}
		return nil
	}), "src")
	b.AddProcessor("fail", ProcessorFunc(func(_ NodeContext, rec Record) error {
		if string(rec.Value) == "a" {
			return boom
		}
		return nil
	}), "wrap")
	b.AddProcessor("replace", ProcessorFunc(func(ctx NodeContext, rec Record) error {
		if ctx.Forward(rec) != nil {
			return errors.New("replaced")
		}
		return nil
	}), "src")
	b.AddProcessor("fail2", ProcessorFunc(func(NodeContext, Record) error { return boom }), "replace")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	proc := topo.Subtopologies()[0].NewProcessor("0_0", 0)
	var pe *ProcessError
	err = proc.Process(nil, Record{Topic: "in", Value: []byte("a")})
	if !errors.As(err, &pe) || pe.Node != "fail" || !errors.Is(err, boom) {
		t.Fatalf("got %v, want boom at node fail", err)
	}
	// The second branch replaces its child's error by its own, so it is the
	// one named.
	err = proc.Process(nil, Record{Topic: "in", Value: []byte("b")})
	if !errors.As(err, &pe) || pe.Node != "replace" || errors.Is(err, boom) {
		t.Fatalf("got %v, want a new error at node replace", err)
	}
}

func TestCheckPartitions(t *testing.T) {
	s := Subtopology{ID: 3, Sources: []string{"a", "b"}}
	if n, err := s.CheckPartitions(map[string]int32{"a": 4, "b": 4}); n != 4 || err != nil {
		t.Errorf("co-partitioned: %d, %v", n, err)
	}
	for _, parts := range []map[string]int32{{"a": 4, "b": 5}, {"a": 4}, {"a": 0, "b": 0}} {
		if _, err := s.CheckPartitions(parts); !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckPartitions(%v) = %v, want ErrInvalid", parts, err)
		}
	}
	_, err := s.CheckPartitions(map[string]int32{"a": 4, "b": 5})
	if want := `subtopology 3: source topics are not co-partitioned: "a" has 4 partitions, "b" has 5`; !strings.Contains(err.Error(), want) {
		t.Errorf("%v does not say %q", err, want)
	}
}

func TestTaskID(t *testing.T) {
	if id := TaskID(1, 3); id != "1_3" {
		t.Errorf("TaskID(1, 3) = %q", id)
	}
	if s, p, err := ParseTaskID("12_345"); s != 12 || p != 345 || err != nil {
		t.Errorf("ParseTaskID(12_345) = %d, %d, %v", s, p, err)
	}
	for _, bad := range []string{"", "1", "_1", "1_", "a_1", "1_-2", "-1_2", "1_2_3", "1_99999999999"} {
		if _, _, err := ParseTaskID(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseTaskID(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestTopicNames(t *testing.T) {
	if got := ChangelogTopic("wc", "counts"); got != "wc-counts-changelog" {
		t.Errorf("ChangelogTopic = %q", got)
	}
	if got := RepartitionTopic("wc", "words"); got != "wc-words-repartition" {
		t.Errorf("RepartitionTopic = %q", got)
	}
}

func TestMemStore(t *testing.T) {
	var s MemStore
	if _, ok, err := s.Get([]byte("k")); ok || err != nil {
		t.Fatal("empty store has k")
	}
	v := []byte("v1")
	s.Put([]byte("k"), v)
	v[0] = 'X' // the store kept a copy
	got, ok, _ := s.Get([]byte("k"))
	if !ok || string(got) != "v1" {
		t.Fatalf("Get = %q, %t", got, ok)
	}
	got[0] = 'Y' // and handed out one
	if got, _, _ := s.Get([]byte("k")); string(got) != "v1" {
		t.Fatalf("Get after modifying a result = %q", got)
	}
	s.Put([]byte("empty"), nil)
	if got, ok, _ := s.Get([]byte("empty")); !ok || got == nil || len(got) != 0 {
		t.Errorf("empty value: %q, %t", got, ok)
	}
	if keys := s.Keys(); !reflect.DeepEqual(keys, []string{"empty", "k"}) || s.Len() != 2 {
		t.Errorf("Keys = %q, Len = %d", keys, s.Len())
	}
	s.Delete([]byte("k"))
	s.Delete([]byte("missing"))
	if _, ok, _ := s.Get([]byte("k")); ok || s.Len() != 1 {
		t.Errorf("k still there after Delete")
	}
}

// A built Topology does not change when its builder is used again.
func TestBuildIsolated(t *testing.T) {
	b := NewBuilder("app")
	b.AddSource("src", "in")
	b.AddProcessor("p", ProcessorFunc(func(ctx NodeContext, _ Record) error {
		if ctx.Store("s") != nil {
			return errors.New("sees store s")
		}
		return nil
	}), "src")
	before, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	b.AddStore("s", "p")
	after, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx := &failCtx{store: &MemStore{}}
	if err := before.Subtopologies()[0].NewProcessor("0_0", 0).Process(ctx, Record{Topic: "in"}); err != nil {
		t.Errorf("first topology: %v", err)
	}
	if err := after.Subtopologies()[0].NewProcessor("0_0", 0).Process(ctx, Record{Topic: "in"}); err == nil {
		t.Errorf("second topology: store s not visible")
	}
	if len(before.Subtopologies()[0].Stores) != 0 || len(after.Subtopologies()[0].Stores) != 1 {
		t.Errorf("stores: before %v, after %v", before.Subtopologies()[0].Stores, after.Subtopologies()[0].Stores)
	}
}

package topology

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestSplitMatchesModel splits random amounts three ways (the default
// branch added last, first, or not at all) and checks every output
// topic, partition by partition, against the first-match rule.
func TestSplitMatchesModel(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 3))
	for _, dflt := range []string{"last", "first", "none"} {
		for round := range 5 {
			b := NewBuilder("app")
			amounts := FromTopic(b, "amounts", String, Int64)
			sp := Split(amounts)
			var rest Stream[string, int64]
			if dflt == "first" {
				rest = sp.Default("rest")
			}
			smallCalls := 0
			big := sp.Branch("big", func(_ string, v int64) bool { return v >= 50 })
			small := sp.Branch("small", func(_ string, v int64) bool { smallCalls++; return v > 0 })
			if dflt == "last" {
				rest = sp.Default("rest")
			}
			big.To("big")
			// A branch is a stream like any: counted without
			// repartitioning, since Split keeps the key.
			Count(GroupByKey(small, "small-by-key"), "small-counts").ToStream().To("small-counts")
			if dflt != "none" {
				MapValues(rest, func(v int64) int64 { return -v }).To("rest")
			}
			topo, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			if subs := topo.Subtopologies(); len(subs) != 1 {
				t.Fatalf("%d subtopologies, want 1:\n%s", len(subs), topo)
			}
			n := int32(1 + rng.IntN(4))
			d := newDriver(t, topo, map[string]int32{"amounts": n, "big": n, "small-counts": n, "rest": n})
			want := map[string]map[int32][]string{"big": {}, "small-counts": {}, "rest": {}}
			counts := map[string]int64{}
			notBig := 0
			for range rng.IntN(100) {
				k, v := strconv.Itoa(rng.IntN(8)), rng.Int64N(100)-30
				d.input("amounts", Partition([]byte(k), n), []byte(k), []byte(strconv.FormatInt(v, 10)))
				switch {
				case v >= 50:
					expect(want["big"], n, k, strconv.FormatInt(v, 10))
				case v > 0:
					notBig++
					counts[k]++
					expect(want["small-counts"], n, k, strconv.FormatInt(counts[k], 10))
				default:
					notBig++
					if dflt != "none" {
						expect(want["rest"], n, k, strconv.FormatInt(-v, 10))
					}
				}
			}
			if err := d.run(); err != nil {
				t.Fatal(err)
			}
			for _, topic := range []string{"big", "small-counts", "rest"} {
				if got := outputs(d, topic); !reflect.DeepEqual(got, want[topic]) {
					t.Errorf("seed %d, default %s, round %d: %s:\n got %v\nwant %v", seed, dflt, round, topic, got, want[topic])
				}
			}
			if smallCalls != notBig {
				t.Errorf("seed %d, default %s, round %d: the second predicate ran %d times, want %d (once per record the first refused)",
					seed, dflt, round, smallCalls, notBig)
			}
		}
	}
}

// TestSplitMergeRoundTrip splits a stream, changes each branch its own
// way and merges the branches back: every record comes out once, in its
// partition's order, as its branch made it.
func TestSplitMergeRoundTrip(t *testing.T) {
	b := NewBuilder("app")
	words := FromTopic(b, "words", String, String)
	sp := Split(words)
	upper := MapValues(sp.Branch("short", func(_, w string) bool { return len(w) <= 3 }), strings.ToUpper)
	doubled := FlatMapValues(sp.Branch("long", func(_, w string) bool { return len(w) <= 6 }),
		func(w string) []string { return []string{w, w} })
	other := MapValues(sp.Default("other"), func(w string) string { return "<" + w + ">" })
	Merge(upper, doubled, other).To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d := newDriver(t, topo, map[string]int32{"words": 2, "out": 3})
	want := map[int32][]string{}
	for i, w := range strings.Fields("a fig apple banana pineapple kiwi watermelon ox") {
		k := strconv.Itoa(i % 3)
		d.input("words", Partition([]byte(k), 2), []byte(k), []byte(w))
		switch {
		case len(w) <= 3:
			expect(want, 3, k, strings.ToUpper(w))
		case len(w) <= 6:
			expect(want, 3, k, w)
			expect(want, 3, k, w)
		default:
			expect(want, 3, k, "<"+w+">")
		}
	}
	if err := d.run(); err != nil {
		t.Fatal(err)
	}
	if got := outputs(d, "out"); !reflect.DeepEqual(got, want) {
		t.Errorf("out:\n got %v\nwant %v", got, want)
	}
}

// A record reaching a merge along two paths comes out once along each,
// first along the path added first, whatever the order of Merge's
// arguments.
func TestMergeOnceAlongEachPath(t *testing.T) {
	b := NewBuilder("app")
	in := FromTopic(b, "in", String, String)
	first := MapValues(in, func(v string) string { return "first " + v })
	second := MapValues(in, func(v string) string { return "second " + v })
	Merge(second, first).To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d := newDriver(t, topo, map[string]int32{"in": 1, "out": 1})
	d.input("in", 0, []byte("k"), []byte("1"))
	d.input("in", 0, []byte("k"), []byte("2"))
	if err := d.run(); err != nil {
		t.Fatal(err)
	}
	want := []string{"k=first 1", "k=second 1", "k=first 2", "k=second 2"}
	if got := outputs(d, "out")[0]; !slices.Equal(got, want) {
		t.Errorf("out: %v, want %v", got, want)
	}
}

// TestMergeMatchesModel merges two topics keyed alike: one subtopology
// reads both, every record comes out once in the order processed, and
// counts by key need no repartitioning.
func TestMergeMatchesModel(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 4))
	for round := range 10 {
		b := NewBuilder("app")
		var peeked []string
		clicks := FromTopic(b, "clicks", String, String)
		taps := MapValues(FromTopic(b, "taps", String, String), func(v string) string { return "tap " + v })
		events := Peek(Merge(clicks, taps), func(k, v string) { peeked = append(peeked, k+"="+v) })
		events.To("events")
		Count(GroupByKey(events, "events-by-user"), "events-per-user").ToStream().To("counts")
		topo, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		subs := topo.Subtopologies()
		if len(subs) != 1 || !slices.Equal(subs[0].Sources, []string{"clicks", "taps"}) || len(subs[0].Repartition) != 0 {
			t.Fatalf("want one subtopology reading clicks and taps, without repartitioning:\n%s", topo)
		}
		n := int32(1 + rng.IntN(4))
		d := newDriver(t, topo, map[string]int32{"clicks": n, "taps": n, "events": n, "counts": n})
		var inOrder []string
		want, wantCounts := map[int32][]string{}, map[int32][]string{}
		counts := map[string]int{}
		for i := range rng.IntN(100) {
			k, v := "u"+strconv.Itoa(rng.IntN(6)), strconv.Itoa(i)
			topic := "clicks"
			if rng.IntN(2) == 0 {
				topic, v = "taps", "tap "+v
				d.input("taps", Partition([]byte(k), n), []byte(k), []byte(strings.TrimPrefix(v, "tap ")))
			} else {
				d.input(topic, Partition([]byte(k), n), []byte(k), []byte(v))
			}
			inOrder = append(inOrder, k+"="+v)
			expect(want, n, k, v)
			counts[k]++
			expect(wantCounts, n, k, strconv.Itoa(counts[k]))
		}
		if err := d.run(); err != nil {
			t.Fatal(err)
		}
		if got := outputs(d, "events"); !reflect.DeepEqual(got, want) {
			t.Errorf("seed %d round %d: events:\n got %v\nwant %v", seed, round, got, want)
		}
		if got := outputs(d, "counts"); !reflect.DeepEqual(got, wantCounts) {
			t.Errorf("seed %d round %d: counts:\n got %v\nwant %v", seed, round, got, wantCounts)
		}
		if !slices.Equal(peeked, inOrder) {
			t.Errorf("seed %d round %d: Peek saw\n %v\nwant\n %v", seed, round, peeked, inOrder)
		}
	}
}

// A merge of a stream with a new key is repartitioned before counting:
// the counts are by the new key, wherever its records came from.
func TestMergeRekeyedRepartitions(t *testing.T) {
	b := NewBuilder("app")
	byUser := FromTopic(b, "by-user", String, String) // user -> page
	byPage := SelectKey(FromTopic(b, "by-page-user", String, String), func(page, user string) string { return user })
	Count(GroupByKey(Merge(byUser, byPage), "views-by-user"), "views").ToStream().To("views")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d := newDriver(t, topo, map[string]int32{"by-user": 4, "by-page-user": 4, "views": 1})
	var want []string
	n := map[string]int{}
	for i := range 40 {
		user, page := "u"+strconv.Itoa(i%5), "/p"+strconv.Itoa(i%7)
		if i%2 == 0 {
			d.input("by-user", Partition([]byte(user), 4), []byte(user), []byte(page))
		} else {
			d.input("by-page-user", Partition([]byte(page), 4), []byte(page), []byte(user))
		}
		n[user]++
		want = append(want, user+"="+strconv.Itoa(n[user]))
	}
	if err := d.run(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range d.records("views", 0) {
		got = append(got, string(r.Key)+"="+string(r.Value))
	}
	if !slices.Equal(got, want) {
		t.Errorf("views:\n got %v\nwant %v\n%s", got, want, topo)
	}
}

// Merged streams are in one subtopology, whose topics must have the same
// partition count: the runtime's check names them.
func TestMergeNeedsCoPartitioning(t *testing.T) {
	b := NewBuilder("app")
	Merge(FromTopic(b, "clicks", String, String), FromTopic(b, "taps", String, String)).To("events")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	subs := topo.Subtopologies()
	if len(subs) != 1 {
		t.Fatalf("%d subtopologies, want 1:\n%s", len(subs), topo)
	}
	_, err = subs[0].CheckPartitions(map[string]int32{"clicks": 3, "taps": 4})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `"clicks" has 3 partitions, "taps" has 4`) {
		t.Errorf("CheckPartitions: %v", err)
	}
}

// textCodec is a Codec[string] other than String.
type textCodec struct{}

func (textCodec) Encode(s string) ([]byte, error) { return []byte("text:" + s), nil }
func (textCodec) Decode(b []byte) (string, error) { return strings.TrimPrefix(string(b), "text:"), nil }

// funcCodec is a codec that cannot be compared.
type funcCodec struct{ enc func(string) []byte }

func (c funcCodec) Encode(s string) ([]byte, error) { return c.enc(s), nil }
func (funcCodec) Decode(b []byte) (string, error)   { return string(b), nil }

// Merge keeps the streams' codecs only where they all have the same, and
// marks the key as changed if the key codecs differ.
func TestMergeCodecs(t *testing.T) {
	raw := funcCodec{func(s string) []byte { return []byte(s) }}
	for _, c := range []struct {
		name               string
		keys, values       Codec[string]
		wantKeys, wantVals bool
		wantChanged        bool
	}{
		{"same", String, String, true, true, false},
		{"other key codec", textCodec{}, String, false, true, true},
		{"other value codec", String, textCodec{}, true, false, false},
		{"uncomparable key codec", raw, String, false, true, true},
	} {
		b := NewBuilder("app")
		m := Merge(FromTopic(b, "a", String, String), FromTopic(b, "b", c.keys, c.values))
		if (m.keys != nil) != c.wantKeys || (m.values != nil) != c.wantVals || m.keyChanged != c.wantChanged {
			t.Errorf("%s: keys %v, values %v, key changed %t; want keys %t, values %t, key changed %t",
				c.name, m.keys, m.values, m.keyChanged, c.wantKeys, c.wantVals, c.wantChanged)
		}
	}
}

// Merging a stream with one computed from it through a topic makes a
// subtopology read what it writes: Build says so, naming the merge.
func TestMergeCycle(t *testing.T) {
	b := NewBuilder("app")
	in := FromTopic(b, "in", String, String)
	rekeyed := Repartition(SelectKey(in, func(k, v string) string { return v }), "rekeyed")
	Merge(in, rekeyed).To("out")
	_, err := b.Build()
	want := `cycle: topic "app-rekeyed-repartition" is both written and read by the subtopology of node "fromRepartition#4" ` +
		`(Merge "merge#5" puts all its streams in one subtopology: a stream cannot be merged with one computed from it through a topic)`
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
		t.Errorf("Build: %v\nwant it to say %s", err, want)
	}
}

// A Topology built before a branch was added does not route to it.
func TestSplitBuildIsolated(t *testing.T) {
	b := NewBuilder("app")
	sp := Split(FromTopic(b, "in", String, String))
	sp.Branch("a", func(_, v string) bool { return v == "a" }).To("a")
	before, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	sp.Default("rest").To("rest")
	after, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		topo *Topology
		want map[int32][]string
	}{{before, map[int32][]string{}}, {after, map[int32][]string{0: {"k=b"}}}} {
		d := newDriver(t, c.topo, map[string]int32{"in": 1, "a": 1, "rest": 1})
		d.input("in", 0, []byte("k"), []byte("b"))
		if err := d.run(); err != nil {
			t.Fatal(err)
		}
		if got := outputs(d, "rest"); !reflect.DeepEqual(got, c.want) {
			t.Errorf("rest: got %v, want %v", got, c.want)
		}
	}
}

func TestBranchingMistakes(t *testing.T) {
	yes := func(string, string) bool { return true }
	for _, c := range []struct {
		name  string
		build func(b *Builder)
		want  string
	}{
		{"no branches", func(b *Builder) {
			Split(FromTopic(b, "in", String, String))
		}, `Split of the stream of fromTopic#1 (node "split#2") has no branches (add them with Branch or Default)`},
		{"nil predicate", func(b *Builder) {
			Split(FromTopic(b, "in", String, String)).Branch("a", nil).To("out")
		}, `Split of the stream of fromTopic#1: branch "a": nil predicate`},
		{"duplicate branch names", func(b *Builder) {
			sp := Split(FromTopic(b, "in", String, String))
			sp.Branch("a", yes).To("a")
			sp.Default("a").To("b")
		}, `Split of the stream of fromTopic#1: branch name "a" is used twice`},
		{"empty branch name", func(b *Builder) {
			Split(FromTopic(b, "in", String, String)).Branch("", yes).To("out")
		}, `Split of the stream of fromTopic#1: a branch has an empty name`},
		{"two defaults", func(b *Builder) {
			sp := Split(FromTopic(b, "in", String, String))
			sp.Default("rest").To("a")
			sp.Default("others").To("b")
		}, `Split of the stream of fromTopic#1: a second default branch "others" (the default branch is "rest")`},
		{"merge of one stream", func(b *Builder) {
			Merge(FromTopic(b, "in", String, String)).To("out")
		}, `Merge of the stream of fromTopic#1: no other stream to merge it with (give two or more)`},
		{"merge with another builder's stream", func(b *Builder) {
			other := FromTopic(NewBuilder("other"), "b", String, String)
			Merge(FromTopic(b, "a", String, String), FromTopic(b, "c", String, String), other).To("out")
		}, `Merge of the stream of fromTopic#1: stream 3 of 3 belongs to another Builder`},
		{"merge with a zero stream", func(b *Builder) {
			Merge(FromTopic(b, "a", String, String), Stream[string, string]{}).To("out")
		}, `Merge of the stream of fromTopic#1: stream 2 of 2 is a zero Stream (streams come from FromTopic)`},
		{"merge of a stream with itself", func(b *Builder) {
			s := FromTopic(b, "a", String, String)
			Merge(s, FromTopic(b, "b", String, String), s).To("out")
		}, `Merge of the stream of fromTopic#1: the stream of fromTopic#1 is given twice`},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := NewBuilder("app")
			c.build(b)
			topo, err := b.Build()
			if topo != nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Build() = %v, %v\nwant an error saying %s", topo, err, c.want)
			}
		})
	}
}

// Branch names and the split are in the topology's description.
func TestSplitString(t *testing.T) {
	b := NewBuilder("app")
	sp := Split(FromTopic(b, "in", String, Int64))
	sp.Branch("odd", func(_ string, v int64) bool { return v%2 != 0 }).To("odd")
	sp.Default("even").To("even")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"processor split#2 (string, int64) -> branch#3, branch#5\n",
		`processor branch#3 (string, int64; branch "odd") -> to#4` + "\n",
		`processor branch#5 (string, int64; default branch "even") -> to#6` + "\n",
	} {
		if !strings.Contains(topo.String(), want) {
			t.Errorf("%s\ndoes not say\n%s", topo, want)
		}
	}
}

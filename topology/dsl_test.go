package topology

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

type order struct {
	Customer string   `json:"customer"`
	Product  string   `json:"product"`
	Amount   int64    `json:"amount"`
	Items    []string `json:"items,omitempty"`
}

// shop is a topology using every DSL operation: per-customer totals
// without repartitioning (the key is unchanged), per-product maxima and
// per-item counts through repartition topics.
func shop(t *testing.T, peeked *int) *Topology {
	b := NewBuilder("shop")
	orders := FromTopic(b, "orders", String, JSON[order]{}) // keyed by customer
	valid := Filter(orders, func(_ string, o order) bool { return o.Amount > 0 })
	valid = Foreach(valid, func(string, order) { *peeked++ })

	amounts := MapValues(valid, func(o order) int64 { return o.Amount }).WithCodecs(String, Int64)
	Aggregate(GroupByKey(amounts, "by-customer"), "totals",
		func() int64 { return 0 }, func(_ string, v, sum int64) int64 { return sum + v }, Int64).
		ToStream().To("customer-totals")

	byProduct := Map(valid, func(_ string, o order) (string, int64) { return o.Product, o.Amount }).WithCodecs(String, Int64)
	Reduce(GroupByKey(byProduct, "by-product"), "max-amount", func(a, v int64) int64 { return max(a, v) }).
		ToStream().To("product-max")

	items := FlatMap(valid, func(c string, o order) []KeyValue[string, string] {
		var kvs []KeyValue[string, string]
		for _, it := range o.Items {
			kvs = append(kvs, KeyValue[string, string]{it, c})
		}
		return kvs
	}).WithCodecs(String, String)
	Count(GroupByKey(items, "by-item"), "item-counts").ToStream().To("item-counts")

	// A JSON table: the latest order per customer.
	Reduce(GroupByKey(valid, "unused"), "latest", func(_, o order) order { return o }).
		ToStream().To("latest")

	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

func TestDSLShape(t *testing.T) {
	var n int
	topo := shop(t, &n)
	subs := topo.Subtopologies()
	type shape struct {
		Sources, Sinks, Repartition []string
		Stores                      []string
	}
	var got []shape
	for _, s := range subs {
		var stores []string
		for _, st := range s.Stores {
			stores = append(stores, st.Name)
		}
		got = append(got, shape{s.Sources, s.Sinks, s.Repartition, stores})
	}
	want := []shape{
		{[]string{"orders"}, []string{"customer-totals", "latest", "shop-by-item-repartition", "shop-by-product-repartition"},
			[]string{"shop-by-item-repartition", "shop-by-product-repartition"}, []string{"latest", "totals"}},
		{[]string{"shop-by-product-repartition"}, []string{"product-max"}, []string{"shop-by-product-repartition"}, []string{"max-amount"}},
		{[]string{"shop-by-item-repartition"}, []string{"item-counts"}, []string{"shop-by-item-repartition"}, []string{"item-counts"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("subtopologies:\n%+v\nwant\n%+v\n%s", got, want, topo)
	}
	golden(t, "shop.txt", topo.String())
}

// TestDSLExact runs the shop over random orders and compares every output
// with a naive computation.
func TestDSLExact(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 2))
	customers := []string{"ann", "bob", "cy", "dee", "eve", "fay", "gus"}
	products := []string{"apple", "pear", "fig", "kiwi"}
	for round := range 10 {
		var peeked int
		topo := shop(t, &peeked)
		n := int32(1 + rng.IntN(5))
		d := newDriver(t, topo, map[string]int32{"orders": n, "customer-totals": n,
			"product-max": 2, "item-counts": 3, "latest": 1})
		totals := map[string][]int64{} // running values in order, per key
		maxes := map[string][]int64{}
		counts := map[string][]int64{}
		latest := map[string]order{}
		valid := 0
		for range rng.IntN(200) {
			o := order{Customer: customers[rng.IntN(len(customers))], Product: products[rng.IntN(len(products))],
				Amount: rng.Int64N(100) - 10}
			for range rng.IntN(3) {
				o.Items = append(o.Items, products[rng.IntN(len(products))])
			}
			value, _ := JSON[order]{}.Encode(o)
			d.input("orders", Partition([]byte(o.Customer), n), []byte(o.Customer), value)
			if o.Amount <= 0 {
				continue
			}
			valid++
			latest[o.Customer] = o
			appendRunning(totals, o.Customer, func(sum int64, _ bool) int64 { return sum + o.Amount })
			appendRunning(maxes, o.Product, func(m int64, ok bool) int64 {
				if !ok {
					return o.Amount
				}
				return max(m, o.Amount)
			})
			for _, it := range o.Items {
				appendRunning(counts, it, func(c int64, _ bool) int64 { return c + 1 })
			}
		}
		if err := d.run(); err != nil {
			t.Fatalf("seed %d round %d: %v", seed, round, err)
		}
		if peeked != valid {
			t.Errorf("seed %d round %d: Foreach saw %d orders, want %d", seed, round, peeked, valid)
		}
		for _, c := range []struct {
			topic string
			want  map[string][]int64
		}{{"customer-totals", totals}, {"product-max", maxes}, {"item-counts", counts}} {
			got := map[string][]int64{}
			for p := range d.parts[c.topic] {
				for _, r := range d.records(c.topic, p) {
					v, err := Int64.Decode(r.Value)
					if err != nil {
						t.Fatal(err)
					}
					got[string(r.Key)] = append(got[string(r.Key)], v)
				}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("seed %d round %d: %s:\n got %v\nwant %v", seed, round, c.topic, got, c.want)
			}
		}
		gotLatest := map[string]order{}
		for _, r := range d.records("latest", 0) {
			o, err := JSON[order]{}.Decode(r.Value)
			if err != nil {
				t.Fatal(err)
			}
			gotLatest[string(r.Key)] = o
		}
		if !reflect.DeepEqual(gotLatest, latest) {
			t.Errorf("seed %d round %d: latest:\n got %v\nwant %v", seed, round, gotLatest, latest)
		}
	}
}

func appendRunning(m map[string][]int64, k string, next func(prev int64, ok bool) int64) {
	var prev int64
	s, ok := m[k]
	if ok {
		prev = s[len(s)-1]
	}
	m[k] = append(s, next(prev, ok))
}

// GroupByKey repartitions exactly when the key may have changed.
func TestGroupByKeyRepartitions(t *testing.T) {
	for _, c := range []struct {
		name string
		op   func(Stream[string, string]) Stream[string, string]
		want bool
	}{
		{"source", func(s Stream[string, string]) Stream[string, string] { return s }, false},
		{"mapValues", func(s Stream[string, string]) Stream[string, string] {
			return MapValues(s, strings.ToUpper)
		}, false},
		{"filter+foreach+flatMapValues", func(s Stream[string, string]) Stream[string, string] {
			s = Filter(s, func(k, v string) bool { return true })
			s = Foreach(s, func(k, v string) {})
			return FlatMapValues(s, strings.Fields)
		}, false},
		{"map", func(s Stream[string, string]) Stream[string, string] {
			return Map(s, func(k, v string) (string, string) { return k, v })
		}, true},
		{"flatMap then mapValues", func(s Stream[string, string]) Stream[string, string] {
			s = FlatMap(s, func(k, v string) []KeyValue[string, string] { return []KeyValue[string, string]{{v, k}} })
			return MapValues(s, strings.ToUpper)
		}, true},
		{"selectKey", func(s Stream[string, string]) Stream[string, string] {
			return SelectKey(s, func(k, v string) string { return v })
		}, true},
		{"peek+split branch", func(s Stream[string, string]) Stream[string, string] {
			sp := Split(Peek(s, func(k, v string) {}))
			sp.Branch("empty", func(k, v string) bool { return v == "" })
			return sp.Default("rest")
		}, false},
		{"merge of sources", func(s Stream[string, string]) Stream[string, string] {
			return Merge(s, FromTopic(s.b, "in2", String, String))
		}, false},
		{"merge with a selectKey", func(s Stream[string, string]) Stream[string, string] {
			return Merge(s, SelectKey(FromTopic(s.b, "in2", String, String), func(k, v string) string { return v }))
		}, true},
		{"merge with another key codec", func(s Stream[string, string]) Stream[string, string] {
			return Merge(s, FromTopic(s.b, "in2", textCodec{}, String)).WithCodecs(String, String)
		}, true},
		{"table stream", func(s Stream[string, string]) Stream[string, string] {
			return Reduce(GroupBy(s, func(k, v string) string { return v }, String, "g"), "r",
				func(a, v string) string { return a + v }).ToStream()
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := NewBuilder("app")
			Count(GroupByKey(c.op(FromTopic(b, "in", String, String)), "k"), "n")
			topo, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			last := topo.Subtopologies()[len(topo.Subtopologies())-1]
			got := len(last.Sources) == 1 && last.Sources[0] == RepartitionTopic("app", "k")
			if got != c.want {
				t.Errorf("repartitioned = %t, want %t:\n%s", got, c.want, topo)
			}
		})
	}
}

// TestSelectKey: each record keeps its value under the key computed from
// it, and a count by the new key goes through a repartition topic.
func TestSelectKey(t *testing.T) {
	b := NewBuilder("app")
	views := FromTopic(b, "views", String, String) // user -> page
	byPage := SelectKey(views, func(user, page string) string { return page + "@" + user[:1] })
	byPage.To("by-page")
	Count(GroupByKey(byPage, "by-page"), "views-per-page").ToStream().To("counts")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if subs := topo.Subtopologies(); len(subs) != 2 || !slices.Equal(subs[1].Sources, []string{"app-by-page-repartition"}) {
		t.Fatalf("want the count after a repartition topic:\n%s", topo)
	}
	d := newDriver(t, topo, map[string]int32{"views": 3, "by-page": 2, "counts": 2})
	want, wantCounts := map[int32][]string{}, map[int32][]string{}
	n := map[string]int{}
	for i := range 30 {
		user, page := []string{"ann", "bob", "ava"}[i%3], "/p"+strconv.Itoa(i%4)
		d.input("views", Partition([]byte(user), 3), []byte(user), []byte(page))
		key := page + "@" + user[:1]
		expect(want, 2, key, page)
		n[key]++
		expect(wantCounts, 2, key, strconv.Itoa(n[key]))
	}
	if err := d.run(); err != nil {
		t.Fatal(err)
	}
	if got := outputs(d, "by-page"); !reflect.DeepEqual(got, want) {
		t.Errorf("by-page:\n got %v\nwant %v", got, want)
	}
	if got := outputs(d, "counts"); !reflect.DeepEqual(got, wantCounts) {
		t.Errorf("counts:\n got %v\nwant %v", got, wantCounts)
	}
}

// Peek calls its function with each pair, in order, and passes the pairs
// on unchanged.
func TestPeek(t *testing.T) {
	b := NewBuilder("app")
	var peeked []string
	Peek(FromTopic(b, "in", String, String), func(k, v string) { peeked = append(peeked, k+"="+v) }).To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d := newDriver(t, topo, map[string]int32{"in": 1, "out": 1})
	var want []string
	for i := range 10 {
		k, v := strconv.Itoa(i%3), strconv.Itoa(i)
		d.input("in", 0, []byte(k), []byte(v))
		want = append(want, k+"="+v)
	}
	if err := d.run(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(peeked, want) {
		t.Errorf("Peek saw %v, want %v", peeked, want)
	}
	if got := outputs(d, "out")[0]; !slices.Equal(got, want) {
		t.Errorf("out: %v, want %v", got, want)
	}
}

func TestPeekAndSelectKeyMistakes(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func(b *Builder)
		want  string
	}{
		{"nil Peek", func(b *Builder) {
			Peek(FromTopic(b, "in", String, String), nil).To("out")
		}, `Peek on the stream of fromTopic#1: nil function`},
		{"nil Foreach", func(b *Builder) {
			Foreach(FromTopic(b, "in", String, String), nil)
		}, `Foreach on the stream of fromTopic#1: nil function`},
		{"nil SelectKey", func(b *Builder) {
			SelectKey[string, string, string](FromTopic(b, "in", String, String), nil).To("out")
		}, `SelectKey on the stream of fromTopic#1: nil function`},
		{"join after SelectKey", func(b *Builder) {
			users := TableFromTopic(b, "users", "users", String, String)
			views := SelectKey(FromTopic(b, "views", String, String), func(k, v string) string { return v })
			JoinTable(views, users, func(k, v, u string) string { return u }).To("out")
		}, `the stream of selectKey#4 may have a new key (Map, FlatMap, SelectKey): Repartition it first`},
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

func TestDecodeErrors(t *testing.T) {
	b := NewBuilder("app")
	FromTopic(b, "nums", JSON[int]{}, Int64).To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key, value string
		want       string
	}{
		{"1", "abc", `topology: task 0_2: record nums[2]@1: node "fromTopic#1": topology: cannot decode: value of nums[2]@1: not a decimal int64: "abc"`},
		{"{", "1", `topology: task 0_2: record nums[2]@1: node "fromTopic#1": topology: cannot decode: key of nums[2]@1: unexpected end of JSON input`},
	} {
		d := newDriver(t, topo, map[string]int32{"nums": 3, "out": 1})
		d.input("nums", 2, []byte("7"), []byte("7"))
		d.input("nums", 2, []byte(c.key), []byte(c.value))
		err := d.run()
		var pe *ProcessError
		if !errors.Is(err, ErrDecode) || !errors.As(err, &pe) {
			t.Fatalf("run() = %v, want a ProcessError wrapping ErrDecode", err)
		}
		if pe.Topic != "nums" || pe.Partition != 2 || pe.Offset != 1 || pe.TaskID != "0_2" {
			t.Errorf("ProcessError = %+v", pe)
		}
		if err.Error() != c.want {
			t.Errorf("error\n %s\nwant\n %s", err, c.want)
		}
		if got := len(d.records("out", 0)); got != 1 {
			t.Errorf("%d records out, want the first one only", got)
		}
	}
}

// A stored value that does not decode is a decode error naming the store.
func TestStoreDecodeError(t *testing.T) {
	b := NewBuilder("app")
	Count(GroupByKey(FromTopic(b, "in", String, String), "k"), "n").ToStream().To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d := newDriver(t, topo, map[string]int32{"in": 1, "out": 1})
	d.input("in", 0, []byte("w"), nil)
	if err := d.run(); err != nil {
		t.Fatal(err)
	}
	d.store("0_0", "n").Put([]byte("w"), []byte("one"))
	d.input("in", 0, []byte("w"), nil)
	err = d.run()
	want := `topology: task 0_0: record in[0]@1: node "count#2": topology: cannot decode: store "n": value of key "w": not a decimal int64: "one"`
	if !errors.Is(err, ErrDecode) || err.Error() != want {
		t.Errorf("error\n %v\nwant\n %s", err, want)
	}
}

// Store and Send failures from the runtime come back from Process, naming
// the node.
func TestRuntimeErrors(t *testing.T) {
	b := NewBuilder("app")
	Count(GroupByKey(FromTopic(b, "in", String, String), "k"), "n").ToStream().To("out")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	proc := topo.Subtopologies()[0].NewProcessor("0_0", 0)
	for _, c := range []struct {
		ctx  *failCtx
		want string
	}{
		{&failCtx{}, `node "count#2": the runtime gave no store "n"`},
		{&failCtx{store: &failStore{}}, `node "count#2": store "n": get: disk on fire`},
		{&failCtx{store: &failStore{getOK: true}}, `node "count#2": store "n": put: disk on fire`},
		{&failCtx{store: &MemStore{}}, `node "to#4": send to "out": broker on fire`},
	} {
		err := proc.Process(c.ctx, Record{Topic: "in", Key: []byte("k")})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Process = %v, want %q", err, c.want)
		}
	}
}

type failCtx struct{ store Store }

func (c *failCtx) TaskID() string   { return "0_0" }
func (c *failCtx) Partition() int32 { return 0 }
func (c *failCtx) Store(string) Store {
	return c.store
}
func (c *failCtx) Send(string, []byte, []byte) error { return errors.New("broker on fire") }

type failStore struct{ getOK bool }

func (s *failStore) Get([]byte) ([]byte, bool, error) {
	if s.getOK {
		return nil, false, nil
	}
	return nil, false, errors.New("disk on fire")
}
func (s *failStore) Put([]byte, []byte) error { return errors.New("disk on fire") }
func (s *failStore) Delete([]byte) error      { return errors.New("disk on fire") }
func (s *failStore) Iterate([]byte, []byte, func(k, v []byte) error) error {
	return errors.New("disk on fire")
}

func TestCodecs(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 42, -9223372036854775808, 9223372036854775807} {
		b, _ := Int64.Encode(v)
		if string(b) != strconv.FormatInt(v, 10) {
			t.Errorf("Int64.Encode(%d) = %q", v, b)
		}
		if got, err := Int64.Decode(b); got != v || err != nil {
			t.Errorf("Int64.Decode(%q) = %d, %v", b, got, err)
		}
	}
	for _, bad := range []string{"", " 1", "1 ", "1.5", "0x10", "9223372036854775808", strings.Repeat("1", 1000)} {
		if _, err := Int64.Decode([]byte(bad)); err == nil {
			t.Errorf("Int64.Decode(%.30q) did not fail", bad)
		}
	}
	if b, _ := Bytes.Decode(nil); b != nil {
		t.Errorf("Bytes.Decode(nil) = %q, want nil", b)
	}
	in := []byte("abc")
	out, _ := Bytes.Decode(in)
	in[0] = 'X'
	if string(out) != "abc" {
		t.Errorf("Bytes.Decode kept its argument")
	}
	if s, _ := String.Decode([]byte("héllo")); s != "héllo" {
		t.Errorf("String.Decode = %q", s)
	}
	o := order{Customer: "ann", Amount: 3, Items: []string{"fig"}}
	b, _ := JSON[order]{}.Encode(o)
	if got, err := (JSON[order]{}).Decode(b); err != nil || !reflect.DeepEqual(got, o) {
		t.Errorf("JSON round trip: %+v, %v", got, err)
	}
	if _, err := (JSON[order]{}).Decode([]byte(`{"amount":"x"}`)); err == nil {
		t.Error("JSON decoded a bad order")
	}
}

func FuzzTopologyInt64Codec(f *testing.F) {
	for _, s := range []string{"0", "-1", "42", "+7", "9223372036854775807", "x", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := Int64.Decode(b)
		if err != nil {
			return
		}
		enc, _ := Int64.Encode(v)
		if v2, err := Int64.Decode(enc); err != nil || v2 != v {
			t.Fatalf("%q decoded to %d, re-encoded as %q, decoded to %d, %v", b, v, enc, v2, err)
		}
	})
}

// Any bytes are a line wordcount processes without error, emitting one
// count per field.
func FuzzTopologyWordCountLine(f *testing.F) {
	for _, s := range []string{"", "a b a", "\xff\xfe x", "日本 語\u3000語", "\x00"} {
		f.Add([]byte(s))
	}
	topo, err := WordCount("wc", "in", "out")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		d := newDriver(t, topo, map[string]int32{"in": 1, "out": 1})
		d.input("in", 0, nil, line)
		if err := d.run(); err != nil {
			t.Fatal(err)
		}
		if got, want := len(d.records("out", 0)), len(strings.Fields(string(line))); got != want {
			t.Fatalf("%d counts for %d words", got, want)
		}
	})
}

// TestNilFunctions: every operation given a nil function fails Build with
// an error naming the operation, instead of panicking at the first record.
func TestNilFunctions(t *testing.T) {
	in := func(b *Builder) Stream[string, string] { return FromTopic(b, "in", String, String) }
	grouped := func(b *Builder) Grouped[string, string] { return GroupByKey(in(b), "g") }
	table := func(b *Builder) Table[string, string] { return TableFromTopic(b, "t", "t", String, String) }
	byTable := func(b *Builder) GroupedTable[string, string] {
		return GroupTableBy(table(b), func(k, v string) (string, string) { return v, k }, String, String, "r")
	}
	windowed := func(b *Builder) TimeWindowed[string, string] {
		return WindowedBy(grouped(b), TumblingWindows(time.Minute))
	}
	init := func() string { return "" }
	for _, c := range []struct {
		want  string
		build func(b *Builder)
	}{
		{"Map on", func(b *Builder) { Map[string, string, string, string](in(b), nil).To("out") }},
		{"MapValues on", func(b *Builder) { MapValues[string, string, string](in(b), nil).To("out") }},
		{"Filter on", func(b *Builder) { Filter(in(b), nil).To("out") }},
		{"FlatMap on", func(b *Builder) { FlatMap[string, string, string, string](in(b), nil).To("out") }},
		{"FlatMapValues on", func(b *Builder) { FlatMapValues[string, string, string](in(b), nil).To("out") }},
		{"GroupBy on", func(b *Builder) { Count(GroupBy[string, string, string](in(b), nil, String, "g"), "c") }},
		{`Aggregate into store "a" on`, func(b *Builder) { Aggregate(grouped(b), "a", init, nil, String) }},
		{`Aggregate into store "a" on`, func(b *Builder) {
			Aggregate(grouped(b), "a", nil, func(k, v, a string) string { return a }, String)
		}},
		{`Reduce into store "r" on`, func(b *Builder) { Reduce(grouped(b), "r", nil) }},
		{"JoinTable on", func(b *Builder) { JoinTable[string, string, string, string](in(b), table(b), nil).To("out") }},
		{"LeftJoinTable on", func(b *Builder) {
			LeftJoinTable[string, string, string, string](in(b), table(b), nil).To("out")
		}},
		{"JoinTables on", func(b *Builder) {
			JoinTables[string, string, string, string](table(b), TableFromTopic(b, "u", "u", String, String), nil, String)
		}},
		{"LeftJoinTables on", func(b *Builder) {
			LeftJoinTables[string, string, string, string](table(b), TableFromTopic(b, "u", "u", String, String), nil, String)
		}},
		{"GroupTableBy on", func(b *Builder) {
			TableReduce(GroupTableBy[string, string, string, string](table(b), nil, String, String, "r"), "s",
				func(a, v string) string { return a }, func(a, v string) string { return a })
		}},
		{`TableAggregate into store "s" on`, func(b *Builder) {
			TableAggregate(byTable(b), "s", init, nil, func(k, v, a string) string { return a }, String)
		}},
		{`TableReduce into store "s" on`, func(b *Builder) {
			TableReduce(byTable(b), "s", func(a, v string) string { return a }, nil)
		}},
		{`WindowAggregate into store "w" on`, func(b *Builder) { WindowAggregate(windowed(b), "w", init, nil, String) }},
		{`WindowReduce into store "w" on`, func(b *Builder) { WindowReduce(windowed(b), "w", nil) }},
		{`JoinStreams "j" on`, func(b *Builder) {
			JoinStreams[string, string, string, string](in(b), FromTopic(b, "in2", String, String),
				JoinWithin(time.Minute), "j", nil).To("out")
		}},
	} {
		b := NewBuilder("app")
		c.build(b)
		topo, err := b.Build()
		if topo != nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) ||
			!strings.Contains(err.Error(), "nil function") {
			t.Errorf("Build() = %v, %v\nwant an error saying %s ...: nil function", topo, err, c.want)
		}
	}
}

package topology

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// globalCtx is a Context with task stores and global stores, as the
// runtime gives them: Store finds a task store first, then a global one.
type globalCtx struct {
	stores  map[string]*MemStore
	globals map[string]*MemStore
	sent    []string // "topic key=value"
}

func (c *globalCtx) TaskID() string   { return "0_0" }
func (c *globalCtx) Partition() int32 { return 0 }

func (c *globalCtx) Store(name string) Store {
	if s, ok := c.stores[name]; ok {
		return s
	}
	if s, ok := c.globals[name]; ok {
		return s
	}
	return nil
}

func (c *globalCtx) Send(topic string, key, value []byte) error {
	c.sent = append(c.sent, topic+" "+string(key)+"="+string(value))
	return nil
}

// ordersTopology joins orders ("customer:item", keyed by order id) with
// the global table of customers (name by customer id), inner and left, to
// two topics.
func ordersTopology(t *testing.T) *Topology {
	t.Helper()
	b := NewBuilder("shop")
	customers := FromGlobalTopic(b, "customers", String, String, "customers")
	orders := FromTopic(b, "orders", String, String)
	customerOf := func(_ string, v string) string { c, _, _ := strings.Cut(v, ":"); return c }
	JoinGlobal(orders, customers, customerOf, func(id, order, name string) string {
		_, item, _ := strings.Cut(order, ":")
		return name + " bought " + item
	}).To("inner")
	LeftJoinGlobal(orders, customers, customerOf, func(id, order, name string, found bool) string {
		if !found {
			return "unknown customer (" + name + ")"
		}
		return name
	}).To("left")
	top, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return top
}

func TestJoinGlobal(t *testing.T) {
	top := ordersTopology(t)
	if got, want := top.GlobalStores(), []GlobalStoreSpec{{Name: "customers", Topic: "customers"}}; !slices.Equal(got, want) {
		t.Fatalf("GlobalStores = %v, want %v", got, want)
	}
	subs := top.Subtopologies()
	if len(subs) != 1 || subs[0].Stateful() || len(subs[0].Stores) != 0 {
		t.Fatalf("subtopologies %+v: want one, stateless (a global store belongs to none)", subs)
	}
	customers := &MemStore{}
	ctx := &globalCtx{globals: map[string]*MemStore{"customers": customers}}
	proc := subs[0].NewProcessor("0_0", 0)
	order := func(id, value string) []string {
		t.Helper()
		ctx.sent = nil
		if err := proc.Process(ctx, Record{Topic: "orders", Key: []byte(id), Value: []byte(value)}); err != nil {
			t.Fatal(err)
		}
		return ctx.sent
	}
	check := func(got []string, want ...string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("sent %q, want %q", got, want)
		}
	}
	// Absent: the inner join drops the order, the left join keeps it.
	check(order("o1", "c1:tea"), "left o1=unknown customer ()")
	// The key looked up comes from keyOf (the value), not the order's key.
	if err := customers.Put([]byte("c1"), []byte("Ana")); err != nil {
		t.Fatal(err)
	}
	if err := customers.Put([]byte("o2"), []byte("not a customer")); err != nil {
		t.Fatal(err)
	}
	check(order("o2", "c1:jam"), "inner o2=Ana bought jam", "left o2=Ana")
	// An update of the table is seen by the next record.
	if err := customers.Put([]byte("c1"), []byte("Ana B.")); err != nil {
		t.Fatal(err)
	}
	check(order("o3", "c1:tea"), "inner o3=Ana B. bought tea", "left o3=Ana B.")
	// A deleted entry is absent again.
	if err := customers.Delete([]byte("c1")); err != nil {
		t.Fatal(err)
	}
	check(order("o4", "c1:tea"), "left o4=unknown customer ()")
	// Other keys are not mixed up.
	if err := customers.Put([]byte("c2"), []byte("Bo")); err != nil {
		t.Fatal(err)
	}
	check(order("o5", "c2:pen"), "inner o5=Bo bought pen", "left o5=Bo")
	check(order("o6", "c3:pen"), "left o6=unknown customer ()")
}

func TestJoinGlobalErrors(t *testing.T) {
	b := NewBuilder("app")
	g := FromGlobalTopic(b, "rates", String, Int64, "rates")
	JoinGlobal(FromTopic(b, "in", String, String), g, func(k, _ string) string { return k },
		func(_, v string, r int64) string { return v }).To("out")
	top, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	s := top.Subtopologies()[0]
	proc := s.NewProcessor("0_0", 0)
	rates := &MemStore{}
	if err := rates.Put([]byte("x"), []byte("not a number")); err != nil {
		t.Fatal(err)
	}
	// A stored value that does not decode is an error naming the store.
	err = proc.Process(&globalCtx{globals: map[string]*MemStore{"rates": rates}}, Record{Topic: "in", Key: []byte("x"), Value: []byte("v")})
	var pe *ProcessError
	if !errors.As(err, &pe) || !errors.Is(err, ErrDecode) || !strings.Contains(err.Error(), `global store "rates"`) {
		t.Errorf("undecodable stored value: got %v, want a ProcessError wrapping ErrDecode naming the store", err)
	}
	// A runtime that gives no such store: an error, not a panic.
	err = proc.Process(&globalCtx{}, Record{Topic: "in", Key: []byte("x"), Value: []byte("v")})
	if err == nil || !strings.Contains(err.Error(), `no global store "rates"`) {
		t.Errorf("missing global store: got %v", err)
	}
}

func TestGlobalBuildErrors(t *testing.T) {
	key := func(k, _ string) string { return k }
	join := func(_, v, _ string) string { return v }
	cases := []struct {
		name  string
		build func(b *Builder)
		want  []string
	}{
		{"topic also read by a source", func(b *Builder) {
			g := FromGlobalTopic(b, "ref", String, String, "ref")
			JoinGlobal(FromTopic(b, "ref", String, String), g, key, join).To("out")
		}, []string{`topic "ref" is read by source "fromTopic#1" and held by global store "ref"`}},
		{"store name twice", func(b *Builder) {
			g := FromGlobalTopic(b, "ref1", String, String, "ref")
			FromGlobalTopic(b, "ref2", String, String, "ref")
			JoinGlobal(FromTopic(b, "in", String, String), g, key, join).To("out")
		}, []string{`global store "ref" is made twice`}},
		{"topic held twice", func(b *Builder) {
			g := FromGlobalTopic(b, "ref", String, String, "a")
			FromGlobalTopic(b, "ref", String, String, "b")
			JoinGlobal(FromTopic(b, "in", String, String), g, key, join).To("out")
		}, []string{`topic "ref" is held by two global stores, "a" and "b"`}},
		{"name of a task store", func(b *Builder) {
			g := FromGlobalTopic(b, "ref", String, String, "counts")
			in := JoinGlobal(FromTopic(b, "in", String, String), g, key, join)
			Count(GroupByKey(in, "x"), "counts").ToStream().To("out")
		}, []string{`store name "counts" is used by a global store and by a store of processors`}},
		{"bad names", func(b *Builder) {
			FromGlobalTopic(b, "a topic", String, String, "ok")
			FromGlobalTopic(b, "ok", String, String, ".hidden")
			FromGlobalTopic(b, "ok2", String, String, "a/b")
			FromGlobalTopic(b, "ok3", String, String, "")
			FromTopic(b, "in", String, String).To("out")
		}, []string{`topic name "a topic"`, `store name ".hidden"`, `store name "a/b" has '/'`, `store name ""`}},
		{"nil codec and functions", func(b *Builder) {
			FromGlobalTopic[string, string](b, "ref", nil, String, "ref")
			g := FromGlobalTopic(b, "ref2", String, String, "ref2")
			in := FromTopic(b, "in", String, String)
			JoinGlobal(in, g, nil, join)
			JoinGlobal[string, string, string, string, string](in, g, key, nil)
			LeftJoinGlobal[string, string, string, string, string](in, g, key, nil)
			in.To("out")
		}, []string{`FromGlobalTopic("ref"): nil codec`, `joinGlobal with global store "ref2": nil key function`,
			`JoinGlobal with global store "ref2": nil join function`, `LeftJoinGlobal with global store "ref2": nil join function`}},
		{"zero or foreign table", func(b *Builder) {
			in := FromTopic(b, "in", String, String)
			JoinGlobal(in, GlobalTable[string, string]{}, key, join)
			other := FromGlobalTopic(NewBuilder("other"), "ref", String, String, "ref")
			JoinGlobal(in, other, key, join)
			in.To("out")
		}, []string{`joinGlobal: a zero GlobalTable`, `joinGlobal: global store "ref" belongs to another Builder`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := NewBuilder("app")
			c.build(b)
			_, err := b.Build()
			if err == nil {
				t.Fatal("Build succeeded")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid: %v", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// Two streams joining one global table stay two subtopologies: the
// global store does not join them, as a task store would.
func TestGlobalStoreJoinsNoSubtopologies(t *testing.T) {
	b := NewBuilder("app")
	g := FromGlobalTopic(b, "ref", String, String, "ref")
	key := func(k, _ string) string { return k }
	join := func(_, v, r string) string { return v + r }
	JoinGlobal(FromTopic(b, "a", String, String), g, key, join).To("out-a")
	LeftJoinGlobal(FromTopic(b, "b", String, String), g, key, func(_, v, r string, _ bool) string { return v + r }).To("out-b")
	top, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	subs := top.Subtopologies()
	if len(subs) != 2 {
		t.Fatalf("%d subtopologies, want 2:\n%s", len(subs), top)
	}
	for _, s := range subs {
		if s.Stateful() {
			t.Errorf("subtopology %d is stateful: %v", s.ID, s.Stores)
		}
	}
	if !strings.Contains(top.String(), "global store ref (every partition of ref)") {
		t.Errorf("String does not list the global store:\n%s", top)
	}
}

// Processor-API nodes read every global store through NodeContext.Store,
// without connecting to it; other stores they are not connected to stay
// hidden.
func TestAddGlobalStore(t *testing.T) {
	b := NewBuilder("app")
	b.AddGlobalStore("rates", "rates")
	b.AddSource("in", "in")
	b.AddProcessor("price", ProcessorFunc(func(ctx NodeContext, rec Record) error {
		if ctx.Store("other") != nil {
			return errors.New("a store the node is not connected to is visible")
		}
		st := ctx.Store("rates")
		if st == nil {
			return errors.New("no global store rates")
		}
		v, ok, err := st.Get(rec.Key)
		if err != nil || !ok {
			return err
		}
		return ctx.Forward(Record{Key: rec.Key, Value: append(append([]byte{}, rec.Value...), v...)})
	}), "in")
	b.AddSink("out", "out", "price")
	top, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if got := top.GlobalStores(); !slices.Equal(got, []GlobalStoreSpec{{Name: "rates", Topic: "rates"}}) {
		t.Errorf("GlobalStores = %v", got)
	}
	rates := &MemStore{}
	if err := rates.Put([]byte("eur"), []byte("@1.1")); err != nil {
		t.Fatal(err)
	}
	ctx := &globalCtx{globals: map[string]*MemStore{"rates": rates, "other": {}}}
	proc := top.Subtopologies()[0].NewProcessor("0_0", 0)
	for _, k := range []string{"eur", "usd"} {
		if err := proc.Process(ctx, Record{Topic: "in", Key: []byte(k), Value: []byte("10")}); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"out eur=10@1.1"}; !slices.Equal(ctx.sent, want) {
		t.Errorf("sent %q, want %q", ctx.sent, want)
	}
	b = NewBuilder("app")
	b.AddGlobalStore(".bad", "ref")
	b.AddSource("in", "in")
	b.AddSink("out", "out", "in")
	if _, err := b.Build(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `store name ".bad"`) {
		t.Errorf("Build: %v, want an error naming the store", err)
	}
}

// TestJoinGlobalMatchesModel interleaves random changes of the global
// table (puts and deletes, applied to its store as the runtime's reader
// does) with orders, and compares both joins' output with a map.
func TestJoinGlobalMatchesModel(t *testing.T) {
	top := ordersTopology(t)
	for seed := range uint64(100) {
		rng := rand.New(rand.NewPCG(seed, 9))
		ctx := &globalCtx{stores: map[string]*MemStore{}, globals: map[string]*MemStore{"customers": {}}}
		proc := top.Subtopologies()[0].NewProcessor("0_0", 0)
		table := map[string]string{}
		var want []string
		for i := range 200 {
			c := fmt.Sprintf("c%d", rng.IntN(5))
			switch rng.IntN(4) {
			case 0:
				name := fmt.Sprintf("name%d", rng.IntN(100))
				table[c] = name
				ctx.globals["customers"].Put([]byte(c), []byte(name))
			case 1:
				delete(table, c)
				ctx.globals["customers"].Delete([]byte(c))
			default:
				id, item := fmt.Sprintf("o%d", i), fmt.Sprintf("item%d", rng.IntN(9))
				if name, ok := table[c]; ok {
					want = append(want, "inner "+id+"="+name+" bought "+item, "left "+id+"="+name)
				} else {
					want = append(want, "left "+id+"=unknown customer ()")
				}
				err := proc.Process(ctx, Record{Topic: "orders", Offset: int64(i), Key: []byte(id), Value: []byte(c + ":" + item)})
				if err != nil {
					t.Fatalf("seed %d: %v", seed, err)
				}
			}
		}
		if !slices.Equal(ctx.sent, want) {
			t.Fatalf("seed %d:\n got %v\nwant %v", seed, ctx.sent, want)
		}
	}
}

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

// tableApp joins a stream of page views with a table of users' regions
// and a table of their plans, and counts users per region.
func tableApp(t *testing.T) *Topology {
	t.Helper()
	b := NewBuilder("app")
	users := TableFromTopic(b, "users", "users", String, String)
	plans := TableFromTopic(b, "plans", "plans", String, String)
	views := FromTopic(b, "views", String, String)
	JoinTable(views, users, func(_ string, page, region string) string { return page + "@" + region }).
		WithCodecs(String, String).To("enriched")
	LeftJoinTable(views, users, func(_ string, page, region string, found bool) string {
		if !found {
			region = "?"
		}
		return page + "@" + region
	}).WithCodecs(String, String).To("enriched-left")
	inner := JoinTables(users, plans, func(_ string, region, plan string) string { return region + "/" + plan }, String)
	inner.ToTopic("user-plans")
	left := LeftJoinTables(users, plans, func(_ string, region, plan string, found bool) string {
		if !found {
			plan = "none"
		}
		return region + "/" + plan
	}, String)
	left.ToTopic("user-plans-left")
	// How many users have each (region, plan) pair: retractions of join
	// results.
	byValue := func(user, pair string) (string, string) { return pair, user }
	TableCount(GroupTableBy(inner, byValue, String, String, "by-pair"), "pair-counts").ToStream().To("pair-counts")
	TableCount(GroupTableBy(left, byValue, String, String, "by-pair-left"), "pair-left-counts").ToStream().To("pair-left-counts")
	// Each row's value in its group is "+user", so a group's reduction is
	// "+u1+u2..." and taking a user out removes its "+user".
	byRegion := GroupTableBy(users, func(user, region string) (string, string) { return region, "+" + user }, String, String, "by-region")
	TableCount(byRegion, "region-counts").ToStream().To("region-counts")
	TableReduce(byRegion, "region-users",
		func(agg, u string) string { return agg + u },
		func(agg, u string) string { return strings.Replace(agg, u, "", 1) }).ToStream().To("region-users")
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return topo
}

// tableModel is the reference: maps, and the definitions of the joins
// and of the count applied to them, each output kept as a sequence per
// key.
type tableModel struct {
	users, plans map[string]string
	counts       map[string]int64
	pairs        map[string]map[string]int64    // count topic -> pair -> users
	out          map[string]map[string][]string // topic -> key -> values ("<nil>": tombstone)
}

func (m *tableModel) emit(topic, key, value string) {
	if m.out[topic] == nil {
		m.out[topic] = map[string][]string{}
	}
	m.out[topic][key] = append(m.out[topic][key], value)
}

// pair is what the inner and left joins of users and plans hold for user.
func (m *tableModel) pair(user string) (inner, left string) {
	r, ok := m.users[user]
	if !ok {
		return "", ""
	}
	p, ok := m.plans[user]
	if !ok {
		return "", r + "/none"
	}
	return r + "/" + p, r + "/" + p
}

// update applies a change to table (nil: delete) and emits what each
// output gets.
func (m *tableModel) update(table, user string, value *string) {
	tab := m.users
	if table == "plans" {
		tab = m.plans
	}
	old, had := tab[user]
	if value == nil && !had {
		return // deleting a missing key changes nothing
	}
	innerBefore, leftBefore := m.pair(user)
	if value == nil {
		delete(tab, user)
	} else {
		tab[user] = *value
	}
	innerAfter, leftAfter := m.pair(user)
	for _, o := range []struct{ topic, counts, before, after string }{
		{"user-plans", "pair-counts", innerBefore, innerAfter}, {"user-plans-left", "pair-left-counts", leftBefore, leftAfter},
	} {
		switch {
		case o.after != "":
			m.emit(o.topic, user, o.after)
		case o.before != "":
			m.emit(o.topic, user, "<nil>")
		}
		if m.pairs[o.counts] == nil {
			m.pairs[o.counts] = map[string]int64{}
		}
		if o.before != "" {
			m.pairs[o.counts][o.before]--
			m.emit(o.counts, o.before, fmt.Sprint(m.pairs[o.counts][o.before]))
		}
		if o.after != "" {
			m.pairs[o.counts][o.after]++
			m.emit(o.counts, o.after, fmt.Sprint(m.pairs[o.counts][o.after]))
		}
	}
	if table == "users" {
		if had {
			m.counts[old]--
			m.emit("region-counts", old, fmt.Sprint(m.counts[old]))
		}
		if value != nil {
			m.counts[*value]++
			m.emit("region-counts", *value, fmt.Sprint(m.counts[*value]))
		}
	}
}

func (m *tableModel) view(user, page string) {
	if r, ok := m.users[user]; ok {
		m.emit("enriched", user, page+"@"+r)
		m.emit("enriched-left", user, page+"@"+r)
	} else {
		m.emit("enriched-left", user, page+"@?")
	}
}

// TestTablesMatchModel drives random table updates, deletes and views
// through the joins and the table aggregations, on two partitions, and
// compares every output's sequence per key with the model's. The region
// members (TableReduce with a subtractor) are checked at the end: each
// region lists exactly its users.
func TestTablesMatchModel(t *testing.T) {
	topo := tableApp(t)
	for seed := range uint64(100) {
		rng := rand.New(rand.NewPCG(seed, 5))
		d := newDriver(t, topo, map[string]int32{"users": 2, "plans": 2, "views": 2, "enriched": 2, "enriched-left": 2,
			"user-plans": 2, "user-plans-left": 2, "region-counts": 2, "region-users": 2, "pair-counts": 2, "pair-left-counts": 2})
		m := &tableModel{users: map[string]string{}, plans: map[string]string{}, counts: map[string]int64{},
			pairs: map[string]map[string]int64{}, out: map[string]map[string][]string{}}
		for range 150 {
			user := fmt.Sprintf("u%d", rng.IntN(6))
			p := Partition([]byte(user), 2)
			switch op := rng.IntN(10); {
			case op < 3:
				v := []string{"eu", "us", "asia"}[rng.IntN(3)]
				m.update("users", user, &v)
				d.input("users", p, []byte(user), []byte(v))
			case op < 5:
				v := []string{"free", "pro"}[rng.IntN(2)]
				m.update("plans", user, &v)
				d.input("plans", p, []byte(user), []byte(v))
			case op < 6:
				table := []string{"users", "plans"}[rng.IntN(2)]
				m.update(table, user, nil)
				d.input(table, p, []byte(user), nil)
			default:
				page := fmt.Sprintf("/p%d", rng.IntN(9))
				m.view(user, page)
				d.input("views", p, []byte(user), []byte(page))
			}
			if err := d.run(); err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
		}
		for _, topic := range []string{"enriched", "enriched-left", "user-plans", "user-plans-left", "region-counts", "pair-counts", "pair-left-counts"} {
			got := map[string][]string{}
			for p := range int32(2) {
				for _, r := range d.records(topic, p) {
					v := string(r.Value)
					if r.Value == nil {
						v = "<nil>"
					}
					got[string(r.Key)] = append(got[string(r.Key)], v)
				}
			}
			want := m.out[topic]
			if want == nil {
				want = map[string][]string{}
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("seed %d: %s:\n got %v\nwant %v", seed, topic, got, want)
			}
		}
		members := map[string][]string{}
		for u, r := range m.users {
			members[r] = append(members[r], u)
		}
		for p := range int32(2) {
			last := map[string]string{}
			for _, r := range d.records("region-users", p) {
				last[string(r.Key)] = string(r.Value)
			}
			for region, agg := range last {
				got := strings.FieldsFunc(agg, func(c rune) bool { return c == '+' })
				slices.Sort(got)
				want := members[region]
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Fatalf("seed %d: region %s lists %v, want %v", seed, region, got, want)
				}
			}
		}
	}
}

// TestTableStoreIsTheTopic: a table's store holds each record's key and
// value bytes as they are on the topic, and a tombstone deletes the key,
// so that restoring it from the topic gives the same store.
func TestTableStoreIsTheTopic(t *testing.T) {
	topo := tableApp(t)
	var users *Subtopology
	for _, s := range topo.Subtopologies() {
		if slices.Contains(s.Sources, "users") {
			users = &s
		}
	}
	if users == nil {
		t.Fatal("no subtopology reads users")
	}
	spec := users.Stores[slices.IndexFunc(users.Stores, func(s StoreSpec) bool { return s.Name == "users" })]
	if !spec.Source || spec.Changelog != "users" {
		t.Fatalf("users store: %+v, want the topic users as its changelog", spec)
	}
	if !slices.Contains(users.Sources, "views") || !slices.Contains(users.Sources, "plans") {
		t.Fatalf("the joins must put views, users and plans in one subtopology: %v", users.Sources)
	}
	d := newDriver(t, topo, map[string]int32{"users": 1, "plans": 1, "views": 1, "enriched": 1, "enriched-left": 1,
		"user-plans": 1, "user-plans-left": 1, "region-counts": 1, "region-users": 1, "pair-counts": 1, "pair-left-counts": 1})
	d.input("users", 0, []byte("ana"), []byte("eu"))
	d.input("users", 0, []byte("bo"), []byte("us"))
	d.input("users", 0, []byte("ana"), nil)
	d.input("users", 0, nil, []byte("keyless"))
	if err := d.run(); err != nil {
		t.Fatal(err)
	}
	st := d.store(users.TaskID(0), "users")
	if got := st.Keys(); !slices.Equal(got, []string{"bo"}) {
		t.Fatalf("store keys %v", got)
	}
	if v, _, _ := st.Get([]byte("bo")); string(v) != "us" {
		t.Fatalf("bo = %q", v)
	}
}

func TestTableMistakes(t *testing.T) {
	for _, c := range []struct {
		name  string
		build func(b *Builder)
		want  string
	}{
		{"join after Map", func(b *Builder) {
			users := TableFromTopic(b, "users", "users", String, String)
			views := Map(FromTopic(b, "views", String, String), func(k, v string) (string, string) { return v, k })
			JoinTable(views, users, func(_, a, b string) string { return a + b }).To("out")
		}, `joinTable with table "users": the stream of map#4 may have a new key (Map, FlatMap, SelectKey): Repartition it first`},
		{"join a windowed table", func(b *Builder) {
			views := FromTopic(b, "views", String, String)
			win := WindowCount(WindowedBy(GroupByKey(views, "g"), TumblingWindows(time.Minute)), "per-minute")
			other := FromTopic(b, "other", WindowedCodec(String, time.Minute), String)
			JoinTable(other, win, func(_ Windowed[string], a string, n int64) string { return a }).To("out")
		}, `table "per-minute" is windowed`},
		{"join a join", func(b *Builder) {
			users := TableFromTopic(b, "users", "users", String, String)
			plans := TableFromTopic(b, "plans", "plans", String, String)
			both := JoinTables(users, plans, func(_, a, b string) string { return a + b }, String)
			views := FromTopic(b, "views", String, String)
			JoinTable(views, both, func(_, a, b string) string { return a + b }).To("out")
		}, `has no store (a join of tables is not materialized)`},
		{"store used twice", func(b *Builder) {
			TableFromTopic(b, "users", "users", String, String).ToStream().To("a")
			TableFromTopic(b, "plans", "users", String, String).ToStream().To("b")
		}, `TableFromTopic("plans"): store "users" is already used`},
		{"nil codec", func(b *Builder) {
			TableFromTopic[string, string](b, "users", "users", String, nil).ToStream().To("a")
		}, `TableFromTopic("users"): nil codec`},
	} {
		b := NewBuilder("app")
		c.build(b)
		_, err := b.Build()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Build: %v\nwant it to say %q", c.name, err, c.want)
		}
	}
}

// TestJoinNeedsCoPartitioning: a stream joined with a table of another
// partition count cannot run; the error names both topics.
func TestJoinNeedsCoPartitioning(t *testing.T) {
	topo := tableApp(t)
	for _, s := range topo.Subtopologies() {
		if !slices.Contains(s.Sources, "views") {
			continue
		}
		_, err := s.CheckPartitions(map[string]int32{"users": 3, "plans": 3, "views": 4})
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `"plans" has 3 partitions, "views" has 4`) {
			t.Fatalf("CheckPartitions: %v", err)
		}
		return
	}
	t.Fatal("no subtopology reads views")
}

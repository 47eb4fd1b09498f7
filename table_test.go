package baton

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/counts"
	"github.com/baton-streams/baton/internal/faultnet"
	"github.com/baton-streams/baton/internal/tick"
	"github.com/baton-streams/baton/topology"
)

// TestTableJoinMoves: a table read from a compacted topic (the topic is
// its store's changelog), joined by a stream of page views and counted
// per region (a table aggregation with retractions), under exactly-once.
// A second and a third instance join while views flow (learners restore
// the table from its own topic), the first drains, users change region,
// then the third crashes. Every view is enriched exactly once with its
// user's region, and the users per region end exact.
func TestTableJoinMoves(t *testing.T) {
	h := newHarness(t, 4)
	users, views, enriched := h.tg.Name("users"), h.input, h.output
	perRegion := h.tg.Name("per-region")
	h.tg.CreateTopic(t, users, 4, true)
	h.tg.CreateTopic(t, perRegion, 4, true)
	h.build = func() (*topology.Topology, error) {
		b := topology.NewBuilder(h.appID)
		table := topology.TableFromTopic(b, users, "users", topology.String, topology.String)
		stream := topology.FromTopic(b, views, topology.String, topology.String)
		topology.JoinTable(stream, table, func(_, view, region string) string { return view + "@" + region }).To(enriched)
		byRegion := topology.GroupTableBy(table, func(user, region string) (string, string) { return region, user },
			topology.String, topology.String, "by-region")
		topology.TableCount(byRegion, "per-region").ToStream().To(perRegion)
		return b.Build()
	}
	regions := []string{"eu", "us", "asia", "africa"}
	region := map[string]string{} // the users' regions, as written
	write := func(recs ...*kgo.Record) {
		t.Helper()
		if err := h.prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var recs []*kgo.Record
	for i := range 3000 {
		u := "u" + strconv.Itoa(i)
		region[u] = regions[i%len(regions)]
		recs = append(recs, &kgo.Record{Topic: users, Key: []byte(u), Value: []byte(region[u])})
	}
	write(recs...)

	eos := []Option{WithGuarantee(ExactlyOnce), WithTransactionTimeout(3 * time.Second)}
	all := allActive(8)
	a := h.start("a", eos...)
	h.eventually(60*time.Second, "a to run every task", func() bool { return all(a) })

	// Views flow: each is "v<n>", keyed by a user, and must come out once
	// as "v<n>@<the user's region>".
	var mu sync.Mutex
	want := map[string]string{}
	ctx, stop := context.WithCancel(context.Background())
	flowed := make(chan struct{})
	go func() {
		defer close(flowed)
		n := 0
		tick.Every(ctx, 20*time.Millisecond, func() error {
			var batch []*kgo.Record
			for range 20 {
				u := "u" + strconv.Itoa((n*7919)%3000)
				v := "v" + strconv.Itoa(n)
				n++
				batch = append(batch, &kgo.Record{Topic: views, Key: []byte(u), Value: []byte(v)})
				mu.Lock()
				want[v] = v + "@" + region[u]
				mu.Unlock()
			}
			if err := h.prod.ProduceSync(context.Background(), batch...).FirstErr(); err != nil && ctx.Err() == nil {
				t.Errorf("writing views: %v", err)
			}
			return nil
		})
	}()
	b, c, cut := h.joinTwoDrainOne(a, all, "0_", eos...)
	stop()
	<-flowed
	// Every view is joined before users move: a task processes its
	// topics in the order they are fetched, so a view still waiting could
	// meet its user's new region.
	h.eventually(60*time.Second, "every view to be joined", func() bool {
		n := 0
		for _, vs := range readCommitted(t, h.brokers, enriched) {
			n += len(vs)
		}
		return n >= len(want)
	})

	// Users move while b and c run; then c crashes.
	recs = nil
	for i := 0; i < 3000; i += 7 {
		u := "u" + strconv.Itoa(i)
		region[u] = regions[(i/7)%3] // africa empties a little
		recs = append(recs, &kgo.Record{Topic: users, Key: []byte(u), Value: []byte(region[u])})
	}
	write(recs...)
	cut.Cut()
	h.eventually(60*time.Second, "b to run every task after c crashed", func() bool { o, _ := owners(b); return len(o) == 8 })

	wantCounts := map[string]string{}
	for _, r := range region {
		n, _ := strconv.Atoi(wantCounts[r])
		wantCounts[r] = strconv.Itoa(n + 1)
	}
	var got map[string][]string
	ok := tick.Until(context.Background(), 60*time.Second, 500*time.Millisecond, func() bool {
		got = readCommitted(t, h.brokers, perRegion)
		for r, n := range wantCounts {
			if vs := got[r]; len(vs) == 0 || vs[len(vs)-1] != n {
				return false
			}
		}
		return true
	})
	if !ok {
		last := map[string]string{}
		for r, vs := range got {
			last[r] = vs[len(vs)-1]
		}
		t.Fatalf("users per region: %v, want %v", last, wantCounts)
	}
	out := readCommitted(t, h.brokers, enriched)
	seen := map[string]int{}
	for _, vs := range out {
		for _, v := range vs {
			id, _, _ := strings.Cut(v, "@")
			seen[id]++
			if want[id] != v {
				t.Errorf("view %s came out as %q, want %q", id, v, want[id])
			}
		}
	}
	var wrong []string
	for id := range want {
		if seen[id] != 1 {
			wrong = append(wrong, fmt.Sprintf("%s (%d times)", id, seen[id]))
		}
	}
	if len(wrong) > 0 {
		slices.SortFunc(wrong, func(a, b string) int {
			if c := cmp.Compare(len(a), len(b)); c != 0 {
				return c
			}
			return strings.Compare(a, b)
		})
		// Ranges of ids tell a start from a move.
		var ids []int
		for _, w := range wrong {
			n, _ := strconv.Atoi(strings.TrimPrefix(strings.Fields(w)[0], "v"))
			ids = append(ids, n)
		}
		slices.Sort(ids)
		t.Logf("missing ids from %d to %d; first 40: %v", ids[0], ids[len(ids)-1], ids[:min(40, len(ids))])
		if len(wrong) > 20 {
			wrong = append(wrong[:20], fmt.Sprintf("... %d more", len(wrong)-20))
		}
		t.Errorf("views not enriched exactly once, of %d: %s", len(want), strings.Join(wrong, ", "))
	}
	t.Logf("%d views enriched, %d users moved", len(want), len(recs))
	c.app.Leave()
}

// readCommitted returns every committed record of topic, as values per
// key in offset order.
func readCommitted(t *testing.T, brokers []string, topic string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := counts.Scan(context.Background(), brokers, topic, true, func(r *kgo.Record) {
		out[string(r.Key)] = append(out[string(r.Key)], string(r.Value))
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestStreamJoinMoves: a windowed join of two streams keeps each side's
// records in a store; the stores move like the others. Under
// exactly-once, while orders flow (each a click and a buy with the same
// key, close in time), a second and a third instance join, the first
// drains and the third crashes: every order is joined exactly once.
func TestStreamJoinMoves(t *testing.T) {
	h := newHarness(t, 4)
	clicks, buys, joined := h.input, h.tg.Name("buys"), h.output
	h.tg.CreateTopic(t, buys, 4, false)
	h.build = func() (*topology.Topology, error) {
		b := topology.NewBuilder(h.appID)
		c := topology.FromTopic(b, clicks, topology.String, topology.String)
		p := topology.FromTopic(b, buys, topology.String, topology.String)
		topology.JoinStreams(c, p, topology.JoinWithin(time.Minute).Grace(time.Hour), "orders",
			func(_, click, buy string) string { return click + "&" + buy }).To(joined)
		return b.Build()
	}
	eos := []Option{WithGuarantee(ExactlyOnce), WithTransactionTimeout(3 * time.Second)}
	all := allActive(4)
	// Orders: a click, then its buy a few records later, a millisecond of
	// event time apart per record.
	orders := 0
	clock := time.Now().Add(-time.Minute) // recent: Apache Kafka's retention goes by record timestamps
	var pending []string
	produce := func(n int) error {
		var recs []*kgo.Record
		for range n {
			id := "o" + strconv.Itoa(orders)
			orders++
			clock = clock.Add(time.Millisecond)
			recs = append(recs, &kgo.Record{Topic: clicks, Key: []byte(id), Value: []byte("c-" + id), Timestamp: clock})
			pending = append(pending, id)
			if len(pending) > 5 {
				bid := pending[0]
				pending = pending[1:]
				clock = clock.Add(time.Millisecond)
				recs = append(recs, &kgo.Record{Topic: buys, Key: []byte(bid), Value: []byte("b-" + bid), Timestamp: clock})
			}
		}
		return h.prod.ProduceSync(context.Background(), recs...).FirstErr()
	}
	if err := produce(2000); err != nil {
		t.Fatal(err)
	}
	a := h.start("a", eos...)
	h.eventually(60*time.Second, "a to run every task", func() bool { return all(a) })
	ctx, stop := context.WithCancel(context.Background())
	flowed := make(chan struct{})
	go func() {
		defer close(flowed)
		tick.Every(ctx, 20*time.Millisecond, func() error {
			if err := produce(20); err != nil && ctx.Err() == nil {
				t.Errorf("writing orders: %v", err)
			}
			return nil
		})
	}()
	b, c, cut := h.joinTwoDrainOne(a, all, "0_", eos...)
	cut.Cut()
	h.eventually(60*time.Second, "b to run every task after c crashed", func() bool { o, _ := owners(b); return len(o) == 4 })
	stop()
	<-flowed
	// The last clicks' buys.
	var recs []*kgo.Record
	for _, id := range pending {
		clock = clock.Add(time.Millisecond)
		recs = append(recs, &kgo.Record{Topic: buys, Key: []byte(id), Value: []byte("b-" + id), Timestamp: clock})
	}
	if err := h.prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var got map[string][]string
	complete := tick.Until(context.Background(), 90*time.Second, 500*time.Millisecond, func() bool {
		got = readCommitted(t, h.brokers, joined)
		return len(got) >= orders
	})
	var wrong []string
	for i := range orders {
		id := "o" + strconv.Itoa(i)
		if want := "c-" + id + "&b-" + id; !slices.Equal(got[id], []string{want}) {
			wrong = append(wrong, fmt.Sprintf("%s: %q", id, got[id]))
		}
	}
	if len(wrong) > 0 || !complete {
		if len(wrong) > 10 {
			wrong = append(wrong[:10], fmt.Sprintf("... %d more", len(wrong)-10))
		}
		t.Fatalf("orders not joined exactly once (%d orders): %s", orders, strings.Join(wrong, ", "))
	}
	t.Logf("%d orders joined exactly once", orders)
	c.app.Leave()
}

// TestJoinNeedsCoPartitionedTopics: a stream joined with a table of
// another partition count cannot run; Run says which topics differ.
func TestJoinNeedsCoPartitionedTopics(t *testing.T) {
	h := newHarness(t, 4)
	users := h.tg.Name("users")
	h.tg.CreateTopic(t, users, 2, true)
	b := topology.NewBuilder(h.appID)
	table := topology.TableFromTopic(b, users, "users", topology.String, topology.String)
	views := topology.FromTopic(b, h.input, topology.String, topology.String)
	topology.JoinTable(views, table, func(_, v, r string) string { return v + "@" + r }).To(h.output)
	top, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	app, err := New(top, WithBrokers(h.brokers...), WithAppID(h.appID), WithStateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = runChecked(t, ctx, app)
	if err == nil || !strings.Contains(err.Error(), "not co-partitioned") ||
		!strings.Contains(err.Error(), fmt.Sprintf("%q has 4 partitions", h.input)) || !strings.Contains(err.Error(), fmt.Sprintf("%q has 2", users)) {
		t.Fatalf("Run: %v; want an error naming %s (4 partitions) and %s (2)", err, h.input, users)
	}
}

// allActive returns a check that apps run all of tasks tasks between them,
// each at least one, with no learner left.
func allActive(tasks int) func(apps ...*running) bool {
	return func(apps ...*running) bool {
		o, _ := owners(apps...)
		if len(o) != tasks {
			return false
		}
		for _, r := range apps {
			n := 0
			for _, ts := range r.app.Status().Tasks {
				if ts.Role == "learner" {
					return false
				}
				if ts.Role == "active" {
					n++
				}
			}
			if n == 0 {
				return false
			}
		}
		return true
	}
}

// joinTwoDrainOne is the moves of the store tests, while their input
// flows: b joins a, then c (whose connections cut can cut) joins them,
// each waited for with settled; the tasks with the prefix stateful must
// have gone through learners; then a drains. No task a plan did not move
// may stop (checkOnlyMovedStop) at any step.
func (h *harness) joinTwoDrainOne(a *running, settled func(...*running) bool, stateful string, opts ...Option) (b, c *running, cut *faultnet.Cutter) {
	h.t.Helper()
	m := h.mark(a)
	b = h.start("b", opts...)
	h.eventually(60*time.Second, "a and b", func() bool { return settled(a, b) })
	h.checkOnlyMovedStop(m)
	cut = &faultnet.Cutter{}
	m = h.mark(a, b)
	c = h.start("c", append(slices.Clone(opts), WithKafkaOptions(kgo.Dialer(cut.Dial)))...)
	h.eventually(60*time.Second, "a, b and c", func() bool { return settled(a, b, c) })
	h.checkOnlyMovedStop(m)
	learned := false
	for _, e := range h.eventsOf(EventLearner) {
		learned = learned || strings.HasPrefix(e.Task, stateful)
	}
	if !learned {
		h.t.Errorf("no learner warmed a task %s*: the joins did not go through learners", stateful)
	}
	m = h.mark(a, b, c)
	a.stop(h.t)
	h.eventually(60*time.Second, "b and c", func() bool { return settled(b, c) })
	h.checkOnlyMovedStop(m)
	return b, c, cut
}

// TestTableTopicEndingWithMarker: a table's topic written in transactions
// ends with a transaction marker, an offset no record has. A task waiting
// for its table to reach the end read at its start must still go on to
// its stream.
func TestTableTopicEndingWithMarker(t *testing.T) {
	h := newHarness(t, 1)
	users := h.tg.Name("users")
	h.tg.CreateTopic(t, users, 1, true)
	txn, err := kgo.NewClient(kgo.SeedBrokers(h.brokers...), kgo.TransactionalID(h.tg.Name("writer")))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	ctx := context.Background()
	if err := txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := txn.ProduceSync(ctx, &kgo.Record{Topic: users, Key: []byte("ana"), Value: []byte("eu")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	h.build = func() (*topology.Topology, error) {
		b := topology.NewBuilder(h.appID)
		table := topology.TableFromTopic(b, users, "users", topology.String, topology.String)
		views := topology.FromTopic(b, h.input, topology.String, topology.String)
		topology.JoinTable(views, table, func(_, v, r string) string { return v + "@" + r }).To(h.output)
		return b.Build()
	}
	h.start("a")
	if err := h.prod.ProduceSync(ctx, &kgo.Record{Topic: h.input, Key: []byte("ana"), Value: []byte("/home")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	h.eventually(30*time.Second, "the view to be joined", func() bool {
		return slices.Equal(readCommitted(t, h.brokers, h.output)["ana"], []string{"/home@eu"})
	})
}

package topology_test

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/baton-streams/baton/topology"
)

// A wordcount built with the DSL, then run by hand the way the runtime
// does: one Processor per task, a Context giving it its stores and
// collecting what it sends. Every topic has one partition here, so a
// record sent to a topic goes to task "<reader>_0".
func Example() {
	b := topology.NewBuilder("wc")
	lines := topology.FromTopic(b, "lines", topology.Bytes, topology.String)
	words := topology.FlatMapValues(lines, strings.Fields)
	byWord := topology.GroupBy(words, func(_ []byte, w string) string { return w }, topology.String, "words")
	topology.Count(byWord, "counts").ToStream().To("counts")
	topo, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(topo)

	// A one-partition runtime in a few lines.
	readers := map[string]topology.Subtopology{}
	for _, s := range topo.Subtopologies() {
		for _, t := range s.Sources {
			readers[t] = s
		}
	}
	ctx := &oneContext{stores: map[string]*topology.MemStore{}}
	tasks := map[string]topology.Processor{}
	queue := []topology.Record{
		{Topic: "lines", Value: []byte("the cat and the hat")},
		{Topic: "lines", Value: []byte("the end")},
	}
	for len(queue) > 0 {
		rec := queue[0]
		queue = queue[1:]
		s := readers[rec.Topic]
		id := s.TaskID(0)
		if tasks[id] == nil {
			tasks[id] = s.NewProcessor(id, 0)
			for _, spec := range s.Stores {
				ctx.stores[spec.Name] = &topology.MemStore{}
			}
		}
		ctx.task, ctx.sent = id, nil
		if err := tasks[id].Process(ctx, rec); err != nil {
			fmt.Println(err)
			return
		}
		for _, r := range ctx.sent {
			if _, ok := readers[r.Topic]; ok {
				queue = append(queue, r)
			} else {
				fmt.Printf("%s: %s=%s\n", r.Topic, r.Key, r.Value)
			}
		}
	}
	// Output:
	// topology "wc": 2 subtopologies
	// subtopology 0 (stateless)
	//   reads:  lines
	//   writes: wc-words-repartition (repartition)
	//   source    fromTopic#1 ([]uint8, string) [lines] -> flatMapValues#2
	//   processor flatMapValues#2 ([]uint8, string) -> groupBy#3
	//   processor groupBy#3 (string, string) -> toRepartition#4
	//   sink      toRepartition#4 (string, string) [wc-words-repartition]
	// subtopology 1 (stateful)
	//   reads:  wc-words-repartition (repartition)
	//   writes: counts
	//   store:  counts (changelog wc-counts-changelog)
	//   source    fromRepartition#5 (string, string) [wc-words-repartition] -> count#6
	//   processor count#6 (string, int64 changes) stores [counts] -> toStream#7
	//   processor toStream#7 (string, int64) -> to#8
	//   sink      to#8 (string, int64) [counts]
	// counts: the=1
	// counts: cat=1
	// counts: and=1
	// counts: the=2
	// counts: hat=1
	// counts: the=3
	// counts: end=1
}

// oneContext is the Context of the example's one-partition runtime.
type oneContext struct {
	task   string
	stores map[string]*topology.MemStore
	sent   []topology.Record
	now    time.Time // the event time of the record in process
}

// SetTimestamp is told each record's event time: what the task sends
// carries it, as in the runtime.
func (c *oneContext) SetTimestamp(ts time.Time) { c.now = ts }

func (c *oneContext) TaskID() string   { return c.task }
func (c *oneContext) Partition() int32 { return 0 }

func (c *oneContext) Store(name string) topology.Store {
	if s, ok := c.stores[name]; ok {
		return s
	}
	return nil
}

func (c *oneContext) Send(topic string, key, value []byte) error {
	// Send must not keep the caller's slices: copy them.
	c.sent = append(c.sent, topology.Record{Topic: topic, Key: bytes.Clone(key), Value: bytes.Clone(value), Timestamp: c.now})
	return nil
}

// The wordcount that `baton run wordcount` runs.
func ExampleWordCount() {
	topo, err := topology.WordCount("wc", "lines", "counts")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range topo.Subtopologies() {
		fmt.Println(s.ID, s.Sources, s.Sinks, s.Stores, s.Stateful())
	}
	// Output:
	// 0 [lines] [wc-words-repartition] [] false
	// 1 [wc-words-repartition] [counts] [{counts wc-counts-changelog false key-value}] true
}

// Clicks per user per minute, with a grace period of 10 seconds. Event
// time is the record's timestamp here; SetTimestampExtractor takes it
// from the payload instead. The record at 0:50 comes after stream time
// reached 1:15, past the first minute's end plus its grace: it is late,
// dropped and counted (in the runtime, in baton_late_records_total).
func ExampleWindowCount() {
	b := topology.NewBuilder("clicks")
	clicks := topology.FromTopic(b, "clicks", topology.String, topology.String)
	perMinute := topology.WindowedBy(topology.GroupByKey(clicks, "by-user"),
		topology.TumblingWindows(time.Minute).Grace(10*time.Second))
	topology.WindowCount(perMinute, "clicks-per-minute").ToStream().To("clicks-per-minute")
	topo, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	s := topo.Subtopologies()[0]
	proc := s.NewProcessor(s.TaskID(0), 0)
	ctx := &oneContext{task: s.TaskID(0), stores: map[string]*topology.MemStore{"clicks-per-minute": {}}}
	keys := topology.WindowedCodec(topology.String, time.Minute)
	for i, at := range []string{"0:05", "0:40", "1:15", "0:50", "1:20"} {
		var m, sec int
		fmt.Sscanf(at, "%d:%d", &m, &sec)
		ts := time.Unix(int64(60*m+sec), 0)
		ctx.sent = nil
		if err := proc.Process(ctx, topology.Record{Topic: "clicks", Offset: int64(i), Key: []byte("ana"), Value: []byte("/home"), Timestamp: ts}); err != nil {
			fmt.Println(err)
			return
		}
		if len(ctx.sent) == 0 {
			fmt.Printf("click at %s: late\n", at)
		}
		for _, r := range ctx.sent {
			w, _ := keys.Decode(r.Key)
			fmt.Printf("click at %s: %s has %s in [%s, %s)\n", at, w.Key, r.Value,
				w.Start.UTC().Format("4:05"), w.End.UTC().Format("4:05"))
		}
	}
	// Output:
	// click at 0:05: ana has 1 in [0:00, 1:00)
	// click at 0:40: ana has 2 in [0:00, 1:00)
	// click at 1:15: ana has 1 in [1:00, 2:00)
	// click at 0:50: late
	// click at 1:20: ana has 2 in [1:00, 2:00)
}

// Page views enriched with the user's region from a table, and users
// counted per region. The table is read from a compacted topic, which
// is also its store's changelog; when a user moves, the count of the
// region they left goes down (a retraction) and the other goes up.
func ExampleJoinTable() {
	b := topology.NewBuilder("views")
	users := topology.TableFromTopic(b, "users", "users", topology.String, topology.String)
	views := topology.FromTopic(b, "page-views", topology.String, topology.String)
	topology.JoinTable(views, users, func(user, page, region string) string { return page + " from " + region }).
		To("enriched-views")
	byRegion := topology.GroupTableBy(users, func(user, region string) (string, string) { return region, user },
		topology.String, topology.String, "users-by-region")
	topology.TableCount(byRegion, "users-per-region").ToStream().To("users-per-region")
	topo, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	err = runOne(topo, []topology.Record{
		{Topic: "users", Key: []byte("ana"), Value: []byte("eu")},
		{Topic: "users", Key: []byte("bo"), Value: []byte("us")},
		{Topic: "page-views", Key: []byte("ana"), Value: []byte("/home")},
		{Topic: "page-views", Key: []byte("cy"), Value: []byte("/home")}, // no such user: dropped
		{Topic: "users", Key: []byte("ana"), Value: []byte("us")},
		{Topic: "page-views", Key: []byte("ana"), Value: []byte("/cart")},
	}, func(_ topology.Record, out []topology.Record) {
		for _, r := range out {
			fmt.Printf("%s: %s=%s\n", r.Topic, r.Key, r.Value)
		}
	})
	if err != nil {
		fmt.Println(err)
	}
	// The counts come after the views: they go through the repartition
	// topic, whose records this one-queue runtime processes last.

	// Output:
	// enriched-views: ana=/home from eu
	// enriched-views: ana=/cart from us
	// users-per-region: eu=1
	// users-per-region: us=1
	// users-per-region: eu=0
	// users-per-region: us=2
}

// Peek sees each record on its way, unchanged.
func ExamplePeek() {
	b := topology.NewBuilder("audit")
	orders := topology.FromTopic(b, "orders", topology.String, topology.String)
	topology.Peek(orders, func(id, item string) { fmt.Printf("saw %s: %s\n", id, item) }).To("orders-copy")
	topo, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	err = runOne(topo, []topology.Record{
		{Topic: "orders", Key: []byte("o1"), Value: []byte("fig")},
		{Topic: "orders", Key: []byte("o2"), Value: []byte("kiwi")},
	}, func(_ topology.Record, out []topology.Record) {
		for _, r := range out {
			fmt.Printf("%s: %s=%s\n", r.Topic, r.Key, r.Value)
		}
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// saw o1: fig
	// orders-copy: o1=fig
	// saw o2: kiwi
	// orders-copy: o2=kiwi
}

// Page views keyed by user, counted per page: SelectKey makes the page
// the key, so the count goes through a repartition topic.
func ExampleSelectKey() {
	b := topology.NewBuilder("views")
	views := topology.FromTopic(b, "page-views", topology.String, topology.String)
	byPage := topology.SelectKey(views, func(user, page string) string { return page })
	topology.Count(topology.GroupByKey(byPage, "views-by-page"), "views").ToStream().To("views-per-page")
	topo, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range topo.Subtopologies() {
		fmt.Println(s.ID, s.Sources, s.Sinks)
	}
	err = runOne(topo, []topology.Record{
		{Topic: "page-views", Key: []byte("ana"), Value: []byte("/home")},
		{Topic: "page-views", Key: []byte("bo"), Value: []byte("/home")},
		{Topic: "page-views", Key: []byte("ana"), Value: []byte("/cart")},
	}, func(_ topology.Record, out []topology.Record) {
		for _, r := range out {
			fmt.Printf("%s: %s=%s\n", r.Topic, r.Key, r.Value)
		}
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// 0 [page-views] [views-views-by-page-repartition]
	// 1 [views-views-by-page-repartition] [views-per-page]
	// views-per-page: /home=1
	// views-per-page: /home=2
	// views-per-page: /cart=1
}

// runOne runs topo as the runtime does with one partition per topic:
// each record of queue, then each record sent to a topic topo reads, is
// processed by its task's processor (made on its first record, with
// empty stores); out gets each record processed with what it sent to the
// other topics.
func runOne(topo *topology.Topology, queue []topology.Record, out func(in topology.Record, sent []topology.Record)) error {
	readers := map[string]topology.Subtopology{}
	for _, s := range topo.Subtopologies() {
		for _, t := range s.Sources {
			readers[t] = s
		}
	}
	ctx := &oneContext{stores: map[string]*topology.MemStore{}}
	procs := map[string]topology.Processor{}
	for len(queue) > 0 {
		rec := queue[0]
		queue = queue[1:]
		s := readers[rec.Topic]
		id := s.TaskID(0)
		if procs[id] == nil {
			procs[id] = s.NewProcessor(id, 0)
			for _, spec := range s.Stores {
				ctx.stores[spec.Name] = &topology.MemStore{}
			}
		}
		ctx.task, ctx.sent = id, nil
		if err := procs[id].Process(ctx, rec); err != nil {
			return err
		}
		var rest []topology.Record
		for _, r := range ctx.sent {
			if _, ok := readers[r.Topic]; ok {
				queue = append(queue, r)
			} else {
				rest = append(rest, r)
			}
		}
		out(rec, rest)
	}
	return nil
}

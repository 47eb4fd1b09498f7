package topology

import (
	"fmt"
	"testing"
	"time"
)

// The cost of one record through the stateful operations, on one task
// with in-memory stores (no changelog, no runtime): side by side, the
// plain count is the baseline the others add to. Run with
//
//	go test ./topology -run XXX -bench Ops -benchmem
func BenchmarkOps(b *testing.B) {
	const keys = 1000
	cases := []struct {
		name  string
		build func(bd *Builder)
		topic func(i int) string
	}{
		{"count", func(bd *Builder) {
			Count(GroupByKey(FromTopic(bd, "in", String, String), "g"), "s").ToStream().To("out")
		}, func(int) string { return "in" }},
		{"window-count-tumbling", func(bd *Builder) {
			WindowCount(WindowedBy(GroupByKey(FromTopic(bd, "in", String, String), "g"), TumblingWindows(time.Minute)), "s").ToStream().To("out")
		}, func(int) string { return "in" }},
		{"window-count-hopping-4", func(bd *Builder) {
			WindowCount(WindowedBy(GroupByKey(FromTopic(bd, "in", String, String), "g"), HoppingWindows(time.Minute, 15*time.Second)), "s").ToStream().To("out")
		}, func(int) string { return "in" }},
		{"join-table", func(bd *Builder) {
			t := TableFromTopic(bd, "table", "t", String, String)
			JoinTable(FromTopic(bd, "in", String, String), t, func(_, a, b string) string { return a + b }).To("out")
		}, func(i int) string {
			if i%10 == 0 {
				return "table"
			}
			return "in"
		}},
		{"join-streams", func(bd *Builder) {
			JoinStreams(FromTopic(bd, "in", String, String), FromTopic(bd, "other", String, String),
				JoinWithin(time.Second), "j", func(_, a, b string) string { return a + b }).To("out")
		}, func(i int) string { return []string{"in", "other"}[i%2] }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			bd := NewBuilder("bench")
			c.build(bd)
			topo, err := bd.Build()
			if err != nil {
				b.Fatal(err)
			}
			proc := topo.Subtopologies()[0].NewProcessor("0_0", 0)
			ctx := &benchCtx{stores: map[string]*MemStore{}}
			recs := make([]Record, 4096)
			for i := range recs {
				recs[i] = Record{Topic: c.topic(i), Key: fmt.Appendf(nil, "k%d", i%keys), Value: []byte("v")}
			}
			start := time.UnixMilli(1_700_000_000_000)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				r := recs[i%len(recs)]
				r.Offset, r.Timestamp = int64(i), start.Add(time.Duration(i)*time.Millisecond)
				if err := proc.Process(ctx, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchCtx is a Context with MemStores that drops what is sent.
type benchCtx struct{ stores map[string]*MemStore }

func (c *benchCtx) TaskID() string   { return "0_0" }
func (c *benchCtx) Partition() int32 { return 0 }
func (c *benchCtx) Store(name string) Store {
	s := c.stores[name]
	if s == nil {
		s = &MemStore{}
		c.stores[name] = s
	}
	return s
}
func (c *benchCtx) Send(string, []byte, []byte) error { return nil }

package topology_test

import (
	"fmt"
	"strings"

	"github.com/baton-streams/baton/topology"
)

// Order lines joined with their product's name, on the product id in
// each order's value: a foreign-key join, built from GroupTableBy and
// JoinTables (see "Joins on a foreign key" in the package docs). The
// orders are grouped by product into one row per product listing its
// orders, that row is joined with the product, and the result is
// flattened back to one record per order. A product's new name reaches
// each of its orders, but so does each change of any of them: o2's
// arrival sends o1's line again. o1, moved to a product not in the
// table, keeps its last result downstream: no tombstone is sent for it.
func ExampleGroupTableBy_foreignKeyJoin() {
	b := topology.NewBuilder("shop")
	orders := topology.TableFromTopic(b, "orders", "orders", topology.String, topology.String) // order id -> "product:quantity"
	products := topology.TableFromTopic(b, "products", "products", topology.String, topology.String)
	byProduct := topology.GroupTableBy(orders, func(id, order string) (string, string) {
		product, qty, _ := strings.Cut(order, ":")
		return product, id + "=" + qty
	}, topology.String, topology.String, "orders-by-product")
	lines := topology.TableAggregate(byProduct, "orders-of-product", func() string { return "" },
		func(_, line, agg string) string { return agg + line + ";" },
		func(_, line, agg string) string { return strings.Replace(agg, line+";", "", 1) },
		topology.String)
	joined := topology.JoinTables(lines, products, func(_, lines, name string) string { return name + "|" + lines }, topology.String)
	topology.FlatMap(joined.ToStream(), func(_, v string) []topology.KeyValue[string, string] {
		name, lines, _ := strings.Cut(v, "|")
		var out []topology.KeyValue[string, string]
		for line := range strings.SplitSeq(strings.TrimSuffix(lines, ";"), ";") {
			if id, qty, ok := strings.Cut(line, "="); ok {
				out = append(out, topology.KeyValue[string, string]{Key: id, Value: qty + " x " + name})
			}
		}
		return out
	}).To("order-lines")
	topo, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	// Each input is processed, with all it leads to, before the next.
	readers := map[string]topology.Subtopology{}
	for _, s := range topo.Subtopologies() {
		for _, t := range s.Sources {
			readers[t] = s
		}
	}
	ctx := &oneContext{stores: map[string]*topology.MemStore{}}
	procs := map[string]topology.Processor{}
	for _, step := range []string{"products p1 hat", "orders o1 p1:2", "orders o2 p1:1", "products p1 cap", "orders o1 p2:5"} {
		f := strings.Fields(step)
		fmt.Printf("%s %s=%s:", f[0], f[1], f[2])
		queue := []topology.Record{{Topic: f[0], Key: []byte(f[1]), Value: []byte(f[2])}}
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
				fmt.Println(err)
				return
			}
			for _, r := range ctx.sent {
				if _, ok := readers[r.Topic]; ok {
					queue = append(queue, r)
				} else {
					fmt.Printf(" [%s=%s]", r.Key, r.Value)
				}
			}
		}
		fmt.Println()
	}
	// Output:
	// products p1=hat:
	// orders o1=p1:2: [o1=2 x hat]
	// orders o2=p1:1: [o1=2 x hat] [o2=1 x hat]
	// products p1=cap: [o1=2 x cap] [o2=1 x cap]
	// orders o1=p2:5: [o2=1 x cap]
}

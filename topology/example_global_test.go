package topology_test

import (
	"fmt"
	"strings"

	"github.com/baton-streams/baton/topology"
)

// Orders enriched with the customer's name from a global table of
// customers. The runtime fills the global store from every partition of
// the "customers" topic; here a MemStore stands in for it, given by the
// Context under the store's name, and is changed between records as the
// runtime would apply the topic's records.
func ExampleJoinGlobal() {
	b := topology.NewBuilder("shop")
	customers := topology.FromGlobalTopic(b, "customers", topology.String, topology.String, "customers")
	orders := topology.FromTopic(b, "orders", topology.String, topology.String) // order id -> "customer:item"
	customerOf := func(_, order string) string { c, _, _ := strings.Cut(order, ":"); return c }
	topology.LeftJoinGlobal(orders, customers, customerOf, func(_, order, name string, found bool) string {
		_, item, _ := strings.Cut(order, ":")
		if !found {
			name = "someone unknown"
		}
		return name + " ordered " + item
	}).To("enriched")
	topo, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(topo.GlobalStores())
	s := topo.Subtopologies()[0]
	proc := s.NewProcessor(s.TaskID(0), 0)
	table := &topology.MemStore{}
	ctx := &oneContext{task: s.TaskID(0), stores: map[string]*topology.MemStore{"customers": table}}
	for i, step := range []string{"order o1 c1:tea", "customer c1 Ana", "order o2 c1:jam", "delete c1", "order o3 c1:pen"} {
		f := strings.Fields(step)
		switch f[0] {
		case "customer":
			_ = table.Put([]byte(f[1]), []byte(f[2]))
		case "delete":
			_ = table.Delete([]byte(f[1]))
		case "order":
			ctx.sent = nil
			if err := proc.Process(ctx, topology.Record{Topic: "orders", Offset: int64(i), Key: []byte(f[1]), Value: []byte(f[2])}); err != nil {
				fmt.Println(err)
				return
			}
			for _, r := range ctx.sent {
				fmt.Printf("%s: %s=%s\n", r.Topic, r.Key, r.Value)
			}
		}
	}
	// Output:
	// [{customers customers}]
	// enriched: o1=someone unknown ordered tea
	// enriched: o2=Ana ordered jam
	// enriched: o3=someone unknown ordered pen
}

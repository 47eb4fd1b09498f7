package topology_test

import (
	"fmt"
	"time"

	"github.com/baton-streams/baton/topology"
)

// joinAt processes one record through proc at m:ss and prints what the
// join sent, with its timestamp.
func joinAt(proc topology.Processor, ctx *oneContext, topic, user, value, at string) {
	var m, sec int
	fmt.Sscanf(at, "%d:%d", &m, &sec)
	ctx.sent = nil
	ts := time.Unix(int64(60*m+sec), 0)
	if err := proc.Process(ctx, topology.Record{Topic: topic, Key: []byte(user), Value: []byte(value), Timestamp: ts}); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s %s at %s:", topic, user, at)
	if len(ctx.sent) == 0 {
		fmt.Print(" -")
	}
	for _, r := range ctx.sent {
		fmt.Printf(" [%s=%s at %s]", r.Key, r.Value, r.Timestamp.UTC().Format("4:05"))
	}
	fmt.Println()
}

// Ad impressions joined with the clicks on them within 10 minutes, with
// a grace of 1 minute; an impression nobody clicked is sent on too, once
// no click can pair with it any more: when the stream time passes its
// time plus twice the window plus the grace (21 minutes). Bob's
// impression at 0:30 is sent on unmatched while the join processes the
// record at 21:31, stamped with its own time; ana's, matched at 4:00,
// never is.
func ExampleLeftJoinStreams() {
	b := topology.NewBuilder("ads")
	impressions := topology.FromTopic(b, "impressions", topology.String, topology.String)
	clicks := topology.FromTopic(b, "clicks", topology.String, topology.String)
	topology.LeftJoinStreams(impressions, clicks, topology.JoinWithin(10*time.Minute).Grace(time.Minute), "shown-clicked",
		func(user, ad, click string, clicked bool) string {
			if !clicked {
				return ad + " not clicked"
			}
			return ad + " clicked on " + click
		}).To("outcomes")
	topo, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	s := topo.Subtopologies()[0]
	ctx := &oneContext{task: s.TaskID(0), stores: map[string]*topology.MemStore{}}
	for _, spec := range s.Stores {
		fmt.Println("store", spec.Name)
		ctx.stores[spec.Name] = &topology.MemStore{}
	}
	proc := s.NewProcessor(s.TaskID(0), 0)
	joinAt(proc, ctx, "impressions", "ana", "shoes", "0:00")
	joinAt(proc, ctx, "impressions", "bob", "hats", "0:30")
	joinAt(proc, ctx, "clicks", "ana", "/shoes", "4:00")
	joinAt(proc, ctx, "impressions", "carl", "socks", "21:30")
	joinAt(proc, ctx, "impressions", "dan", "hats", "21:31")
	// Output:
	// store shown-clicked-left
	// store shown-clicked-right
	// store shown-clicked-unmatched
	// impressions ana at 0:00: -
	// impressions bob at 0:30: -
	// clicks ana at 4:00: [ana=shoes clicked on /shoes at 4:00]
	// impressions carl at 21:30: -
	// impressions dan at 21:31: [bob=hats not clicked at 0:30]
}

// Orders and payments of the same id within 5 minutes, without grace:
// an order not paid and a payment for no order are both sent on, each
// once the stream time passes its time plus 10 minutes: the order at
// 4:00 when the stream time reaches 14:01, the payment at 5:00 at 15:01.
func ExampleOuterJoinStreams() {
	b := topology.NewBuilder("shop")
	orders := topology.FromTopic(b, "orders", topology.String, topology.String)
	payments := topology.FromTopic(b, "payments", topology.String, topology.String)
	topology.OuterJoinStreams(orders, payments, topology.JoinWithin(5*time.Minute), "order-paid",
		func(id, order, payment string, ordered, paid bool) string {
			switch {
			case !paid:
				return order + ": not paid"
			case !ordered:
				return payment + ": no order"
			}
			return order + ": paid " + payment
		}).To("reconciled")
	topo, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	s := topo.Subtopologies()[0]
	ctx := &oneContext{task: s.TaskID(0), stores: map[string]*topology.MemStore{}}
	for _, spec := range s.Stores {
		ctx.stores[spec.Name] = &topology.MemStore{}
	}
	proc := s.NewProcessor(s.TaskID(0), 0)
	joinAt(proc, ctx, "orders", "o1", "2 hats", "0:00")
	joinAt(proc, ctx, "payments", "o1", "10 EUR", "3:00")
	joinAt(proc, ctx, "orders", "o2", "1 scarf", "4:00")
	joinAt(proc, ctx, "payments", "o9", "7 EUR", "5:00")
	joinAt(proc, ctx, "orders", "o3", "3 socks", "14:01")
	joinAt(proc, ctx, "orders", "o4", "1 coat", "15:01")
	// Output:
	// orders o1 at 0:00: -
	// payments o1 at 3:00: [o1=2 hats: paid 10 EUR at 3:00]
	// orders o2 at 4:00: -
	// payments o9 at 5:00: -
	// orders o3 at 14:01: [o2=1 scarf: not paid at 4:00]
	// orders o4 at 15:01: [o9=7 EUR: no order at 5:00]
}

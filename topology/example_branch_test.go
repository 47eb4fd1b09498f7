package topology_test

import (
	"fmt"
	"strconv"

	"github.com/baton-streams/baton/topology"
)

// Payments split three ways: each goes to the first branch that accepts
// it, so a payment of 250.00 is large and not also checked; what no
// branch accepts goes to the default branch.
func ExampleSplit() {
	b := topology.NewBuilder("payments")
	payments := topology.FromTopic(b, "payments", topology.String, topology.Int64) // cents
	sp := topology.Split(payments)
	sp.Branch("large", func(_ string, cents int64) bool { return cents >= 10000 }).To("large-payments")
	sp.Branch("valid", func(_ string, cents int64) bool { return cents > 0 }).To("payments-checked")
	sp.Default("invalid").To("invalid-payments")
	topo, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	var in []topology.Record
	for _, p := range []struct {
		user  string
		cents int64
	}{{"ana", 1200}, {"bo", -500}, {"ana", 25000}, {"cy", 0}} {
		in = append(in, topology.Record{Topic: "payments", Key: []byte(p.user), Value: []byte(strconv.FormatInt(p.cents, 10))})
	}
	err = runOne(topo, in, func(_ topology.Record, out []topology.Record) {
		for _, r := range out {
			fmt.Printf("%s: %s=%s\n", r.Topic, r.Key, r.Value)
		}
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// payments-checked: ana=1200
	// invalid-payments: bo=-500
	// large-payments: ana=25000
	// invalid-payments: cy=0
}

// Clicks and taps, from two topics keyed by user, merged into one stream
// of events and counted per user. Both topics end up in one
// subtopology, so they must have the same number of partitions; the
// count needs no repartitioning, as neither key changed.
func ExampleMerge() {
	b := topology.NewBuilder("events")
	clicks := topology.FromTopic(b, "clicks", topology.String, topology.String)
	taps := topology.FromTopic(b, "taps", topology.String, topology.String)
	events := topology.Merge(clicks, taps)
	topology.Count(topology.GroupByKey(events, "events-by-user"), "events").ToStream().To("events-per-user")
	topo, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range topo.Subtopologies() {
		fmt.Println(s.ID, s.Sources, s.Sinks)
	}
	err = runOne(topo, []topology.Record{
		{Topic: "clicks", Key: []byte("ana"), Value: []byte("/home")},
		{Topic: "taps", Key: []byte("ana"), Value: []byte("buy")},
		{Topic: "taps", Key: []byte("bo"), Value: []byte("back")},
	}, func(in topology.Record, out []topology.Record) {
		for _, r := range out {
			fmt.Printf("%s %s: %s=%s\n", in.Topic, in.Value, r.Key, r.Value)
		}
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// 0 [clicks taps] [events-per-user]
	// clicks /home: ana=1
	// taps buy: ana=2
	// taps back: bo=1
}

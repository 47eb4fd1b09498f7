package topology_test

import (
	"fmt"
	"time"

	"github.com/baton-streams/baton/topology"
)

// The page-views application that `baton run pageviews` runs, driven by
// hand on one partition: views per region per minute with a grace period
// of 10 seconds. cy is not in the users table: the view counts under
// "unknown". The view at 0:58 comes after the one at 1:20 moved the
// stream time past the first minute's end plus its grace: it is late.
func ExamplePageViews() {
	topo, err := topology.PageViews("pv", "views", "users", "views-per-region", time.Minute, 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range topo.Subtopologies() {
		fmt.Println(s.ID, s.Sources, s.Sinks, s.Stateful())
	}
	at := func(m, s int) time.Time { return time.Unix(int64(60*m+s), 0) }
	keys := topology.WindowedCodec(topology.String, time.Minute)
	err = runOne(topo, []topology.Record{
		{Topic: "users", Key: []byte("ana"), Value: []byte("eu")},
		{Topic: "users", Key: []byte("bo"), Value: []byte("us")},
		{Topic: "views", Key: []byte("ana"), Value: []byte("/home"), Timestamp: at(0, 5)},
		{Topic: "views", Key: []byte("bo"), Value: []byte("/cart"), Timestamp: at(0, 30)},
		{Topic: "views", Key: []byte("cy"), Value: []byte("/home"), Timestamp: at(0, 40)},
		{Topic: "views", Key: []byte("ana"), Value: []byte("/cart"), Timestamp: at(1, 5)},
		{Topic: "views", Key: []byte("bo"), Value: []byte("/home"), Timestamp: at(0, 55)},
		{Topic: "views", Key: []byte("ana"), Value: []byte("/pay"), Timestamp: at(1, 20)},
		{Topic: "views", Key: []byte("bo"), Value: []byte("/home"), Timestamp: at(0, 58)},
	}, func(in topology.Record, out []topology.Record) {
		if in.Topic == "pv-views-by-region-repartition" && len(out) == 0 { // a view the window store did not take
			fmt.Printf("view at %s: late\n", in.Timestamp.UTC().Format("4:05"))
		}
		for _, r := range out {
			w, err := keys.Decode(r.Key)
			if err != nil {
				fmt.Println(err)
				return
			}
			fmt.Printf("view at %s: %s has %s in [%s, %s)\n", r.Timestamp.UTC().Format("4:05"), w.Key, r.Value,
				w.Start.UTC().Format("4:05"), w.End.UTC().Format("4:05"))
		}
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// 0 [users views] [pv-views-by-region-repartition] true
	// 1 [pv-views-by-region-repartition] [views-per-region] true
	// view at 0:05: eu has 1 in [0:00, 1:00)
	// view at 0:30: us has 1 in [0:00, 1:00)
	// view at 0:40: unknown has 1 in [0:00, 1:00)
	// view at 1:05: eu has 1 in [1:00, 2:00)
	// view at 0:55: us has 2 in [0:00, 1:00)
	// view at 1:20: eu has 2 in [1:00, 2:00)
	// view at 0:58: late
}

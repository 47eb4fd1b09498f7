package topology_test

import (
	"fmt"
	"time"

	"github.com/baton-streams/baton/topology"
)

// The sessions application that `baton run sessions` runs, driven by hand
// on one partition: sessions end after 5 minutes without a click, with a
// grace period of 1 minute, so a session is written once a click comes
// more than 6 minutes after its last one. ana's click at 9:07 comes after
// bo's at 9:09, within the grace, and joins her session. bo's click at
// 9:13 is 6 minutes after it, not more: ana's next click, at 9:14, closes
// it and opens her second session; cy's at 9:30 closes the rest. A click
// without a user is dropped.
func ExampleSessions() {
	topo, err := topology.Sessions("s", "clicks", "sessions", 5*time.Minute, time.Minute)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range topo.Subtopologies() {
		fmt.Println(s.ID, s.Sources, s.Sinks, s.Stateful())
	}
	at := func(m int) time.Time { return time.Date(2026, 3, 1, 9, m, 0, 0, time.UTC) }
	var queue []topology.Record
	for _, c := range []struct {
		click string
		m     int
	}{
		{"ana /home", 0}, {"ana /cart", 4}, {"bo /home", 9}, {"ana /pay", 7}, {"  ", 10},
		{"bo /help", 13}, {"ana /home", 14}, {"cy /home", 30},
	} {
		queue = append(queue, topology.Record{Topic: "clicks", Value: []byte(c.click), Timestamp: at(c.m)})
	}
	err = runOne(topo, queue, func(in topology.Record, out []topology.Record) {
		for _, r := range out {
			fmt.Printf("click %q at 9:%02d: %s = %s\n", in.Value, in.Timestamp.Minute(), r.Key, r.Value)
		}
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// 0 [clicks] [s-clicks-by-user-repartition] false
	// 1 [s-clicks-by-user-repartition] [sessions] true
	// click "ana /home" at 9:14: ana@1772355600000 = 1772355600000 1772356020000 3
	// click "cy /home" at 9:30: bo@1772356140000 = 1772356140000 1772356380000 2
	// click "cy /home" at 9:30: ana@1772356440000 = 1772356440000 1772356440000 1
}

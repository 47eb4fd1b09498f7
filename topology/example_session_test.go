package topology_test

import (
	"fmt"
	"time"

	"github.com/baton-streams/baton/topology"
)

// clicksAt processes one click of user at m:ss through proc and prints
// what it sent, decoding each key with keys: a session's bounds, or
// "deleted" for a session merged into another.
func clicksAt(proc topology.Processor, ctx *oneContext, keys topology.Codec[topology.Windowed[string]], user, at string) {
	var m, sec int
	fmt.Sscanf(at, "%d:%d", &m, &sec)
	ctx.sent = nil
	ts := time.Unix(int64(60*m+sec), 0)
	if err := proc.Process(ctx, topology.Record{Topic: "clicks", Key: []byte(user), Value: []byte("/home"), Timestamp: ts}); err != nil {
		fmt.Println(err)
		return
	}
	if len(ctx.sent) == 0 {
		fmt.Printf("%s at %s: -\n", user, at)
	}
	for _, r := range ctx.sent {
		w, _ := keys.Decode(r.Key)
		what := string(r.Value) + " clicks"
		if r.Value == nil {
			what = "deleted"
		}
		fmt.Printf("%s at %s: %s [%s, %s] %s\n", user, at, r.Topic, w.Start.UTC().Format("4:05"), w.End.UTC().Format("4:05"), what)
	}
}

// Clicks per user session, a session ending after 5 minutes without a
// click, with a grace period of 5 minutes. The click at 6:00 comes late,
// after the one at 10:00, but within the grace; it falls within the gap
// of both of ana's sessions and merges them: the two are deleted (a
// tombstone each on a compacted topic) and the merged one sent on.
func ExampleSessionCount() {
	b := topology.NewBuilder("clicks")
	clicks := topology.FromTopic(b, "clicks", topology.String, topology.String)
	sessions := topology.SessionWindowedBy(topology.GroupByKey(clicks, "by-user"),
		topology.InactivityGap(5*time.Minute).Grace(5*time.Minute))
	topology.SessionCount(sessions, "clicks-per-session").ToTopic("sessions")
	topo, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	s := topo.Subtopologies()[0]
	proc := s.NewProcessor(s.TaskID(0), 0)
	ctx := &oneContext{task: s.TaskID(0), stores: map[string]*topology.MemStore{"clicks-per-session": {}}}
	keys := topology.SessionWindowedCodec(topology.String)
	for _, at := range []string{"0:00", "3:00", "10:00", "6:00"} {
		clicksAt(proc, ctx, keys, "ana", at)
	}
	// Output:
	// ana at 0:00: sessions [0:00, 0:00] 1 clicks
	// ana at 3:00: sessions [0:00, 0:00] deleted
	// ana at 3:00: sessions [0:00, 3:00] 2 clicks
	// ana at 10:00: sessions [10:00, 10:00] 1 clicks
	// ana at 6:00: sessions [0:00, 3:00] deleted
	// ana at 6:00: sessions [10:00, 10:00] deleted
	// ana at 6:00: sessions [0:00, 10:00] 4 clicks
}

// The same sessions, sent on only once each has closed: a session is
// closed once the stream time is past its end by more than the gap plus
// the grace (here 10 minutes), when no click the store accepts could
// change it. The sessions that ana's click at 6:00 merged are never sent.
func ExampleSuppressUntilWindowCloses() {
	b := topology.NewBuilder("clicks")
	clicks := topology.FromTopic(b, "clicks", topology.String, topology.String)
	sessions := topology.SessionWindowedBy(topology.GroupByKey(clicks, "by-user"),
		topology.InactivityGap(5*time.Minute).Grace(5*time.Minute))
	counts := topology.SessionCount(sessions, "clicks-per-session")
	topology.SuppressUntilWindowCloses(counts, "closed-sessions").ToStream().To("sessions")
	topo, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	s := topo.Subtopologies()[0]
	proc := s.NewProcessor(s.TaskID(0), 0)
	ctx := &oneContext{task: s.TaskID(0), stores: map[string]*topology.MemStore{}}
	for _, spec := range s.Stores {
		ctx.stores[spec.Name] = &topology.MemStore{} // the buffer is a store with a changelog too
	}
	keys := topology.SessionWindowedCodec(topology.String)
	clicksAt(proc, ctx, keys, "ana", "0:00")
	clicksAt(proc, ctx, keys, "ana", "3:00")
	clicksAt(proc, ctx, keys, "bob", "4:00")
	clicksAt(proc, ctx, keys, "ana", "10:00")
	clicksAt(proc, ctx, keys, "ana", "6:00")
	clicksAt(proc, ctx, keys, "bob", "14:00")
	clicksAt(proc, ctx, keys, "bob", "14:01")
	clicksAt(proc, ctx, keys, "carl", "20:00")
	clicksAt(proc, ctx, keys, "carl", "20:01")
	// Output:
	// ana at 0:00: -
	// ana at 3:00: -
	// bob at 4:00: -
	// ana at 10:00: -
	// ana at 6:00: -
	// bob at 14:00: -
	// bob at 14:01: sessions [4:00, 4:00] 1 clicks
	// carl at 20:00: -
	// carl at 20:01: sessions [0:00, 10:00] 4 clicks
}

package topology_test

import (
	"fmt"
	"strconv"
	"time"

	"github.com/baton-streams/baton/topology"
)

// idleAfter is how long a session lasts without events.
const idleAfter = 30 * time.Minute

// sessions counts each user's events and reports a session once the user
// has been idle for idleAfter of event time: each event moves the user's
// stream-time timer to idleAfter after it.
type sessions struct{}

func (sessions) Process(ctx topology.NodeContext, rec topology.Record) error {
	counts := ctx.Store("counts")
	v, _, err := counts.Get(rec.Key)
	if err != nil {
		return err
	}
	n, _ := strconv.Atoi(string(v))
	if err := counts.Put(rec.Key, strconv.AppendInt(nil, int64(n+1), 10)); err != nil {
		return err
	}
	return ctx.Timers().Set(topology.StreamTime, rec.Key, rec.Timestamp.Add(idleAfter))
}

func (sessions) OnTimer(ctx topology.NodeContext, _ topology.Clock, user []byte, at time.Time) error {
	counts := ctx.Store("counts")
	v, _, err := counts.Get(user)
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("%s events, idle since %s", v, at.Add(-idleAfter).UTC().Format("15:04"))
	if err := counts.Delete(user); err != nil {
		return err
	}
	return ctx.Send("sessions", user, []byte(msg))
}

// An idle-session timeout with a stream-time timer per user, run by hand
// like the runtime does: the timers of a task fire after the record that
// moves its stream time past them.
func ExampleBuilder_AddTimers() {
	b := topology.NewBuilder("idle")
	b.AddSource("events", "events")
	b.AddProcessor("sessions", topology.SupplierFunc(func(string, int32) topology.Node { return sessions{} }), "events")
	b.AddStore("counts", "sessions")
	b.AddTimers("idle-timers", "sessions")
	topo, err := b.Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	sub := topo.Subtopologies()[0]
	fmt.Println("stores:", sub.Stores, "timers:", sub.Timers)

	ctx := &oneContext{task: "0_0", stores: map[string]*topology.MemStore{}}
	for _, spec := range sub.Stores {
		ctx.stores[spec.Name] = &topology.MemStore{}
	}
	proc := sub.NewProcessor("0_0", 0)
	day := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, e := range []struct {
		user string
		min  int
	}{{"alice", 0}, {"bob", 5}, {"alice", 20}, {"carol", 40}, {"bob", 70}} {
		ctx.sent = nil
		rec := topology.Record{Topic: "events", Offset: int64(i), Key: []byte(e.user), Timestamp: day.Add(time.Duration(e.min) * time.Minute)}
		if err := proc.Process(ctx, rec); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s at %s\n", e.user, rec.Timestamp.Format("15:04"))
		for _, r := range ctx.sent {
			fmt.Printf("  %s: %s %s\n", r.Topic, r.Key, r.Value)
		}
	}
	// Output:
	// stores: [{counts idle-counts-changelog false key-value} {idle-timers idle-idle-timers-changelog false internal}] timers: true
	// alice at 00:00
	// bob at 00:05
	// alice at 00:20
	// carol at 00:40
	//   sessions: bob 1 events, idle since 00:05
	// bob at 01:10
	//   sessions: alice 2 events, idle since 00:20
	//   sessions: carol 1 events, idle since 00:40
}

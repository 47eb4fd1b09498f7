package baton

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/kafkatest"
	"github.com/baton-streams/baton/topology"
)

// slowTopology creates a 2-partition input and returns the test's target,
// the input, an app id and a topology whose one processor takes perRecord
// a record.
func slowTopology(t *testing.T, perRecord time.Duration) (tg *kafkatest.Target, in, appID string, top *topology.Topology) {
	t.Helper()
	tg = kafkatest.ForTest(t)
	in, appID = tg.Name("in"), tg.Name("slow")
	tg.CreateTopic(t, in, 2, false)
	b := topology.NewBuilder(appID)
	b.AddSource("src", in)
	b.AddProcessor("slow", topology.ProcessorFunc(func(topology.NodeContext, topology.Record) error {
		time.Sleep(perRecord) // the work a record takes
		return nil
	}), "src")
	top, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return tg, in, appID, top
}

// runUntilCleanup runs app until the test ends; then it leaves at once,
// and its Run must return nil.
func runUntilCleanup(t *testing.T, app *App) {
	ctx, cancel := context.WithCancel(context.Background())
	done := goRun(t, ctx, app)
	t.Cleanup(func() {
		cancel()
		app.Leave()
		if err := <-done; err != nil {
			t.Errorf("instance %s: %v", app.InstanceID(), err)
		}
	})
}

// TestSlowProcessorKeepsItsMembership: an instance whose processor takes
// 20ms a record, with a backlog of 12s of work, answers a rebalance
// within the rebalance timeout (3s) and keeps its membership: the second
// instance's join moves one task to it, and the first loses none (no
// task given up without a commit). When a loop turn lasted a whole poll's
// records, the first instance answered only after its backlog, was
// expelled and lost its tasks.
func TestSlowProcessorKeepsItsMembership(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: works off a 12s backlog")
	}
	const perRecord = 20 * time.Millisecond
	tg, in, appID, top := slowTopology(t, perRecord)
	prod := testProducer(t, tg.Brokers)
	var recs []*kgo.Record
	for i := range 600 { // 300 a partition: 12s of work for one worker
		recs = append(recs, &kgo.Record{Topic: in, Partition: int32(i % 2), Value: []byte(fmt.Sprint(i))})
	}
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var events []Event
	listen := func(e Event) {
		mu.Lock()
		events = append(events, e)
		mu.Unlock()
	}
	start := func(id string) *App {
		app, err := New(top, append(testTimings(), WithBrokers(tg.Brokers...), WithAppID(appID), WithInstanceID(id), WithListener(listen),
			WithLogger(slog.New(slog.DiscardHandler)), WithMemoryState())...)
		if err != nil {
			t.Fatal(err)
		}
		runUntilCleanup(t, app)
		return app
	}
	processed := func(app *App) (n int64, active int) {
		for _, ts := range app.Status().Tasks {
			if ts.Role == "active" {
				n += ts.Processed
				active++
			}
		}
		return n, active
	}

	a := start("a")
	waitFor(t, 60*time.Second, func() bool { n, active := processed(a); return active == 2 && n >= 10 },
		func() string { return fmt.Sprintf("a: %+v", a.Status()) })
	b2 := start("b")
	waitFor(t, 60*time.Second, func() bool {
		_, na := processed(a)
		_, nb := processed(b2)
		return na == 1 && nb == 1
	}, func() string { return fmt.Sprintf("a: %+v\nb: %+v", a.Status(), b2.Status()) })
	left, _ := processed(a)
	mu.Lock()
	defer mu.Unlock()
	for _, e := range events {
		if e.Kind == EventLost {
			t.Errorf("%s lost task %s (gave it up without a commit): it was expelled from the group", e.Instance, e.Task)
		}
	}
	if left >= 600 {
		t.Errorf("a processed its whole backlog (%d records) before the rebalance took a task from it", left)
	}
}

// TestStatusShowsWaitingRecords: an active task's records polled and not
// yet processed show in Status (TaskStatus.Waiting) while its processor
// works through them, and none once it has processed them all.
func TestStatusShowsWaitingRecords(t *testing.T) {
	tg, in, appID, top := slowTopology(t, 5*time.Millisecond)
	prod := testProducer(t, tg.Brokers)
	var recs []*kgo.Record
	for i := range 200 {
		recs = append(recs, &kgo.Record{Topic: in, Partition: int32(i % 2), Value: []byte(fmt.Sprint(i))})
	}
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	app, err := New(top, append(testTimings(), WithBrokers(tg.Brokers...), WithAppID(appID), WithInstanceID("a"),
		WithLogger(slog.New(slog.DiscardHandler)), WithMemoryState())...)
	if err != nil {
		t.Fatal(err)
	}
	runUntilCleanup(t, app)
	tasks := func() (processed, waiting int64) {
		for _, ts := range app.Status().Tasks {
			if ts.Role == "active" {
				processed += ts.Processed
				waiting += ts.Waiting
			}
		}
		return processed, waiting
	}
	var most int64
	waitFor(t, 60*time.Second, func() bool {
		n, w := tasks()
		most = max(most, w)
		return n > 0 && w > 0 && n+w <= 200
	}, func() string {
		return fmt.Sprintf("no records shown waiting while processed (most %d): %+v", most, app.Status())
	})
	waitFor(t, 60*time.Second, func() bool { n, w := tasks(); return n == 200 && w == 0 },
		func() string { return fmt.Sprintf("want 200 processed and none waiting: %+v", app.Status()) })
	// Polls go on with nothing to read: each comes back within the poll's
	// wait (100 ms).
	first := app.Status().PolledAt
	polling := false
	waitFor(t, 30*time.Second, func() bool {
		st := app.Status()
		polling = polling || st.Polling
		return !first.IsZero() && st.PolledAt.After(first) && polling
	}, func() string {
		return fmt.Sprintf("no poll seen under way and back after %v: %+v", first, app.Status())
	})
}

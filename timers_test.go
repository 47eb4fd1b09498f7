package baton

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/commit"
	"github.com/baton-streams/baton/internal/counts"
	"github.com/baton-streams/baton/internal/faultnet"
	"github.com/baton-streams/baton/internal/kafkatest"
	"github.com/baton-streams/baton/topology"
)

// timerNode sets the timer each record asks for: key is the timer's name,
// value "<clock> <due unix ms>" (clock "s" or "w"); a record without a
// value sets nothing. OnTimer sends the timer's name to the output with
// the instance that fired it as the value. calls counts the calls of
// both, unguarded: the race detector reports a Punctuate that runs at the
// same time as the task's records.
type timerNode struct {
	out, instance string
	calls         int
}

func (n *timerNode) Process(ctx topology.NodeContext, rec topology.Record) error {
	n.calls++
	if len(rec.Value) == 0 {
		return nil
	}
	c, ms, ok := strings.Cut(string(rec.Value), " ")
	due, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil {
		return fmt.Errorf("bad timer request %q", rec.Value)
	}
	clock := topology.WallClock
	if c == "s" {
		clock = topology.StreamTime
	}
	return ctx.Timers().Set(clock, rec.Key, time.UnixMilli(due))
}

func (n *timerNode) OnTimer(ctx topology.NodeContext, _ topology.Clock, name []byte, _ time.Time) error {
	n.calls++
	return ctx.Send(n.out, name, []byte(n.instance))
}

// TestTimersSurviveHandovers runs a Processor-API topology with timers
// on two instances while records set timers of both clocks, due over the
// next two seconds. A third instance joins (tasks move to it through
// learners) and then drains (they move back) while timers fall due; under
// exactly-once, a transaction of each of the first two instances aborts
// too, and a fourth instance takes tasks and crashes. Every timer must fire exactly once in the output (read committed):
// none lost in a move or an abort, none fired by both the old and the new
// owner.
func TestTimersSurviveHandovers(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: moves tasks while timers fall due")
	}
	for _, g := range []Guarantee{AtLeastOnce, ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) { testTimersSurviveHandovers(t, g) })
	}
}

func testTimersSurviveHandovers(t *testing.T, g Guarantee) {
	tg := kafkatest.ForTest(t)
	appID, in, out := tg.Name("timers"), tg.Name("requests"), tg.Name("fired")
	tg.CreateTopic(t, in, 4, false)
	tg.CreateTopic(t, out, 2, false)
	// On Apache Kafka the old owner's last writes reach a learner a little
	// later than on the embedded cluster (see TestScaleOut).
	acceptable := int64(10)
	if tg.Kafka != nil {
		acceptable = 100
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	start := func(id string, extra ...Option) *running {
		b := topology.NewBuilder(appID)
		b.AddSource("src", in)
		b.AddProcessor("timers", topology.SupplierFunc(func(string, int32) topology.Node { return &timerNode{out: out, instance: id} }), "src")
		b.AddTimers("due", "timers")
		top, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		opts := append(testTimings(), WithBrokers(tg.Brokers...), WithAppID(appID), WithInstanceID(id), WithStateDir(t.TempDir()),
			WithAcceptableLag(acceptable), WithLogger(logger), WithGuarantee(g))
		if g == ExactlyOnce {
			opts = append(opts, WithTransactionTimeout(3*time.Second))
		}
		app, err := New(top, append(opts, extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		r := &running{app: app, cancel: cancel, done: goRun(t, ctx, app)}
		t.Cleanup(func() {
			cancel()
			app.Leave()
			select {
			case <-r.done:
			case <-time.After(30 * time.Second):
				t.Errorf("instance %s did not stop", id)
			}
		})
		return r
	}
	active := func(apps ...*running) (map[string]string, bool) {
		o := map[string]string{}
		learning := false
		for _, r := range apps {
			for _, ts := range r.app.Status().Tasks {
				switch ts.Role {
				case "active":
					o[ts.ID] = r.app.InstanceID()
				case "learner":
					learning = true
				}
			}
		}
		return o, len(o) == 4 && !learning
	}
	describe := func(apps ...*running) func() string {
		return func() string {
			var sb strings.Builder
			for _, r := range apps {
				fmt.Fprintf(&sb, "%s: %+v\n", r.app.InstanceID(), r.app.Status().Tasks)
			}
			return sb.String()
		}
	}

	prod, err := kgo.NewClient(kgo.SeedBrokers(tg.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prod.Close)
	// Each request sets one timer, named by its key, due within 2 s: of
	// the wall clock, or of the stream time, which the requests' own
	// timestamps move.
	var mu sync.Mutex
	want := map[string]bool{}
	rng := rand.New(rand.NewPCG(3, 4))
	produce := func(i int) error {
		now := time.Now()
		clock := []string{"s", "w"}[(i/4)%2] // each partition gets both
		name := fmt.Sprintf("%s%d", clock, i)
		due := now.Add(time.Duration(100+rng.IntN(1900)) * time.Millisecond).UnixMilli()
		r := &kgo.Record{Topic: in, Partition: int32(i % 4), Key: []byte(name), Value: fmt.Appendf(nil, "%s %d", clock, due), Timestamp: now}
		if err := prod.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			return err
		}
		mu.Lock()
		want[name] = true
		mu.Unlock()
		return nil
	}
	ctx, stopFlow := context.WithCancel(context.Background())
	flowDone := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				flowDone <- nil
				return
			case <-time.After(10 * time.Millisecond):
			}
			if err := produce(i); err != nil {
				flowDone <- err
				return
			}
		}
	}()
	t.Cleanup(stopFlow)

	by := map[string]int{} // timers fired, by instance, and by instance and clock
	fired := func() map[string]int {
		got := map[string]int{}
		clear(by)
		err := counts.Scan(context.Background(), tg.Brokers, out, true, func(r *kgo.Record) {
			got[string(r.Key)]++
			by[string(r.Value)]++
			by[string(r.Value)+" "+string(r.Key[:1])]++ // by instance and clock
		})
		if err != nil {
			t.Fatalf("reading %s: %v", out, err)
		}
		return got
	}

	// firedBy counts the timers instance fired, committed or not.
	firedBy := func(instance string) int {
		n := 0
		err := counts.Scan(context.Background(), tg.Brokers, out, false, func(r *kgo.Record) {
			if string(r.Value) == instance {
				n++
			}
		})
		if err != nil {
			t.Fatalf("reading %s: %v", out, err)
		}
		return n
	}

	a, b2 := start("a"), start("b")
	waitFor(t, 60*time.Second, func() bool { _, ok := active(a, b2); return ok }, describe(a, b2))
	waitFor(t, 30*time.Second, func() bool { return len(fired()) > 20 }, func() string { return fmt.Sprintf("no timer fired: %d\n%s", len(fired()), describe(a, b2)()) })
	if g == ExactlyOnce {
		// A transaction that aborts takes back the timers it fired with
		// the rest of its work: they fire again in the next one.
		for _, r := range []*running{a, b2} {
			aborted := func() float64 { return testutil.ToFloat64(r.app.e.Metrics().Transactions.WithLabelValues("aborted")) }
			before := aborted()
			cause := errors.New("test: a transaction with timers fired aborts")
			r.app.e.Committer().(*commit.Transactional).Plant(commit.Fault{Abort: cause})
			waitFor(t, 30*time.Second, func() bool { return aborted() > before }, func() string { return "no abort on " + r.app.InstanceID() })
		}
	}
	c := start("c")
	waitFor(t, 60*time.Second, func() bool {
		o, ok := active(a, b2, c)
		return ok && slices.Contains(mapValues(o), "c")
	}, describe(a, b2, c))
	// Timers of both clocks fall due on c, then c drains.
	waitFor(t, 30*time.Second, func() bool { fired(); return by["c s"] > 0 && by["c w"] > 0 },
		func() string { return fmt.Sprintf("c fired no timer of one clock: %v", by) })
	c.stop(t)
	waitFor(t, 60*time.Second, func() bool { _, ok := active(a, b2); return ok }, describe(a, b2))
	if g == ExactlyOnce {
		// d takes tasks, fires timers for a while, and crashes: what it
		// fired since its last commit is aborted and fired again by the
		// next owner, once.
		cut := &faultnet.Cutter{}
		d := start("d", WithKafkaOptions(kgo.Dialer(cut.Dial)))
		waitFor(t, 60*time.Second, func() bool {
			o, ok := active(a, b2, d)
			return ok && slices.Contains(mapValues(o), "d")
		}, describe(a, b2, d))
		// d fires timers (uncommitted until its next commit), then is
		// cut off.
		waitFor(t, 30*time.Second, func() bool { return firedBy("d") > 0 }, func() string { return "d fired no timer" })
		cut.Cut()
		waitFor(t, 60*time.Second, func() bool { o, _ := active(a, b2); return len(o) == 4 }, describe(a, b2))
		d.app.Leave()
	}
	// a and b fire timers again after the moves, before the flow stops.
	fired()
	aBefore, bBefore := by["a"], by["b"]
	waitFor(t, 30*time.Second, func() bool { fired(); return by["a"] > aBefore && by["b"] > bBefore },
		func() string {
			return fmt.Sprintf("a or b fired no timer after the moves: %v (before: a %d, b %d)", by, aBefore, bBefore)
		})
	stopFlow()
	if err := <-flowDone; err != nil {
		t.Fatalf("producing requests: %v", err)
	}
	// A last request on each partition, without a timer, moves stream
	// time past every stream-time timer.
	for p := range int32(4) {
		r := &kgo.Record{Topic: in, Partition: p, Key: []byte("end"), Timestamp: time.Now().Add(time.Hour)}
		if err := prod.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 60*time.Second, func() bool {
		got := fired()
		for name := range want {
			if got[name] == 0 {
				return false
			}
		}
		return true
	}, func() string {
		got := fired()
		var missing []string
		for name := range want {
			if got[name] == 0 {
				missing = append(missing, name)
			}
		}
		slices.Sort(missing)
		return fmt.Sprintf("%d of %d timers never fired: %.300v", len(missing), len(want), missing)
	})
	a.stop(t)
	b2.stop(t)

	got := fired()
	var twice, unknown []string
	for name, n := range got {
		switch {
		case !want[name]:
			unknown = append(unknown, name)
		case n > 1:
			twice = append(twice, fmt.Sprintf("%s x%d", name, n))
		}
	}
	if len(twice) > 0 || len(unknown) > 0 {
		slices.Sort(twice)
		t.Errorf("of %d timers, %d fired more than once: %v; unknown: %v", len(want), len(twice), twice, unknown)
	}
	for _, id := range []string{"a", "b", "c"} {
		if by[id+" s"] == 0 || by[id+" w"] == 0 {
			t.Errorf("%s fired %d stream-time and %d wall-clock timers, want some of each (by instance: %v)", id, by[id+" s"], by[id+" w"], by)
		}
	}
	if !t.Failed() {
		t.Logf("%d timers, each fired once; by instance: %v", len(want), by)
	}
	if g == ExactlyOnce {
		// What the aborted transactions fired is in the log, uncommitted.
		raw := map[string]int{}
		if err := counts.Scan(context.Background(), tg.Brokers, out, false, func(r *kgo.Record) { raw[string(r.Key)]++ }); err != nil {
			t.Fatal(err)
		}
		again := 0
		for _, n := range raw {
			if n > 1 {
				again++
			}
		}
		t.Logf("%d timers fired in an aborted transaction and again after it", again)
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

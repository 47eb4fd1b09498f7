package baton

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/topology"
)

// TestWindowedStoreMoves: a windowed count's store moves like the counts
// do. Under exactly-once, a second and a third instance join (each warms
// learners of the windowed store first, and tasks not moved are not
// stopped), the first drains, then the third crashes; every window's
// committed count history is exactly 1..n.
func TestWindowedStoreMoves(t *testing.T) {
	h := newHarness(t, 4)
	h.window = time.Second
	h.prefill(2000)
	eos := []Option{WithGuarantee(ExactlyOnce), WithTransactionTimeout(3 * time.Second)}
	a := h.start("a", eos...)
	h.eventually(60*time.Second, "a to run every task", func() bool { return balanced(a) })
	f := h.startFlow(20 * time.Millisecond)
	b, c, cut := h.joinTwoDrainOne(a, balanced, "1_", eos...)
	cut.Cut()
	h.eventually(60*time.Second, "b to own every task after c crashed", func() bool { _, all := owners(b); return all })
	f.stop()
	h.waitExact(90 * time.Second)
	c.app.Leave()
}

// TestWindowLateRecordsAndEventTime: event time comes from the value (a
// TimestampExtractor); a record whose only window has closed is dropped
// and counted in baton_late_records_total; what the task sends carries
// the extracted event time, not the record's own.
func TestWindowLateRecordsAndEventTime(t *testing.T) {
	h := newHarness(t, 1)
	b := topology.NewBuilder(h.appID)
	// Event times are seconds after base: recent, since Apache Kafka
	// deletes records older than the topic's retention by their
	// timestamps, and a whole minute, so windows start at base.
	base := time.Now().Truncate(time.Minute).Unix()
	b.SetTimestampExtractor(h.input, topology.ValueTimestamp(topology.String, topology.Int64,
		func(_ string, sec int64, _ topology.Record) time.Time { return time.Unix(base+sec, 0) }))
	clicks := topology.FromTopic(b, h.input, topology.String, topology.Int64)
	w := topology.TumblingWindows(10 * time.Second).Grace(2 * time.Second)
	topology.WindowCount(topology.WindowedBy(topology.GroupByKey(clicks, "by-user"), w), "clicks").ToStream().To(h.output)
	top, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	app, err := New(top, WithBrokers(h.brokers...), WithAppID(h.appID), WithStateDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := goRun(t, ctx, app)
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	// Event times in seconds: 3 and 8 in [0,10); 13 opens [10,20) and
	// moves stream time to 13, past 10+2: [0,10) closes, so 9 is late;
	// 11 is not.
	var recs []*kgo.Record
	for _, sec := range []string{"3", "8", "13", "9", "11"} {
		recs = append(recs, &kgo.Record{Topic: h.input, Key: []byte("u1"), Value: []byte(sec)})
	}
	if err := h.prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	late := func() float64 { return testutil.ToFloat64(app.e.Metrics().Late.WithLabelValues("0_0", "clicks")) }
	h.eventually(30*time.Second, "the late record to be counted", func() bool { return late() == 1 })

	cl, err := kgo.NewClient(kgo.SeedBrokers(h.brokers...), kgo.ConsumeTopics(h.output), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	codec := topology.WindowedCodec(topology.String, 10*time.Second)
	var got []string
	for len(got) < 4 {
		fctx, fcancel := context.WithTimeout(context.Background(), 30*time.Second)
		fs := cl.PollFetches(fctx)
		timedOut := fctx.Err()
		fcancel()
		if timedOut != nil {
			t.Fatalf("output so far %v: %v", got, timedOut)
		}
		fs.EachRecord(func(r *kgo.Record) {
			k, err := codec.Decode(r.Key)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%s@%d=%s at %d", k.Key, k.Start.Unix()-base, r.Value, r.Timestamp.Unix()-base))
		})
	}
	want := []string{"u1@0=1 at 3", "u1@0=2 at 8", "u1@10=1 at 13", "u1@10=2 at 11"}
	if !slices.Equal(got, want) {
		t.Fatalf("output %v, want %v", got, want)
	}
	if n := late(); n != 1 {
		t.Fatalf("%v late records counted, want 1", n)
	}
}

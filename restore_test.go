package baton

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/govern"
	"github.com/baton-streams/baton/internal/tick"
	"github.com/baton-streams/baton/state"
	"github.com/baton-streams/baton/topology"
)

// fetchGate holds a client's fetch responses carrying records of one
// topic while it is shut: the hook runs on the client's fetch goroutine,
// so the records reach no poll until the gate opens.
type fetchGate struct {
	topic   string
	mu      sync.Mutex
	shut    bool
	opened  chan struct{}
	held    chan struct{} // closed once a response is held
	heldOne sync.Once
}

func newFetchGate(topic string) *fetchGate {
	return &fetchGate{topic: topic, opened: make(chan struct{}), held: make(chan struct{})}
}

func (g *fetchGate) OnFetchRecordBuffered(r *kgo.Record) {
	if r.Topic != g.topic {
		return
	}
	g.mu.Lock()
	shut := g.shut
	g.mu.Unlock()
	if !shut {
		return
	}
	g.heldOne.Do(func() { close(g.held) })
	<-g.opened
}

func (g *fetchGate) shutNow() {
	g.mu.Lock()
	g.shut = true
	g.mu.Unlock()
}

func (g *fetchGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shut {
		g.shut = false
		close(g.opened)
	}
}

// deleteRecords deletes topic's records below del. Apache Kafka deletes
// records only from topics whose cleanup policy includes delete, so it
// sets compact,delete first; a leader that has not seen the new policy
// yet answers POLICY_VIOLATION, which is retried for a while.
func deleteRecords(ctx context.Context, adm *kadm.Client, topic string, del kadm.Offsets) error {
	alter := []kadm.AlterConfig{{Name: "cleanup.policy", Value: kadm.StringPtr("compact,delete")}}
	resp, err := adm.AlterTopicConfigs(ctx, alter, topic)
	if err == nil {
		err = resp[0].Err
	}
	if err != nil {
		return fmt.Errorf("cleanup.policy of %s: %w", topic, err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		deleted, err := adm.DeleteRecords(ctx, del)
		if err == nil {
			err = deleted.Error()
		}
		if err == nil || !errors.Is(err, kerr.PolicyViolation) || time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("deleting records of %s: %w", topic, err)
			}
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// produceLines writes the given lines and remembers their words.
func (h *harness) produceLines(lines ...string) {
	h.t.Helper()
	var recs []*kgo.Record
	for i, l := range lines {
		for _, w := range bytes.Fields([]byte(l)) {
			h.words[string(w)]++
		}
		recs = append(recs, &kgo.Record{Topic: h.input, Key: []byte(strconv.Itoa(i)), Value: []byte(l)})
	}
	if err := h.prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		h.t.Fatal(err)
	}
}

// changelogFrom reads a changelog partition (read_committed) and returns
// the last value of every key, with the partition's start offset.
func (h *harness) changelogFrom(topic string, part int32) (map[string]string, int64) {
	h.t.Helper()
	return h.changelogUntil(topic, part, -1)
}

// changelogUntil is changelogFrom over the records before offset until
// (-1: the partition's end).
func (h *harness) changelogUntil(topic string, part int32, until int64) (map[string]string, int64) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(h.prod)
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	ends, eerr := adm.ListEndOffsets(ctx, topic)
	if err == nil && eerr == nil {
		eerr = ends.Error()
	}
	if err != nil || eerr != nil {
		h.t.Fatalf("offsets of %s: %v %v", topic, err, eerr)
	}
	start, _ := starts.Lookup(topic, part)
	end, _ := ends.Lookup(topic, part)
	if until >= 0 {
		if until > end.Offset {
			h.t.Fatalf("reading %s[%d] up to %d: its end is %d", topic, part, until, end.Offset)
		}
		end.Offset = until
	}
	out := map[string]string{}
	if end.Offset <= start.Offset {
		return out, start.Offset
	}
	// Markers are read too: a copy's checkpoint may lie just past the
	// marker that ends its changelog, which only they reach.
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.brokers...), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {part: kgo.NewOffset().AtStart()}}))
	if err != nil {
		h.t.Fatal(err)
	}
	defer cl.Close()
	for next := start.Offset; next < end.Offset; {
		f := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			// Stuck below until: the partition's last stable offset
			// stays below it (a transaction open there), though a
			// copy that said it holds until read those records.
			h.logTopics()
			h.logTail(topic, part, next)
			h.t.Fatalf("reading %s[%d] committed: at %d of %d", topic, part, next, end.Offset)
		}
		f.EachRecord(func(r *kgo.Record) {
			if r.Offset >= end.Offset {
				next = end.Offset // every record before it was seen
				return
			}
			next = r.Offset + 1
			switch {
			case r.Attrs.IsControl():
			case r.Value == nil:
				delete(out, string(r.Key))
			default:
				out[string(r.Key)] = string(r.Value)
			}
		})
		f.EachPartition(func(p kgo.FetchTopicPartition) {
			if p.Err == nil && p.LastStableOffset > next && len(p.Records) == 0 {
				next = max(next, p.LastStableOffset)
			}
		})
	}
	return out, start.Offset
}

// storeContents reads every key of a task's store from a stopped
// instance's state directory.
func storeContents(t *testing.T, dir, task, store string) map[string]string {
	t.Helper()
	st, err := state.OpenPebble(dir, task, store)
	if err != nil {
		t.Fatalf("opening %s/%s in %s: %v", task, store, dir, err)
	}
	defer st.Close()
	out := map[string]string{}
	if err := st.Iterate(nil, nil, func(k, v []byte) error {
		out[string(k)] = string(v)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestChangelogTruncatedDuringRestore truncates a changelog past the
// position a standby reads it at (DeleteRecords while the standby's
// fetch is held), then lets the standby go on. The records between its
// position and the new start are gone, so the values it holds may be
// stale: it must wipe the store and restore from the changelog's start,
// and end up holding exactly what the changelog holds, not skip to the
// start and keep the rest.
func TestChangelogTruncatedDuringRestore(t *testing.T) {
	h := newHarness(t, 1)
	changelog := topology.ChangelogTopic(h.appID, "counts")
	const task = "1_0"

	h.produce(300)
	h.start("a", WithStandbys(1))
	h.waitExact(30 * time.Second)

	gate := newFetchGate(changelog)
	t.Cleanup(gate.open)
	dir := t.TempDir()
	b := h.start("b", WithStandbys(1), WithStateDir(dir), WithKafkaOptions(kgo.WithHooks(gate)))
	caughtUp := func() bool {
		for _, s := range b.app.Status().Tasks {
			if s.ID == task && s.Role == "standby" && s.Lag == 0 {
				return true
			}
		}
		return false
	}
	h.eventually(30*time.Second, "b's standby of "+task+" to catch up", caughtUp)

	// Hold b's next changelog fetch, then write past it.
	gate.shutNow()
	h.produce(100)
	select {
	case <-gate.held:
	case <-time.After(30 * time.Second):
		t.Fatal("b's standby fetched no more changelog records")
	}
	h.produce(100)
	h.waitExact(30 * time.Second)

	// Truncate the changelog at its end: every record b has not read is
	// gone. Apache Kafka deletes records only from topics whose cleanup
	// policy includes delete.
	h.admin(func(ctx context.Context, adm *kadm.Client) error {
		ends, err := adm.ListEndOffsets(ctx, changelog)
		if err != nil {
			return err
		}
		var del kadm.Offsets
		ends.Each(func(o kadm.ListedOffset) { del.AddOffset(o.Topic, o.Partition, o.Offset, -1) })
		return deleteRecords(ctx, adm, changelog, del)
	})
	// After the truncation only one word changes, so a store that kept
	// its old values holds words the changelog no longer has.
	h.produceLines("alpha", "alpha alpha")
	h.waitExact(30 * time.Second)

	gate.open()
	if !tick.Until(context.Background(), 30*time.Second, 50*time.Millisecond, func() bool {
		return slices.ContainsFunc(h.eventsOn("b", EventStoreRebuilt), func(e Event) bool { return e.Task == task })
	}) {
		t.Errorf("b did not report rebuilding the store of %s", task)
	}
	h.eventually(30*time.Second, "b's standby of "+task+" to catch up again", caughtUp)
	b.stop(t)

	want, start := h.changelogFrom(changelog, 0)
	if start == 0 {
		t.Fatalf("the changelog of %s still starts at 0", task)
	}
	got := storeContents(t, dir, task, "counts")
	if len(got) != len(want) {
		t.Errorf("b's store holds %d keys, the changelog from %d holds %d", len(got), start, len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("key %q: store %q, changelog %q", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("b's store holds %q, which the changelog (from offset %d) no longer has", k, start)
		}
	}
}

// TestStoreOptionsReachPebble: WithStoreOptions reaches every store the
// App opens.
func TestStoreOptionsReachPebble(t *testing.T) {
	h := newHarness(t, 2)
	h.produce(50)
	var mu sync.Mutex
	tuned := map[string]bool{}
	tune := state.WithPebbleOptions(func(o *pebble.Options) {
		mu.Lock()
		defer mu.Unlock()
		tuned[fmt.Sprint(o.MemTableSize)] = true
		o.MemTableSize = 1 << 20
	})
	h.start("a", WithStoreOptions(tune))
	h.waitExact(30 * time.Second)
	mu.Lock()
	defer mu.Unlock()
	if !tuned[strconv.Itoa(state.DefaultMemTableSize)] || len(tuned) != 1 {
		t.Errorf("the tuning saw memtable sizes %v, want only the default %d", tuned, state.DefaultMemTableSize)
	}
}

// TestActiveRestoresNeverWait: an active task that restores is on the
// critical path, so its restore never yields to busy active tasks, even
// while another application of the process processes a flow (the
// pressure warm restores yield to is the process's). Here b restores
// every task cold, as actives, alone in its group: no standby or learner
// can exist, so any wait would be an active's.
func TestActiveRestoresNeverWait(t *testing.T) {
	busyProcess(t)

	h := newHarness(t, 2)
	h.prefill(3000)
	a := h.start("a", WithDrainTimeout(0))
	h.waitExact(60 * time.Second)
	a.stop(t)
	b := h.start("b")
	h.produce(100)
	h.waitExact(60 * time.Second)
	var restored int64
	for _, ts := range b.app.Status().Totals {
		restored += ts.Restored
	}
	if restored == 0 {
		t.Fatal("b restored nothing: the test proves nothing")
	}
	if !govern.Process.Since(time.Now(), time.Second) {
		t.Fatal("the other application's actives were not busy: the test proves nothing")
	}
	if y := testutil.ToFloat64(b.app.e.Metrics().RestoreYielded); y > 0 {
		t.Errorf("b's active tasks' restores (%d records) waited %.6fs for busy actives", restored, y)
	}
	if st := b.app.Status().Restore; st.Records != restored || st.YieldedSeconds != 0 {
		t.Errorf("b's status says it restored %d records and yielded %.6fs; its tasks restored %d and nothing yielded", st.Records, st.YieldedSeconds, restored)
	}
}

// busyProcess starts another application in the process, processing a
// flow until the test ends: its active tasks keep the process busy, the
// pressure warm restores yield to.
func busyProcess(t *testing.T) {
	t.Helper()
	other := newHarness(t, 2)
	x := other.start("x")
	other.startFlow(10 * time.Millisecond) // stopped when the test ends
	other.eventually(30*time.Second, "the other application to process its flow", func() bool { return processedBy(x) > 50 })
}

// TestWarmRestoresYield: while active tasks of the process have records
// (another application's, processing a flow), learners restore in
// chunks and wait after each (WithRestoreShare). /status says for how
// long, the same figure the metric counts, and what was restored; the
// learners still finish and the counts are exact.
func TestWarmRestoresYield(t *testing.T) {
	busyProcess(t)

	h := newHarness(t, 4)
	h.prefill(20000)
	opts := []Option{WithAcceptableLag(100)} // every moved task warms a learner first
	a := h.start("a", opts...)
	h.waitExact(60 * time.Second)
	b := h.start("b", opts...)
	h.eventually(120*time.Second, "a and b to share the tasks", func() bool { return balanced(a, b) })
	h.produce(100)
	h.waitExact(60 * time.Second)
	if len(h.eventsOn("b", EventLearnerReady)) == 0 {
		t.Fatal("b warmed no learner: the test proves nothing")
	}
	st := b.app.Status().Restore
	if st.Records == 0 {
		t.Error("b's status says it restored nothing, though its learners restored")
	}
	if st.YieldedSeconds == 0 {
		t.Error("b's learners never yielded to the busy actives of the process")
	}
	if y := testutil.ToFloat64(b.app.e.Metrics().RestoreYielded); math.Abs(y-st.YieldedSeconds) > 1e-6 {
		t.Errorf("b's status says its restores yielded %.6fs, the metric %.6fs", st.YieldedSeconds, y)
	}
}

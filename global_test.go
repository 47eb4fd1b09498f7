package baton

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/counts"
	"github.com/baton-streams/baton/internal/kafkatest"
	"github.com/baton-streams/baton/topology"
)

// globalSetup is a cluster with a global table topic of 3 partitions
// ("ref": key -> name), an input of orders (2 partitions, each value the
// key to look up) and the output of their inner join ("order@key=name").
type globalSetup struct {
	t                *testing.T
	tg               *kafkatest.Target
	appID            string
	ref, orders, out string
	prod             *kgo.Client // writes to the partition each record names
	seq              int         // orders written
	refWritten       int         // records written to ref
}

func newGlobalSetup(t *testing.T) *globalSetup {
	t.Helper()
	return newGlobalSetupOf(t, true)
}

// newGlobalSetupOf is newGlobalSetup with a global topic compacted or
// not.
func newGlobalSetupOf(t *testing.T, compact bool) *globalSetup {
	t.Helper()
	tg := kafkatest.ForTest(t)
	s := &globalSetup{t: t, tg: tg, appID: tg.Name("enrich"), ref: tg.Name("ref"), orders: tg.Name("orders"), out: tg.Name("enriched")}
	tg.CreateTopic(t, s.ref, 3, compact)
	tg.CreateTopic(t, s.orders, 2, false)
	tg.CreateTopic(t, s.out, 2, false)
	cl, err := kgo.NewClient(kgo.SeedBrokers(tg.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	s.prod = cl
	return s
}

func (s *globalSetup) topology() *topology.Topology {
	s.t.Helper()
	b := topology.NewBuilder(s.appID)
	ref := topology.FromGlobalTopic(b, s.ref, topology.String, topology.String, "ref")
	orders := topology.FromTopic(b, s.orders, topology.String, topology.String)
	topology.JoinGlobal(orders, ref, func(_, key string) string { return key }, func(id, key, name string) string {
		return id + "@" + key + "=" + name
	}).To(s.out)
	top, err := b.Build()
	if err != nil {
		s.t.Fatal(err)
	}
	return top
}

// start runs an instance with its state in dir.
func (s *globalSetup) start(id, dir string, opts ...Option) *running {
	s.t.Helper()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	all := append([]Option{WithBrokers(s.tg.Brokers...), WithInstanceID(id), WithStateDir(dir), WithLogger(logger)}, testTimings()...)
	all = append(all, opts...)
	app, err := New(s.topology(), all...)
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{app: app, cancel: cancel, done: goRun(s.t, ctx, app)}
	s.t.Cleanup(func() {
		cancel()
		app.Leave()
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
			s.t.Errorf("instance %s did not stop", id)
		}
	})
	return r
}

// leave stops r at once, without draining (its tasks have nowhere to
// move), and waits for Run to return.
func leave(t *testing.T, r *running) {
	t.Helper()
	r.cancel()
	r.app.Leave()
	select {
	case err := <-r.done:
		r.done <- err
		if err != nil {
			t.Fatalf("instance %s: %v", r.app.InstanceID(), err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("instance %s did not stop", r.app.InstanceID())
	}
}

// writeRef writes key=value (a tombstone if value is "") to partition p
// of the global topic.
func (s *globalSetup) writeRef(p int32, key, value string) {
	s.t.Helper()
	r := &kgo.Record{Topic: s.ref, Partition: p, Key: []byte(key)}
	if value != "" {
		r.Value = []byte(value)
	}
	if err := s.prod.ProduceSync(context.Background(), r).FirstErr(); err != nil {
		s.t.Fatal(err)
	}
	s.refWritten++
}

// writeRefTxn writes key=value to partition p of the global topic in a
// transaction, committed or aborted.
func (s *globalSetup) writeRefTxn(p int32, key, value string, commit bool) {
	s.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.tg.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.TransactionalID(s.tg.Name("ref-writer")))
	if err != nil {
		s.t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if err := cl.BeginTransaction(); err != nil {
		s.t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: s.ref, Partition: p, Key: []byte(key), Value: []byte(value)}).FirstErr(); err != nil {
		s.t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		s.t.Fatal(err)
	}
}

// order writes an order looking key up to partition p of the input and
// returns its id.
func (s *globalSetup) order(p int32, key string) string {
	s.t.Helper()
	s.seq++
	id := fmt.Sprintf("o%04d", s.seq)
	r := &kgo.Record{Topic: s.orders, Partition: p, Key: []byte(id), Value: []byte(key)}
	if err := s.prod.ProduceSync(context.Background(), r).FirstErr(); err != nil {
		s.t.Fatal(err)
	}
	return id
}

// output reads the join's output: order id -> "key=name".
func (s *globalSetup) output() map[string]string {
	s.t.Helper()
	out := map[string]string{}
	err := counts.Scan(context.Background(), s.tg.Brokers, s.out, true, func(r *kgo.Record) {
		id, rest, _ := strings.Cut(string(r.Value), "@")
		out[id] = rest
	})
	if err != nil {
		s.t.Fatalf("reading %s: %v", s.out, err)
	}
	return out
}

func eventually(t *testing.T, timeout time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// globalStatus returns r's status of the global store "ref".
func globalStatus(r *running) GlobalStoreStatus {
	for _, g := range r.app.Status().GlobalStores {
		if g.Name == "ref" {
			return g
		}
	}
	return GlobalStoreStatus{}
}

// activeTasks returns the ids of r's active tasks.
func activeTasks(r *running) []string {
	var out []string
	for _, t := range r.app.Status().Tasks {
		if t.Role == "active" {
			out = append(out, t.ID)
		}
	}
	slices.Sort(out)
	return out
}

// TestGlobalTableTwoInstances: two instances of an app whose stream joins
// a global table of 3 partitions each hold the whole table (each reads
// every partition, tombstones delete), and an update written while they
// run reaches both: orders of both input partitions, so of both
// instances, see every key and then the update.
func TestGlobalTableTwoInstances(t *testing.T) {
	s := newGlobalSetup(t)
	names := map[string]string{}
	for i := range 30 {
		k := fmt.Sprintf("k%02d", i)
		names[k] = "name-" + k
		s.writeRef(int32(i%3), k, names[k])
	}
	s.writeRef(2, "k29", "") // deleted: absent from the table
	delete(names, "k29")
	a := s.start("a", t.TempDir())
	b := s.start("b", t.TempDir())
	eventually(t, 60*time.Second, "a and b to run one task each", func() bool {
		ta, tb := activeTasks(a), activeTasks(b)
		return len(ta) == 1 && len(tb) == 1 && ta[0] != tb[0]
	})
	for _, r := range []*running{a, b} {
		g := globalStatus(r)
		if !g.Ready || g.Read != int64(s.refWritten) || g.Lag != 0 {
			t.Errorf("instance %s: global store %+v, want ready, read %d, lag 0", r.app.InstanceID(), g, s.refWritten)
		}
	}
	want := map[string]string{}
	for p := range int32(2) {
		for i := range 30 {
			k := fmt.Sprintf("k%02d", i)
			id := s.order(p, k)
			if name, ok := names[k]; ok {
				want[id] = k + "=" + name
			}
		}
	}
	eventually(t, 60*time.Second, "the join's output", func() bool { return len(s.output()) >= len(want) })
	got := s.output()
	for id, w := range want {
		if got[id] != w {
			t.Errorf("order %s: output %q, want %q", id, got[id], w)
		}
	}
	for id, g := range got {
		if _, ok := want[id]; !ok {
			t.Errorf("order %s: output %q, want none (its key is not in the table)", id, g)
		}
	}

	// An update and a delete while the instances run reach both.
	s.writeRef(1, "k01", "renamed")
	s.writeRef(2, "k02", "")
	s.writeRef(0, "k30", "new")
	for _, r := range []*running{a, b} {
		eventually(t, 60*time.Second, "instance "+r.app.InstanceID()+" to read the updates", func() bool {
			return globalStatus(r).Read == int64(s.refWritten)
		})
	}
	want = map[string]string{}
	for p := range int32(2) {
		want[s.order(p, "k01")] = "k01=renamed"
		s.order(p, "k02")
		want[s.order(p, "k30")] = "k30=new"
		want[s.order(p, "k03")] = "k03=name-k03"
	}
	eventually(t, 60*time.Second, "the join's output after the updates", func() bool {
		got := s.output()
		for id := range want {
			if _, ok := got[id]; !ok {
				return false
			}
		}
		return true
	})
	got = s.output()
	for id, w := range want {
		if got[id] != w {
			t.Errorf("order %s after the updates: output %q, want %q", id, got[id], w)
		}
	}
	// Every order has an output but those of k29 and, after the
	// updates, of k02: two of each.
	if n := len(got); n != s.seq-4 {
		t.Errorf("%d outputs for %d orders, want %d (the orders of deleted keys have none)", n, s.seq, s.seq-4)
	}
}

// TestGlobalStoreRestart: an instance restarted with its state reuses its
// global store and reads only the records written while it was down,
// then joins with them.
func TestGlobalStoreRestart(t *testing.T) {
	s := newGlobalSetup(t)
	for i := range 40 {
		s.writeRef(int32(i%3), fmt.Sprintf("k%02d", i), fmt.Sprintf("v%d", i))
	}
	// A committed transaction and an aborted one: the store reads the
	// topic read_committed, and the markers ending the partitions do not
	// hold up its start.
	s.writeRefTxn(0, "t1", "committed", true)
	s.writeRefTxn(1, "t2", "aborted", false)
	dir := t.TempDir()
	reg := prometheus.NewRegistry()
	eos := []Option{WithGuarantee(ExactlyOnce), WithTransactionTimeout(3 * time.Second)}
	a := s.start("a", dir, append(eos, WithMetrics(reg))...)
	eventually(t, 60*time.Second, "a to run both tasks", func() bool { return len(activeTasks(a)) == 2 })
	if g := globalStatus(a); g.Read != 41 || g.Lag != 0 {
		t.Fatalf("first start: global store %+v, want 41 records read (not the aborted one), lag 0", g)
	}
	if v, ok := gather(t, reg)[`baton_global_store_lag_records{store="ref"}`]; !ok || v != 0 {
		t.Errorf("baton_global_store_lag_records = %v (reported: %v), want 0", v, ok)
	}
	leave(t, a)
	for i := range 5 { // while a is down: 2 new keys, 2 updates, 1 delete
		switch i {
		case 0, 1:
			s.writeRef(int32(i), fmt.Sprintf("n%d", i), "new")
		case 2, 3:
			s.writeRef(int32(i%3), fmt.Sprintf("k%02d", i), "updated")
		case 4:
			s.writeRef(1, "k04", "")
		}
	}
	a = s.start("a", dir, eos...)
	eventually(t, 60*time.Second, "a to run both tasks again", func() bool { return len(activeTasks(a)) == 2 })
	if g := globalStatus(a); !g.Ready || g.Read != 5 || g.Lag != 0 {
		t.Fatalf("after the restart: global store %+v, want ready, 5 records read (those it lacked), lag 0", g)
	}
	want := map[string]string{}
	for p := range int32(2) {
		want[s.order(p, "n0")] = "n0=new"
		want[s.order(p, "n1")] = "n1=new"
		want[s.order(p, "k02")] = "k02=updated"
		want[s.order(p, "k39")] = "k39=v39"
		want[s.order(p, "t1")] = "t1=committed"
		s.order(p, "k04")
		s.order(p, "t2")
	}
	eventually(t, 60*time.Second, "the join's output", func() bool { return len(s.output()) >= len(want) })
	got := s.output()
	if len(got) != len(want) {
		t.Errorf("%d outputs, want %d: %v", len(got), len(want), got)
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("order %s: output %q, want %q", id, got[id], w)
		}
	}
}

// TestGlobalStoreErrors: a missing global topic stops Run with an error
// naming it; so does a topology with global stores but no state dir.
func TestGlobalStoreErrors(t *testing.T) {
	s := newGlobalSetup(t)
	s.ref = s.tg.Name("no-such-topic")
	app, err := New(s.topology(), WithBrokers(s.tg.Brokers...), WithStateDir(t.TempDir()),
		WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = runChecked(t, ctx, app)
	if err == nil || !strings.Contains(err.Error(), "global store ref: topic "+s.ref) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("Run with a missing global topic: %v, want an error naming the topic", err)
	}
	if _, err := New(s.topology(), WithBrokers(s.tg.Brokers...)); err == nil || !strings.Contains(err.Error(), "state dir") {
		t.Errorf("New without a state dir: %v, want an error asking for one", err)
	}

}

// TestGlobalStoreBehindTopicStart: a restarted instance whose global
// store lacks records that are gone from the topic (deleted while it was
// down) wipes the store and reads the topic again from its start: the
// entries of the deleted records are gone from its table, the others are
// read again.
func TestGlobalStoreBehindTopicStart(t *testing.T) {
	s := newGlobalSetup(t)
	for i := range 30 {
		s.writeRef(int32(i%3), fmt.Sprintf("k%02d", i), fmt.Sprintf("v%d", i))
	}
	dir := t.TempDir()
	a := s.start("a", dir)
	eventually(t, 60*time.Second, "a to run both tasks", func() bool { return len(activeTasks(a)) == 2 })
	leave(t, a)
	for p := range int32(3) {
		s.writeRef(p, fmt.Sprintf("n%d", p), "new")
	}
	adm := kadm.NewClient(s.prod)
	ends, err := adm.ListEndOffsets(context.Background(), s.ref)
	if err != nil {
		t.Fatal(err)
	}
	del := kadm.Offsets{}
	o, _ := ends.Lookup(s.ref, 0)
	del.AddOffset(s.ref, 0, o.Offset, -1)
	if err := deleteRecords(context.Background(), adm, s.ref, del); err != nil {
		t.Fatal(err)
	}
	a = s.start("a", dir)
	eventually(t, 60*time.Second, "a to run both tasks again", func() bool { return len(activeTasks(a)) == 2 })
	// Partitions 1 and 2 read again whole (10 records and a new one each),
	// partition 0 from its new start: nothing.
	if g := globalStatus(a); !g.Ready || g.Read != 22 || g.Lag != 0 {
		t.Fatalf("after the restart: global store %+v, want ready, 22 records read, lag 0", g)
	}
	want := map[string]string{}
	want[s.order(0, "k01")] = "k01=v1"
	want[s.order(1, "n2")] = "n2=new"
	s.order(0, "k00") // partition 0's records are gone
	s.order(1, "n0")
	eventually(t, 60*time.Second, "the join's output", func() bool { return len(s.output()) >= len(want) })
	got := s.output()
	if len(got) != len(want) {
		t.Errorf("%d outputs, want %d: %v", len(got), len(want), got)
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("order %s: output %q, want %q", id, got[id], w)
		}
	}
}

// lockedBuffer is a log destination safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestGlobalTopicNotCompacted: a global topic that is not compacted is
// read all the same, with a warning naming it; a compacted one gets none.
func TestGlobalTopicNotCompacted(t *testing.T) {
	for _, compact := range []bool{false, true} {
		t.Run(fmt.Sprintf("compact=%t", compact), func(t *testing.T) {
			s := newGlobalSetupOf(t, compact)
			s.writeRef(0, "k", "v")
			var logs lockedBuffer
			a := s.start("a", t.TempDir(), WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
			eventually(t, 60*time.Second, "a to run both tasks", func() bool { return len(activeTasks(a)) == 2 })
			if g := globalStatus(a); g.Read != 1 {
				t.Errorf("global store %+v, want 1 record read", g)
			}
			warned := strings.Contains(logs.String(), "global store topic is not compacted") && strings.Contains(logs.String(), "topic="+s.ref)
			if warned == compact {
				t.Errorf("warned about compaction: %t, want %t; log:\n%s", warned, !compact, logs.String())
			}
		})
	}
}

// TestGlobalStoreInMemory: with WithMemoryState the global store is held
// in memory, read whole at each start.
func TestGlobalStoreInMemory(t *testing.T) {
	s := newGlobalSetup(t)
	for i := range 6 {
		s.writeRef(int32(i%3), fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i))
	}
	a := s.start("a", "", WithMemoryState())
	eventually(t, 60*time.Second, "a to run both tasks", func() bool { return len(activeTasks(a)) == 2 })
	if g := globalStatus(a); !g.Ready || g.Read != 6 {
		t.Fatalf("global store %+v, want ready, 6 records read", g)
	}
	want := map[string]string{s.order(0, "k2"): "k2=v2", s.order(1, "k4"): "k4=v4"}
	s.order(1, "k9")
	eventually(t, 60*time.Second, "the join's output", func() bool { return len(s.output()) >= len(want) })
	if got := s.output(); !maps.Equal(got, want) {
		t.Errorf("output %v, want %v", got, want)
	}
}

// TestGlobalReaderLosesRecords: records the running reader has not read
// yet are deleted from the topic; the instance stops with an error naming
// the partition, instead of holding a table with a hole.
func TestGlobalReaderLosesRecords(t *testing.T) {
	s := newGlobalSetup(t)
	s.writeRef(0, "k0", "v0")
	gate := newFetchGate(s.ref)
	a := s.start("a", t.TempDir(), WithKafkaOptions(kgo.WithHooks(gate)))
	eventually(t, 60*time.Second, "a to run both tasks", func() bool { return len(activeTasks(a)) == 2 })
	gate.shutNow()
	s.writeRef(0, "k1", "v1") // fetched, held by the gate
	select {
	case <-gate.held:
	case <-time.After(60 * time.Second):
		t.Fatal("the reader did not fetch the record")
	}
	s.writeRef(0, "k2", "v2") // deleted before the reader fetches them
	s.writeRef(0, "k3", "v3")
	adm := kadm.NewClient(s.prod)
	del := kadm.Offsets{}
	del.AddOffset(s.ref, 0, 4, -1)
	if err := deleteRecords(context.Background(), adm, s.ref, del); err != nil {
		t.Fatal(err)
	}
	gate.open()
	select {
	case err := <-a.done:
		a.done <- err
		if err == nil || !strings.Contains(err.Error(), "global store topic "+s.ref+"[0]") || !strings.Contains(err.Error(), "gone") {
			t.Errorf("Run returned %v, want an error naming %s[0] and saying records are gone", err, s.ref)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the instance went on after records its global store lacked were deleted")
	}
}

package baton

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/baton-streams/baton/internal/commit"
	"github.com/baton-streams/baton/internal/engine"
	"github.com/baton-streams/baton/internal/faultnet"
	"github.com/baton-streams/baton/internal/kafkatest"
	"github.com/baton-streams/baton/internal/rewind"
	"github.com/baton-streams/baton/internal/txncheck"
	"github.com/baton-streams/baton/topology"
)

func TestParseGuarantee(t *testing.T) {
	for _, g := range []Guarantee{AtLeastOnce, ExactlyOnce} {
		got, err := ParseGuarantee(g.String())
		if err != nil || got != g {
			t.Errorf("ParseGuarantee(%q) = %v, %v", g.String(), got, err)
		}
	}
	if _, err := ParseGuarantee("twice"); err == nil {
		t.Error("ParseGuarantee(twice): no error")
	}
}

func TestExactlyOnceOptions(t *testing.T) {
	top, err := topology.WordCount("wc", "lines", "counts")
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(top, WithBrokers("127.0.0.1:1"), WithStateDir(t.TempDir()), WithGuarantee(ExactlyOnce),
		WithTransactionTimeout(100*time.Millisecond), WithCommitInterval(time.Second))
	if !errors.Is(err, ErrConfig) {
		t.Fatalf("transaction timeout below the commit interval: err = %v, want ErrConfig", err)
	}
	if _, err := New(top, WithBrokers("127.0.0.1:1"), WithStateDir(t.TempDir()), WithGuarantee(Guarantee(7))); !errors.Is(err, ErrConfig) {
		t.Fatalf("unknown guarantee: err = %v, want ErrConfig", err)
	}
}

// TestExactlyOnceCrash: under exactly-once, an instance dies (its network
// cut, as if killed) while records flow and its transaction holds output
// records: the transaction coordinator, asked right after the cut, has it
// open with output written and no group offsets in it, and once it ended,
// its records are in the output and changelog and none is read committed.
// (A cut between two transactions or during a commit proves nothing; the
// test then starts another instance and tries again, at most five times.)
// The survivors process its records again from the last commit, and every
// word's committed history is exactly 1..n: nothing lost and nothing
// counted twice. The survivors' own tasks never stop.
func TestExactlyOnceCrash(t *testing.T) {
	for _, standbys := range []int{0, 1} {
		t.Run(map[int]string{0: "standbys=0", 1: "standbys=1"}[standbys], func(t *testing.T) {
			h := newHarness(t, 4)
			h.prefill(2000)
			eos := []Option{WithGuarantee(ExactlyOnce), WithStandbys(standbys), WithTransactionTimeout(3 * time.Second)}
			a := h.start("a", eos...)
			b := h.start("b", eos...)
			f := h.startFlow(10 * time.Millisecond)
			for attempt, caught := 1, false; !caught; attempt++ {
				if attempt > 5 {
					t.Fatalf("in %d attempts, no instance was cut off while its transaction held records", attempt-1)
				}
				cut := &faultnet.Cutter{}
				c := h.start(fmt.Sprintf("c%d", attempt), append(eos, WithKafkaOptions(kgo.Dialer(cut.Dial)))...)
				h.eventually(60*time.Second, "three instances to share the tasks", func() bool { return balanced(a, b, c) })
				h.eventually(30*time.Second, "c to write output in a transaction", func() bool { return txncheck.HoldsRecords(h.describeTxn(c), h.output) })
				m := h.mark(a, b, c)
				cut.Cut()
				// Cut off, c changes nothing in the cluster any more: what
				// the coordinator holds now is its transaction at the cut.
				// Once the coordinator has ended it, its records must be in
				// the topics and none read committed, or the cut landed on
				// a commit already on its way.
				txn := h.describeTxn(c)
				if txncheck.HoldsRecords(txn, h.output) {
					if _, err := txncheck.WaitEnded(context.Background(), kadm.NewClient(h.prod), c.app.e.TransactionalID(), 60*time.Second); err != nil {
						t.Fatal(err)
					}
					written, committed, err := txncheck.Records(context.Background(), h.brokers, txn, h.output, topology.ChangelogTopic(h.appID, "counts"))
					if err != nil {
						t.Fatal(err)
					}
					caught = written > 0 && committed == 0
					t.Logf("attempt %d: c was cut off in transaction %s (producer %d epoch %d): %d records written, %d committed",
						attempt, txn.State, txn.ProducerID, txn.ProducerEpoch, written, committed)
				} else {
					t.Logf("attempt %d: c's transaction was %s over %v at the cut: no output, or its commit had begun; again", attempt, txn.State, txn.Topics.Sorted())
				}
				h.eventually(30*time.Second, "a and b to own every task", func() bool { _, all := owners(a, b); return all })
				h.checkOnlyMovedStop(m)
				c.app.Leave()
			}
			f.stop()
			h.waitExact(60 * time.Second)
		})
	}
}

// describeTxn asks the transaction coordinator about r's transaction.
func (h *harness) describeTxn(r *running) kadm.DescribedTransaction {
	h.t.Helper()
	d, err := txncheck.Describe(context.Background(), kadm.NewClient(h.prod), r.app.e.TransactionalID())
	if err != nil {
		h.t.Fatal(err)
	}
	return d
}

// TestExactlyOnceScaling: exact counts under exactly-once through joins
// (learners, warm handovers) and drains while records flow; at each join
// and drain, no task stops unless a plan moves it.
func TestExactlyOnceScaling(t *testing.T) {
	h := newHarness(t, 4)
	h.prefill(2000)
	eos := []Option{WithGuarantee(ExactlyOnce), WithTransactionTimeout(3 * time.Second)}
	a := h.start("a", eos...)
	h.eventually(60*time.Second, "a to run every task", func() bool { return balanced(a) })
	f := h.startFlow(20 * time.Millisecond)
	m := h.mark(a)
	b := h.start("b", eos...)
	h.eventually(60*time.Second, "a and b", func() bool { return balanced(a, b) })
	h.checkOnlyMovedStop(m)
	m = h.mark(a, b)
	c := h.start("c", eos...)
	h.eventually(60*time.Second, "a, b and c", func() bool { return balanced(a, b, c) })
	h.checkOnlyMovedStop(m)
	m = h.mark(a, b, c)
	a.stop(t)
	h.eventually(60*time.Second, "b and c", func() bool { return balanced(b, c) })
	h.checkOnlyMovedStop(m)
	f.stop()
	h.waitExact(60 * time.Second)
	if len(h.eventsOf(EventLearner)) == 0 {
		t.Error("no learner warmed up: the joins did not go through learners")
	}
	committed, aborted := 0.0, 0.0
	for _, r := range []*running{a, b, c} {
		committed += testutil.ToFloat64(r.app.e.Metrics().Transactions.WithLabelValues("committed"))
		aborted += testutil.ToFloat64(r.app.e.Metrics().Transactions.WithLabelValues("aborted"))
	}
	if committed == 0 {
		t.Error("no transaction committed")
	}
	if aborted > 0 {
		// A handover commits the transaction before the task moves; an
		// abort would throw away every task's work since the last commit.
		t.Errorf("%v transactions aborted during graceful joins and drains", aborted)
	}
}

// TestExactlyOnceAbortCatchesUpStores: a transaction whose commit outcome
// is unknown may have committed. After the abort, the stores of active
// tasks are brought up to what their changelogs hold before processing
// goes on. Here the changelog holds a committed write the store lacks
// (alpha=999); after an abort the next "alpha" must count 1000. The
// aborted transaction is the one that counted "beta" (the second with
// work after the line: the first split it into words): the rollback drops
// that count, so beta counts 1 once processed again, not 2.
func TestExactlyOnceAbortCatchesUpStores(t *testing.T) {
	h := newHarness(t, 4)
	a := h.start("a", WithGuarantee(ExactlyOnce))
	h.produce(50)
	h.waitExact(60 * time.Second)
	h.eventually(30*time.Second, "a to run every task", func() bool { _, all := owners(a); return all })

	changelog := topology.ChangelogTopic(h.appID, "counts")
	rec := &kgo.Record{Topic: changelog, Partition: topology.Partition([]byte("alpha"), 4), Key: []byte("alpha"), Value: []byte("999")}
	if err := h.prod.ProduceSync(context.Background(), rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
	aborted := func() float64 { return testutil.ToFloat64(a.app.e.Metrics().Transactions.WithLabelValues("aborted")) }
	before := aborted()
	cause := errors.New("test: a commit with an unknown outcome")
	a.app.e.Committer().(*commit.Transactional).Plant(commit.Fault{Skip: 1, Abort: cause})
	if err := h.prod.ProduceSync(context.Background(), &kgo.Record{Topic: h.input, Value: []byte("beta")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	h.words["beta"]++
	h.eventually(30*time.Second, "the transaction to abort", func() bool { return aborted() > before })
	if err := h.prod.ProduceSync(context.Background(), &kgo.Record{Topic: h.input, Value: []byte("alpha")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	h.eventually(30*time.Second, "alpha to count 1000", func() bool { return h.counts()["alpha"] == 1000 })
	h.words["alpha"] = 1000
	h.injected = map[string]bool{"alpha": true}
	h.waitExact(30 * time.Second)
}

// TestRewindWaitsForPendingOffsets: the group has committed offset 5 of an
// input partition whose log starts at 3, and a transaction that commits
// offset 8 for it is still open, as when an instance aborted and its
// markers are not all written yet. A stable read of the group's offsets
// cannot give that partition's offset until the transaction ends (Apache
// Kafka answers UNSTABLE_OFFSET_COMMIT for the partition); the rewind asks
// again until then and goes back to 5 after the abort, not to the start
// of the partition.
func TestRewindWaitsForPendingOffsets(t *testing.T) {
	tg := kafkatest.ForTest(t)
	topic, group, txnID := tg.Name("in"), tg.Name("g"), tg.Name("txn")
	tg.CreateTopic(t, topic, 1, false)
	adm := newAdmin(t, tg.Brokers)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	cl, err := kgo.NewClient(kgo.SeedBrokers(tg.Brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range 10 {
		if err := cl.ProduceSync(ctx, kgo.StringRecord(fmt.Sprint(i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	trimmed, err := adm.DeleteRecords(ctx, kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: 3}}})
	if err == nil {
		err = trimmed.Error()
	}
	if err != nil {
		t.Fatalf("moving the log start to 3: %v", err)
	}
	committed, err := adm.CommitOffsets(ctx, group, kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: 5, LeaderEpoch: -1}}})
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		t.Fatalf("committing offset 5: %v", err)
	}

	// The open transaction: its producer adds the group's offsets to it
	// and commits offset 8 in it, then waits.
	txn, err := kgo.NewClient(kgo.SeedBrokers(tg.Brokers...), kgo.TransactionalID(txnID))
	if err != nil {
		t.Fatal(err)
	}
	defer txn.Close()
	pid, epoch, err := txn.ProducerID(ctx)
	if err != nil {
		t.Fatalf("initializing the transactional producer: %v", err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = txnID, pid, epoch, group
	addResp, err := add.RequestWith(ctx, txn)
	if err == nil {
		err = kerr.ErrorForCode(addResp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("AddOffsetsToTxn: %v", err)
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch, commit.Generation = txnID, group, pid, epoch, -1
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	ct := kmsg.NewTxnOffsetCommitRequestTopic()
	ct.Topic, ct.TopicID = topic, td[topic].ID // by name up to v5, by id from v6
	cp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset, cp.LeaderEpoch = 0, 8, -1
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	commitResp, err := commit.RequestWith(ctx, txn)
	if err == nil {
		for _, rt := range commitResp.Topics {
			for _, rp := range rt.Partitions {
				err = errors.Join(err, kerr.ErrorForCode(rp.ErrorCode))
			}
		}
	}
	if err != nil {
		t.Fatalf("TxnOffsetCommit: %v", err)
	}

	// What the rewind's read sees while the transaction is open.
	stable, err := adm.FetchOffsets(kadm.RequireStable(ctx), group)
	if err == nil {
		if o, ok := stable.Lookup(topic, 0); ok {
			err = o.Err
			if err == nil {
				t.Fatalf("a stable read gave offset %d of %s[0] while a transaction holding offsets for it is open", o.At, topic)
			}
		}
	}
	t.Logf("a stable read with the transaction open: %v", err)
	if tg.Kafka != nil && !errors.Is(err, kerr.UnstableOffsetCommit) {
		t.Fatalf("a stable read with the transaction open: %v, want UNSTABLE_OFFSET_COMMIT", err)
	}

	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		set map[string]map[int32]kgo.EpochOffset
		err error
	}
	done := make(chan result, 1)
	go func() {
		set, err := rewind.Targets(ctx, adm, group, map[string][]int32{topic: {0}}, starts)
		done <- result{set, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("the rewind decided (%v, %v) while the transaction holding the partition's offsets was open", r.set, r.err)
	case <-time.After(time.Second):
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = txnID, pid, epoch, false
	endResp, err := end.RequestWith(ctx, txn)
	if err == nil {
		err = kerr.ErrorForCode(endResp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("aborting the transaction: %v", err)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("rewind: %v", r.err)
	}
	if got := r.set[topic][0].Offset; got != 5 {
		t.Fatalf("rewinds %s[0] to %d, want 5 (the group's commit; the log starts at 3)", topic, got)
	}
}

// TestExactlyOnceFencedRejoins: another producer takes the instance's
// transactional id over while it processes (as when the brokers bump its
// epoch after a lost commit outcome): its client is fenced and can no
// longer write. The instance closes its tasks and joins again with a new
// client instead of stopping (it says the producer was fenced: a restart
// for another reason does not pass), and every count stays exact.
func TestExactlyOnceFencedRejoins(t *testing.T) {
	h := newHarness(t, 4)
	h.prefill(200)
	logs := &logRecorder{}
	a := h.start("a", WithGuarantee(ExactlyOnce), WithLogger(slog.New(logs)))
	h.eventually(60*time.Second, "a to run every task", func() bool { _, all := owners(a); return all })
	h.waitExact(60 * time.Second)
	f := h.startFlow(10 * time.Millisecond)
	h.eventually(30*time.Second, "a to commit a transaction of the flow", func() bool {
		return testutil.ToFloat64(a.app.e.Metrics().Transactions.WithLabelValues("committed")) > 0
	})
	rogue, err := kgo.NewClient(kgo.SeedBrokers(h.brokers...), kgo.TransactionalID(a.app.e.TransactionalID()))
	if err != nil {
		t.Fatal(err)
	}
	if err := rogue.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	// The rogue's first produce initializes its producer id: the brokers
	// bump the epoch of the transactional id, fencing a's client. a's new
	// client may fence the rogue in turn before its record or its abort
	// lands: then the rogue is told it was fenced. Any other error means
	// the rogue did not take the id over, and the test proves nothing.
	rogueErr := func(what string, err error) {
		if err != nil && !engine.Fenced(err) {
			t.Fatalf("the rogue producer's %s: %v (want success, or fenced by a's new client)", what, err)
		}
		t.Logf("the rogue producer's %s: %v", what, err)
	}
	rogueErr("produce", rogue.ProduceSync(context.Background(), &kgo.Record{Topic: h.output, Key: []byte("rogue"), Value: []byte("1")}).FirstErr())
	rogueErr("abort", rogue.EndTransaction(context.Background(), kgo.TryAbort))
	rogue.Close()
	waitRejoined(h, a)
	if !logs.has(slog.LevelWarn, "the transactional producer was fenced") {
		t.Errorf("a joined again, but never said its producer was fenced; its warnings: %v", logs.messages(slog.LevelWarn))
	}
	runsExact(t, h, a, f)
	if got := h.counts()["rogue"]; got != 0 {
		t.Errorf("the rogue's aborted record reached the output (read committed): rogue=%d", got)
	}
}

// logRecorder is a slog.Handler that keeps every record's level and
// message, for tests that check what an instance said.
type logRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logRecorder) WithGroup(string) slog.Handler            { return l }
func (l *logRecorder) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}

// has reports whether a record at level starts with msg.
func (l *logRecorder) has(level slog.Level, msg string) bool {
	return slices.ContainsFunc(l.messages(level), func(m string) bool { return strings.HasPrefix(m, msg) })
}

// messages are the messages logged at level.
func (l *logRecorder) messages(level slog.Level) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.recs {
		if r.Level == level {
			out = append(out, r.Message)
		}
	}
	return out
}

// waitRejoined waits until a has closed its tasks and joined the group
// again with new clients.
func waitRejoined(h *harness, a *running) {
	h.t.Helper()
	restarts := func() float64 { return testutil.ToFloat64(a.app.e.Metrics().MemberRestarts) }
	h.eventually(60*time.Second, "a to join again with a new client", func() bool { return restarts() > 0 })
}

// runsExact stops the flow and checks that a still runs, owns every task
// again and ends with every count exact.
func runsExact(t *testing.T, h *harness, a *running, f *flow) {
	t.Helper()
	f.stop()
	select {
	case err := <-a.done:
		t.Fatalf("a stopped: %v", err)
	default:
	}
	h.eventually(60*time.Second, "a to run every task again", func() bool { _, all := owners(a); return all })
	h.waitExact(60 * time.Second)
}

// withAbortTimeout shortens the exactly-once abort timeout (30 s).
func withAbortTimeout(d time.Duration) Option { return func(c *config) { c.AbortTimeout = d } }

// TestExactlyOnceAbortUnresolvedRejoins: produce stalls and the
// transaction coordinator stops answering EndTxn, as on Apache Kafka while
// the broker leading them is dead and its partitions have not moved yet,
// or while brokers die one after another. A commit fails on its flush,
// and every attempt to abort fails past the abort timeout. The instance closes its tasks and joins again with a new
// client instead of stopping, and once EndTxn is answered again every
// count is exact.
func TestExactlyOnceAbortUnresolvedRejoins(t *testing.T) {
	if kafkatest.Real(t) {
		t.Skip("fails EndTxn through the embedded cluster's request hooks; runs on the embedded cluster only")
	}
	k := hookedCluster(t)
	var down atomic.Bool
	var refused atomic.Int32
	k.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		if !down.Load() {
			return nil, nil, false
		}
		refused.Add(1)
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil, true
	})
	// The instance's transactional produce stalls too (its partition's
	// leader is dead), so the commit fails on its flush with the
	// transaction still open in the client. The test's own input
	// producer is not transactional and goes on.
	k.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		r := req.(*kmsg.ProduceRequest)
		if !down.Load() || r.TransactionID == nil {
			return nil, nil, false
		}
		return refuseProduce(r, kerr.NotLeaderForPartition.Code), nil, true
	})
	h := newHarnessOn(t, &kafkatest.Target{Brokers: k.ListenAddrs()}, 4)
	h.prefill(200)
	a := h.start("a", WithGuarantee(ExactlyOnce), withAbortTimeout(2*time.Second))
	h.eventually(60*time.Second, "a to run every task", func() bool { _, all := owners(a); return all })
	h.waitExact(60 * time.Second)
	f := h.startFlow(10 * time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	down.Store(true)
	t.Cleanup(func() { down.Store(false) }) // before the flow stops, should the test fail
	waitRejoined(h, a)
	down.Store(false)
	t.Logf("EndTxn refused %d times before a joined again", refused.Load())
	runsExact(t, h, a, f)
}

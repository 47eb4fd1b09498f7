package baton

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/baton-streams/baton/internal/faultnet"
	"github.com/baton-streams/baton/internal/kafkatest"
	"github.com/baton-streams/baton/internal/tick"
	"github.com/baton-streams/baton/topology"
)

func TestMain(m *testing.M) {
	code := m.Run()
	// The shared Apache Kafka cluster (BATON_KAFKA=real) goes first: its
	// process waiters are not leaks.
	kafkatest.StopShared()
	if code == 0 {
		// franz-go's fetch manager once outlived its client's Close in a CI
		// run that included the crash tests (cut connections); it waits for
		// in-flight fetches to report back. It belongs to the client, not
		// the App; every other goroutine must be gone.
		if err := goleak.Find(goleak.IgnoreTopFunction("github.com/twmb/franz-go/pkg/kgo.(*fetchManager).manageFetchConcurrency")); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// flow produces lines until stopped, remembering every word's count.
type flow struct {
	h      *harness
	cancel context.CancelFunc
	done   chan struct{}
}

func (h *harness) startFlow(every time.Duration) *flow {
	ctx, cancel := context.WithCancel(context.Background())
	f := &flow{h: h, cancel: cancel, done: make(chan struct{})}
	h.t.Cleanup(f.stop)
	go func() {
		defer close(f.done)
		// An error means the cluster is gone: the test ended.
		_ = tick.Every(ctx, every, func() error {
			h.wmu.Lock()
			defer h.wmu.Unlock()
			return h.produceErr(20)
		})
	}()
	return f
}

func (f *flow) stop() {
	f.cancel()
	<-f.done
}

// prefill writes n lines of distinct words so that every count task has
// real state to restore.
func (h *harness) prefill(n int) {
	var recs []*kgo.Record
	for i := range n {
		w := "w" + strconv.Itoa(i)
		h.words[w]++
		recs = append(recs, &kgo.Record{Topic: h.input, Key: []byte(w), Value: []byte(w)})
	}
	if err := h.prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		h.t.Fatal(err)
	}
}

// eventually waits for cond, failing with what after timeout.
func (h *harness) eventually(timeout time.Duration, what string, cond func() bool) {
	h.t.Helper()
	if !tick.Until(context.Background(), timeout, 50*time.Millisecond, cond) {
		h.t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// owners maps every task active on one of apps to its instance, and says
// whether every task of the 4-partition wordcount is active somewhere.
func owners(apps ...*running) (map[string]string, bool) {
	out := map[string]string{}
	for _, r := range apps {
		for _, t := range r.app.Status().Tasks {
			if t.Role == "active" {
				out[t.ID] = r.app.InstanceID()
			}
		}
	}
	return out, len(out) == 8
}

// balanced reports whether the apps run every task, each its share of
// the 4 stateful and 4 stateless tasks (within one), with no learner left.
func balanced(apps ...*running) bool {
	o, all := owners(apps...)
	if !all {
		return false
	}
	lo, hi := 4/len(apps), (4+len(apps)-1)/len(apps)
	for _, r := range apps {
		stateful, stateless := 0, 0
		for id, inst := range o {
			switch {
			case inst != r.app.InstanceID():
			case strings.HasPrefix(id, "1_"):
				stateful++
			default:
				stateless++
			}
		}
		if stateful < lo || stateful > hi || stateless < lo || stateless > hi {
			return false
		}
		for _, t := range r.app.Status().Tasks {
			if t.Role == "learner" {
				return false
			}
		}
	}
	return true
}

func (h *harness) eventsOn(instance string, kind EventKind) []Event {
	var out []Event
	for _, e := range h.eventsOf(kind) {
		if e.Instance == instance {
			out = append(out, e)
		}
	}
	return out
}

// checkAtLeast verifies no count is below the occurrences produced.
func (h *harness) waitAtLeast(timeout time.Duration) {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := h.counts()
		low := ""
		for w, n := range h.words {
			if got[w] < n {
				low = fmt.Sprintf("%s: %d < %d", w, got[w], n)
				break
			}
		}
		if low == "" {
			return
		}
		if time.Now().After(deadline) {
			h.diagnose()
			h.t.Fatalf("a count is lower than its occurrences (lost data): %s", low)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestScaleOut: a third instance joins while records flow. It restores as
// a learner before any stateful task becomes active on it; tasks that do
// not move are never revoked; each handed-over task needs at most
// acceptable_lag records replayed; counts stay exact.
func TestScaleOut(t *testing.T) {
	h := newHarness(t, 4)
	h.prefill(3000)
	// On Apache Kafka the old owner's last writes (flushed as it revokes
	// the task) reach the learner a little after both rejoin for the
	// follow-up round. A learner more than acceptable_lag behind the old
	// owner's copy then is not the warmest copy, and the orphan rule hands
	// the task back to its old owner: with 10 that happened in about one
	// run in three at this input rate. 100 is still far below the default
	// (10,000).
	acceptable := int64(10)
	if h.tg.Kafka != nil {
		acceptable = 100
	}
	a, b := h.start("a", WithAcceptableLag(acceptable)), h.start("b", WithAcceptableLag(acceptable))
	h.eventually(30*time.Second, "a and b to share the tasks", func() bool { return balanced(a, b) })
	f := h.startFlow(20 * time.Millisecond)
	h.mu.Lock()
	since := len(h.events)
	h.mu.Unlock()
	c := h.start("c", WithAcceptableLag(acceptable))
	h.eventually(30*time.Second, "c to run stateful tasks", func() bool { return balanced(a, b, c) })
	f.stop()
	h.waitExact(30 * time.Second)

	final, _ := owners(a, b, c)
	learned := map[string]bool{}
	for _, e := range h.eventsOn("c", EventLearner) {
		learned[e.Task] = true
	}
	for _, e := range h.eventsOn("c", EventAssigned) {
		if !strings.HasPrefix(e.Task, "1_") {
			continue
		}
		if !learned[e.Task] {
			t.Errorf("stateful task %s became active on c without a learner first", e.Task)
		}
		if e.Detail != "warm" {
			t.Errorf("task %s became active on c as %q, want a warm promotion of its open learner", e.Task, e.Detail)
		}
		if e.Lag > acceptable {
			t.Errorf("task %s handed to c with lag %d > acceptable lag %d", e.Task, e.Lag, acceptable)
		}
	}
	for _, e := range h.eventsOf(EventRestored) {
		if e.Instance == "c" && e.Replayed > acceptable {
			t.Errorf("task %s replayed %d records on c after the handover", e.Task, e.Replayed)
		}
	}
	h.mu.Lock()
	after := slices.Clone(h.events[since:])
	h.mu.Unlock()
	for _, e := range after {
		if e.Kind == EventRevoked && e.Instance != "c" && final[e.Task] != "c" {
			t.Errorf("task %s revoked from %s though it did not move to c (now on %s)", e.Task, e.Instance, final[e.Task])
		}
	}
}

// TestDrain: a draining instance hands its tasks to warm copies; nothing
// is replayed from scratch, and counts stay exact.
func TestDrain(t *testing.T) {
	h := newHarness(t, 4)
	h.prefill(3000)
	a, b, c := h.start("a"), h.start("b"), h.start("c")
	h.eventually(30*time.Second, "three instances to share the tasks", func() bool { return balanced(a, b, c) })
	f := h.startFlow(20 * time.Millisecond)
	before := len(h.eventsOf(EventAssigned))
	c.stop(t)
	h.eventually(30*time.Second, "a and b to own every task", func() bool { _, all := owners(a, b); return all })
	f.stop()
	h.waitExact(30 * time.Second)
	for _, e := range h.eventsOf(EventAssigned)[before:] {
		if strings.HasPrefix(e.Task, "1_") && e.Lag > 10 {
			t.Errorf("task %s moved off the draining instance cold (lag %d)", e.Task, e.Lag)
		}
	}
	for _, e := range h.eventsOf(EventRestored) {
		if e.Replayed > 10 {
			t.Errorf("task %s replayed %d records on %s", e.Task, e.Replayed, e.Instance)
		}
	}
}

// TestCrash: an instance dies without leaving. Its tasks run elsewhere
// after the session timeout; no count is lost. With a standby, its
// stateful tasks go to the warm standby instead of restoring from zero.
func TestCrash(t *testing.T) {
	for _, standbys := range []int{0, 1} {
		t.Run(fmt.Sprintf("standbys=%d", standbys), func(t *testing.T) {
			h := newHarness(t, 4)
			h.prefill(3000)
			cut := &faultnet.Cutter{}
			a := h.start("a", WithStandbys(standbys))
			b := h.start("b", WithStandbys(standbys))
			c := h.start("c", WithStandbys(standbys), WithKafkaOptions(kgo.Dialer(cut.Dial)))
			h.eventually(30*time.Second, "three instances to share the tasks", func() bool { return balanced(a, b, c) })
			if standbys > 0 {
				h.eventually(30*time.Second, "standbys to catch up", func() bool {
					n := 0
					for _, r := range []*running{a, b, c} {
						for _, ts := range r.app.Status().Tasks {
							if ts.Role == "standby" && ts.Lag <= 10 {
								n++
							}
						}
					}
					return n == 4
				})
			}
			f := h.startFlow(20 * time.Millisecond)
			lost, _ := owners(c)
			before := len(h.eventsOf(EventAssigned))
			cut.Cut()
			h.eventually(30*time.Second, "a and b to own every task", func() bool { _, all := owners(a, b); return all })
			f.stop()
			h.waitAtLeast(30 * time.Second)
			for _, e := range h.eventsOf(EventAssigned)[before:] {
				if _, was := lost[e.Task]; !was || !strings.HasPrefix(e.Task, "1_") {
					continue
				}
				if standbys > 0 && e.Lag > 10 {
					t.Errorf("orphan %s went to %s with lag %d though a standby was warm", e.Task, e.Instance, e.Lag)
				}
			}
			c.app.Leave()
		})
	}
}

// TestLeaderCrashWhileLearning is the seed's second scenario: the leader
// dies while a new instance warms a learner. The survivors reassign
// everything; no count is lost.
func TestLeaderCrashWhileLearning(t *testing.T) {
	h := newHarness(t, 4)
	h.prefill(20000)
	cut := &faultnet.Cutter{}
	a := h.start("a", WithKafkaOptions(kgo.Dialer(cut.Dial)))
	h.eventually(30*time.Second, "a to lead", func() bool { return a.app.Status().Leader })
	b := h.start("b")
	h.eventually(30*time.Second, "a and b to share the tasks", func() bool { return balanced(a, b) })
	h.mu.Lock()
	crashed := make(chan struct{})
	prev := len(h.events)
	h.mu.Unlock()
	go func() { // crash the leader as soon as c starts learning
		for {
			h.mu.Lock()
			learning := false
			for _, e := range h.events[prev:] {
				learning = learning || (e.Kind == EventLearner && e.Instance == "c")
			}
			h.mu.Unlock()
			if learning {
				cut.Cut()
				close(crashed)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	c := h.start("c")
	select {
	case <-crashed:
	case <-time.After(30 * time.Second):
		t.Fatal("c never started a learner")
	}
	f := h.startFlow(20 * time.Millisecond)
	h.eventually(40*time.Second, "b and c to own every task", func() bool { return balanced(b, c) })
	f.stop()
	h.waitAtLeast(30 * time.Second)
	a.app.Leave()
}

// TestExactAfterJoinsAndDrains: a run with several graceful joins and
// drains ends with every count exact.
func TestExactAfterJoinsAndDrains(t *testing.T) {
	h := newHarness(t, 4)
	h.prefill(2000)
	a := h.start("a")
	f := h.startFlow(20 * time.Millisecond)
	b := h.start("b")
	h.eventually(30*time.Second, "a and b", func() bool { return balanced(a, b) })
	c := h.start("c")
	h.eventually(30*time.Second, "a, b and c", func() bool { return balanced(a, b, c) })
	a.stop(t)
	d := h.start("d")
	h.eventually(30*time.Second, "b, c and d", func() bool { return balanced(b, c, d) })
	b.stop(t)
	h.eventually(30*time.Second, "c and d", func() bool { return balanced(c, d) })
	f.stop()
	h.waitExact(30 * time.Second)
	ids := []string{}
	for _, e := range h.eventsOf(EventLeaving) {
		ids = append(ids, e.Instance)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"a", "b"}) {
		t.Errorf("drained instances = %v, want [a b]", ids)
	}
}

// TestCorruptStateIsRestored: a task's state directory damaged between
// runs is wiped and restored from the changelog; the counts stay exact.
func TestCorruptStateIsRestored(t *testing.T) {
	h := newHarness(t, 4)
	h.prefill(2000)
	dir := t.TempDir()
	a := h.start("a", WithStateDir(dir))
	h.waitExact(30 * time.Second)
	a.stop(t)
	manifests, err := filepath.Glob(filepath.Join(dir, "1_0", "counts", "MANIFEST-*"))
	if err != nil || len(manifests) == 0 {
		t.Fatalf("no store files to damage under %s: %v", dir, err)
	}
	for _, m := range manifests {
		if err := os.WriteFile(m, []byte("not a manifest"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h.produce(300)
	h.start("a2", WithStateDir(dir))
	h.waitExact(30 * time.Second)
	restored := false
	for _, e := range h.eventsOf(EventAssigned) {
		restored = restored || (e.Instance == "a2" && e.Task == "1_0" && e.Lag > 0)
	}
	if !restored {
		t.Error("the damaged task was not restored from its changelog (no lag at assignment)")
	}
}

// TestStateBehindChangelogStart: a store whose checkpoint is older than
// the changelog's first offset (records deleted meanwhile) is wiped and
// restored from the changelog's start, with a log line naming the task.
func TestStateBehindChangelogStart(t *testing.T) {
	h := newHarness(t, 1)
	h.produce(200)
	dir := t.TempDir()
	a := h.start("a", WithStateDir(dir))
	h.waitExact(30 * time.Second)
	a.stop(t)
	h.produce(200)
	b := h.start("b")
	h.waitExact(30 * time.Second)
	b.stop(t)

	cl, err := kgo.NewClient(kgo.SeedBrokers(h.brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	changelog := topology.ChangelogTopic(h.appID, "counts")
	// Apache Kafka deletes records only from topics whose cleanup policy
	// includes delete.
	alter := []kadm.AlterConfig{{Name: "cleanup.policy", Value: kadm.StringPtr("compact,delete")}}
	if resp, err := adm.AlterTopicConfigs(context.Background(), alter, changelog); err != nil {
		t.Fatal(err)
	} else if err := resp[0].Err; err != nil {
		t.Fatalf("cleanup.policy of %s: %v", changelog, err)
	}
	ends, err := adm.ListEndOffsets(context.Background(), changelog)
	if err != nil {
		t.Fatal(err)
	}
	var del kadm.Offsets
	ends.Each(func(o kadm.ListedOffset) { del.AddOffset(o.Topic, o.Partition, o.Offset, -1) })
	deleted, err := adm.DeleteRecords(context.Background(), del)
	if err == nil {
		err = deleted.Error()
	}
	if err != nil {
		t.Fatalf("deleting the changelog's records: %v", err)
	}
	logs := &syncBuffer{}
	h.start("a2", WithStateDir(dir), WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	h.eventually(30*time.Second, "a2 to wipe the store behind the changelog's start", func() bool {
		return strings.Contains(logs.String(), "behind its changelog's start") && strings.Contains(logs.String(), "task=1_0")
	})
}

// TestStateAheadOfChangelog: a state directory holds a store whose
// checkpoint is past its changelog's end, as state from another cluster
// (here: another application's run on another cluster, with the same
// task and store names) or a changelog deleted and created again leaves
// it. Kept, its counts would go on from another history. The instance
// wipes it with a warning naming the task and store, restores it from
// this changelog, and every count is exact.
func TestStateAheadOfChangelog(t *testing.T) {
	dir := t.TempDir()
	other := newHarness(t, 1)
	other.produce(300)
	a := other.start("a", WithStateDir(dir))
	other.waitExact(60 * time.Second)
	a.stop(t)

	h := newHarness(t, 1)
	h.produce(20)
	logs := &syncBuffer{}
	h.start("b", WithStateDir(dir), WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	h.waitExact(60 * time.Second)
	h.produce(20)
	h.waitExact(60 * time.Second)
	found := false
	for _, line := range strings.Split(logs.String(), "\n") {
		found = found || strings.Contains(line, "ahead of its changelog") && strings.Contains(line, "task=1_0") && strings.Contains(line, "store=counts")
	}
	if !found {
		t.Errorf("no warning naming task 1_0 and store counts about state ahead of its changelog; log:\n%s", logs.String())
	}
}

// TestStateAheadOfChangelogEndUnknown is TestStateAheadOfChangelog with
// the changelog's end offset unknown when the instance opens the store:
// the first three ListOffsets requests for the changelog fail with
// LEADER_NOT_AVAILABLE (on Apache Kafka a changelog leader that is down
// does this; the embedded cluster fails them through its request hooks).
// A store with state must not be used before its changelog's end is
// known: the instance waits for it, then wipes the store and restores
// it, and every count is exact.
func TestStateAheadOfChangelogEndUnknown(t *testing.T) {
	if kafkatest.Real(t) {
		t.Skip("fails ListOffsets through the embedded cluster's request hooks; runs on the embedded cluster only")
	}
	dir := t.TempDir()
	other := newHarness(t, 1)
	other.produce(300)
	a := other.start("a", WithStateDir(dir))
	other.waitExact(60 * time.Second)
	a.stop(t)

	k, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(4),
		kfake.GroupMinSessionTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	h := newHarnessOn(t, &kafkatest.Target{Brokers: k.ListenAddrs()}, 1)
	h.produce(20)
	changelog := topology.ChangelogTopic(h.appID, "counts")
	var failed atomic.Int32
	k.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		r := req.(*kmsg.ListOffsetsRequest)
		if failed.Load() >= 3 || !slices.ContainsFunc(r.Topics, func(t kmsg.ListOffsetsRequestTopic) bool { return t.Topic == changelog }) {
			return nil, nil, false
		}
		failed.Add(1)
		resp := r.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, rt := range r.Topics {
			st := kmsg.NewListOffsetsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewListOffsetsResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.LeaderNotAvailable.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	logs := &syncBuffer{}
	h.start("b", WithStateDir(dir), WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	h.waitExact(60 * time.Second)
	h.produce(20)
	h.waitExact(60 * time.Second)
	for _, want := range []string{"changelog end offset unknown; waiting for it", "ahead of its changelog"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no warning %q; log:\n%s", want, logs.String())
		}
	}
}

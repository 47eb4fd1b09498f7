package baton

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/goleak"

	"github.com/baton-streams/baton/instance"
	"github.com/baton-streams/baton/internal/counts"
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
		err := tick.Every(ctx, every, func() error {
			h.wmu.Lock()
			defer h.wmu.Unlock()
			return h.produceErr(20)
		})
		if err != nil && ctx.Err() == nil {
			// The counts checked later would be wrong for a reason
			// that is not baton's: say so here.
			h.t.Errorf("the input flow stopped: %v", err)
		}
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
		ts := h.stamp()
		h.count(w, ts)
		recs = append(recs, &kgo.Record{Topic: h.input, Key: []byte(w), Value: []byte(w), Timestamp: ts})
	}
	res := h.prod.ProduceSync(context.Background(), recs...)
	if err := res.FirstErr(); err != nil {
		h.t.Fatal(err)
	}
	for _, r := range res {
		h.wrote[r.Record.Partition]++
	}
}

// eventually waits for cond, failing with what after timeout.
func (h *harness) eventually(timeout time.Duration, what string, cond func() bool) {
	h.t.Helper()
	if !tick.Until(context.Background(), timeout, 50*time.Millisecond, cond) {
		h.logStatus()
		h.t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// logStatus logs each running instance's generation, tasks (role, lag,
// processed) and the last plan it made as leader with its reasons: what a
// timed-out wait needs to tell a stuck restore from a plan that never
// came.
func (h *harness) logStatus() {
	h.t.Helper()
	for _, r := range h.runs {
		st := r.app.Status()
		var b strings.Builder
		fmt.Fprintf(&b, "instance %s: generation %d leader %v leaving %v;", st.Instance, st.Generation, st.Leader, st.Leaving)
		for _, ts := range st.Tasks {
			fmt.Fprintf(&b, " %s=%s(lag %d, processed %d)", ts.ID, ts.Role, ts.Lag, ts.Processed)
		}
		if p := st.Plan; p != nil {
			fmt.Fprintf(&b, "; last plan: generation %d followup %v", p.Generation, p.Followup)
			for _, in := range p.Instances {
				fmt.Fprintf(&b, " %s{active %v learner %v standby %v revoked %v}", in.ID, in.Active, in.Learner, in.Standby, in.Revoked)
			}
			fmt.Fprintf(&b, " reasons %q", p.Reasons)
		}
		h.t.Log(b.String())
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

// TestScaleOut: a third instance joins while records flow. Its link is
// slow, so that restoring the counts' state takes it seconds: long enough
// to see what happens meanwhile. Each stateful task it takes is first
// restored there by a learner while its owner keeps processing, and is
// revoked only once that learner is ready (checkLearnerPromise); tasks
// that do not move are never revoked, restarted nor paused
// (checkOnlyMovedStop); each handed-over task needs at most
// acceptable_lag records replayed; counts stay exact.
func TestScaleOut(t *testing.T) {
	h := newHarness(t, 4)
	h.prefill(60000)
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
	a, b := h.start("a", WithAcceptableLag(acceptable), h.checkCopies()), h.start("b", WithAcceptableLag(acceptable), h.checkCopies())
	h.eventually(30*time.Second, "a and b to share the tasks", func() bool { return balanced(a, b) })
	h.waitExact(60 * time.Second) // the changelogs hold the whole prefill
	// About 150 changelog writes a second per task: the slow link reads
	// several times that, so a ready learner is not far behind.
	f := h.startFlow(100 * time.Millisecond)
	m := h.mark(a, b)
	s := h.sample(a, b)
	slow := &faultnet.Slow{BytesPerSecond: 60_000}
	c := h.start("c", WithAcceptableLag(acceptable), WithKafkaOptions(kgo.Dialer(slow.Dial)), h.checkCopies())
	h.eventually(60*time.Second, "c to run stateful tasks", func() bool { return balanced(a, b, c) })
	s.stop()
	f.stop()
	h.waitExact(30 * time.Second)

	for _, e := range h.eventsOn("c", EventAssigned) {
		if !strings.HasPrefix(e.Task, "1_") {
			continue
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
	if n := h.checkLearnerPromise(m, s, "c"); n == 0 {
		t.Error("no stateful task moved to c")
	}
	h.checkOnlyMovedStop(m)
}

// TestDrain: a draining instance hands its tasks to warm copies; nothing
// is replayed from scratch, the other instances' tasks never stop, and
// counts stay exact. The state is large enough, and a's link slow
// enough, that restoring a drained task takes seconds: a drain that left
// before its learners were ready would hand its tasks over cold, with a
// lag of thousands, where the check below sees it.
func TestDrain(t *testing.T) {
	h := newHarness(t, 4)
	h.prefill(60000)
	_, slow := slowLink(100_000)
	a, b, c := h.start("a", slow, h.checkCopies()), h.start("b", h.checkCopies()), h.start("c", h.checkCopies())
	h.eventually(60*time.Second, "three instances to share the tasks", func() bool { return balanced(a, b, c) })
	h.waitExact(60 * time.Second)
	f := h.startFlow(20 * time.Millisecond)
	m := h.mark(a, b, c)
	held, _ := owners(c)
	c.stop(t)
	h.eventually(60*time.Second, "a and b to own every task", func() bool { _, all := owners(a, b); return all })
	f.stop()
	h.waitExact(30 * time.Second)
	// The drain's handovers are warm: every stateful task c held went to
	// an instance whose copy was within the acceptable lag, and nothing
	// was replayed. (Handovers while the group formed are not the
	// drain's: with members joining one by one, a task can move while the
	// prefill is still being counted.)
	drained, _ := h.since(m)
	ready := map[string]bool{} // instance/task
	moved := 0
	// A member the group expelled meanwhile (a starved machine can miss
	// the session timeout) loses its tasks, and their next owners may
	// replay them: only the drained tasks' replays are owed then.
	var lost []string
	for _, e := range drained {
		if e.Kind == EventLost {
			lost = append(lost, e.Instance+" lost "+e.Task)
		}
	}
	// A task assigned before the drain began may still be restoring as
	// it begins (the slow-linked a took one cold while the group
	// formed): its replay is the formation's, not the drain's.
	assigned := map[string]bool{} // instance/task, since the drain began
	// A copy the leader saw within the acceptable lag may take its task
	// without a learner (a copy left on disk, whose lag its instance
	// reads every second): it then replays what its task's owner wrote
	// since, a second's flow at most, but never the task's whole state.
	const sinceCaughtUp = 1000
	caughtUp := map[string]bool{} // instance/task assigned within the acceptable lag
	for _, e := range drained {
		switch {
		case e.Kind == EventLearnerReady:
			ready[e.Instance+"/"+e.Task] = true
		case e.Kind == EventRestored && e.Replayed > 10 && !assigned[e.Instance+"/"+e.Task]:
			t.Logf("task %s replayed %d records on %s, which took it before the drain began", e.Task, e.Replayed, e.Instance)
		case e.Kind == EventAssigned && strings.HasPrefix(e.Task, "1_"):
			assigned[e.Instance+"/"+e.Task] = true
			if _, was := held[e.Task]; !was {
				break
			}
			moved++
			caughtUp[e.Instance+"/"+e.Task] = e.Lag >= 0 && e.Lag <= 10
			if e.Lag > 10 {
				t.Errorf("task %s moved off the draining instance to %s %s (lag %v, learner ready before: %v); want a handover to a caught-up copy",
					e.Task, e.Instance, e.Detail, lagText(e.Lag), ready[e.Instance+"/"+e.Task])
			} else if e.Detail != "warm" || !ready[e.Instance+"/"+e.Task] {
				t.Logf("task %s moved off the draining instance to %s %s (lag %v) without a learner-ready event there first",
					e.Task, e.Instance, e.Detail, lagText(e.Lag))
			}
		case e.Kind == EventRestored && e.Replayed > 10:
			if caughtUp[e.Instance+"/"+e.Task] && e.Replayed <= sinceCaughtUp {
				t.Logf("task %s replayed %d records on %s, whose copy was within the acceptable lag when it was given the task", e.Task, e.Replayed, e.Instance)
				break
			}
			if _, was := held[e.Task]; !was && len(lost) > 0 {
				t.Logf("task %s replayed %d records on %s, after %v", e.Task, e.Replayed, e.Instance, lost)
				break
			}
			t.Errorf("task %s replayed %d records on %s (lost meanwhile: %v); its events since the drain began:", e.Task, e.Replayed, e.Instance, lost)
			for _, o := range drained {
				if o.Task == e.Task {
					t.Logf("  %s %s %s detail %q lag %v replayed %d", o.Time.Format("15:04:05.000"), o.Instance, o.Kind, o.Detail, lagText(o.Lag), o.Replayed)
				}
			}
		}
	}
	stateful := 0
	for id := range held {
		if strings.HasPrefix(id, "1_") {
			stateful++
		}
	}
	if stateful == 0 || moved < stateful {
		t.Errorf("c held %d stateful tasks; %d handovers of them seen", stateful, moved)
	}
	t.Logf("c held %d stateful tasks", stateful)
	h.checkOnlyMovedStop(m)
	// The drained instance holds no task now; its totals keep what its
	// tasks did, and with the others' they cover every word.
	var counted, words int64
	for _, r := range []*running{a, b, c} {
		for id, n := range r.app.Status().Totals {
			if strings.HasPrefix(id, "1_") {
				counted += n.Processed
			}
		}
	}
	for _, n := range h.words {
		words += n
	}
	if counted < words {
		t.Errorf("the count tasks' totals sum to %d records, fewer than the %d words produced", counted, words)
	}
	if st := c.app.Status(); len(st.Tasks) != 0 || len(st.Totals) == 0 {
		t.Errorf("drained instance c: %d tasks, totals %v; want none, and what its tasks did", len(st.Tasks), st.Totals)
	}
}

// TestCrash: an instance dies without leaving. Its tasks run elsewhere
// after the session timeout; no count is lost, and no count is higher
// than the work the dead instance may have done without committing it
// explains (at-least-once). With a standby, its stateful tasks go to the
// warm standby instead of restoring from zero. Tasks of the survivors
// never stop.
func TestCrash(t *testing.T) {
	for _, standbys := range []int{0, 1} {
		t.Run(fmt.Sprintf("standbys=%d", standbys), func(t *testing.T) {
			h := newHarness(t, 4)
			h.prefill(3000)
			cut := &faultnet.Cutter{}
			a := h.start("a", WithStandbys(standbys), h.checkCopies())
			b := h.start("b", WithStandbys(standbys), h.checkCopies())
			c := h.start("c", WithStandbys(standbys), WithKafkaOptions(kgo.Dialer(cut.Dial)), h.checkCopies())
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
			// c dies in the middle of the flow, with records processed
			// since its last commit.
			base := processedBy(c)
			f := h.startFlow(20 * time.Millisecond)
			h.eventually(30*time.Second, "c to process the flow", func() bool { return processedBy(c) > base+200 })
			lost, _ := owners(c)
			m := h.mark(a, b, c)
			before := len(h.eventsOf(EventAssigned))
			cut.Cut()
			uncommitted := h.uncommitted(lost)
			h.eventually(30*time.Second, "a and b to own every task", func() bool { _, all := owners(a, b); return all })
			f.stop()
			h.waitAtLeast(30 * time.Second)
			h.checkOverCount(uncommitted)
			for _, e := range h.eventsOf(EventAssigned)[before:] {
				if _, was := lost[e.Task]; !was || !strings.HasPrefix(e.Task, "1_") {
					continue
				}
				if standbys > 0 && e.Lag > 10 {
					t.Errorf("orphan %s went to %s with lag %d though a standby was warm", e.Task, e.Instance, e.Lag)
				}
			}
			h.checkOnlyMovedStop(m)
			c.app.Leave()
		})
	}
}

// TestLeaderCrashWhileLearning is the seed's second scenario: the leader
// dies while a new instance warms a learner. The new instance's link is
// slow, and the leader dies only once c's learner is seen restoring,
// behind by more than the acceptable lag.
// The survivors reassign everything; b's tasks stop only if a plan moves
// them; no count is lost, and none is higher than the dead leader's
// uncommitted work explains.
func TestLeaderCrashWhileLearning(t *testing.T) {
	if raceEnabled {
		// Under the race detector on two cores, the embedded cluster
		// answered the survivors' JoinGroup after the client's deadline
		// (i/o timeout) while the dead leader was still a member, with a
		// 2 s and with a 6 s session: b was expelled, and the scenario
		// was not the one scripted. It runs in the plain pass and on
		// Apache Kafka.
		t.Skip("the scripted timing does not hold under the race detector")
	}
	h := newHarness(t, 4)
	h.prefill(20000)
	cut := &faultnet.Cutter{}
	a := h.start("a", WithKafkaOptions(kgo.Dialer(cut.Dial)))
	h.eventually(30*time.Second, "a to lead", func() bool { return a.app.Status().Leader })
	b := h.start("b")
	h.eventually(30*time.Second, "a and b to share the tasks", func() bool { return balanced(a, b) })
	m := h.mark(a, b)
	// Crash the leader while c has a learner restoring: its lag known and
	// above the acceptable lag (10).
	crashed, quit := make(chan string, 1), make(chan struct{})
	defer close(quit)
	go func() {
		for {
			if app, ok := h.apps.Load("c"); ok {
				for _, ts := range app.(*App).Status().Tasks {
					if ts.Role == "learner" && ts.Lag > 10 && ts.Lag != instance.UnknownLag {
						cut.Cut()
						crashed <- fmt.Sprintf("%s (lag %d)", ts.ID, ts.Lag)
						return
					}
				}
			}
			select {
			case <-quit:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	slow := &faultnet.Slow{BytesPerSecond: 60_000}
	c := h.start("c", WithKafkaOptions(kgo.Dialer(slow.Dial)))
	select {
	case learner := <-crashed:
		t.Logf("the leader died while c's learner %s restored", learner)
	case <-time.After(30 * time.Second):
		t.Fatal("c never had a learner restoring (lag known and above the acceptable lag)")
	}
	lost, _ := owners(a)
	uncommitted := h.uncommitted(lost)
	f := h.startFlow(20 * time.Millisecond)
	h.eventually(40*time.Second, "b and c to own every task", func() bool { return balanced(b, c) })
	f.stop()
	h.waitAtLeast(30 * time.Second)
	h.checkOverCount(uncommitted)
	h.checkOnlyMovedStop(m)
	a.app.Leave()
}

// TestExactAfterJoinsAndDrains: a run with several graceful joins and
// drains ends with every count exact; at each join and drain, no task
// stopped unless a plan moved it.
func TestExactAfterJoinsAndDrains(t *testing.T) {
	h := newHarness(t, 4)
	h.prefill(2000)
	a := h.start("a")
	h.eventually(30*time.Second, "a to run every task", func() bool { return balanced(a) })
	f := h.startFlow(20 * time.Millisecond)
	m := h.mark(a)
	b := h.start("b")
	h.eventually(30*time.Second, "a and b", func() bool { return balanced(a, b) })
	h.checkOnlyMovedStop(m)
	m = h.mark(a, b)
	c := h.start("c")
	h.eventually(30*time.Second, "a, b and c", func() bool { return balanced(a, b, c) })
	h.checkOnlyMovedStop(m)
	m = h.mark(a, b, c)
	a.stop(t)
	h.checkOnlyMovedStop(m)
	m = h.mark(b, c)
	d := h.start("d")
	h.eventually(30*time.Second, "b, c and d", func() bool { return balanced(b, c, d) })
	h.checkOnlyMovedStop(m)
	m = h.mark(b, c, d)
	b.stop(t)
	h.eventually(30*time.Second, "c and d", func() bool { return balanced(c, d) })
	h.checkOnlyMovedStop(m)
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
// runs is wiped and restored from the changelog; the other tasks' stores
// are kept as they are; the counts stay exact.
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
	a2 := h.start("a2", WithStateDir(dir))
	h.waitExact(30 * time.Second)
	// Nothing was written to the changelogs while no instance ran: a store
	// kept from disk replays nothing, a wiped one replays its changelog.
	replayed := map[string]int64{}
	for _, e := range h.eventsOn("a2", EventRestored) {
		replayed[e.Task] += e.Replayed
	}
	for _, id := range []string{"1_0", "1_1", "1_2", "1_3"} {
		n, ok := replayed[id]
		switch {
		case !ok:
			t.Errorf("task %s never finished restoring on a2", id)
		case id == "1_0" && n == 0:
			t.Error("the damaged task 1_0 was not restored from its changelog (nothing replayed)")
		case id != "1_0" && n != 0:
			t.Errorf("healthy task %s replayed %d changelog records: its store on disk was not kept", id, n)
		}
	}
	// Status says the same: what each task restored while active.
	for _, ts := range a2.app.Status().Tasks {
		if n, ok := replayed[ts.ID]; ok && ts.Restored != n {
			t.Errorf("status of %s: restored %d, but it replayed %d", ts.ID, ts.Restored, n)
		}
	}
}

// TestStateBehindChangelogStart: a store whose checkpoint is older than
// the changelog's first offset (records deleted meanwhile) is wiped and
// restored from the changelog's start, with a log line naming the task.
// a counts "alpha"; b, on other state, counts "beta" in two rounds; then
// the changelog loses a's records and the first of b's. a's store, behind
// the start, must be wiped (else alpha keeps a's count) and rebuilt from
// what remains (else beta loses b's count).
func TestStateBehindChangelogStart(t *testing.T) {
	h := newHarness(t, 1)
	lines := func(n int, line string) {
		t.Helper()
		var recs []*kgo.Record
		for range n {
			recs = append(recs, &kgo.Record{Topic: h.input, Value: []byte(line)})
			for _, w := range strings.Fields(line) {
				h.words[w]++
			}
		}
		if err := h.prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	lines(100, "alpha")
	dir := t.TempDir()
	a := h.start("a", WithStateDir(dir))
	h.waitExact(30 * time.Second)
	a.stop(t)

	cl, err := kgo.NewClient(kgo.SeedBrokers(h.brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	changelog := topology.ChangelogTopic(h.appID, "counts")
	ends, err := adm.ListEndOffsets(context.Background(), changelog)
	if err != nil {
		t.Fatal(err)
	}
	checkpoint, ok := ends.Lookup(changelog, 0) // a's store has all of it
	if !ok || checkpoint.Offset == 0 {
		t.Fatalf("a wrote nothing to %s", changelog)
	}

	b := h.start("b")
	lines(50, "beta")
	h.waitExact(30 * time.Second)
	lines(50, "beta")
	h.waitExact(30 * time.Second)
	b.stop(t)

	// The first record after a's checkpoint goes too: a's store is then
	// behind the start. beta's later records still hold its count.
	var del kadm.Offsets
	del.AddOffset(changelog, 0, checkpoint.Offset+1, -1)
	if err := deleteRecords(context.Background(), adm, changelog, del); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	h.start("a2", WithStateDir(dir), WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	h.eventually(30*time.Second, "a2 to wipe the store behind the changelog's start", func() bool {
		return strings.Contains(logs.String(), "behind its changelog's start") && strings.Contains(logs.String(), "task=1_0")
	})
	// What the changelog still holds, and what comes next: alpha counts
	// from zero again (its records are gone), beta goes on from 100.
	// alpha's committed history starts again at 1, so only its last
	// value is checked.
	h.words = map[string]int64{"alpha": 0, "beta": h.words["beta"]}
	h.injected = map[string]bool{"alpha": true}
	lines(10, "alpha beta")
	h.waitExact(30 * time.Second)
}

// mark is a point in a test's history: how many events and plans were
// seen then, and which instance ran each task.
type mark struct {
	events, plans int
	owners        map[string]string
}

// mark notes the history so far; apps are the instances running then.
func (h *harness) mark(apps ...*running) mark {
	o, _ := owners(apps...)
	h.mu.Lock()
	defer h.mu.Unlock()
	return mark{events: len(h.events), plans: len(h.plans), owners: o}
}

// since returns the events and plans recorded after m.
func (h *harness) since(m mark) ([]Event, []PlanStatus) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.events[m.events:]), slices.Clone(h.plans[m.plans:])
}

// checkOnlyMovedStop checks the cooperative promise over everything since
// m: a task is revoked only from an instance a plan told to revoke it,
// and a task that no plan moved (active on the same instance at m and in
// every plan since) is never revoked, assigned again (which restarts it)
// nor paused. Every plan must have been recorded, and at least one task
// must have stayed, or the check would prove nothing.
func (h *harness) checkOnlyMovedStop(m mark) {
	h.t.Helper()
	events, plans := h.since(m)
	led := 0
	for _, e := range events {
		if e.Kind == EventLeader {
			led++
		}
	}
	if len(plans) == 0 || len(plans) != led {
		h.t.Errorf("%d plans recorded for %d rounds led since the mark: the check needs every plan", len(plans), led)
		return
	}
	planned := map[[2]string]bool{} // instance, task
	stayed := maps.Clone(m.owners)
	for _, p := range plans {
		active := map[string]string{}
		for _, in := range p.Instances {
			for _, id := range in.Revoked {
				planned[[2]string{in.ID, id}] = true
			}
			for _, id := range in.Active {
				active[id] = in.ID
			}
		}
		for id, owner := range stayed {
			if active[id] != owner {
				delete(stayed, id)
			}
		}
	}
	if len(stayed) == 0 {
		var lost []string
		for _, e := range events {
			if e.Kind == EventLost && m.owners[e.Task] == e.Instance {
				lost = append(lost, e.Instance+":"+e.Task)
			}
		}
		h.t.Errorf("no task stayed where it was in %d plans: nothing to check (tasks lost without a plan, their owner expelled by the group: %v)", len(plans), lost)
	}
	for _, e := range events {
		switch {
		case e.Kind == EventRevoked && !planned[[2]string{e.Instance, e.Task}]:
			h.t.Errorf("task %s revoked from %s though no plan told it to", e.Task, e.Instance)
		case e.Kind == EventRevoked && stayed[e.Task] != "":
			h.t.Errorf("task %s revoked from %s though every plan kept it on %s", e.Task, e.Instance, stayed[e.Task])
		case e.Kind == EventAssigned && stayed[e.Task] != "":
			h.t.Errorf("task %s assigned again on %s (%s, lag %d) though every plan kept it on %s: it stopped", e.Task, e.Instance, e.Detail, e.Lag, stayed[e.Task])
		case e.Kind == EventLost && stayed[e.Task] != "":
			h.t.Errorf("task %s lost by %s (its membership ended) though every plan kept it on %s", e.Task, e.Instance, stayed[e.Task])
		case e.Kind == EventPaused && stayed[e.Task] != "":
			h.t.Errorf("task %s paused on %s though every plan kept it on %s", e.Task, e.Instance, stayed[e.Task])
		}
	}
}

// progressSample is what an instance had processed of a task, and the
// group's committed offset of the task's input partition, at one time.
type progressSample struct {
	at        time.Time
	instance  string
	task      string
	processed int64
	committed int64 // -1: not read
}

// sampler records, until stopped, every 25 ms what apps processed of
// each stateful task they run, and every 100 ms the committed offsets of
// the stateful tasks' input.
type sampler struct {
	stop    func()
	mu      sync.Mutex
	samples []progressSample
}

func (h *harness) sample(apps ...*running) *sampler {
	_, source := h.internalTopics() // the stateful tasks' input
	adm := kadm.NewClient(h.prod)
	ctx, cancel := context.WithCancel(context.Background())
	s := &sampler{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		committed := map[string]int64{}
		n := 0
		_ = tick.Every(ctx, 25*time.Millisecond, func() error {
			if n%4 == 0 {
				if offs, err := adm.FetchOffsets(ctx, h.appID); err == nil {
					offs.Each(func(o kadm.OffsetResponse) {
						if o.Topic == source && o.Err == nil {
							committed[fmt.Sprintf("1_%d", o.Partition)] = o.At
						}
					})
				}
			}
			n++
			now := time.Now()
			var got []progressSample
			for _, r := range apps {
				for _, ts := range r.app.Status().Tasks {
					if ts.Role == "active" && strings.HasPrefix(ts.ID, "1_") {
						c, ok := committed[ts.ID]
						if !ok {
							c = -1
						}
						got = append(got, progressSample{at: now, instance: r.app.InstanceID(), task: ts.ID, processed: ts.Processed, committed: c})
					}
				}
			}
			s.mu.Lock()
			s.samples = append(s.samples, got...)
			s.mu.Unlock()
			return nil
		})
	}()
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	h.t.Cleanup(s.stop)
	return s
}

// between returns the first and the last sample of task on instance
// taken within [from, to].
func (s *sampler) between(instance, task string, from, to time.Time) (first, last progressSample, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.samples {
		if p.instance != instance || p.task != task || p.at.Before(from) || p.at.After(to) {
			continue
		}
		if !ok {
			first, ok = p, true
		}
		last = p
	}
	return first, last, ok
}

// checkLearnerPromise checks the seed's promise for every stateful task
// that moved to instance to since m: a learner warmed it there; it was
// ready before its old owner was told to revoke it, so the old owner held
// it until then; the old owner kept processing it while the learner
// warmed (its processed count rose in each half of the warm-up, and the
// committed offset of its input rose); and the handover gap (last record processed by the old owner to the
// first by the new one) was shorter than the learner's warm-up, which a
// task revoked first and restored afterwards would not manage. It
// returns how many stateful tasks moved to instance to.
func (h *harness) checkLearnerPromise(m mark, s *sampler, to string) int {
	h.t.Helper()
	events, _ := h.since(m)
	checked := 0
	for _, asg := range events {
		if asg.Kind != EventAssigned || asg.Instance != to || !strings.HasPrefix(asg.Task, "1_") {
			continue
		}
		id, from := asg.Task, m.owners[asg.Task]
		var learner, ready, revoked, last, first *Event
		for i := range events {
			e := &events[i]
			if e.Task != id {
				continue
			}
			switch {
			case e.Kind == EventLearner && e.Instance == to && learner == nil:
				learner = e
			case e.Kind == EventLearnerReady && e.Instance == to && revoked == nil:
				ready = e // the last readiness before the revoke
			case e.Kind == EventRevoked && e.Instance == from && revoked == nil:
				revoked = e
			case e.Kind == EventLastRecord && e.Instance == from && last == nil:
				last = e
			case e.Kind == EventFirstRecord && e.Instance == to && first == nil:
				first = e
			}
		}
		checked++
		switch {
		case learner == nil:
			h.t.Errorf("task %s became active on %s with no learner there first", id, to)
			continue
		case revoked == nil:
			h.t.Errorf("task %s moved from %s to %s without a revoke on %s", id, from, to, from)
			continue
		case ready == nil:
			h.t.Errorf("task %s was revoked from %s before its learner on %s was ready", id, from, to)
			continue
		case last == nil || first == nil:
			h.t.Errorf("task %s: no last record on %s (%v) or first record on %s (%v)", id, from, last != nil, to, first != nil)
			continue
		}
		// Processing and commits go on through the warm-up: in each half
		// of it the owner processed records, and over it the committed
		// offset rose.
		warm := ready.Time.Sub(learner.Time)
		mid := learner.Time.Add(warm / 2)
		for _, half := range [][2]time.Time{{learner.Time, mid}, {mid, ready.Time}} {
			p0, p1, ok := s.between(from, id, half[0], half[1])
			switch {
			case !ok:
				h.t.Errorf("task %s: no sample of %s while the learner warmed (%v)", id, from, warm)
			case p1.processed <= p0.processed:
				h.t.Errorf("task %s: %s processed nothing from %s to %s while the learner warmed", id, from, half[0].Format(time.StampMilli), half[1].Format(time.StampMilli))
			}
		}
		p0, p1, ok := s.between(from, id, learner.Time, ready.Time)
		if ok && (p0.committed < 0 || p1.committed <= p0.committed) {
			h.t.Errorf("task %s: the committed offset did not rise while the learner warmed for %v (%d then %d)", id, warm, p0.committed, p1.committed)
		}
		if gap := first.Time.Sub(last.Time); gap >= warm {
			h.t.Errorf("task %s: handover gap %v from %s to %s is not shorter than the learner's warm-up (%v)", id, gap, from, to, warm)
		} else {
			h.t.Logf("task %s: learner on %s warmed for %v while %s processed %d records; handover gap %v", id, to, warm.Round(time.Millisecond), from, p1.processed-p0.processed, gap.Round(time.Millisecond))
		}
	}
	return checked
}

// uncommitted is, for the tasks an instance ran when it died, the input
// it may have processed without committing it: per source partition,
// from the group's committed offset to the end offset, read just after
// the death (a commit still landing or records still arriving only widen
// the ranges).
type uncommitted struct {
	lines map[int32][2]int64 // input partition of a lost split task
	words map[int32][2]int64 // repartition partition of a lost count task
}

func (h *harness) uncommitted(lost map[string]string) uncommitted {
	h.t.Helper()
	_, repartition := h.internalTopics()
	adm := kadm.NewClient(h.prod)
	ctx := context.Background()
	committed, err := adm.FetchOffsets(ctx, h.appID)
	if err != nil {
		h.t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, h.input, repartition)
	if err != nil {
		h.t.Fatal(err)
	}
	u := uncommitted{lines: map[int32][2]int64{}, words: map[int32][2]int64{}}
	for id := range lost {
		sub, p, _ := topology.ParseTaskID(id)
		topic, into := h.input, u.lines
		if sub == 1 {
			topic, into = repartition, u.words
		}
		from := int64(0)
		if o, ok := committed.Lookup(topic, p); ok {
			from = o.At
		}
		end, ok := ends.Lookup(topic, p)
		if !ok {
			h.t.Fatalf("no end offset for %s[%d]", topic, p)
		}
		into[p] = [2]int64{from, end.Offset}
	}
	return u
}

// widen returns the ranges of u, each from its start to the end later
// read in v: the work of an instance that went on processing between the
// two reads.
func (u uncommitted) widen(v uncommitted) uncommitted {
	out := uncommitted{lines: map[int32][2]int64{}, words: map[int32][2]int64{}}
	for _, m := range []struct{ from, to, into map[int32][2]int64 }{{u.lines, v.lines, out.lines}, {u.words, v.words, out.words}} {
		for p, r := range m.from {
			if later, ok := m.to[p]; ok && later[1] > r[1] {
				r[1] = later[1]
			}
			m.into[p] = r
		}
	}
	return out
}

// checkOverCount checks that the counts exceed the occurrences produced
// by no more than u explains: a lost split task may split its
// uncommitted lines again (each of their words counted twice at most), a
// lost count task may count its uncommitted words again.
func (h *harness) checkOverCount(u uncommitted) {
	h.t.Helper()
	var bound int64
	for _, r := range u.words {
		bound += r[1] - r[0]
	}
	err := counts.Scan(context.Background(), h.brokers, h.input, false, func(r *kgo.Record) {
		if rng, ok := u.lines[r.Partition]; ok && r.Offset >= rng[0] && r.Offset < rng[1] {
			bound += int64(len(strings.Fields(string(r.Value))))
		}
	})
	if err != nil {
		h.t.Fatal(err)
	}
	var over int64
	for w, n := range h.counts() {
		over += n - h.words[w]
	}
	if over > bound {
		h.t.Errorf("counts exceed the occurrences by %d in all, more than the %d the dead instance's uncommitted work explains (%v lines, %v words)", over, bound, u.lines, u.words)
	} else {
		h.t.Logf("counts exceed the occurrences by %d in all; the dead instance's uncommitted work explains up to %d (%v lines, %v words)", over, bound, u.lines, u.words)
	}
}

// processedBy is the records r processed, over the tasks it runs.
func processedBy(r *running) int64 {
	var n int64
	for _, ts := range r.app.Status().Tasks {
		n += ts.Processed
	}
	return n
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

// lagText shows a lag as the logs do.
func lagText(l int64) any {
	if l == instance.UnknownLag {
		return "unknown"
	}
	return l
}

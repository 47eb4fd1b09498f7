package baton

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/baton-streams/baton/internal/commit"
	"github.com/baton-streams/baton/internal/kafkatest"
	"github.com/baton-streams/baton/topology"
)

// eventsSince returns how many events of kind instance reported after the
// first n events of the harness.
func (h *harness) eventsSince(n int, instance string, kind EventKind) []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Event
	for _, e := range h.events[n:] {
		if e.Instance == instance && e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

func (h *harness) eventCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.events)
}

// TestStaticRestart: three exactly-once instances with fixed instance ids
// count while lines flow; each in turn stops for a restart
// (StopForRestart) and starts again with the same id and state dir
// within the session timeout. The stopped instance stays a member of the
// group. On Apache Kafka (BATON_KAFKA=real) no task changes owner and the
// others see no rebalance at all; everywhere every count is exact.
func TestStaticRestart(t *testing.T) {
	tg := kafkatest.ForTest(t)
	h := newHarnessOn(t, tg, 4)
	h.prefill(500)
	dirs := map[string]string{"a": t.TempDir(), "b": t.TempDir(), "c": t.TempDir()}
	opts := func(id string) []Option {
		return []Option{WithGuarantee(ExactlyOnce), WithTransactionTimeout(5 * time.Second), WithStateDir(dirs[id]),
			WithStopMode(StopForRestart), WithSessionTimeout(20 * time.Second), WithRebalanceTimeout(10 * time.Second)}
	}
	apps := map[string]*running{}
	for _, id := range []string{"a", "b", "c"} {
		apps[id] = h.start(id, opts(id)...)
	}
	all := func() []*running { return []*running{apps["a"], apps["b"], apps["c"]} }
	h.eventually(90*time.Second, "three instances to share the tasks", func() bool { return balanced(all()...) })
	before, _ := owners(all()...)
	f := h.startFlow(20 * time.Millisecond)
	for _, id := range []string{"a", "b", "c"} {
		mark := h.eventCount()
		r := apps[id]
		r.cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Fatalf("instance %s: %v", id, err)
			}
			r.done <- nil
		case <-time.After(30 * time.Second):
			t.Fatalf("instance %s did not stop", id)
		}
		if got := h.staticMembers(); strings.Join(got, ",") != "a,b,c" {
			t.Fatalf("after %s stopped for a restart the group's static members are %v, want a,b,c", id, got)
		}
		apps[id] = h.start(id, opts(id)...)
		if tg.Kafka == nil {
			// kfake rebalances when a static member rejoins with other
			// metadata (Kafka compares only the protocol), and baton's
			// subscription changes across a restart (lags, owned tasks):
			// its tasks may move there. Only that every task runs again
			// is checked.
			h.eventually(60*time.Second, id+"'s tasks to run again", func() bool { _, ok := owners(all()...); return ok })
			continue
		}
		h.eventually(60*time.Second, id+" to run its tasks again", func() bool {
			now, ok := owners(all()...)
			return ok && equalOwners(now, before)
		})
		for _, other := range []string{"a", "b", "c"} {
			if other == id {
				continue
			}
			for _, kind := range []EventKind{EventRebalance, EventRevoked, EventAssigned, EventLearner} {
				if ev := h.eventsSince(mark, other, kind); len(ev) > 0 {
					t.Errorf("restart of %s: %s had %d %s event(s) (first: task %q, generation %d)", id, other, len(ev), kind, ev[0].Task, ev[0].Generation)
				}
			}
		}
	}
	f.stop()
	h.waitExact(60 * time.Second)
}

// staticMembers returns the sorted group.instance.ids of the group's
// members (a member without one counts as "-").
func (h *harness) staticMembers() []string {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	groups, err := kadm.NewClient(h.prod).DescribeGroups(ctx, h.appID)
	if err == nil {
		err = groups.Error()
	}
	if err != nil {
		h.t.Fatalf("describing the group: %v", err)
	}
	var ids []string
	for _, m := range groups[h.appID].Members {
		id := "-"
		if m.InstanceID != nil {
			id = *m.InstanceID
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// TestStaticDrainLeaves: a static member that drains (the default stop)
// leaves the group when Run returns, although the client sends no
// LeaveGroup for static members: the group does not wait for its session
// to expire.
func TestStaticDrainLeaves(t *testing.T) {
	tg := kafkatest.ForTest(t)
	h := newHarnessOn(t, tg, 4)
	h.produce(100)
	a := h.start("a", WithSessionTimeout(30*time.Second), WithRebalanceTimeout(10*time.Second))
	b := h.start("b", WithSessionTimeout(30*time.Second), WithRebalanceTimeout(10*time.Second))
	h.eventually(60*time.Second, "a and b to share the tasks", func() bool { return balanced(a, b) })
	a.stop(t)
	if got := h.staticMembers(); strings.Join(got, ",") != "b" {
		t.Errorf("after a drained, the group's members are %v, want b", got)
	}
	h.waitExact(60 * time.Second)
}

func equalOwners(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestStopForRestartNeedsInstanceID: StopForRestart without an instance id
// is a configuration error naming the option.
func TestStopForRestartNeedsInstanceID(t *testing.T) {
	top := wordcountTop(t)
	_, err := New(top, WithBrokers("127.0.0.1:1"), WithStateDir(t.TempDir()), WithStopMode(StopForRestart))
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "instance id") {
		t.Fatalf("err = %v, want ErrConfig naming the instance id", err)
	}
	if _, err := ParseStopMode("pause"); err == nil {
		t.Error("ParseStopMode(pause): no error")
	}
	for _, m := range []StopMode{StopDrain, StopForRestart} {
		if got, err := ParseStopMode(m.String()); err != nil || got != m {
			t.Errorf("ParseStopMode(%q) = %v, %v", m.String(), got, err)
		}
	}
}

// TestSessionTimeoutOutsideBrokerBounds: a session timeout below the
// brokers' group.min.session.timeout.ms makes Run return an error naming
// it and the broker setting, instead of trying to join forever.
func TestSessionTimeoutOutsideBrokerBounds(t *testing.T) {
	tg := kafkatest.WithDefaultSessionBounds(t)
	h := newHarnessOn(t, tg, 2)
	app, err := New(wordcountTopOn(t, h), WithBrokers(tg.Brokers...), WithAppID(h.appID), WithMemoryState(),
		WithSessionTimeout(2*time.Second), WithLogger(quietLogger()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = runChecked(t, ctx, app)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("Run = %v after %v; want an error about the session timeout", err, ctx.Err())
	}
	for _, want := range []string{"session timeout: 2s", "group.min.session.timeout.ms"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Run error %q does not name %q", err, want)
		}
	}
}

func wordcountTop(t *testing.T) *topology.Topology {
	t.Helper()
	top, err := topology.WordCount("wc", "lines", "counts")
	if err != nil {
		t.Fatal(err)
	}
	return top
}

func wordcountTopOn(t *testing.T, h *harness) *topology.Topology {
	t.Helper()
	top, err := topology.WordCount(h.appID, h.input, h.output)
	if err != nil {
		t.Fatal(err)
	}
	return top
}

func quietLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// TestExactlyOnceLostCommitOutcomes: transaction commits go through but
// report an error, as when the connection drops during EndTxn, while
// lines flow. The instance aborts, catches its stores up with the
// committed changelogs and rewinds the input to the committed offsets.
// On Apache Kafka those offsets can still be unstable right after the
// commit (its markers are written after EndTxn returns): the rewind must
// wait for them, not restart the partitions. Every count stays exact.
func TestExactlyOnceLostCommitOutcomes(t *testing.T) {
	tg := kafkatest.ForTest(t)
	h := newHarnessOn(t, tg, 4)
	h.prefill(200)
	a := h.start("a", WithGuarantee(ExactlyOnce))
	h.eventually(60*time.Second, "a to run every task", func() bool { _, all := owners(a); return all })
	h.waitExact(60 * time.Second)
	f := h.startFlow(10 * time.Millisecond)
	aborted := func() float64 { return testutil.ToFloat64(a.app.e.Metrics().Transactions.WithLabelValues("aborted")) }
	lost := errors.New("test: the commit's outcome was lost")
	for range 10 {
		n := aborted()
		a.app.e.Committer().(*commit.Transactional).Plant(commit.Fault{Lost: lost})
		h.eventually(30*time.Second, "a commit with a lost outcome", func() bool { return aborted() > n })
	}
	f.stop()
	h.waitExact(60 * time.Second)
}

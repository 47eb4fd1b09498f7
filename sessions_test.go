package baton

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/counts"
	"github.com/baton-streams/baton/internal/tick"
	"github.com/baton-streams/baton/topology"
)

// clickStream writes the clicks of TestSessionsScaleOutAndDrain and
// remembers their times per user. Each click is keyed by its user, so a
// user's clicks stay in order on one input partition and reach session
// task 1_p only from input partition p: a task's stream time is the
// latest click time written to its partition so far, and the test knows
// which clicks the task accepts.
type clickStream struct {
	topic      string
	partitions int32
	gap, grace int64 // ms
	rng        *rand.Rand
	clock      int64 // ms: the latest click time written
	n          int   // clicks written
	times      map[string][]int64
	now        map[int32]int64 // per partition: the stream time its session task will have
	bridged    int             // clicks written between two open sessions of their user
}

// batch returns n clicks of users u0..u199, about 16 of them active at a
// time, a user's clicks a second and a half apart on average, so that a
// click more than the gap after the user's last is common and sessions
// open and close all along. The clock moves on 100 ms a click on average;
// a click in four is behind it by up to the grace, and a click in forty
// goes between its user's last two sessions if they are open and at most
// two gaps apart (far behind the clock, but accepted: it bridges them).
func (c *clickStream) batch(n int) []*kgo.Record {
	recs := make([]*kgo.Record, 0, n)
	for range n {
		c.clock += c.rng.Int64N(200)
		user := "u" + strconv.Itoa((c.n/40+c.rng.IntN(16))%200)
		c.n++
		ts := c.clock
		if c.rng.IntN(4) == 0 {
			ts -= c.rng.Int64N(c.grace + 1)
		}
		p := topology.Partition([]byte(user), c.partitions)
		if c.rng.IntN(10) == 0 {
			sorted := slices.Sorted(slices.Values(c.times[user]))
			for j := len(sorted) - 1; j > 0; j-- {
				a, b := sorted[j-1], sorted[j]
				if b-a > c.gap {
					if b-a <= 2*c.gap && c.now[p]-a <= c.gap+c.grace {
						ts = a + (b-a)/2
						c.bridged++
					}
					break
				}
			}
		}
		c.times[user] = append(c.times[user], ts)
		c.now[p] = max(c.now[p], ts)
		recs = append(recs, c.click(user, ts))
	}
	return recs
}

func (c *clickStream) click(user string, ts int64) *kgo.Record {
	return &kgo.Record{Topic: c.topic, Key: []byte(user), Value: []byte(user + " /page/" + strconv.Itoa(c.rng.IntN(20))), Timestamp: time.UnixMilli(ts)}
}

// write writes recs; each must land on the partition of its user.
func (c *clickStream) write(cl *kgo.Client, recs []*kgo.Record) error {
	for _, r := range cl.ProduceSync(context.Background(), recs...) {
		if r.Err != nil {
			return fmt.Errorf("writing clicks: %w", r.Err)
		}
		if p := topology.Partition(r.Record.Key, c.partitions); r.Record.Partition != p {
			return fmt.Errorf("click of %s written to partition %d, not its user's %d", r.Record.Key, r.Record.Partition, p)
		}
	}
	return nil
}

// closers returns one click per partition, of a user of its own, past
// the end of every session so far by more than the gap plus the grace:
// it closes every session of its task. Its own session stays open.
func (c *clickStream) closers() []*kgo.Record {
	var recs []*kgo.Record
	done := map[int32]bool{}
	for i := 0; len(done) < int(c.partitions); i++ {
		user := "closer" + strconv.Itoa(i)
		if p := topology.Partition([]byte(user), c.partitions); !done[p] {
			done[p] = true
			recs = append(recs, c.click(user, c.clock+c.gap+c.grace+1))
		}
	}
	return recs
}

// sessions are the sessions of the clicks written, computed from their
// times alone: each user's clicks in time order, cut where two are more
// than the gap apart; key <user>@<start> -> value "<start> <end> <clicks>".
func (c *clickStream) sessions() map[string]string {
	out := map[string]string{}
	for user, ts := range c.times {
		ts = slices.Sorted(slices.Values(ts))
		start, n := ts[0], 0
		for i, at := range ts {
			if i > 0 && at-ts[i-1] > c.gap {
				out[fmt.Sprintf("%s@%d", user, start)] = fmt.Sprintf("%d %d %d", start, ts[i-1], n)
				start, n = at, 0
			}
			n++
		}
		out[fmt.Sprintf("%s@%d", user, start)] = fmt.Sprintf("%d %d %d", start, ts[len(ts)-1], n)
	}
	return out
}

// TestSessionsScaleOutAndDrain runs the sessions application
// (topology.Sessions) under exactly-once while clicks flow: a second
// instance joins (the session tasks it takes are warmed by learners
// first, while a keeps processing them), then the first drains (its
// session tasks go to learners on b). Read committed, the output holds
// every session of the clicks written exactly once, with the bounds and
// the count computed from the click times alone, and nothing else. Each
// session task that moved became active warm, from a learner there, with
// both of its stores (the sessions and the buffer of sessions not yet
// closed) holding state as it started: checkCopies compares every copy
// with its changelog when the test ends.
func TestSessionsScaleOutAndDrain(t *testing.T) {
	h := newHarness(t, 4)
	const gap, grace = 2 * time.Second, time.Second
	output := h.tg.Name("sessions") // not compacted: a session written twice stays visible
	h.tg.CreateTopic(t, output, 4, false)
	h.build = func() (*topology.Topology, error) {
		return topology.Sessions(h.appID, h.input, output, gap, grace)
	}
	clicks := &clickStream{topic: h.input, partitions: 4, gap: gap.Milliseconds(), grace: grace.Milliseconds(),
		rng: rand.New(rand.NewPCG(3, 7)), times: map[string][]int64{}, now: map[int32]int64{},
		// Recent: Apache Kafka deletes records older than a topic's
		// retention by their timestamps; the clock moves on some 40
		// minutes of event time in the test.
		clock: time.Now().Add(-2 * time.Hour).UnixMilli()}
	if err := clicks.write(h.prod, clicks.batch(3000)); err != nil {
		t.Fatal(err)
	}
	acceptable := int64(10)
	if h.tg.Kafka != nil {
		acceptable = 100 // as in TestScaleOut: the old owner's last writes reach the learner a little later
	}
	opts := []Option{WithGuarantee(ExactlyOnce), WithTransactionTimeout(3 * time.Second), WithAcceptableLag(acceptable), h.checkCopies()}
	a := h.start("a", opts...)
	h.eventually(60*time.Second, "a to run every task", func() bool { return balanced(a) })
	// Learners have state to restore: every session task has committed
	// writes to both of its stores.
	h.eventually(60*time.Second, "a to commit the state of every session task", func() bool {
		for _, store := range []string{"sessions", "closed-sessions"} {
			written := map[int32]bool{}
			err := counts.Scan(context.Background(), h.brokers, topology.ChangelogTopic(h.appID, store), true, func(r *kgo.Record) {
				written[r.Partition] = true
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(written) < 4 {
				return false
			}
		}
		return true
	})

	var mu sync.Mutex // clicks, while the flow writes
	ctx, stop := context.WithCancel(context.Background())
	flowed := make(chan struct{})
	var flowErr error // once flowed is closed
	go func() {
		defer close(flowed)
		flowErr = tick.Every(ctx, 50*time.Millisecond, func() error {
			mu.Lock()
			defer mu.Unlock()
			if err := clicks.write(h.prod, clicks.batch(20)); err != nil && ctx.Err() == nil {
				return err
			}
			return nil
		})
	}()
	written := func() int {
		mu.Lock()
		defer mu.Unlock()
		return clicks.n
	}

	// Scale out: b's session tasks come from learners.
	m, c := h.mark(a), h.copiesSoFar()
	b := h.start("b", opts...)
	h.eventually(60*time.Second, "a and b to share the tasks", func() bool { return balanced(a, b) })
	h.checkOnlyMovedStop(m)
	toB := h.checkWarmMoves(m, c, "b")
	// b processes clicks of its own before a drains.
	from := written()
	h.eventually(30*time.Second, "b to process new clicks", func() bool { return written() > from+1000 && processedBy(b) > 0 })

	// Drain a: its session tasks go to learners on b.
	held, _ := owners(a)
	m, c = h.mark(a, b), h.copiesSoFar()
	a.stop(t)
	h.eventually(60*time.Second, "b to run every task", func() bool { return balanced(b) })
	fromA := h.checkWarmMoves(m, c, "b")
	for id := range held {
		if strings.HasPrefix(id, "1_") && !slices.Contains(fromA, id) {
			t.Errorf("session task %s was on a when it drained, and did not move to b", id)
		}
	}
	from = written()
	h.eventually(30*time.Second, "b to run the drained tasks", func() bool { return written() > from+1000 })
	stop()
	<-flowed
	if flowErr != nil {
		// The sessions the clicks make are unknown from here on.
		t.Fatalf("the click flow stopped: %v", flowErr)
	}
	if err := clicks.write(h.prod, clicks.closers()); err != nil {
		t.Fatal(err)
	}
	want := clicks.sessions()
	t.Logf("%d clicks, %d of them bridging two sessions, in %d sessions; session tasks moved to b: %v at the scale-out, %v at the drain",
		clicks.n, clicks.bridged, len(want), toB, fromA)

	var got map[string][]string
	complete := tick.Until(context.Background(), 90*time.Second, 500*time.Millisecond, func() bool {
		got = readCommitted(t, h.brokers, output)
		return len(got) >= len(want)
	})
	keys := slices.Collect(maps.Keys(want))
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var wrong []string
	for _, k := range keys {
		if w, ok := want[k]; !ok {
			wrong = append(wrong, fmt.Sprintf("%s written as %q, not a session of the clicks", k, got[k]))
		} else if !slices.Equal(got[k], []string{w}) {
			wrong = append(wrong, fmt.Sprintf("%s written as %q, want once as %q", k, got[k], w))
		}
	}
	if len(wrong) > 0 || !complete {
		n := len(wrong)
		if n > 20 {
			wrong = append(wrong[:20], fmt.Sprintf("... %d more", n-20))
		}
		h.logStatus()
		t.Fatalf("sessions not written exactly once (%d of %d wrong, output complete: %v):\n%s", n, len(want), complete, strings.Join(wrong, "\n"))
	}
	if clicks.bridged == 0 {
		t.Error("no click bridged two sessions")
	}
	b.app.Leave()
}

// copiesSoFar is how many store copies checkCopies has recorded.
func (h *harness) copiesSoFar() int {
	h.copies.mu.Lock()
	defer h.copies.mu.Unlock()
	return len(h.copies.copies)
}

// checkWarmMoves checks every session task (1_*) that became active on
// instance to since m: a learner restored it there first, it became
// active warm, and both its stores, the sessions and the buffer of
// sessions not yet closed, held state as it started processing (among
// the copies recorded after the first copies). A task its owner lost
// meanwhile (a starved machine can miss the session timeout, and the
// group then expels it) may move cold: it is only logged. It returns the
// tasks that moved.
func (h *harness) checkWarmMoves(m mark, copies int, to string) []string {
	h.t.Helper()
	events, _ := h.since(m)
	var moved, warm []string
	for i, e := range events {
		if e.Kind != EventAssigned || e.Instance != to || !strings.HasPrefix(e.Task, "1_") {
			continue
		}
		moved = append(moved, e.Task)
		before := func(kind EventKind, instance string) bool {
			return slices.ContainsFunc(events[:i], func(l Event) bool {
				return l.Kind == kind && (instance == "" || l.Instance == instance) && l.Task == e.Task
			})
		}
		learned := before(EventLearner, to)
		switch {
		case learned && e.Detail == "warm":
			warm = append(warm, e.Task)
		case before(EventLost, ""):
			h.t.Logf("session task %s became active on %s %s (lag %d) after its owner lost it", e.Task, to, e.Detail, e.Lag)
		default:
			h.t.Errorf("session task %s became active on %s %s (lag %d), learner there first: %v; want a warm promotion of its learner", e.Task, to, e.Detail, e.Lag, learned)
			for _, o := range events {
				if o.Task == e.Task {
					h.t.Logf("  %s %s %s detail %q lag %v", o.Time.Format("15:04:05.000"), o.Instance, o.Kind, o.Detail, lagText(o.Lag))
				}
			}
		}
	}
	if len(moved) == 0 {
		h.t.Errorf("no session task moved to %s", to)
	}
	// A task's stores are recorded as it starts processing, once its
	// first records come.
	stores := []string{"sessions", "closed-sessions"}
	started := func(id string) map[string]storeCopy {
		h.copies.mu.Lock()
		defer h.copies.mu.Unlock()
		out := map[string]storeCopy{}
		for _, c := range h.copies.copies[copies:] {
			if c.instance == to && c.task == id {
				out[c.store] = c
			}
		}
		return out
	}
	h.eventually(30*time.Second, "the moved session tasks to start processing", func() bool {
		for _, id := range warm {
			if len(started(id)) < len(stores) {
				return false
			}
		}
		return true
	})
	for _, id := range warm {
		got := started(id)
		for _, store := range stores {
			if c := got[store]; len(c.data) == 0 || c.checkpoint == 0 {
				h.t.Errorf("session task %s started on %s with store %s empty (%d keys, changelog offset %d): its learner did not restore it",
					id, to, store, len(c.data), c.checkpoint)
			}
		}
	}
	return moved
}

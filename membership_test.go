package baton

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/commit"
)

// TestStopWaitsForTheCatchUp: after a transaction whose commit outcome was
// lost, the instance catches its stores up with their changelogs, off the
// loop. A stop that comes meanwhile closes the stores only once that
// catch-up, which writes them, has ended: a write into a closed Pebble
// store panics. The catch-up is held just before its write until the
// member's context ends, then a little longer, as a slow fetch would.
func TestStopWaitsForTheCatchUp(t *testing.T) {
	h := newHarness(t, 4)
	h.prefill(200)
	held := make(chan struct{}, 1)
	var released atomic.Bool
	hold := func(o *config) {
		o.OnCatchUp = func(ctx context.Context) {
			select {
			case held <- struct{}{}:
			default:
			}
			<-ctx.Done()
			time.Sleep(300 * time.Millisecond)
			released.Store(true)
		}
	}
	a := h.start("a", WithGuarantee(ExactlyOnce), hold)
	h.eventually(60*time.Second, "a to run every task", func() bool { _, all := owners(a); return all })
	h.waitExact(60 * time.Second)
	f := h.startFlow(10 * time.Millisecond)
	defer f.stop()
	lost := errors.New("test: the commit's outcome was lost")
	a.app.e.Committer().(*commit.Transactional).Plant(commit.Fault{Lost: lost})
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("no catch-up after a commit with a lost outcome")
	}
	a.cancel()
	select {
	case err := <-a.done:
		a.done <- err
		if err != nil {
			t.Fatalf("a: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("a did not stop")
	}
	if !released.Load() {
		t.Errorf("Run returned while the catch-up was still running: it writes the stores Run closed")
	}
}

// TestOneShotsEndWithTheirMember: the goroutines the loop starts for one
// answer (offsets read off the loop) belong to the member that started
// them. After a fence the instance joins again as a new member, with new
// channels; a goroutine of the old member still running then would hand
// its stale answer to the new one (and read the fields being replaced).
// One such goroutine is held past its member's context's end: the
// instance must not start its new member before it ended.
func TestOneShotsEndWithTheirMember(t *testing.T) {
	h := newHarness(t, 4)
	h.prefill(200)
	var armed, held atomic.Bool
	var a *running
	restarts := func() float64 { return testutil.ToFloat64(a.app.e.Metrics().MemberRestarts) }
	outlived := make(chan bool, 1)
	hold := func(o *config) {
		o.OnOneShot = func(ctx context.Context) {
			if !armed.Load() || !held.CompareAndSwap(false, true) {
				return
			}
			<-ctx.Done()
			// Until the instance starts its new member, or long enough
			// to know it waits for this goroutine.
			deadline := time.Now().Add(3 * time.Second)
			for restarts() == 0 && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			outlived <- restarts() > 0
		}
	}
	a = h.start("a", WithGuarantee(ExactlyOnce), hold)
	h.eventually(60*time.Second, "a to run every task", func() bool { _, all := owners(a); return all })
	f := h.startFlow(10 * time.Millisecond)
	defer f.stop()
	h.eventually(30*time.Second, "a to commit a transaction of the flow", func() bool {
		return testutil.ToFloat64(a.app.e.Metrics().Transactions.WithLabelValues("committed")) > 0
	})
	armed.Store(true)
	h.eventually(30*time.Second, "a goroutine for one answer to start", held.Load)
	// A producer with a's transactional id fences a's client.
	rogue, err := kgo.NewClient(kgo.SeedBrokers(h.brokers...), kgo.TransactionalID(a.app.e.TransactionalID()))
	if err != nil {
		t.Fatal(err)
	}
	if err := rogue.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	_ = rogue.ProduceSync(context.Background(), &kgo.Record{Topic: h.output, Key: []byte("rogue"), Value: []byte("1")}).FirstErr()
	_ = rogue.EndTransaction(context.Background(), kgo.TryAbort)
	rogue.Close()
	select {
	case late := <-outlived:
		if late {
			t.Errorf("a started a new member while a goroutine of the old one was still running")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("a's member did not end after its producer was fenced")
	}
	waitRejoined(h, a)
}

// TestSlowRestoreWrites: restored chunks are written off the loop, one at
// a time, and a task processes only once the chunks of its changelog are
// written. b writes every other restored chunk after a pause of 200 ms
// while lines flow and it takes over tasks from a, warming
// learners: every store b starts processing on must equal its changelog
// up to its checkpoint, and under exactly-once every count's history must
// be 1, 2, ... n.
func TestSlowRestoreWrites(t *testing.T) {
	h := newHarness(t, 4)
	h.prefill(3000)
	a := h.start("a", WithGuarantee(ExactlyOnce))
	h.eventually(60*time.Second, "a to run every task", func() bool { _, all := owners(a); return all })
	f := h.startFlow(5 * time.Millisecond)
	var writes atomic.Int64
	slow := func(c *config) {
		// Every other chunk waits: were two written at once, the later
		// would land first.
		c.OnRestoreWrite = func() {
			if writes.Add(1)%2 == 1 {
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
	b := h.start("b", WithGuarantee(ExactlyOnce), slow, h.checkCopies())
	stopped := func() {
		select {
		case err := <-b.done:
			b.done <- err
			t.Fatalf("b stopped: %v", err)
		default:
		}
	}
	h.eventually(90*time.Second, "a and b to share the tasks", func() bool { stopped(); return balanced(a, b) })
	time.Sleep(time.Second)
	f.stop()
	h.waitExact(60 * time.Second) // and every count's history
	stopped()
}

// TestLoopDoesNotWaitForRestoreWrites: while b's learners restore, every
// restored chunk takes two seconds to write, as on a disk that stalls. The
// loop must not wait for those writes: no turn of b's loop may take as
// long as one (baton_loop_turn_seconds), and the rebalance rounds that
// give b its tasks go on (its callbacks are answered). A loop that wrote the
// chunks itself would take two seconds per chunk. The bound is the stall the test
// makes, not a speed: turns measure a few milliseconds.
func TestLoopDoesNotWaitForRestoreWrites(t *testing.T) {
	const stall = 2 * time.Second
	h := newHarness(t, 4)
	h.prefill(3000)
	a := h.start("a")
	h.eventually(60*time.Second, "a to run every task", func() bool { _, all := owners(a); return all })
	f := h.startFlow(10 * time.Millisecond)
	defer f.stop()
	var writes atomic.Int64
	slow := func(c *config) {
		c.OnRestoreWrite = func() {
			writes.Add(1)
			time.Sleep(stall)
		}
	}
	b := h.start("b", slow)
	// The rounds that give b its stateless tasks and its learners go on
	// while the learners' first chunk is being written. How many chunks
	// follow depends on how soon the learners catch up (or are promoted
	// for another reason), so the test waits for one write to start and
	// then for longer than it takes: a turn that waited for it would have
	// ended, and been counted, by then.
	h.eventually(60*time.Second, "b to run stateless tasks and start writing a restored chunk", func() bool {
		active := 0
		for _, ts := range b.app.Status().Tasks {
			if ts.Role == "active" {
				active++
			}
		}
		return active > 0 && writes.Load() >= 1
	})
	time.Sleep(stall + stall/2)
	turns, over, bound := loopTurns(t, b.app, stall.Seconds()*0.8)
	// The loop waits for a chunk's write only before what must not
	// overlap it (awaitApply): processing a task whose store the chunk
	// writes, a learner promoted while its chunk is being written, say.
	// Each such wait is counted.
	waits := uint64(testutil.ToFloat64(b.app.e.Metrics().RestoreWriteWaits))
	t.Logf("b's loop: %d turns, %d of them over %.2f s; %d restored chunks written; %d waits before what must not overlap a write",
		turns, over, bound, writes.Load(), waits)
	if over > waits {
		t.Errorf("b's loop took %d turns over %.2f s while restored chunks took %v each to write, %d of them waiting before what must not overlap a write: it waited for the others", over, bound, stall, waits)
	}
}

// loopTurns returns how many turns app's loop took, and how many of them
// took longer than bound: the largest bucket bound of the histogram at or
// below atLeast.
func loopTurns(t *testing.T, app *App, atLeast float64) (turns, over uint64, bound float64) {
	t.Helper()
	var m dto.Metric
	if err := app.e.Metrics().LoopTurn.Write(&m); err != nil {
		t.Fatal(err)
	}
	h := m.GetHistogram()
	below := uint64(0)
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() <= atLeast {
			below, bound = b.GetCumulativeCount(), b.GetUpperBound()
		}
	}
	return h.GetSampleCount(), h.GetSampleCount() - below, bound
}

// TestMeasureLoopTurns measures how long the loop's turns are when the
// disk and the brokers are slow: while b joins, every write to a's state
// directory waits 500 ms and each of a's commits hangs two seconds
// before it starts; a's link reads 50 kB/s throughout (so its produce
// acknowledgements, and its commits, lag behind), and lines flow. It
// reports a's turns by duration (baton_loop_turn_seconds), and the longest
// turn of each kind over 5 ms (by the case of shell.next that handled it),
// and asserts no timing. Run it with
//
//	BATON_MEASURE=1 go test -run TestMeasureLoopTurns -v .
func TestMeasureLoopTurns(t *testing.T) {
	if os.Getenv("BATON_MEASURE") == "" {
		t.Skip("a measurement: set BATON_MEASURE=1")
	}
	h := newHarness(t, 4)
	h.prefill(3000)
	dir := t.TempDir()
	var slowDisk atomic.Bool
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if slowDisk.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite && strings.HasPrefix(op.Path, dir) {
			time.Sleep(500 * time.Millisecond)
		}
		return nil
	}))
	link, slow := slowLink(50_000)
	hang := func(c *config) {
		c.OnCommitWork = func() {
			if slowDisk.Load() {
				time.Sleep(2 * time.Second)
			}
		}
	}
	// The longest turns, by the case of next that handled them.
	var longMu sync.Mutex
	long := map[string]time.Duration{}
	watch := func(c *config) {
		c.OnTurn = func(turn func(), took time.Duration) {
			if took < 5*time.Millisecond {
				return
			}
			name := runtime.FuncForPC(reflect.ValueOf(turn).Pointer()).Name()
			longMu.Lock()
			long[name] = max(long[name], took)
			longMu.Unlock()
		}
	}
	a := h.start("a", WithStateDir(dir), withStateFS(fs), slow, hang, watch)
	defer link.Lift()
	h.eventually(60*time.Second, "a to run every task", func() bool { _, all := owners(a); return all })
	f := h.startFlow(10 * time.Millisecond)
	defer f.stop()
	time.Sleep(2 * time.Second)
	before, _, _ := loopTurns(t, a.app, 0)
	slowDisk.Store(true)
	start := time.Now()
	b := h.start("b")
	h.eventually(120*time.Second, "a and b to share the tasks", func() bool { return balanced(a, b) })
	t.Logf("balanced %v after b started, with a's disk and link slow", time.Since(start).Round(10*time.Millisecond))
	time.Sleep(3 * time.Second)
	slowDisk.Store(false)
	var m dto.Metric
	if err := a.app.e.Metrics().LoopTurn.Write(&m); err != nil {
		t.Fatal(err)
	}
	hist := m.GetHistogram()
	prev := uint64(0)
	var rows []string
	for _, bk := range hist.GetBucket() {
		if n := bk.GetCumulativeCount() - prev; n > 0 {
			rows = append(rows, fmt.Sprintf("<= %v: %d", time.Duration(bk.GetUpperBound()*float64(time.Second)), n))
		}
		prev = bk.GetCumulativeCount()
	}
	if n := hist.GetSampleCount() - prev; n > 0 {
		rows = append(rows, fmt.Sprintf("longer: %d", n))
	}
	t.Logf("a's loop: %d turns (%d before the slow phase), %.3f s in all; by duration (whole run): %s",
		hist.GetSampleCount(), before, hist.GetSampleSum(), strings.Join(rows, ", "))
	longMu.Lock()
	defer longMu.Unlock()
	for _, name := range slices.Sorted(maps.Keys(long)) {
		t.Logf("longest turn of %s: %v", strings.TrimPrefix(name, "github.com/baton-streams/baton."), long[name].Round(10*time.Microsecond))
	}
}

// TestSlowCommitWrites: the writes a commit made durable go to the stores
// off the loop, in commit order, while processing goes on and reads them
// from memory until they are written; a store closes only after its
// writes. Every other commit's writes wait a second, five commit
// intervals, on both instances (the core begins no periodic commit
// before the last one's writes are done, so processing reads from memory
// all that time; a revoke's commit may start meanwhile, and its writes
// must land after the earlier commit's), while lines flow, b joins and takes tasks over (a's revoked
// stores close behind their writes), and b drains, so that those tasks go back to a's stores on
// disk: every store a task starts processing on must equal its changelog
// up to its checkpoint, the counts must be right, and under exactly-once
// every count's history must be 1, 2, ... n.
func TestSlowCommitWrites(t *testing.T) {
	for _, g := range guarantees {
		t.Run(g.String(), func(t *testing.T) {
			h := newHarness(t, 4)
			h.prefill(3000)
			// Every other write waits.
			writes, slow := slowCommitWrites(func(n int64) time.Duration { return time.Duration(n%2) * time.Second })
			// The learners that move tasks back and forth restore at full
			// speed: a and b share this process, so each one's busy actives
			// would make the other's learners yield (WithRestoreShare), and
			// under the race detector a learner yielding half its time fell
			// behind the flow for good. The restore governor is tested on its
			// own (TestWarmRestoresYield); this test is about commit writes.
			full := WithRestoreShare(1)
			a := h.start("a", WithGuarantee(g), slow, full, h.checkCopies())
			h.eventually(60*time.Second, "a to run every task", func() bool { _, all := owners(a); return all })
			f := h.startFlow(5 * time.Millisecond)
			h.eventually(60*time.Second, "a's commits to write its stores", func() bool { return writes.Load() >= 4 })
			b := h.start("b", WithGuarantee(g), slow, full, h.checkCopies())
			h.eventually(90*time.Second, "a and b to share the tasks", func() bool { alive(t, a, b); return balanced(a, b) })
			before := writes.Load()
			h.eventually(60*time.Second, "b's and a's commits to write their stores", func() bool { alive(t, a, b); return writes.Load() >= before+4 })
			b.stop(t)
			h.eventually(90*time.Second, "a to run every task again", func() bool { alive(t, a); _, all := owners(a); return all })
			f.stop()
			h.checkCounts(g, 60*time.Second)
			t.Logf("%d commits wrote stores", writes.Load())
		})
	}
}

// TestLoopDoesNotWaitForCommitWrites: every commit's store writes take
// two seconds, as on a disk that stalls. The loop must not wait for them:
// no turn of its loop may take as long as one (baton_loop_turn_seconds),
// while commits go on (processing waits once two commits' writes are
// behind) and the counts come out right. A loop that wrote the stores
// itself would take two seconds per commit.
func TestLoopDoesNotWaitForCommitWrites(t *testing.T) {
	const stall = 2 * time.Second
	for _, g := range guarantees {
		t.Run(g.String(), func(t *testing.T) {
			h := newHarness(t, 4)
			h.prefill(300)
			writes, slow := slowCommitWrites(func(int64) time.Duration { return stall })
			a := h.start("a", WithGuarantee(g), slow)
			h.eventually(60*time.Second, "a to run every task", func() bool { _, all := owners(a); return all })
			f := h.startFlow(10 * time.Millisecond)
			h.eventually(60*time.Second, "three commits' store writes", func() bool { return writes.Load() >= 3 })
			f.stop()
			h.checkCounts(g, 90*time.Second)
			turns, over, bound := loopTurns(t, a.app, stall.Seconds()*0.8)
			t.Logf("a's loop: %d turns, %d of them over %.2f s; %d commits' store writes", turns, over, bound, writes.Load())
			if over > 0 {
				t.Errorf("a's loop took %d turns over %.2f s while commits' store writes took %v each: it waited for them", over, bound, stall)
			}
		})
	}
}

// slowCommitWrites returns an option that makes the nth commit's store
// writes (from 1) wait pause(n) first, and the count of those writes.
func slowCommitWrites(pause func(n int64) time.Duration) (*atomic.Int64, Option) {
	writes := &atomic.Int64{}
	return writes, func(c *config) {
		c.OnCommitWrite = func() { time.Sleep(pause(writes.Add(1))) }
	}
}

// TestRewindWhileAnActiveRestores: under exactly-once, b's transaction
// aborts while b's count tasks still restore as active tasks (cold, each
// restored chunk slow to write). The rewind then catches the stores of
// b's active tasks up with their changelogs off the loop, restoring ones
// included; no restored chunk may be written into those stores
// meanwhile, or two goroutines would write one store and the loop would
// read a checkpoint the rewind moves (a chunk written after the
// catch-up's later records would set keys back). The catch-up is held
// for a moment before each write; a chunk write starting then is the
// overlap. The counts stay exact.
func TestRewindWhileAnActiveRestores(t *testing.T) {
	h := newHarness(t, 4)
	h.prefill(100000) // restores of many chunks: the abort lands among them
	a := h.start("a", WithGuarantee(ExactlyOnce), WithDrainTimeout(0))
	h.waitExact(60 * time.Second)
	a.stop(t)

	var catching, overlap atomic.Bool
	var catchUps atomic.Int32
	hooks := func(c *config) {
		c.OnRestoreWrite = func() {
			if catching.Load() {
				overlap.Store(true)
			}
			time.Sleep(100 * time.Millisecond)
		}
		c.OnCatchUp = func(context.Context) {
			catchUps.Add(1)
			catching.Store(true)
			time.Sleep(300 * time.Millisecond)
			catching.Store(false)
		}
	}
	b := h.start("b", WithGuarantee(ExactlyOnce), hooks)
	h.eventually(60*time.Second, "b to restore its count tasks as actives", func() bool {
		for _, ts := range b.app.Status().Tasks {
			if strings.HasPrefix(ts.ID, "1_") && ts.Role == "active" && ts.Lag > 0 {
				return true
			}
		}
		return false
	})
	b.app.e.Committer().(*commit.Transactional).Plant(commit.Fault{Abort: errors.New("test: the transaction aborts")})
	h.produce(50) // the stateless tasks process these at once: the transaction that aborts
	h.waitExact(120 * time.Second)
	if catchUps.Load() == 0 {
		t.Fatal("no catch-up wrote a store while the count tasks restored: the test proves nothing")
	}
	if overlap.Load() {
		t.Error("a restored chunk was written while the rewind caught the same tasks' stores up")
	}
}

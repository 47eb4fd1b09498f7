package baton

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/faultnet"
	"github.com/baton-streams/baton/internal/tick"
)

// faultyNet is a kgo dialer for one instance, with two faults:
//
//   - Cut closes every connection and refuses new ones (a
//     faultnet.Cutter), until Heal lets new ones through again, as when a
//     network partition ends. While cut, a dial fails as on a real
//     network, with a *net.OpError, which the client retries:
//     faultnet.ErrCut alone is no network error to it, and it would fail
//     the buffered records at once, as on a misconfiguration.
//   - HoldProduce holds the responses to Produce requests until
//     ReleaseProduce: the records the instance writes reach the cluster
//     but stay unacknowledged, so its open transaction cannot commit,
//     while every other request (heartbeats, joins, fetches, offset
//     commits) goes through. The client writes every request to a broker
//     from one goroutine, so holding a write would hold them all; it
//     reads each connection's responses on its own.
type faultyNet struct {
	cur  atomic.Pointer[faultnet.Cutter]
	mu   sync.Mutex
	hold chan struct{} // non-nil while Produce requests are held
}

func newFaultyNet(t *testing.T) *faultyNet {
	n := &faultyNet{}
	n.cur.Store(&faultnet.Cutter{})
	t.Cleanup(n.ReleaseProduce) // before the instances stop
	return n
}

func (n *faultyNet) Dial(ctx context.Context, network, host string) (net.Conn, error) {
	conn, err := n.cur.Load().Dial(ctx, network, host)
	if errors.Is(err, faultnet.ErrCut) {
		return nil, &net.OpError{Op: "dial", Net: network, Err: &os.SyscallError{Syscall: "connect", Err: err}}
	}
	if err != nil {
		return nil, err
	}
	return &heldConn{Conn: conn, n: n, closed: make(chan struct{})}, nil
}

func (n *faultyNet) Cut()  { n.cur.Load().Cut() }
func (n *faultyNet) Heal() { n.cur.Store(&faultnet.Cutter{}) }

func (n *faultyNet) HoldProduce() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.hold == nil {
		n.hold = make(chan struct{})
	}
}

func (n *faultyNet) ReleaseProduce() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.hold != nil {
		close(n.hold)
		n.hold = nil
	}
}

// heldConn holds the responses read on a connection of Produce requests
// while its faultyNet holds them. The client writes each request with one
// Write: a size (int32), then the request's API key (int16; Produce is
// 0), and sends Produce requests on connections of their own.
type heldConn struct {
	net.Conn
	n       *faultyNet
	produce atomic.Bool
	once    sync.Once
	closed  chan struct{}
}

func (c *heldConn) Write(b []byte) (int, error) {
	if len(b) >= 6 && binary.BigEndian.Uint16(b[4:6]) == 0 {
		c.produce.Store(true)
	}
	return c.Conn.Write(b)
}

func (c *heldConn) Read(b []byte) (int, error) {
	if c.produce.Load() {
		c.n.mu.Lock()
		hold := c.n.hold
		c.n.mu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-c.closed:
				return 0, net.ErrClosed
			}
		}
	}
	return c.Conn.Read(b)
}

func (c *heldConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// runErr reports whether r's Run has returned, and with what.
func runErr(r *running) (bool, error) {
	select {
	case err := <-r.done:
		r.done <- err
		return true, err
	default:
		return false, nil
	}
}

// mustRun fails the test at once if r's Run has returned.
func mustRun(t *testing.T, r *running) {
	t.Helper()
	if stopped, err := runErr(r); stopped {
		t.Fatalf("instance %s stopped: Run returned %v", r.app.InstanceID(), err)
	}
}

// TestExactlyOnceLostSessionRejoins: under exactly-once, an instance
// loses its session while its open transaction holds records: its
// records are held unacknowledged (so the transaction cannot commit), then
// its network is cut while lines flow, until the other instance has taken
// every task over. The network comes back, with the records still held,
// until the cut instance has rejoined the group (or aborted the
// transaction first). Then:
//
//   - its Run does not return: the records of the transaction it aborts
//     fail with the abort, which is no reason to stop;
//   - it aborts the transaction opened before the loss: a member that
//     lost its session must not commit work the group gave to another
//     member meanwhile, even under the member id and generation it
//     rejoined with;
//   - it runs tasks again, and every count is exact;
//   - it reports the tasks it lost (EventLost).
//
// A runtime that lets rebalances through while a commit waits for its
// records rejoins c under a new member id and generation before the
// commit goes on; if that commit then goes through, the records it
// processed before the loss count twice (a processed them again from
// the last commit): the counts come out high.
func TestExactlyOnceLostSessionRejoins(t *testing.T) {
	h := newHarness(t, 4)
	h.prefill(1000)
	fault := newFaultyNet(t)
	a := h.start("a", WithGuarantee(ExactlyOnce))
	// c's transaction timeout is long: the cluster must not abort (and
	// fence) the transaction c holds open while its records are held.
	c := h.start("c", WithGuarantee(ExactlyOnce), WithTransactionTimeout(time.Minute), WithKafkaOptions(kgo.Dialer(fault.Dial)))
	h.eventually(60*time.Second, "a and c to share the tasks", func() bool { return balanced(a, c) })
	h.waitExact(60 * time.Second)

	f := h.startFlow(10 * time.Millisecond)
	processed := func() int64 {
		var n int64
		for _, ts := range c.app.Status().Tasks {
			n += ts.Processed
		}
		return n
	}
	start := processed()
	h.eventually(30*time.Second, "c to process the flowing lines", func() bool { return processed() > start+100 })
	aborted := func() float64 { return testutil.ToFloat64(c.app.e.Metrics().Transactions.WithLabelValues("aborted")) }
	abortedBefore := aborted()

	fault.HoldProduce()
	held := processed()
	h.eventually(30*time.Second, "c to process lines whose records are held", func() bool { return processed() > held })
	fault.Cut()
	h.eventually(60*time.Second, "a to own every task while c is cut off", func() bool {
		mustRun(t, c)
		_, all := owners(a)
		return all
	})
	gen := a.app.Status().Generation
	fault.Heal()
	h.eventually(60*time.Second, "c to rejoin the group or abort its transaction", func() bool {
		mustRun(t, c)
		mine, _ := owners(c)
		return aborted() > abortedBefore || (c.app.Status().Generation > gen && len(mine) > 0)
	})
	fault.ReleaseProduce()
	h.eventually(90*time.Second, "c to rejoin and share the tasks again", func() bool {
		mustRun(t, c)
		return balanced(a, c)
	})
	h.eventually(30*time.Second, "c to abort the transaction it had open when its session was lost", func() bool {
		mustRun(t, c)
		return aborted() > abortedBefore
	})
	f.stop()
	h.waitExact(60 * time.Second)
	mustRun(t, c)
	c.stop(t)
	lost := 0
	for _, e := range h.eventsOf(EventLost) {
		if e.Instance == "c" {
			lost++
		}
	}
	if lost == 0 {
		t.Error("c lost its session and its tasks, but reported no EventLost")
	}
}

// TestGuaranteeSwitchRestores: a group that ran under exactly-once leaves
// changelogs that end with a transaction marker. A new instance of the
// same application, with no local state, running at-least-once restores
// its stateful tasks from those changelogs to their end (past the
// marker), processes, and every count is exact.
func TestGuaranteeSwitchRestores(t *testing.T) {
	h := newHarness(t, 4)
	h.prefill(1000)
	h.produce(200)
	a := h.start("a", WithGuarantee(ExactlyOnce))
	h.eventually(60*time.Second, "a to run every task", func() bool { _, all := owners(a); return all })
	h.waitExact(60 * time.Second)
	a.stop(t)

	b := h.start("b") // at-least-once, fresh state dir
	h.produce(200)
	restored := func() bool {
		done := map[string]bool{}
		for _, e := range h.eventsOn("b", EventRestored) {
			if strings.HasPrefix(e.Task, "1_") {
				done[e.Task] = true
			}
		}
		return len(done) == 4
	}
	if !tick.Until(context.Background(), 60*time.Second, 50*time.Millisecond, restored) {
		var lags []string
		for _, ts := range b.app.Status().Tasks {
			lags = append(lags, fmt.Sprintf("%s %s lag %d", ts.ID, ts.Role, ts.Lag))
		}
		t.Fatalf("b's stateful actives never finished restoring the changelogs written under exactly-once: %s", strings.Join(lags, ", "))
	}
	h.waitExact(60 * time.Second)
	h.produce(200)
	h.waitExact(60 * time.Second)
	mustRun(t, b)
	b.stop(t)
}

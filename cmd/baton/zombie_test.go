package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/baton-streams/baton/internal/tick"
	"github.com/baton-streams/baton/internal/txncheck"
)

// TestExactlyOnceZombieFenced: two exactly-once `baton run wordcount`
// processes count while lines flow. One, z, is frozen (SIGSTOP) while its
// transaction holds records, past its session timeout: the group expels
// it and the other instance, a, takes its tasks over. Then z resumes
// (SIGCONT) as a zombie, still holding the tasks it was given, its open
// transaction and the records it had fetched, and goes on as if nothing
// happened. It must be fenced: none of the frozen transaction's records is
// ever committed, z joins the group again, and every word's committed
// history is exactly 1..n.
//
// Two ways to be fenced:
//   - by the group: z wakes before the cluster times its transaction out
//     (a runs z's stateless tasks meanwhile; the stateful ones wait for
//     the changelog's open transaction to end). z's commit carries the
//     member id and generation it was expelled from and is refused, or
//     z learns first that it lost its session: either way it aborts.
//   - by the transaction coordinator: z wakes after the cluster aborted
//     its transaction and a ran all of its tasks. Its producer epoch is
//     stale: its abort gets it a new epoch, or its producer is fenced and
//     it joins again with a new client (baton_member_restarts_total).
func TestExactlyOnceZombieFenced(t *testing.T) {
	for _, c := range []struct {
		name       string
		txnTimeout string
		// awake: z is expelled (a is in a generation after the one of
		// the freeze) and a runs enough of its tasks for z to be a zombie.
		awake func(t *testing.T, e *e2e, aAddr, id string, held txnDesc) bool
	}{
		{"by the group", "60s", func(t *testing.T, e *e2e, aAddr, _ string, _ txnDesc) bool {
			return activeTasksOf(t, aAddr, "0_") == 4
		}},
		{"by the transaction coordinator", "3s", func(t *testing.T, e *e2e, aAddr, id string, held txnDesc) bool {
			now := e.describeTxn(t, id)
			aborted := now.ProducerID != held.ProducerID || now.ProducerEpoch != held.ProducerEpoch || now.State != "Ongoing"
			return aborted && activeTasks(t, aAddr) == 8
		}},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			e := clusterWithLines(t)
			run := func() (*proc, string) {
				return e.run(t, "--state-dir", t.TempDir(), "--session-timeout", "2s", "--guarantee", "exactly-once",
					"--transaction-timeout", c.txnTimeout)
			}
			a, aAddr := run()
			z, zAddr := run()
			waitUntil(t, 60*time.Second, "a and z to run the 8 tasks", func() bool {
				return activeTasks(t, aAddr) > 0 && activeTasks(t, zAddr) > 0 && activeTasks(t, aAddr, zAddr) == 8
			})
			id := getStatus(t, zAddr).Instance
			f := e.startWordFlow(2)
			signal := func(sig syscall.Signal) {
				t.Helper()
				if err := z.cmd.Process.Signal(sig); err != nil {
					t.Fatal(err)
				}
			}
			// Freeze z while its transaction holds output records and
			// before it commits. Frozen, it changes nothing: the
			// coordinator's view of its transaction is the one at the
			// SIGSTOP. If that caught it between transactions, or while
			// a commit of the group was under way (z's offsets may have
			// been accepted already: its transaction may then end
			// committed, rightly), let it run and try again.
			// fenced counts z's aborted transactions and fenced restarts.
			fenced := func() float64 {
				return metric(t, zAddr, "baton_transactions_total", `result="aborted"`) + metric(t, zAddr, "baton_member_restarts_total")
			}
			var held txnDesc
			var generation int32 // a's when z froze
			var fencedBefore float64
			for attempt := 1; held.ProducerID == 0; attempt++ {
				if attempt > 10 {
					t.Fatalf("in %d attempts, z was never frozen while its transaction held records and no commit was under way", attempt-1)
				}
				waitUntil(t, 30*time.Second, "z to write output in a transaction", func() bool { return e.holdsRecords(e.describeTxn(t, id)) })
				fencedBefore = fenced()
				signal(syscall.SIGSTOP)
				waitStopped(t, z.cmd.Process.Pid)
				generation = getStatus(t, aAddr).Generation
				txn := e.describeTxn(t, id)
				pending, err := txncheck.CommitPending(context.Background(), kadm.NewClient(e.client), e.appID)
				if err != nil {
					t.Fatal(err)
				}
				if e.holdsRecords(txn) && !pending {
					held = txn
				} else {
					t.Logf("attempt %d: z's transaction was %s over %v at the SIGSTOP (a commit under way in the group: %v); again", attempt, txn.State, txn.Topics.Sorted(), pending)
					signal(syscall.SIGCONT)
				}
			}
			t.Logf("z frozen in transaction %s (producer %d epoch %d) over %v", held.State, held.ProducerID, held.ProducerEpoch, held.Topics.Sorted())
			waitUntil(t, 60*time.Second, "z to be expelled and a to take its tasks over", func() bool {
				return getStatus(t, aAddr).Generation > generation && c.awake(t, e, aAddr, id, held)
			})
			signal(syscall.SIGCONT)
			// Fenced, z either aborts its transaction (the client gets a
			// new epoch) or finds its producer fenced and joins again with
			// a new client.
			if !tick.Until(context.Background(), 60*time.Second, 200*time.Millisecond, func() bool { return fenced() > fencedBefore }) {
				t.Fatalf("z neither aborted a transaction nor restarted fenced within 60 s of waking; its stderr:\n%s", z.stderr)
			}
			waitUntil(t, 60*time.Second, "a and z to share the 8 tasks again", func() bool {
				return activeTasks(t, aAddr) > 0 && activeTasks(t, zAddr) > 0 && activeTasks(t, aAddr, zAddr) == 8
			})
			want := f.end(t)
			e.waitExact(t, want, 60*time.Second)
			e.checkNeverCommitted(t, held)
			for _, p := range []struct {
				name string
				p    *proc
			}{{"a", a}, {"z", z}} {
				if code := p.p.stop(t, 60*time.Second); code != 0 {
					t.Errorf("%s: SIGTERM: exit %d, want 0; stderr:\n%s", p.name, code, p.p.stderr)
				}
			}
		})
	}
}

// waitStopped waits until every thread of process pid is stopped
// (SIGSTOP is delivered asynchronously), as /proc tells. Without /proc it
// returns at once.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/task", pid)
	if _, err := os.Stat(dir); err != nil {
		t.Logf("cannot tell when process %d stops (%v); going on", pid, err)
		return
	}
	waitUntil(t, 10*time.Second, fmt.Sprintf("process %d to stop", pid), func() bool {
		stats, err := filepath.Glob(dir + "/*/stat")
		if err != nil || len(stats) == 0 {
			return false
		}
		for _, f := range stats {
			b, err := os.ReadFile(f)
			if err != nil {
				return false
			}
			// pid (comm) state ...: comm may hold spaces and parentheses.
			i := bytes.LastIndexByte(b, ')')
			if i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
				return false
			}
		}
		return true
	})
}

// activeTasksOf counts the tasks whose id starts with prefix (say "0_",
// subtopology 0) active and caught up on the instance at addr.
func activeTasksOf(t *testing.T, addr, prefix string) int {
	t.Helper()
	n := 0
	for _, task := range getStatus(t, addr).Tasks {
		if task.Role == "active" && task.Lag == 0 && strings.HasPrefix(task.ID, prefix) {
			n++
		}
	}
	return n
}

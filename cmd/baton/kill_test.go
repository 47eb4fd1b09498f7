package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/baton-streams/baton/internal/counts"
	"github.com/baton-streams/baton/internal/tick"
	"github.com/baton-streams/baton/internal/txncheck"
	"github.com/baton-streams/baton/topology"
)

// TestExactlyOnceKill9: two `baton run wordcount --guarantee exactly-once`
// processes count while lines flow; one is killed with SIGKILL while its
// transaction holds output records: the transaction coordinator, asked
// right after the kill, still has it open with output written and no
// group offsets in it, and once the coordinator has ended it, its records
// are in the output and changelog and none is read committed (it was not
// a commit already on its way). A kill that missed (between two
// transactions, or during a commit) proves nothing: the test then starts
// another victim and tries again, at most five times. The survivor takes the tasks over and every word's committed
// history is exactly 1..n: nothing lost, nothing counted twice.
func TestExactlyOnceKill9(t *testing.T) {
	e := clusterWithLines(t)
	run := func() (*proc, string) {
		return e.run(t, "--state-dir", t.TempDir(), "--session-timeout", "2s", "--guarantee", "exactly-once")
	}
	a, aAddr := run()
	f := e.startWordFlow(2)
	for attempt, caught := 1, false; !caught; attempt++ {
		if attempt > 5 {
			t.Fatalf("in %d attempts, no victim was killed while its transaction held records", attempt-1)
		}
		b, bAddr := run()
		waitUntil(t, 60*time.Second, "a and b to run the 8 tasks", func() bool {
			return activeTasks(t, aAddr) > 0 && activeTasks(t, bAddr) > 0 && activeTasks(t, aAddr, bAddr) == 8
		})
		id := getStatus(t, bAddr).Instance
		waitUntil(t, 30*time.Second, "b to write output in a transaction", func() bool { return e.holdsRecords(e.describeTxn(t, id)) })
		if err := b.cmd.Process.Kill(); err != nil { // SIGKILL
			t.Fatal(err)
		}
		<-b.done
		b.done <- nil
		// The dead process changes nothing any more: what the coordinator
		// holds now is its transaction at the kill.
		txn := e.describeTxn(t, id)
		if !e.holdsRecords(txn) {
			t.Logf("attempt %d: b's transaction was %s over %v at the kill: no output, or its commit had begun; another victim", attempt, txn.State, txn.Topics.Sorted())
			continue
		}
		if _, err := txncheck.WaitEnded(context.Background(), kadm.NewClient(e.client), e.appID+"-"+id, 60*time.Second); err != nil {
			t.Fatal(err)
		}
		written, committed := e.txnRecords(t, txn)
		t.Logf("attempt %d: b was killed in transaction %s (producer %d epoch %d) over %v: %d records written, %d committed",
			attempt, txn.State, txn.ProducerID, txn.ProducerEpoch, txn.Topics.Sorted(), written, committed)
		caught = written > 0 && committed == 0
	}
	want := f.end(t)
	waitUntil(t, 60*time.Second, "a to run all 8 tasks", func() bool { return activeTasks(t, aAddr) == 8 })
	e.waitExact(t, want, 60*time.Second)
	if code := a.stop(t, 60*time.Second); code != 0 {
		t.Errorf("SIGTERM: exit %d, want 0", code)
	}
}

// activeTasks counts the tasks active and caught up on the instances
// serving status at addrs.
func activeTasks(t *testing.T, addrs ...string) int {
	t.Helper()
	n := 0
	for _, addr := range addrs {
		for _, task := range getStatus(t, addr).Tasks {
			if task.Role == "active" && task.Lag == 0 {
				n++
			}
		}
	}
	return n
}

// txnDesc is what the transaction coordinator says of a transactional id.
type txnDesc = kadm.DescribedTransaction

// describeTxn asks the transaction coordinator about the transactional id
// of the instance with this id (baton's is <app id>-<instance id>).
func (e *e2e) describeTxn(t *testing.T, instance string) txnDesc {
	t.Helper()
	d, err := txncheck.Describe(context.Background(), kadm.NewClient(e.client), e.appID+"-"+instance)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// holdsRecords reports whether txn is open, holds output records and has
// not begun to commit (txncheck.HoldsRecords).
func (e *e2e) holdsRecords(txn txnDesc) bool { return txncheck.HoldsRecords(txn, e.counts) }

// txnRecords counts the records of transaction txn in the output and the
// changelog (txncheck.Records): all, and those read committed.
func (e *e2e) txnRecords(t *testing.T, txn txnDesc) (written, committed int) {
	t.Helper()
	written, committed, err := txncheck.Records(context.Background(), strings.Split(e.brokers, ","), txn,
		e.counts, topology.ChangelogTopic(e.appID, "counts"))
	if err != nil {
		t.Fatal(err)
	}
	return written, committed
}

// checkNeverCommitted checks that the records of transaction txn (its
// producer id and epoch) are in the output and changelog, read
// uncommitted, and that a read_committed reader sees none of them: the
// transaction held work and none of it was committed.
func (e *e2e) checkNeverCommitted(t *testing.T, txn txnDesc) {
	t.Helper()
	written, committed := e.txnRecords(t, txn)
	t.Logf("transaction of producer %d epoch %d: %d records written, %d committed", txn.ProducerID, txn.ProducerEpoch, written, committed)
	if written == 0 {
		t.Errorf("no record of producer %d epoch %d in the output or changelog: the transaction held no work", txn.ProducerID, txn.ProducerEpoch)
	}
	if committed > 0 {
		t.Errorf("%d records of the transaction of producer %d epoch %d were committed", committed, txn.ProducerID, txn.ProducerEpoch)
	}
}

// waitExact waits until the output (read_committed) holds want's counts,
// then checks every word's whole committed history: 1, 2, ..., its count,
// each value once (counts.Exact).
func (e *e2e) waitExact(t *testing.T, want map[string]int64, timeout time.Duration) {
	t.Helper()
	var got map[string]int64
	if !tick.Until(context.Background(), timeout, 300*time.Millisecond, func() bool {
		got = e.readCounts(t)
		return fmt.Sprint(got) == fmt.Sprint(want)
	}) {
		for w, n := range want {
			if got[w] != n {
				t.Errorf("%s: count %d, want %d", w, got[w], n)
			}
		}
		t.Fatalf("counts not exact after %v", timeout)
	}
	e.checkHistories(t, want)
}

// checkHistories fails the test unless every word's committed output
// values are exactly 1..want[word] (counts.Exact).
func (e *e2e) checkHistories(t *testing.T, want map[string]int64) {
	t.Helper()
	seqs, err := counts.Sequences(context.Background(), strings.Split(e.brokers, ","), e.counts)
	if err != nil {
		t.Fatal(err)
	}
	if bad := counts.Exact(seqs, want, 10); bad != nil {
		t.Fatalf("the committed output is not exactly 1..n per word (final counts are right):\n%s", strings.Join(bad, "\n"))
	}
}

// metric returns the sum of the samples of a Prometheus counter or gauge
// the instance at addr serves on /metrics whose line contains every one
// of labels (say `result="aborted"`).
func metric(t *testing.T, addr, name string, labels ...string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, l := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(l, name+"{") && !strings.HasPrefix(l, name+" ") {
			continue
		}
		match := true
		for _, lb := range labels {
			match = match && strings.Contains(l, lb)
		}
		if !match {
			continue
		}
		v, err := strconv.ParseFloat(l[strings.LastIndex(l, " ")+1:], 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", l, err)
		}
		sum += v
	}
	return sum
}

func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !tick.Until(context.Background(), timeout, 200*time.Millisecond, cond) {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

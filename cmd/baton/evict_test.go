package main

import (
	"strings"
	"testing"
	"time"
)

// TestEvictKilledStaticMember: two static members (--instance-id) with a
// five-minute session timeout count under exactly-once while lines flow;
// b is killed with SIGKILL. Its tasks would wait five minutes for the
// group to expire it; `baton evict` removes it at once, a takes every task
// within a minute, and every word's committed history is exact; evict
// fenced b's transactional producer, so b's open transaction holds up
// no restore of a until it times out. Before
// the kill, evict refuses to remove b, which still answers at its
// /status, and names an instance id the group does not have.
func TestEvictKilledStaticMember(t *testing.T) {
	e := clusterWithLines(t)
	run := func(id string) (*proc, string) {
		return e.run(t, "--state-dir", t.TempDir(), "--instance-id", id, "--session-timeout", "5m", "--guarantee", "exactly-once")
	}
	a, aAddr := run("a")
	b, bAddr := run("b")
	f := e.startWordFlow(2)
	waitUntil(t, 90*time.Second, "a and b to run the 8 tasks", func() bool {
		return activeTasks(t, aAddr) > 0 && activeTasks(t, bAddr) > 0 && activeTasks(t, aAddr, bAddr) == 8
	})
	evict := func(args ...string) (string, string, int) {
		return runBaton(t, "", append([]string{"evict", "--brokers", e.brokers, "--app-id", e.appID}, args...)...)
	}
	if _, stderr, code := evict("--instance-id", "b"); code == 0 || !strings.Contains(stderr, "answers at http://"+bAddr+"/status") || !strings.Contains(stderr, "--force") {
		t.Fatalf("evicting b while it runs: exit %d, stderr %q; want a refusal naming its /status and --force", code, stderr)
	}
	if _, stderr, code := evict("--instance-id", "nobody"); code == 0 || !strings.Contains(stderr, "no member with instance id nobody") || !strings.Contains(stderr, "a, b") {
		t.Fatalf("evicting an unknown instance: exit %d, stderr %q; want an error naming it and the static members a, b", code, stderr)
	}

	if err := b.cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	<-b.done
	b.done <- nil
	out, stderr, code := evict("--instance-id", "b", "--reason", "its machine is gone")
	if code != 0 || !strings.Contains(out, "removed instance b from group "+e.appID) || !strings.Contains(out, "fenced its transactional producer "+e.appID+"-b") {
		t.Fatalf("evicting the killed b: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	if txn := e.describeTxn(t, "b"); txn.State == "Ongoing" {
		t.Errorf("b's transaction is still open after the evict (producer %d epoch %d): not fenced", txn.ProducerID, txn.ProducerEpoch)
	}
	// Without the evict the group would wait for b's five-minute session.
	waitUntil(t, 60*time.Second, "a to run all 8 tasks", func() bool { return activeTasks(t, aAddr) == 8 })
	want := f.end(t)
	e.waitExact(t, want, 60*time.Second)
	if code := a.stop(t, 60*time.Second); code != 0 {
		t.Errorf("SIGTERM: exit %d, want 0", code)
	}
}

// TestEvictBadInput: evict without a required flag is a usage error
// naming it, and one whose brokers do not answer fails in one line
// naming the group.
func TestEvictBadInput(t *testing.T) {
	for _, missing := range []string{"brokers", "app-id", "instance-id"} {
		args := map[string]string{"brokers": "127.0.0.1:1", "app-id": "wc", "instance-id": "b"}
		delete(args, missing)
		cmd := []string{"evict"}
		for k, v := range args {
			cmd = append(cmd, "--"+k, v)
		}
		_, stderr, code := runBaton(t, "", cmd...)
		if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "--"+missing+": required") {
			t.Errorf("without --%s: exit %d, stderr %q; want exit 2 and one line naming it", missing, code, stderr)
		}
	}
	_, stderr, code := runBaton(t, "", "evict", "--brokers", "127.0.0.1:1", "--app-id", "wc", "--instance-id", "b", "--timeout", "1s")
	if code == 0 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "describing group wc") {
		t.Errorf("unreachable brokers: exit %d, stderr %q; want one line naming the group", code, stderr)
	}
}

package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/baton-streams/baton/internal/tick"
)

// TestExactlyOnceKill9: two `baton run wordcount --guarantee exactly-once`
// processes count while lines flow; one is killed with SIGKILL in the
// middle. The survivor takes its tasks over and every count is exact:
// nothing lost, nothing counted twice.
func TestExactlyOnceKill9(t *testing.T) {
	e := clusterWithLines(t)
	run := func() (*proc, string) {
		return e.run(t, "--state-dir", t.TempDir(), "--session-timeout", "2s", "--guarantee", "exactly-once")
	}
	a, aAddr := run()
	b, bAddr := run()
	actives := func(addrs ...string) int {
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
	waitUntil(t, 60*time.Second, "a and b to run the 8 tasks", func() bool {
		return actives(aAddr) > 0 && actives(bAddr) > 0 && actives(aAddr, bAddr) == 8
	})

	f := e.startWordFlow(2)
	time.Sleep(1500 * time.Millisecond)
	if err := b.cmd.Process.Kill(); err != nil { // SIGKILL, mid-transaction
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	want := f.end(t)
	waitUntil(t, 60*time.Second, "a to run all 8 tasks", func() bool { return actives(aAddr) == 8 })
	var got map[string]int64
	ok := false
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		got = e.readCounts(t)
		if fmt.Sprint(got) == fmt.Sprint(want) {
			ok = true
			break
		}
	}
	if !ok {
		for w, n := range want {
			if got[w] != n {
				t.Errorf("%s: count %d, want %d", w, got[w], n)
			}
		}
		t.Fatalf("counts not exact after SIGKILL under exactly-once; a's stderr:\n%s", a.stderr)
	}
	if code := a.stop(t, 60*time.Second); code != 0 {
		t.Errorf("SIGTERM: exit %d, want 0", code)
	}
}

func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !tick.Until(context.Background(), timeout, 200*time.Millisecond, cond) {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

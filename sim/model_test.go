package sim

import (
	"math"
	"strings"
	"testing"
	"time"
)

func runText(t *testing.T, policy, text string) *Result {
	t.Helper()
	sc, err := ParseString("test", text)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := ParsePolicy(policy)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(sc, pol, Options{Detail: true, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func entryAt(r *Result, kind, text string) (time.Duration, bool) {
	for _, e := range r.Timeline {
		if e.Kind == kind && strings.Contains(e.Text, text) {
			return e.At, true
		}
	}
	return 0, false
}

// TestRestoreArithmetic follows one learner by hand: placed when the
// join's round completes (heartbeat + join + sync), ready when its lag
// reaches acceptable_lag at the instance's restore rate, handed over in
// a rejoin round and its follow-up.
func TestRestoreArithmetic(t *testing.T) {
	r := runText(t, "smooth", `
timing heartbeat=3s join=100ms sync=100ms
config acceptable_lag=10000
task T1 T2 state=1e5 rate=0
instance A active=T1,T2 restore=1e4
at 10s join B restore=1e4
`)
	want := []struct {
		kind, text string
		at         time.Duration
	}{
		{"learner", "B learns T", 13200 * time.Millisecond},
		{"ready", "B learner T", 22200 * time.Millisecond}, // (1e5 - 1e4) / 1e4 = 9s later
		{"revoke", "A gives up T", 25400 * time.Millisecond},
		{"active", "B runs T", 25600 * time.Millisecond}, // follow-up: join + sync
	}
	for _, w := range want {
		at, ok := entryAt(r, w.kind, w.text)
		if !ok || at != w.at {
			t.Errorf("%s %q at %v (found %v), want %v", w.kind, w.text, at, ok, w.at)
		}
	}
	if r.RestoredCritical != 0 || math.Abs(r.UnavailableTaskSeconds-0.2) > 1e-9 || !r.Balanced {
		t.Errorf("critical %v, unavailable %v s, balanced %v; want 0, 0.2 (one follow-up round), true", r.RestoredCritical, r.UnavailableTaskSeconds, r.Balanced)
	}
}

// TestEagerStopsTheWorld: under eager every task pauses from the moment
// members notice the rebalance until the plan is applied.
func TestEagerStopsTheWorld(t *testing.T) {
	r := runText(t, "eager", `
timing heartbeat=3s join=100ms sync=100ms
task T1 T2 state=1e5 rate=0
instance A active=T1,T2 restore=1e4
at 10s join B restore=1e4
`)
	if r.MaxUnavailable != 2 || r.UnavailableTaskSeconds < 0.4-1e-9 {
		t.Errorf("most unavailable %d, task-seconds %v; want 2 and at least 0.4", r.MaxUnavailable, r.UnavailableTaskSeconds)
	}
}

// TestCrashWaitsForSessionTimeout: the group acts on a crash only once the
// session timeout expels the member; the task is unavailable all along.
func TestCrashWaitsForSessionTimeout(t *testing.T) {
	r := runText(t, "smooth", `
timing heartbeat=1s join=100ms sync=100ms session=20s
task T1 T2 state=1e5 rate=0
instance A active=T1 standby=T2 restore=1e4
instance B active=T2 standby=T1 restore=1e4
at 10s crash A
`)
	at, ok := entryAt(r, "active", "B runs T1, caught up")
	if want := 31200 * time.Millisecond; !ok || at != want {
		t.Errorf("T1 back at %v (found %v), want %v: crash + session + heartbeat + join + sync", at, ok, want)
	}
	if math.Abs(r.UnavailableTaskSeconds-21.2) > 1e-9 {
		t.Errorf("unavailable %v task-seconds, want 21.2", r.UnavailableTaskSeconds)
	}
}

// TestDiskState: state an instance holds on disk in no role counts with
// its lag. B holds T1's state 500 records behind, within the acceptable
// lag, so when A drains T1 moves to B at once and B restores those 500 on
// the critical path; without it B must learn T1 from scratch first.
func TestDiskState(t *testing.T) {
	const group = `
timing heartbeat=1s join=100ms sync=100ms
config acceptable_lag=1000
task T1 state=1e5 rate=0
instance A active=T1 restore=1e4
at 10s leave A
`
	warm := runText(t, "smooth", group+"instance B restore=1e4 disk=T1:500\n")
	if _, learned := entryAt(warm, "learner", "B learns T1"); learned || warm.RestoredCritical != 500 || !warm.Balanced || warm.TimeToBalance > 3*time.Second {
		t.Errorf("with T1 on B's disk: learner %v, restored %v, balanced after %v; want no learner, 500, within 3s", learned, warm.RestoredCritical, warm.TimeToBalance)
	}
	cold := runText(t, "smooth", group+"instance B restore=1e4\n")
	if _, learned := entryAt(cold, "learner", "B learns T1"); !learned || cold.TimeToBalance < 9*time.Second {
		t.Errorf("without: learner %v, balanced after %v; want a learner restoring for 9.9s", learned, cold.TimeToBalance)
	}
}

// TestMostUnavailableAtOnce: the follow-up plan at 11.4s takes S1 off A
// and starts X1 (revoked in the first round) on B at the same instant.
// The two are never unavailable together: one task at a time is.
func TestMostUnavailableAtOnce(t *testing.T) {
	r := runText(t, "smooth", `
timing heartbeat=1s join=100ms sync=100ms
config acceptable_lag=10
task X1 X2 stateless
task S1 S2 state=100 rate=0
instance A active=X1,X2,S1,S2 restore=1e4
at 10s join B restore=1e4
`)
	revoked, ok1 := entryAt(r, "revoke", "A gives up S1")
	started, ok2 := entryAt(r, "active", "B runs X1")
	if !ok1 || !ok2 || revoked != started {
		t.Fatalf("S1 revoked at %v (%v), X1 started at %v (%v): want the same plan", revoked, ok1, started, ok2)
	}
	if r.MaxUnavailable != 1 {
		t.Errorf("most unavailable at once %d, want 1", r.MaxUnavailable)
	}
}

// TestRoundThatMovesNothing: A rejoins (its capacity set to what it was)
// and the round's plan keeps every task where it is. The round changes
// nothing any member holds, so the group never stops being balanced.
func TestRoundThatMovesNothing(t *testing.T) {
	r := runText(t, "cooperative", `
timing heartbeat=1s join=100ms sync=100ms
task X1 X2 stateless
instance A active=X1
instance B active=X2
at 10s capacity A 1
`)
	if r.Rebalances != 1 || !r.Balanced || r.TimeToBalance != 0 {
		t.Errorf("%d rebalances, balanced %v after %v; want 1, true after 0s", r.Rebalances, r.Balanced, r.TimeToBalance)
	}
}

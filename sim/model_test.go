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

// TestRestoreArithmetic follows one learner by hand. A's heartbeats fall
// every 3s from 0; B joins at 10s and A learns of the round at its
// heartbeat at 12s: B's learner is placed join + sync later. It is ready
// when its lag reaches acceptable_lag at the instance's restore rate; B
// rejoins at once and A at its early heartbeat, 500ms after its last
// assignment. A gives T up in that round and rejoins as soon as it has
// (the follow-up), B at its own early heartbeat; meanwhile B's copy,
// dropped as a learner by the plan that revokes T, restores nothing, and
// B restores the rest of T before it runs it.
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
		{"learner", "B learns T", 12200 * time.Millisecond},
		{"ready", "B learner T", 21200 * time.Millisecond},   // (1e5 - 1e4) / 1e4 = 9s later
		{"revoke", "A gives up T", 21900 * time.Millisecond}, // A beats at 12.7s, then every 3s: 21.7s, + join + sync
		{"active", "B runs T", 22600 * time.Millisecond},     // 21.9s + 500ms + join + sync
	}
	for _, w := range want {
		at, ok := entryAt(r, w.kind, w.text)
		if !ok || at != w.at {
			t.Errorf("%s %q at %v (found %v), want %v", w.kind, w.text, at, ok, w.at)
		}
	}
	// 7000 of the last 10000 restored by 21.9s; 3000 more at 1e4/s
	// after 22.6s.
	if math.Abs(r.RestoredCritical-3000) > 1e-6 || math.Abs(r.UnavailableTaskSeconds-1.0) > 1e-9 || !r.Balanced {
		t.Errorf("critical %v, unavailable %v s, balanced %v; want 3000, 1.0, true", r.RestoredCritical, r.UnavailableTaskSeconds, r.Balanced)
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
	// A's last heartbeat was at 10s, with the crash: the broker expels it
	// at 30s, and B's heartbeat at 30s learns of the round at once.
	at, ok := entryAt(r, "active", "B runs T1, caught up")
	if want := 30200 * time.Millisecond; !ok || at != want {
		t.Errorf("T1 back at %v (found %v), want %v: last heartbeat + session + join + sync", at, ok, want)
	}
	if math.Abs(r.UnavailableTaskSeconds-20.2) > 1e-9 {
		t.Errorf("unavailable %v task-seconds, want 20.2", r.UnavailableTaskSeconds)
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
// The two are never unavailable together: one task at a time is. (With
// the buckets balanced apart: stand-ins would move X2 as well.)
func TestMostUnavailableAtOnce(t *testing.T) {
	r := runText(t, "smooth", `
timing heartbeat=1s join=100ms sync=100ms
config acceptable_lag=10 separate_buckets=true
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

// TestHeartbeatNotice: members learn of a round at their next heartbeat,
// which beat= places (here 300ms after 0, then every second), and the
// broker expels a crashed member a session timeout after its last one.
func TestHeartbeatNotice(t *testing.T) {
	const group = `
timing heartbeat=1s join=100ms sync=100ms session=5s
task X1 X2 stateless
instance A active=X1 beat=300ms
instance B active=X2 beat=300ms
`
	join := runText(t, "cooperative", group+"at 10s join C\n")
	// C joins at once; A and B at their heartbeats at 10.3s.
	if at, ok := entryAt(join, "rebalance", "#1 plan"); !ok || at != 10500*time.Millisecond {
		t.Errorf("join: first plan at %v (found %v), want 10.5s", at, ok)
	}
	crash := runText(t, "cooperative", group+"at 10s crash B\n")
	// B's last heartbeat at 9.3s: expelled at 14.3s, which A's heartbeat
	// then learns.
	if at, ok := entryAt(crash, "expelled", "B"); !ok || at != 14300*time.Millisecond {
		t.Errorf("crash: B expelled at %v (found %v), want 14.3s", at, ok)
	}
	if at, ok := entryAt(crash, "active", "A runs X2"); !ok || at != 14500*time.Millisecond {
		t.Errorf("crash: X2 back at %v (found %v), want 14.5s", at, ok)
	}
}

// TestFollowupRejoin: in the follow-up round the member that gave tasks
// up rejoins at once and the others at their early heartbeat, 500ms
// after their assignment; when every member gave up something, nobody
// waits for a heartbeat.
func TestFollowupRejoin(t *testing.T) {
	r := runText(t, "cooperative", `
timing heartbeat=1s join=100ms sync=100ms
task X1 X2 stateless
instance A active=X1,X2
at 10s join B
`)
	first, _ := entryAt(r, "rebalance", "#1 plan")
	second, ok := entryAt(r, "rebalance", "#2 plan")
	if want := first + 500*time.Millisecond + 200*time.Millisecond; !ok || second != want {
		t.Errorf("follow-up plan at %v (found %v), want %v: B's early heartbeat + join + sync", second, ok, want)
	}
	// Without the early heartbeat B rejoins at its timer, a heartbeat
	// after its assignment.
	late := runText(t, "cooperative", `
timing heartbeat=1s join=100ms sync=100ms early=0s
task X1 X2 stateless
instance A active=X1,X2
at 10s join B
`)
	first, _ = entryAt(late, "rebalance", "#1 plan")
	if second, ok := entryAt(late, "rebalance", "#2 plan"); !ok || second != first+time.Second+200*time.Millisecond {
		t.Errorf("with early=0s, follow-up plan at %v (found %v), want %v", second, ok, first+time.Second+200*time.Millisecond)
	}
	alone := runText(t, "cooperative", `
timing heartbeat=1s join=100ms sync=100ms
task X1 X2 stateless
instance A active=X1,X2
at 10s capacity A 2
`)
	if r := alone; r.Rebalances != 1 {
		t.Fatalf("%d rebalances, want 1", r.Rebalances)
	}
	if at, ok := entryAt(alone, "rebalance", "#1 plan"); !ok || at != 10200*time.Millisecond {
		t.Errorf("lone member's plan at %v (found %v), want 10.2s: it asks and nobody else must notice", at, ok)
	}
}

// TestStartTime: an active runs Timing.Start after its owner can run it.
// Under eager A pauses both tasks at its heartbeat at 10s, the plan comes
// join + sync later, and each task's first record start after that.
func TestStartTime(t *testing.T) {
	r := runText(t, "eager", `
timing heartbeat=1s join=100ms sync=100ms start=50ms
task X1 X2 stateless
instance A active=X1,X2
at 10s join B
`)
	if math.Abs(r.UnavailableTaskSeconds-0.5) > 1e-9 || r.MaxUnavailable != 2 || r.TimeToBalance != 250*time.Millisecond {
		t.Errorf("unavailable %v task-seconds, at most %d, balanced after %v; want 0.5, 2, 250ms", r.UnavailableTaskSeconds, r.MaxUnavailable, r.TimeToBalance)
	}
}

// TestRejoinDuringRound: B's learner is ready at 10.209s, while the
// follow-up round waits for B's early heartbeat (10.7s). B has not
// rejoined yet, so it rejoins at once and that round serves the
// readiness: no round of its own.
func TestRejoinDuringRound(t *testing.T) {
	r := runText(t, "smooth", `
timing heartbeat=1s join=100ms sync=100ms
config acceptable_lag=10
task X1 X2 stateless
task S1 S2 state=100 rate=0
instance A active=X1,X2,S1,S2 restore=1e4
at 10s join B restore=1e4
`)
	if at, ok := entryAt(r, "rebalance", "#2: B rejoins at once"); !ok || at != 10209*time.Millisecond {
		t.Errorf("B rejoins at %v (found %v), want 10.209s", at, ok)
	}
	if at, ok := entryAt(r, "rebalance", "#2 plan"); !ok || at != 10409*time.Millisecond {
		t.Errorf("second plan at %v (found %v), want 10.409s", at, ok)
	}
	if r.Rebalances != 3 {
		t.Errorf("%d rebalances, want 3 (a join, its follow-up with the handover, the handover's follow-up)", r.Rebalances)
	}
}

// TestDrainedMemberLeavesDuringFollowup: C's plan at 10.2s revokes its
// last task. C rejoins the follow-up round at once, after the revoke,
// and leaves only once that round's JoinGroup has completed (A and B at
// their early heartbeat, 10.7s): the leader plans the round, C leaves,
// and A and B, waiting for their assignment, rejoin at once for a third
// round, which hands X2 to B.
func TestDrainedMemberLeavesDuringFollowup(t *testing.T) {
	r := runText(t, "cooperative", `
timing heartbeat=1s join=100ms sync=100ms
task X1 X2 stateless
instance A active=X1
instance B
instance C active=X2
at 10s leave C
`)
	if at, ok := entryAt(r, "left", "C drained"); !ok || at != 10900*time.Millisecond {
		t.Errorf("C left at %v (found %v), want 10.9s", at, ok)
	}
	if at, ok := entryAt(r, "active", "B runs X2"); !ok || at != 11100*time.Millisecond {
		t.Errorf("X2 on B at %v (found %v), want 11.1s", at, ok)
	}
	if r.Rebalances != 3 {
		t.Errorf("%d rebalances, want 3", r.Rebalances)
	}
}

// TestStatefulUnavailability: the stateful figures count the stateful
// tasks alone. A crash orphans both kinds; the stateless tasks start at
// once (start time) and the stateful ones only once restored, so they
// are unavailable longer, and eager's pause of the survivors counts both.
func TestStatefulUnavailability(t *testing.T) {
	const scenario = `
timing heartbeat=1s join=10ms sync=10ms session=3s start=100ms
tasks stateful=4 stateless=4 state=1e5 rate=0
instances 2 restore=1e5
at 5s crash i2
`
	for _, policy := range []string{"smooth", "eager"} {
		r := runText(t, policy, scenario)
		if r.UnavailableStatefulSeconds <= 0 || r.UnavailableStatefulSeconds >= r.UnavailableTaskSeconds {
			t.Errorf("%s: stateful unavailable %.3f task-s of %.3f in all: want some, and less than all", policy, r.UnavailableStatefulSeconds, r.UnavailableTaskSeconds)
		}
		// i2's two stateful tasks restore 1e5 records each, sharing 1e5
		// records/s: each is unavailable at least 2 s.
		if r.UnavailableStatefulSeconds < 4 {
			t.Errorf("%s: stateful unavailable %.3f task-s, want at least 4 (two tasks restoring 2 s each)", policy, r.UnavailableStatefulSeconds)
		}
		if r.MaxUnavailableStateful < 2 || r.MaxUnavailableStateful > r.MaxUnavailable {
			t.Errorf("%s: at most %d stateful unavailable at once (%d in all), want 2 to %d", policy, r.MaxUnavailableStateful, r.MaxUnavailable, r.MaxUnavailable)
		}
	}
	r := runText(t, "smooth", strings.ReplaceAll(scenario, "stateful=4 stateless=4", "stateful=0 stateless=8"))
	if r.UnavailableStatefulSeconds != 0 || r.MaxUnavailableStateful != 0 || r.UnavailableTaskSeconds <= 0 {
		t.Errorf("stateless only: stateful %.3f task-s, %d at once (all: %.3f): want 0 and 0 of some", r.UnavailableStatefulSeconds, r.MaxUnavailableStateful, r.UnavailableTaskSeconds)
	}
}

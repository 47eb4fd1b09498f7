package lifecycle

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestParseRole(t *testing.T) {
	for _, r := range []Role{None, Active, Standby, Learner} {
		got, err := ParseRole(r.String())
		if err != nil || got != r {
			t.Errorf("ParseRole(%q) = %v, %v; want %v", r.String(), got, err, r)
		}
	}
	for _, s := range []string{"", "disk", "Active", " active", "leader"} {
		if r, err := ParseRole(s); err == nil {
			t.Errorf("ParseRole(%q) = %v; want an error", s, r)
		}
	}
}

func TestRoleJSON(t *testing.T) {
	in := map[string]Role{"a": Active, "b": Standby, "c": Learner, "d": None}
	b, err := json.Marshal(in)
	if err != nil || string(b) != `{"a":"active","b":"standby","c":"learner","d":"none"}` {
		t.Fatalf("json.Marshal = %s, %v", b, err)
	}
	var out map[string]Role
	if err := json.Unmarshal(b, &out); err != nil || len(out) != 4 || out["a"] != Active || out["c"] != Learner || out["d"] != None {
		t.Fatalf("json.Unmarshal = %v, %v", out, err)
	}
	var r Role
	if err := json.Unmarshal([]byte(`"observer"`), &r); err == nil {
		t.Errorf("an unknown role decoded as %v", r)
	}
	if _, err := json.Marshal(Role(9)); err == nil {
		t.Error("a role out of range encoded")
	}
}

func TestWarmPromotionKeepsStores(t *testing.T) {
	for _, role := range []Event{AssignStandby, AssignLearner} {
		s, fx, err := Step(State{}, role, true)
		if err != nil || s.Phase != Replicating || !slices.Equal(fx, []Effect{OpenStores, StartReading}) {
			t.Fatalf("%s: %v %v %v", role, s, fx, err)
		}
		s, fx, err = Step(s, AssignActive, true)
		if err != nil || s != (State{Role: Active, Phase: Restoring}) || !slices.Equal(fx, []Effect{StartProcessor, PauseInput}) {
			t.Fatalf("a %s promoted to active: %v %v %v, want restoring its tail with input paused", role, s, fx, err)
		}
		s, fx, err = Step(s, CaughtUp, true)
		if err != nil || s != (State{Role: Active, Phase: Running}) || !slices.Equal(fx, []Effect{StopReading, ResumeInput}) {
			t.Fatalf("the promoted %s caught up: %v %v %v", role, s, fx, err)
		}
	}
}

func TestColdActiveRestoresBeforeProcessing(t *testing.T) {
	s, fx, err := Step(State{}, AssignActive, true)
	if err != nil || s.Phase != Restoring || !slices.Equal(fx, []Effect{OpenStores, StartProcessor, PauseInput, StartReading}) {
		t.Fatalf("%v %v %v", s, fx, err)
	}
	s, fx, err = Step(s, CaughtUp, true)
	if err != nil || s.Phase != Running || !slices.Equal(fx, []Effect{StopReading, ResumeInput}) {
		t.Fatalf("%v %v %v", s, fx, err)
	}
}

// TestRevokeAndLoseClose: a running task given up, revoked (committed
// by the instance before) or lost, closes its stores; a restoring one
// also stops reading and resumes its input.
func TestRevokeAndLoseClose(t *testing.T) {
	running := State{Role: Active, Phase: Running}
	for _, ev := range []Event{Revoke, Lose} {
		s, fx, err := Step(running, ev, true)
		if err != nil || s != (State{}) || !slices.Equal(fx, []Effect{CloseStores}) {
			t.Errorf("%s of a running task: %v %v %v, want closed with close-stores", ev, s, fx, err)
		}
		_, fx, _ = Step(State{Role: Active, Phase: Restoring}, ev, true)
		if !slices.Equal(fx, []Effect{StopReading, ResumeInput, CloseStores}) {
			t.Errorf("%s of a restoring task: %v", ev, fx)
		}
	}
}

func TestLearnerReportsReady(t *testing.T) {
	s, _, _ := Step(State{}, AssignLearner, true)
	_, fx, err := Step(s, CaughtUp, true)
	if err != nil || !slices.Equal(fx, []Effect{ReportReady}) {
		t.Errorf("%v %v", fx, err)
	}
	s, _, _ = Step(State{}, AssignStandby, true)
	if _, fx, _ := Step(s, CaughtUp, true); len(fx) != 0 {
		t.Errorf("a standby does not ask for a rebalance: %v", fx)
	}
}

func TestStatelessNeverReplicates(t *testing.T) {
	if _, _, err := Step(State{}, AssignLearner, false); err == nil {
		t.Error("a stateless task accepted a learner")
	}
	s, fx, err := Step(State{}, AssignActive, false)
	if err != nil || s.Phase != Running || !slices.Equal(fx, []Effect{StartProcessor}) {
		t.Errorf("%v %v %v", s, fx, err)
	}
}

// TestRandomWalk drives random events and checks invariants of the effect
// stream against a model of the stores, the reader and the input.
func TestRandomWalk(t *testing.T) {
	seed := uint64(42)
	rng := rand.New(rand.NewPCG(seed, seed))
	for run := range 2000 {
		stateful := rng.IntN(4) != 0
		var s State
		open, reading, paused, processor := false, false, false, false
		for range 30 {
			ev := Event(rng.IntN(7))
			next, fx, err := Step(s, ev, stateful)
			if err != nil {
				if next != s {
					t.Fatalf("run %d: an error changed the state", run)
				}
				continue
			}
			for _, e := range fx {
				switch e {
				case OpenStores:
					if open {
						t.Fatalf("run %d: %v on %s: stores opened twice", run, ev, s.Phase)
					}
					open = true
				case CloseStores:
					if !open || reading {
						t.Fatalf("run %d: close with open=%v reading=%v", run, open, reading)
					}
					open = false
				case StartReading:
					if !open || reading {
						t.Fatalf("run %d: start reading with open=%v reading=%v", run, open, reading)
					}
					reading = true
				case StopReading:
					reading = false
				case PauseInput:
					paused = true
				case ResumeInput:
					paused = false
				case StartProcessor:
					processor = true
				}
			}
			s = next
			if s.Phase == Closed {
				processor = false
				if paused {
					t.Fatalf("run %d: closed after %s with its input still paused", run, ev)
				}
			}
			if stateful && (s.Phase == Closed) == open {
				t.Fatalf("run %d: phase %s with stores open=%v", run, s.Phase, open)
			}
			if s.Phase == Running && (paused || reading || !processor) {
				t.Fatalf("run %d: running with paused=%v reading=%v processor=%v", run, paused, reading, processor)
			}
			if s.Phase == Restoring && (!paused || !reading) {
				t.Fatalf("run %d: restoring without paused input and a reader", run)
			}
		}
	}
}

// TestLearnerReadinessLostAndRegained: a learner that fell behind after
// reporting ready reports ready again when it catches up, so the leader
// gets another chance to move the task; a learner that stays ready does
// not ask twice.
func TestLearnerReadinessLostAndRegained(t *testing.T) {
	s, _, _ := Step(State{}, AssignLearner, true)
	s, fx, _ := Step(s, CaughtUp, true)
	if !s.Ready || !slices.Equal(fx, []Effect{ReportReady}) {
		t.Fatalf("caught up: %v %v", s, fx)
	}
	if _, fx, _ := Step(s, CaughtUp, true); len(fx) != 0 {
		t.Errorf("a learner already ready must not ask again: %v", fx)
	}
	s, fx, err := Step(s, FellBehind, true)
	if err != nil || s.Ready || len(fx) != 0 {
		t.Fatalf("fell behind: %v %v %v", s, fx, err)
	}
	s, fx, _ = Step(s, CaughtUp, true)
	if !s.Ready || !slices.Equal(fx, []Effect{ReportReady}) {
		t.Errorf("readiness regained must be reported again: %v %v", s, fx)
	}
	if s, _, _ = Step(s, AssignStandby, true); s.Ready {
		t.Errorf("a standby is never ready: %v", s)
	}
}

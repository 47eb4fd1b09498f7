package sim

import (
	"testing"
	"time"
)

// TestTimeToTotalShare: Kafka Streams' HighAvailabilityTaskAssignorTest
// case in the simulator. C1 runs four stateful tasks and three stateless
// ones; C2 joins at 10s and needs about 20s to restore a stateful task.
// With stand-ins C2 runs the three stateless tasks from the follow-up of
// the first round, its share of all seven (three) within a second of the
// join; with the buckets balanced apart it runs one until its learners
// are ready. Both runs end with each bucket balanced, and every round
// passes both checkers (runText checks).
func TestTimeToTotalShare(t *testing.T) {
	const group = `
timing heartbeat=1s join=100ms sync=100ms
task S1 S2 S3 S4 state=2e5 rate=0
task X1 X2 X3 stateless
instance C1 active=S1,S2,S3,S4,X1,X2,X3 restore=1e4
at 10s join C2 restore=1e4
`
	now := runText(t, "smooth", "config max_learners=2 acceptable_lag=10\n"+group)
	apart := runText(t, "smooth", "config max_learners=2 acceptable_lag=10 separate_buckets=true\n"+group)
	for _, r := range []*Result{now, apart} {
		if !r.Balanced || !r.TotalShareHeld || len(r.Violations) > 0 {
			t.Fatalf("balanced %v, total share held %v, violations %v", r.Balanced, r.TotalShareHeld, r.Violations)
		}
	}
	if now.TimeToTotalShare > 2*time.Second {
		t.Errorf("stand-ins: C2 carries its share of all tasks after %v, want within 2s of the join", now.TimeToTotalShare)
	}
	if apart.TimeToTotalShare < 20*time.Second {
		t.Errorf("separate buckets: C2 carries its share of all tasks after %v, want only once a learner has restored (20s)", apart.TimeToTotalShare)
	}
	if now.TimeToBalance > apart.TimeToBalance+2*time.Second {
		t.Errorf("stand-ins balance after %v, separate buckets after %v: the stand-ins delay the stateful moves", now.TimeToBalance, apart.TimeToBalance)
	}
}

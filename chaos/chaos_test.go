package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/internal/kafkatest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	kafkatest.StopShared()
	os.Exit(code)
}

// external returns the shared Apache Kafka cluster as the run's cluster
// with BATON_KAFKA=real (its restarts kill -9 one broker and start it
// again), or nil for an embedded cluster of the run's own.
func external(t *testing.T) *External {
	tg := kafkatest.ForTest(t)
	if tg.Kafka == nil {
		return nil
	}
	return &External{Brokers: tg.Brokers, Prefix: tg.Name(""),
		RestartBroker: func(ctx context.Context, rng *rand.Rand) (string, error) {
			node := 1 + rng.IntN(tg.Kafka.Nodes())
			if err := tg.Kafka.Kill(node); err != nil {
				return "", err
			}
			if err := tg.Kafka.Restart(ctx, node); err != nil {
				return "", err
			}
			return fmt.Sprintf("broker %d was killed (kill -9) and restarted", node), nil
		}}
}

// TestChaosShort is the CI-sized chaos run, once per guarantee: about 20 s
// of joins, drains, crashes, leader crashes and cluster restarts under
// continuous input, then every count is checked against the input. On
// Apache Kafka (BATON_KAFKA=real) a restart kills -9 one broker and starts
// it again. BATON_CHAOS_DURATION makes it a long run.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("a chaos run takes about a minute; it runs in the full test pass")
	}
	for _, g := range []baton.Guarantee{baton.AtLeastOnce, baton.ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) {
			cfg := Config{Duration: 20 * time.Second, Every: 2 * time.Second, Seed: 7, Guarantee: g, External: external(t)}
			if s := os.Getenv("BATON_CHAOS_DURATION"); s != "" {
				d, err := time.ParseDuration(s)
				if err != nil || d <= 0 {
					t.Fatalf("BATON_CHAOS_DURATION=%q: want a positive duration such as 10m", s)
				}
				cfg.Duration = d
			}
			if testing.Verbose() {
				cfg.Out = os.Stdout
			}
			res, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Log(res)
			if !res.OK() {
				t.Fatalf("%s broken: %v (low words: %v)", g, res, res.LowWords)
			}
			if res.RecordsIn == 0 || len(res.Events) == 0 {
				t.Fatalf("the run did nothing: %v", res)
			}
		})
	}
}

func TestResultOK(t *testing.T) {
	eos, alo := baton.ExactlyOnce.String(), baton.AtLeastOnce.String()
	for _, c := range []struct {
		r    Result
		want bool
	}{
		{Result{Guarantee: alo, Events: map[string]int{"crash": 1}, Duplicated: 5}, true},
		{Result{Guarantee: alo, Events: map[string]int{"drain": 1}, Duplicated: 5}, false},
		{Result{Guarantee: alo, Events: map[string]int{"handover-crash": 1}, Duplicated: 5}, true},
		{Result{Guarantee: alo, Events: map[string]int{"crash": 1}, Lost: 1}, false},
		{Result{Guarantee: eos, Events: map[string]int{"crash": 1}, Duplicated: 1}, false},
		{Result{Guarantee: eos, Events: map[string]int{"crash": 1}}, true},
	} {
		if got := c.r.OK(); got != c.want {
			t.Errorf("%+v.OK() = %v, want %v", c.r, got, c.want)
		}
	}
}

package chaos

import (
	"context"
	"os"
	"testing"
	"time"
)

// TestChaosShort is the CI-sized chaos run: about 20 s of joins, drains,
// crashes and leader crashes under continuous input, then every count is
// checked against the input.
func TestChaosShort(t *testing.T) {
	if testing.Short() {
		t.Skip("a chaos run takes about a minute; it runs in the full test pass")
	}
	cfg := Config{Duration: 20 * time.Second, Every: 2 * time.Second, Seed: 7}
	if testing.Verbose() {
		cfg.Out = os.Stdout
	}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res)
	if !res.OK() {
		t.Fatalf("at-least-once broken: %v (low words: %v)", res, res.LowWords)
	}
	if res.RecordsIn == 0 || len(res.Events) == 0 {
		t.Fatalf("the run did nothing: %v", res)
	}
}

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/baton-streams/baton/cluster"
	"github.com/baton-streams/baton/internal/kafkatest"
)

// TestRunSessionTimeoutRefused: against brokers whose
// group.min.session.timeout.ms is Kafka's default (6 s), `baton run
// wordcount --session-timeout 2s` exits non-zero, its last stderr line
// naming the session timeout and the broker setting, instead of trying to
// join forever.
func TestRunSessionTimeoutRefused(t *testing.T) {
	var brokers string
	if kafkatest.Real(t) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		c, err := kafkatest.Start(ctx, kafkatest.Config{Nodes: 1, BrokerConfig: map[string]string{"group.min.session.timeout.ms": "6000"}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Stop()
		brokers = strings.Join(c.Addrs(), ",")
	} else {
		c, err := cluster.Start("127.0.0.1:0", 1, kfake.GroupMinSessionTimeout(6*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		brokers = strings.Join(c.Addrs(), ",")
	}
	(&kafkatest.Target{Brokers: strings.Split(brokers, ",")}).CreateTopic(t, "lines", 2, false)
	p := startBaton(t, "run", "wordcount", "--brokers", brokers, "--app-id", "wc", "--input", "lines",
		"--output", "counts", "--state-dir", t.TempDir(), "--session-timeout", "2s")
	var err error
	select {
	case err = <-p.done:
		p.done <- err
	case <-time.After(30 * time.Second):
		t.Fatalf("baton still running 30 s after start; stderr:\n%s", p.stderr)
	}
	if err == nil {
		t.Fatalf("exit 0; want an error; stderr:\n%s", p.stderr)
	}
	lines := strings.Split(strings.TrimSpace(p.stderr.String()), "\n")
	last := lines[len(lines)-1]
	for _, want := range []string{"baton: ", "session timeout: 2s", "group.min.session.timeout.ms"} {
		if !strings.Contains(last, want) {
			t.Errorf("last stderr line %q does not contain %q", last, want)
		}
	}
}

// TestRunOnStopRestartNeedsInstanceID: --on-stop restart without
// --instance-id is a usage error naming both flags.
func TestRunOnStopRestartNeedsInstanceID(t *testing.T) {
	_, stderr, code := runBaton(t, "", "run", "wordcount", "--brokers", "127.0.0.1:1", "--app-id", "wc", "--input", "lines",
		"--output", "counts", "--state-dir", t.TempDir(), "--on-stop", "restart")
	if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "--on-stop restart") || !strings.Contains(stderr, "--instance-id") {
		t.Errorf("exit %d, stderr %q; want exit 2 and one line naming --on-stop restart and --instance-id", code, stderr)
	}
	_, stderr, code = runBaton(t, "", "run", "wordcount", "--brokers", "127.0.0.1:1", "--app-id", "wc", "--input", "lines",
		"--output", "counts", "--state-dir", t.TempDir(), "--on-stop", "pause")
	if code != 2 || !strings.Contains(stderr, "--on-stop") {
		t.Errorf("--on-stop pause: exit %d, stderr %q; want exit 2 naming --on-stop", code, stderr)
	}
}

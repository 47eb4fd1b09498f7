package main

import (
	"strings"
	"testing"
	"time"

	"github.com/baton-streams/baton/internal/kafkatest"
)

// TestRunSessionTimeoutRefused: against brokers whose
// group.min.session.timeout.ms is Kafka's default (6 s), `baton run
// wordcount --session-timeout 2s` exits non-zero, its last stderr line
// naming the session timeout and the broker setting, instead of trying to
// join forever.
func TestRunSessionTimeoutRefused(t *testing.T) {
	tg := kafkatest.WithDefaultSessionBounds(t)
	brokers := tg.Bootstrap()
	tg.CreateTopic(t, "lines", 2, false)
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

// TestRunErrorPolicyFlags: a bad --on-bad-record or --on-processing-error
// is a usage error naming the flag and what it takes.
func TestRunErrorPolicyFlags(t *testing.T) {
	for _, c := range [][]string{{"--on-bad-record", "ignore"}, {"--on-processing-error", "dead-letter:"}} {
		_, stderr, code := runBaton(t, "", "run", "wordcount", "--brokers", "127.0.0.1:1", "--app-id", "wc", "--input", "lines",
			"--output", "counts", "--state-dir", t.TempDir(), c[0], c[1])
		if code != 2 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c[0]) || !strings.Contains(stderr, "stop, skip or dead-letter:TOPIC") {
			t.Errorf("%s %s: exit %d, stderr %q; want exit 2 and one line naming the flag and its values", c[0], c[1], code, stderr)
		}
	}
}

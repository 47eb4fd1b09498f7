package main

import (
	"bytes"
	"context"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/baton-streams/baton/internal/kafkatest"
)

// TestDemo runs the README's headline command, `baton demo`, as a user
// would, and checks what it ends with: a handover row for every count
// task that moved to i3, warm (lag within the demo's acceptable lag of
// 100), and the line verifying every count.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the demo restores 300,000 words and takes about ten seconds")
	}
	if kafkatest.Real(t) {
		t.Skipf("the demo starts its own embedded cluster whatever %s says; the default pass runs it", kafkatest.EnvMode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, batonBin, "demo")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("baton demo: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	verified := regexp.MustCompile(`(?m)^Verified: all (\d+) words have exactly the count of their occurrences\. Time to balance after the join: \d+\.\ds\.$`)
	m := verified.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no verification line in the demo's output:\n%s", out)
	}
	if n, _ := strconv.Atoi(m[1]); n < distinct {
		t.Errorf("verified %d words, want at least the %d the demo starts with", n, distinct)
	}
	// task from to gap lag replayed
	row := regexp.MustCompile(`(?m)^  (1_\d+) +(i[12]) +i3 +\S+ +(\d+) +(\d+)$`)
	rows := row.FindAllStringSubmatch(out, -1)
	if len(rows) == 0 {
		t.Fatalf("no count task moved to i3 in the handover table:\n%s", out)
	}
	for _, r := range rows {
		if lag, _ := strconv.Atoi(r[3]); lag > 100 {
			t.Errorf("task %s moved from %s to i3 with lag %d, more than the demo's acceptable lag (100)", r[1], r[2], lag)
		}
	}
}

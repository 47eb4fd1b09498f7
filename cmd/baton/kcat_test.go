package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// kcat returns the path of kcat, a third-party Kafka client. The test is
// skipped when it is missing unless BATON_REQUIRE_KCAT is set (.ci/run
// installs it and sets it).
func kcat(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("kcat"); err == nil {
		return p
	}
	if os.Getenv("BATON_REQUIRE_KCAT") != "" {
		t.Fatal("BATON_REQUIRE_KCAT is set but kcat is not on PATH (apt-get install -y kcat)")
	}
	t.Skip("kcat is not installed (apt-get install -y kcat); set BATON_REQUIRE_KCAT=1 to make this a failure")
	return ""
}

// TestKcatInterop: lines written by kcat are
// counted by baton (on either cluster), and kcat reads the counts back, keyed and partitioned
// as any Kafka client expects.
func TestKcatInterop(t *testing.T) {
	kc := kcat(t)
	e := clusterWithLines(t)
	brokers := e.brokers

	var lines strings.Builder
	want := map[string]int{}
	for i := range 300 {
		words := []string{"kafka", "baton", "w" + strconv.Itoa(i%17)}
		for _, w := range words {
			want[w]++
		}
		fmt.Fprintln(&lines, strings.Join(words, " "))
	}
	produce := exec.Command(kc, "-P", "-b", brokers, "-t", e.lines)
	produce.Stdin = strings.NewReader(lines.String())
	if out, err := produce.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}

	run, _ := e.run(t, "--state-dir", t.TempDir())

	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := exec.Command(kc, "-C", "-b", brokers, "-X", "isolation.level=read_committed", "-t", e.counts, "-e", "-q", "-f", "%k=%s\n").Output()
		got := map[string]int{}
		if err == nil {
			for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				if k, v, ok := strings.Cut(l, "="); ok {
					got[k], _ = strconv.Atoi(v)
				}
			}
		}
		if fmt.Sprint(got) == fmt.Sprint(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kcat reads counts %v, want %v (err %v)", got, want, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	// kcat sees the group's topics, internal ones included.
	meta, err := exec.Command(kc, "-L", "-b", brokers).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{e.appID + "-words-repartition", e.appID + "-counts-changelog", e.counts} {
		if !strings.Contains(string(meta), topic) {
			t.Errorf("kcat -L does not list %s", topic)
		}
	}
	if code := run.stop(t, 60*time.Second); code != 0 {
		t.Errorf("SIGTERM: exit %d", code)
	}
}

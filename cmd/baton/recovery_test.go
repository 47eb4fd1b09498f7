package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/counts"
	"github.com/baton-streams/baton/internal/kafkatest"
)

// TestMeasureKill9Recovery measures, on a 1-node Apache Kafka with the
// broker's default transaction settings, how long after a kill -9 under
// exactly-once every task of the killed instance runs again: when a
// survivor takes them over (the dead instance's open transaction holds
// its changelogs until the broker aborts it), and when the killed instance
// is started again at once with the same --instance-id (a static member
// whose transactional id fences its predecessor), and when `baton evict`
// removes it from the group and fences its producer right after the kill
// (a supervisor that knows it is gone). It reports figures and
// checks the counts; it asserts no timing. Run it with
//
//	BATON_KAFKA=real BATON_MEASURE=1 go test ./cmd/baton -run TestMeasureKill9Recovery -v
func TestMeasureKill9Recovery(t *testing.T) {
	if !kafkatest.Real(t) || os.Getenv("BATON_MEASURE") == "" {
		t.Skip("a measurement on Apache Kafka: set BATON_KAFKA=real and BATON_MEASURE=1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := kafkatest.Start(ctx, kafkatest.Config{Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	brokers := strings.Join(c.Addrs(), ",")
	for _, name := range []string{"survivor", "evicted", "static-restart"} {
		restart := name == "static-restart"
		t.Run(name, func(t *testing.T) {
			tg := &kafkatest.Target{Brokers: c.Addrs()}
			input, output, appID := name+"-lines", name+"-counts", name+"-wc"
			tg.CreateTopic(t, input, 4, false)
			client, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			dirs := map[string]string{"a": t.TempDir(), "b": t.TempDir()}
			run := func(id string) (*proc, string) {
				p := startBaton(t, "run", "wordcount", "--brokers", brokers, "--app-id", appID, "--input", input,
					"--output", output, "--state-dir", dirs[id], "--http", "127.0.0.1:0", "--session-timeout", "6s",
					"--guarantee", "exactly-once", "--instance-id", id)
				l := p.waitLine(t, "http: listening on ", 20*time.Second)
				return p, l[strings.LastIndex(l, " ")+1:]
			}
			running := func(addr string) map[string]int64 {
				out := map[string]int64{}
				for _, task := range getStatus(t, addr).Tasks {
					if task.Role == "active" && task.Lag == 0 {
						out[task.ID] = task.Processed
					}
				}
				return out
			}
			a, aAddr := run("a")
			b, bAddr := run("b")
			waitUntil(t, 90*time.Second, "a and b to run the 8 tasks", func() bool {
				return len(running(aAddr)) > 0 && len(running(bAddr)) > 0 && len(running(aAddr))+len(running(bAddr)) == 8
			})
			ofB := running(bAddr)

			e := &e2e{brokers: brokers, client: client, appID: appID, lines: input, counts: output}
			flow := e.startWordFlow(1)
			waitUntil(t, 30*time.Second, "b to process", func() bool {
				for _, n := range running(bAddr) {
					if n > 0 {
						return true
					}
				}
				return false
			})
			if err := b.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			killed := time.Now()
			<-b.done
			b.done <- nil
			where := aAddr
			if name == "evicted" {
				// A supervisor that knows b is gone removes it and
				// fences its producer at once.
				if out, stderr, code := runBaton(t, "", "evict", "--brokers", brokers, "--app-id", appID, "--instance-id", "b"); code != 0 {
					t.Fatalf("baton evict: exit %d, stdout %q, stderr %q", code, out, stderr)
				}
			}
			if restart {
				b, bAddr = run("b")
				where = bAddr
			}
			// b's tasks run again when each is active without lag where
			// it went and has processed a record there.
			waitUntil(t, 120*time.Second, "b's tasks to run again", func() bool {
				now := running(where)
				for id := range ofB {
					if now[id] == 0 {
						return false
					}
				}
				return true
			})
			took := time.Since(killed)
			want := flow.end(t)
			// The output, read read_committed, is whole again once the
			// dead instance's transaction is aborted.
			var got map[string]int64
			exact := false
			for deadline := time.Now().Add(120 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
				got = readCounts(t, brokers, output)
				exact = fmt.Sprint(got) == fmt.Sprint(want)
				if exact {
					break
				}
			}
			whole := time.Since(killed)
			t.Logf("%s: b's %d tasks ran again %.1fs after its kill -9, the output was whole (read_committed) %.1fs after it (session timeout 6s, transaction timeout 10s, broker defaults otherwise); counts exact: %v",
				name, len(ofB), took.Seconds(), whole.Seconds(), exact)
			if !exact {
				t.Errorf("counts not exact after the kill -9")
			} else {
				e.checkHistories(t, want)
			}
			a.stop(t, 60*time.Second)
			b.stop(t, 60*time.Second)
		})
	}
}

func readCounts(t *testing.T, brokers, topic string) map[string]int64 {
	t.Helper()
	got, err := counts.Read(context.Background(), strings.Split(brokers, ","), topic)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

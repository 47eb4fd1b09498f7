package main

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/assign"
	"github.com/baton-streams/baton/internal/kafkatest"
	"github.com/baton-streams/baton/protocol"
	"github.com/baton-streams/baton/topology"
	"github.com/baton-streams/baton/web"
)

// TestInspect runs `baton inspect` as a process against a
// cluster with two wordcount instances running in this test, and checks
// the table names every task once as active and that the plan of a
// settled group moves nothing.
func TestInspect(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and two instances")
	}
	tg := kafkatest.ForTest(t)
	appID, lines, counts := tg.Name("wc"), tg.Name("lines"), tg.Name("counts")
	cl, err := kgo.NewClient(kgo.SeedBrokers(tg.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	tg.CreateTopic(t, lines, 4, false)
	var recs []*kgo.Record
	for i := range 2000 {
		recs = append(recs, &kgo.Record{Topic: lines, Value: []byte("w" + string(rune('a'+i%26)) + " x")})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var apps []*baton.App
	for _, id := range []string{"a", "b"} {
		top, err := topology.WordCount(appID, lines, counts)
		if err != nil {
			t.Fatal(err)
		}
		app, err := baton.New(top, baton.WithBrokers(tg.Brokers...), baton.WithAppID(appID), baton.WithInstanceID(id),
			baton.WithStateDir(t.TempDir()), baton.WithSessionTimeout(2*time.Second), baton.WithHeartbeatInterval(100*time.Millisecond),
			baton.WithRebalanceTimeout(3*time.Second), baton.WithAcceptableLag(10), baton.WithEndpoint("127.0.0.1:1"+id),
			baton.WithCreateSinks(map[string]string{"cleanup.policy": "compact"}), baton.WithLogger(slog.New(slog.DiscardHandler)))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- app.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			app.Leave()
			<-done
		})
		apps = append(apps, app)
	}
	settled := func() bool {
		n := 0
		for _, a := range apps {
			st := a.Status()
			for _, task := range st.Tasks {
				if task.Role != "active" || task.Lag > 0 {
					return false
				}
				n++
			}
			// Both members in the group: on a broker without an
			// initial rebalance delay, a forms a group alone first.
			if st.Generation == 0 || len(st.Tasks) == 0 {
				return false
			}
		}
		return n == 8
	}
	tasks := []string{"0_0", "0_1", "0_2", "0_3", "1_0", "1_1", "1_2", "1_3"}
	// Each task listed exactly once: an instance's status can lag the
	// assignment the group holds for it (a learner just handed out).
	onceEach := func(out string) bool {
		for _, task := range tasks {
			if strings.Count(out, " "+task+" ") != 1 {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(60 * time.Second)
	var out, stderr string
	var code int
	for {
		if settled() {
			out, stderr, code = runBaton(t, "", "inspect", "--brokers", tg.Brokers[0], "--app-id", appID, "--acceptable-lag", "10")
			if code == 0 && strings.Contains(out, "nothing moves") && strings.Count(out, " active ") == 8 && onceEach(out) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("inspect never showed a settled group of 8 active tasks, each listed once (exit %d):\n%s%s", code, out, stderr)
		}
		<-time.After(200 * time.Millisecond)
	}
	for _, want := range []string{"group " + appID + ": Stable, 2 members", "INSTANCE", "CHANGELOG END", "next plan (smooth",
		"records not committed on 8 input partitions", "desired instances: "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	t.Logf("baton inspect:\n%s", out)
}

func TestInspectBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"inspect", "--app-id", "wc"},
		{"inspect", "--brokers", "127.0.0.1:1"},
		{"inspect", "--brokers", "127.0.0.1:1", "--app-id", "wc", "--policy", "nope"},
		{"inspect", "--brokers", "127.0.0.1:1", "--app-id", "wc", "--max-learners", "0"},
		{"inspect", "--bogus"},
	} {
		_, stderr, code := runBaton(t, "", args...)
		if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || stderr == "" {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and one line", args, code, stderr)
		}
	}
}

// printInput sums the live figures of the statuses read, names the
// members whose status was not read, and prints the leader's
// recommendation.
func TestInspectPrintInput(t *testing.T) {
	in := inspection{inputLag: 130, inputParts: 8,
		statuses: map[string]*baton.Status{
			"a": {Instance: "a", Tasks: []baton.TaskStatus{{ID: "0_0", Role: "active", Input: &baton.InputLag{Records: 100, Seconds: 2.5, Rate: 30}}}},
			"b": {Instance: "b", Leader: true, Generation: 4, Autoscale: &baton.AutoscaleStatus{DesiredInstances: 4, Instances: 3, Reason: "scale out 3 → 4"},
				Tasks: []baton.TaskStatus{{ID: "0_1", Role: "active", Input: &baton.InputLag{Records: 20, Seconds: 7, Rate: 12}}}},
		},
		unread: map[string]string{"c": "no endpoint in its subscription"}}
	var b strings.Builder
	in.printInput(&b)
	for _, want := range []string{
		"input lag: 130 records not committed on 8 input partitions",
		"live, from the /status of 2 of 3 instances: 120 records behind, at most 7.0 s, 42 records/s arriving",
		"c: /status not read: no endpoint in its subscription",
		"desired instances: 4 (leader b, 3 running): scale out 3 → 4",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	in.statuses["b"].Leader = false
	in.inputErr = errors.New("listing input end offsets: boom")
	in.printInput(&b)
	for _, want := range []string{"input lag: unknown: listing input end offsets: boom", "desired instances: unknown"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
}

// An instance whose /status says it is unconfirmed is marked so, its
// active tasks are not shown as active, and the live section says since
// when; a confirmed instance's tasks stay active.
func TestInspectUnconfirmed(t *testing.T) {
	since := time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)
	in := inspection{appID: "wc",
		group: web.Group{State: "Stable", Protocol: "baton-smooth", Members: []web.Member{
			{MemberID: "m-a", Subscription: protocol.Subscription{InstanceID: "a"}, HasAssignment: true,
				Assignment: protocol.Assignment{Active: []string{"0_0"}, Standby: []string{"0_1"}}},
			{MemberID: "m-b", Subscription: protocol.Subscription{InstanceID: "b"}, HasAssignment: true,
				Assignment: protocol.Assignment{Active: []string{"0_1"}}},
		}},
		statuses: map[string]*baton.Status{
			"a": {Instance: "a", Unconfirmed: true, ConfirmedAt: since},
			"b": {Instance: "b", ConfirmedAt: since.Add(time.Minute)},
		},
		unread: map[string]string{}}
	var b strings.Builder
	if err := in.print(&b, assign.Config{MaxLearners: 2, AcceptableLag: 100}, assign.Smooth); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^a \(unconfirmed\)\s+-\s+unconfirmed\s+0_0\s`),
		regexp.MustCompile(`(?m)^a \(unconfirmed\)\s+-\s+standby\s+0_1\s`),
		regexp.MustCompile(`(?m)^b\s+-\s+active\s+0_1\s`),
		regexp.MustCompile(`(?m)^  a: unconfirmed: the group has not confirmed it since 2026-12-05T03:00:00Z`),
	} {
		if !want.MatchString(out) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "b: unconfirmed") || strings.Contains(out, "b (unconfirmed)") {
		t.Errorf("confirmed b shown as unconfirmed:\n%s", out)
	}
}

package kafkatest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestMain(m *testing.M) {
	code := m.Run()
	StopShared()
	os.Exit(code)
}

// TestTargetCreatesTopics: the cluster a test gets takes topics with the
// default replication factor and the configs asked for.
func TestTargetCreatesTopics(t *testing.T) {
	tg := ForTest(t)
	topic := tg.Name("t")
	tg.CreateTopic(t, topic, 3, true)
	cl, err := kgo.NewClient(kgo.SeedBrokers(tg.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	td, err := adm.ListTopics(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(td[topic].Partitions) != 3 {
		t.Fatalf("topic %s: %d partitions, want 3", topic, len(td[topic].Partitions))
	}
	rc, err := adm.DescribeTopicConfigs(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := rc.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Configs {
		if c.Key == "cleanup.policy" && c.MaybeValue() != "compact" {
			t.Fatalf("cleanup.policy %q, want compact", c.MaybeValue())
		}
	}
}

func TestBadMode(t *testing.T) {
	t.Setenv(EnvMode, "kfake")
	ft := &fatalT{TB: t}
	func() {
		defer func() { _ = recover() }()
		Real(ft)
	}()
	if !strings.Contains(ft.msg, "want embedded or real") {
		t.Fatalf("BATON_KAFKA=kfake: got %q", ft.msg)
	}
}

type fatalT struct {
	testing.TB
	msg string
}

func (f *fatalT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic("fatal")
}

// TestKillAndRestart: a node killed with SIGKILL leaves the cluster
// serving on the others (leaders move), and comes back on its own data.
func TestKillAndRestart(t *testing.T) {
	if !Real(t) {
		t.Skip("starts Apache Kafka: run with BATON_KAFKA=real")
	}
	ctx := context.Background()
	c, err := Start(ctx, Config{Nodes: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.DefaultProduceTopic("t"), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 3, nil, "t"); err != nil {
		t.Fatal(err)
	}
	leader := leaderOf(ctx, t, adm, "t")
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(pctx, &kgo.Record{Value: []byte("after kill")}).FirstErr(); err != nil {
		t.Fatalf("producing with node %d down: %v", leader, err)
	}
	if err := c.Restart(ctx, leader); err != nil {
		t.Fatal(err)
	}
	fresh, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()[leader-1]))
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	md, err := kadm.NewClient(fresh).BrokerMetadata(ctx)
	if err != nil || len(md.Brokers) != 3 {
		t.Fatalf("after restart, node %d sees %v brokers, err %v", leader, len(md.Brokers), err)
	}

	// A fenced restart waits while the dead node still leads a partition:
	// the controller fences it only when its session runs out
	// (broker.session.timeout.ms, 9 s), so a second after the kill it
	// still leads t[0] and the restart does not happen.
	leader = leaderOf(ctx, t, adm, "t")
	if err := c.Kill(leader); err != nil {
		t.Fatal(err)
	}
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	defer cancelShort()
	if err := c.RestartFenced(short, leader); err == nil || !strings.Contains(err.Error(), "still leads 1 partitions") {
		t.Fatalf("a fenced restart a second after the kill: err %v, want one saying node %d still leads 1 partitions", err, leader)
	}
	if err := c.RestartFenced(ctx, leader); err != nil {
		t.Fatal(err)
	}
	if n, err := c.PartitionsLedBy(ctx, leader); err != nil || n != 0 {
		t.Fatalf("node %d leads %d partitions right after its fenced restart (err %v), want 0", leader, n, err)
	}
	md, err = kadm.NewClient(fresh).BrokerMetadata(ctx)
	if err != nil || len(md.Brokers) != 3 {
		t.Fatalf("after the fenced restart, node %d sees %v brokers, err %v", leader, len(md.Brokers), err)
	}
}

// leaderOf waits until the metadata lists a leader for topic's partition 0
// (it may not at once for a new topic) and returns it.
func leaderOf(ctx context.Context, t *testing.T, adm *kadm.Client, topic string) int {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		td, err := adm.ListTopics(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := td[topic].Partitions[0]; ok && p.Err == nil && p.Leader >= 1 {
			return int(p.Leader)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader listed for %s[0]: %+v", topic, td[topic])
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestFencedRestart(t *testing.T) {
	for _, c := range []struct {
		env       string
		def, want bool
		err       string
	}{
		{"", false, false, ""},
		{"", true, true, ""},
		{"at-once", true, false, ""},
		{"fenced", false, true, ""},
		{"later", true, false, `BATON_FAULT_RESTART="later": want at-once or fenced`},
	} {
		t.Setenv(EnvRestart, c.env)
		got, err := FencedRestart(c.def)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s=%q: err %v, want one saying %q", EnvRestart, c.env, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s=%q, default %v: got %v, %v; want %v", EnvRestart, c.env, c.def, got, err, c.want)
		}
	}
}

package baton

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/cluster"
	"github.com/baton-streams/baton/internal/kafkatest"
	"github.com/baton-streams/baton/internal/tick"
	"github.com/baton-streams/baton/topology"
)

// newTargetHarness is newHarness on the cluster kafkatest.ForTest picks
// (kfake, or Apache Kafka with BATON_KAFKA=real), with names unique to the
// test.
func newTargetHarness(t *testing.T, brokers []string, name func(string) string, partitions int32) *harness {
	t.Helper()
	h := bareHarness(t, brokers, name)
	adm := newAdmin(t, brokers)
	for _, topic := range []string{h.input, h.output} {
		var configs map[string]*string
		if topic == h.output {
			configs = map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}
		}
		createTopic(t, adm, topic, partitions, configs)
	}
	h.prod = testProducer(t, brokers)
	return h
}

func newAdmin(t *testing.T, brokers []string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

func createTopic(t *testing.T, adm *kadm.Client, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, -1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating topic %s: %v", topic, err)
	}
}

// internalTopics returns the wordcount's changelog and repartition topic.
func (h *harness) internalTopics() (changelog, repartition string) {
	h.t.Helper()
	top, err := topology.WordCount(h.appID, h.input, h.output)
	if err != nil {
		h.t.Fatal(err)
	}
	for _, s := range top.Subtopologies() {
		for _, st := range s.Stores {
			changelog = st.Changelog
		}
		for _, r := range s.Repartition {
			repartition = r
		}
	}
	if changelog == "" || repartition == "" {
		h.t.Fatalf("wordcount has changelog %q and repartition topic %q", changelog, repartition)
	}
	return changelog, repartition
}

// topicConfigs returns the configs the cluster reports for topic.
func topicConfigs(t *testing.T, adm *kadm.Client, topic string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatalf("describing %s: %v", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		t.Fatalf("describing %s: %v", topic, err)
	}
	out := map[string]string{}
	for _, c := range rc.Configs {
		if c.Value != nil {
			out[c.Key] = *c.Value
		}
	}
	return out
}

// replicationOf returns the replica count of every partition of topic and
// the number of brokers in the cluster.
func replicationOf(t *testing.T, adm *kadm.Client, topic string) (map[int32]int, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	td := md.Topics[topic]
	if td.Err != nil {
		t.Fatalf("metadata of %s: %v", topic, td.Err)
	}
	out := map[int32]int{}
	for p, pd := range td.Partitions {
		out[p] = len(pd.Replicas)
	}
	return out, len(md.Brokers)
}

func brokerCount(t *testing.T, adm *kadm.Client) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := adm.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return len(md.Brokers)
}

// checkTopic checks the replication factor, partitions and configs of a
// topic baton created.
func checkTopic(t *testing.T, adm *kadm.Client, topic string, partitions int32, rf int, want map[string]string) {
	t.Helper()
	reps, _ := replicationOf(t, adm, topic)
	if len(reps) != int(partitions) {
		t.Errorf("%s: %d partitions, want %d", topic, len(reps), partitions)
	}
	for p, n := range reps {
		if n != rf {
			t.Errorf("%s[%d]: %d replicas, want %d", topic, p, n, rf)
		}
	}
	got := topicConfigs(t, adm, topic)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s=%q, want %q", topic, k, got[k], v)
		}
	}
}

// TestInternalTopicConfigs checks what baton creates by default:
// compacted changelogs, repartition topics that delete nothing by
// retention, and the replication defaults derived from the cluster's size.
func TestInternalTopicConfigs(t *testing.T) {
	tg := kafkatest.ForTest(t)
	h := newTargetHarness(t, tg.Brokers, tg.Name, 4)
	sinks := tg.Name("created-sink")
	h.output = sinks // created by baton (WithCreateSinks)
	h.produce(100)
	h.start("a", WithCreateSinks(map[string]string{"cleanup.policy": "compact"}))
	h.waitExact(60 * time.Second)

	adm := newAdmin(t, h.brokers)
	brokers := brokerCount(t, adm)
	rf := min(3, brokers)
	isr := strconv.Itoa(max(1, min(2, rf-1)))
	changelog, repartition := h.internalTopics()
	checkTopic(t, adm, changelog, 4, rf, map[string]string{"cleanup.policy": "compact", "min.insync.replicas": isr})
	checkTopic(t, adm, repartition, 4, rf, map[string]string{"cleanup.policy": "delete", "retention.ms": "-1", "retention.bytes": "-1", "min.insync.replicas": isr})
	checkTopic(t, adm, sinks, 4, rf, map[string]string{"cleanup.policy": "compact", "min.insync.replicas": isr})
}

// TestReplicationOptions creates the internal topics with an explicit
// replication factor and min.insync.replicas. It needs at least two
// brokers to tell explicit values from defaults: on the embedded cluster
// it starts three, on a one-node Apache Kafka it checks explicit values
// equal to the cluster's size.
func TestReplicationOptions(t *testing.T) {
	tg := kafkatest.ForTest(t)
	brokers := tg.Brokers
	if tg.Kafka == nil {
		c, err := cluster.Start("127.0.0.1:0", 3)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		brokers = c.Addrs()
	}
	adm := newAdmin(t, brokers)
	n := brokerCount(t, adm)
	// Defaults would be rf=min(3, n) and isr=min(2, rf-1): with n >= 2,
	// rf=2 isr=2 differs from both.
	rf, isr := min(2, n), min(2, n)
	if n < 2 {
		t.Logf("a %d-broker cluster: checking replication factor %d and min.insync.replicas %d, which equal the defaults", n, rf, isr)
	}
	h := newTargetHarness(t, brokers, tg.Name, 4)
	sink := tg.Name("created-sink")
	h.output = sink
	h.produce(50)
	h.start("a", WithReplicationFactor(rf), WithMinInSyncReplicas(isr), WithCreateSinks(nil))
	h.waitExact(60 * time.Second)
	changelog, repartition := h.internalTopics()
	want := map[string]string{"min.insync.replicas": strconv.Itoa(isr)}
	for _, topic := range []string{changelog, repartition, sink} {
		checkTopic(t, adm, topic, 4, rf, want)
	}
}

// runErr runs a wordcount App with opts and returns Run's error, which
// must come before processing starts.
func (h *harness) runErr(opts ...Option) error {
	h.t.Helper()
	top, err := topology.WordCount(h.appID, h.input, h.output)
	if err != nil {
		h.t.Fatal(err)
	}
	app, err := New(top, append([]Option{WithBrokers(h.brokers...), WithMemoryState(), WithInstanceID("x")}, opts...)...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = runChecked(h.t, ctx, app)
	if ctx.Err() != nil {
		h.t.Fatalf("Run did not fail within 60 s (err %v)", err)
	}
	return err
}

// TestReplicationBeyondCluster: a replication factor or min.insync.replicas
// the cluster cannot satisfy stops Run with an error naming the option.
func TestReplicationBeyondCluster(t *testing.T) {
	tg := kafkatest.ForTest(t)
	h := newTargetHarness(t, tg.Brokers, tg.Name, 2)
	n := brokerCount(t, newAdmin(t, h.brokers))
	err := h.runErr(WithReplicationFactor(n + 1))
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "replication factor: "+strconv.Itoa(n+1)+" exceeds the "+strconv.Itoa(n)+" brokers") {
		t.Errorf("replication factor %d on %d brokers: got %v", n+1, n, err)
	}
	// min.insync.replicas above the default replication factor.
	err = h.runErr(WithMinInSyncReplicas(min(3, n) + 1))
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "min in-sync replicas") {
		t.Errorf("min in-sync replicas %d with the default replication factor: got %v", min(3, n)+1, err)
	}
}

func TestTopicOptionValidation(t *testing.T) {
	top, err := topology.WordCount("wc", "lines", "counts")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		opts []Option
		want string
	}{
		{"zero replication factor", []Option{WithReplicationFactor(0)}, "replication factor: must be between 1"},
		{"negative replication factor", []Option{WithReplicationFactor(-1)}, "replication factor: must be between 1"},
		{"replication factor beyond int16", []Option{WithReplicationFactor(40000)}, "replication factor"},
		{"zero min insync", []Option{WithMinInSyncReplicas(0)}, "min in-sync replicas: must be >= 1"},
		{"min insync above replication", []Option{WithReplicationFactor(2), WithMinInSyncReplicas(3)}, "min in-sync replicas: must not exceed the replication factor (2), got 3"},
		{"negative purge interval", []Option{WithRepartitionPurgeInterval(-time.Second)}, "repartition purge interval"},
		{"negative block cache", []Option{WithBlockCache(-1)}, "block cache: want a size of 0 bytes or more, got -1"},
		{"zero restore share", []Option{WithRestoreShare(0)}, "restore share: want more than 0 and at most 1, got 0"},
		{"restore share above 1", []Option{WithRestoreShare(1.5)}, "restore share: want more than 0 and at most 1, got 1.5"},
		{"NaN restore share", []Option{WithRestoreShare(math.NaN())}, "restore share: want more than 0 and at most 1, got NaN"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := New(top, append([]Option{WithBrokers("127.0.0.1:1"), WithMemoryState()}, c.opts...)...)
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want ErrConfig naming %q", err, c.want)
			}
		})
	}
	if _, err := New(top, WithBrokers("127.0.0.1:1"), WithMemoryState(), WithReplicationFactor(3), WithMinInSyncReplicas(3), WithRepartitionPurgeInterval(0)); err != nil {
		t.Errorf("valid options: %v", err)
	}
}

// TestExistingInternalTopics: an internal topic left with the wrong
// partition count or cleanup policy stops Run with an error naming it;
// one with the right ones is used.
func TestExistingInternalTopics(t *testing.T) {
	compact := map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}
	deleting := map[string]*string{"cleanup.policy": kadm.StringPtr("delete")}
	for _, c := range []struct {
		name       string
		changelog  bool // pre-create the changelog (else the repartition topic)
		partitions int32
		configs    map[string]*string
		want       string // "" for no error
	}{
		{"changelog partitions", true, 2, compact, "baton: changelog topic %s has 2 partitions, the subtopology has 4 tasks: delete it or use a new app id"},
		{"changelog policy", true, 4, deleting, "baton: changelog topic %s has cleanup.policy=delete, want compact"},
		{"repartition partitions", false, 3, deleting, "baton: repartition topic %s has 3 partitions, the subtopology has 4 tasks"},
		{"repartition policy", false, 4, compact, "baton: repartition topic %s has cleanup.policy=compact, want delete"},
		{"changelog fine", true, 4, map[string]*string{"cleanup.policy": kadm.StringPtr("compact,delete")}, ""},
		{"repartition fine", false, 4, deleting, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			tg := kafkatest.ForTest(t)
			h := newTargetHarness(t, tg.Brokers, tg.Name, 4)
			changelog, repartition := h.internalTopics()
			topic := repartition
			if c.changelog {
				topic = changelog
			}
			createTopic(t, newAdmin(t, h.brokers), topic, c.partitions, c.configs)
			if c.want == "" {
				h.produce(50)
				h.start("a")
				h.waitExact(60 * time.Second)
				return
			}
			err := h.runErr(WithAppID(h.appID))
			want := strings.ReplaceAll(c.want, "%s", topic)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("got %v, want an error containing %q", err, want)
			}
		})
	}
}

// TestRepartitionPurge: once the records of the repartition topic are
// processed and committed, baton deletes them (the log start offset
// advances; the topic's retention is unlimited, so nothing else would).
func TestRepartitionPurge(t *testing.T) {
	for _, g := range []Guarantee{AtLeastOnce, ExactlyOnce} {
		t.Run(g.String(), func(t *testing.T) {
			tg := kafkatest.ForTest(t)
			h := newTargetHarness(t, tg.Brokers, tg.Name, 4)
			_, repartition := h.internalTopics()
			h.produce(200)
			h.start("a", WithGuarantee(g), WithRepartitionPurgeInterval(0))
			h.waitExact(60 * time.Second)
			adm := newAdmin(t, h.brokers)
			var starts, ends kadm.ListedOffsets
			purged := tick.Until(context.Background(), 60*time.Second, 100*time.Millisecond, func() bool {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				var err error
				if starts, err = adm.ListStartOffsets(ctx, repartition); err != nil {
					return false
				}
				if ends, err = adm.ListEndOffsets(ctx, repartition); err != nil {
					return false
				}
				some := false
				ok := true
				ends.Each(func(e kadm.ListedOffset) {
					if e.Offset == 0 {
						return
					}
					some = true
					if s, found := starts.Lookup(e.Topic, e.Partition); !found || s.Offset == 0 {
						ok = false
					}
				})
				return some && ok
			})
			if !purged {
				t.Fatalf("repartition topic %s not purged: start offsets %v, end offsets %v", repartition, offsetsOf(starts), offsetsOf(ends))
			}
		})
	}
}

func offsetsOf(l kadm.ListedOffsets) map[int32]int64 {
	out := map[int32]int64{}
	l.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// TestInternalTopicsAfterLateInput: an App started before its input topic
// exists creates its internal topics once the input appears, however late
// (the 10 s allowed to reach the brokers do not limit it).
func TestInternalTopicsAfterLateInput(t *testing.T) {
	tg := kafkatest.ForTest(t)
	h := bareHarness(t, tg.Brokers, tg.Name)
	h.prod = testProducer(t, h.brokers)
	r := h.start("a", WithCreateSinks(nil))
	// Not a wait for a condition: the input must appear after the 10 s.
	time.Sleep(11 * time.Second)
	select {
	case err := <-r.done:
		t.Fatalf("Run returned while waiting for its input: %v", err)
	default:
	}
	createTopic(t, newAdmin(t, h.brokers), h.input, 2, nil)
	h.produce(50)
	h.waitExact(60 * time.Second)
}

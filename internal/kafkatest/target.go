package kafkatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/cluster"
)

// The end-to-end tests run against the cluster BATON_KAFKA names:
//
//	BATON_KAFKA=embedded (or unset)  franz-go's kfake, a fresh cluster per test
//	BATON_KAFKA=real                 Apache Kafka, one cluster per test binary
//
// BATON_KAFKA_NODES sets the real cluster's size (default 3: replication
// factor 3, min.insync.replicas 2).
const (
	EnvMode  = "BATON_KAFKA"
	EnvNodes = "BATON_KAFKA_NODES"
)

// EnvRestart names the variable that makes every fault test bring a killed
// broker back one way: "at-once" (Restart) or "fenced" (RestartFenced).
// Unset, each test chooses.
const EnvRestart = "BATON_FAULT_RESTART"

// FencedRestart reports whether a test should bring a killed broker back
// with RestartFenced: def, unless EnvRestart says otherwise.
func FencedRestart(def bool) (bool, error) {
	switch v := os.Getenv(EnvRestart); v {
	case "":
		return def, nil
	case "at-once":
		return false, nil
	case "fenced":
		return true, nil
	default:
		return false, fmt.Errorf("%s=%q: want at-once or fenced, or unset for each test's default", EnvRestart, v)
	}
}

// Real reports whether BATON_KAFKA selects Apache Kafka. Any value other
// than "", "embedded" and "real" fails the tests that ask.
func Real(t testing.TB) bool {
	switch m := os.Getenv(EnvMode); m {
	case "", "embedded":
		return false
	case "real":
		return true
	default:
		t.Fatalf("%s=%q: want embedded or real", EnvMode, m)
		return false
	}
}

var shared struct {
	sync.Mutex
	c   *Cluster
	err error
}

// Shared returns the test binary's real cluster, starting it on first use.
// Call StopShared from TestMain.
func Shared() (*Cluster, error) {
	shared.Lock()
	defer shared.Unlock()
	if shared.c != nil || shared.err != nil {
		return shared.c, shared.err
	}
	nodes := 3
	if s := os.Getenv(EnvNodes); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			shared.err = fmt.Errorf("kafkatest: %s=%q: want a positive number", EnvNodes, s)
			return nil, shared.err
		}
		nodes = n
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	shared.c, shared.err = Start(ctx, Config{
		Nodes: nodes,
		// The tests form a new group each, about a hundred per test
		// binary: a broker's default 3 s wait for more members before
		// a new group's first rebalance would add minutes. The fault
		// tests start their own clusters and keep the default.
		BrokerConfig: map[string]string{"group.initial.rebalance.delay.ms": "0"},
		Logf:         func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) },
	})
	return shared.c, shared.err
}

// StopShared stops the shared cluster, if one was started.
func StopShared() {
	shared.Lock()
	defer shared.Unlock()
	if shared.c != nil {
		shared.c.Stop()
	}
}

// Target is the cluster one end-to-end test runs against.
type Target struct {
	// Brokers are the bootstrap addresses.
	Brokers []string
	// Kafka is the real cluster, nil on the embedded one.
	Kafka *Cluster
	// prefix makes names unique on a cluster shared by several tests.
	prefix string
}

var unsafe = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// ForTest returns the cluster t runs against: a fresh embedded cluster
// (closed when t ends), or the shared Apache Kafka cluster. Give every
// topic, group and application id the test uses through Name, so tests
// sharing a real cluster do not meet.
func ForTest(t testing.TB) *Target {
	t.Helper()
	if !Real(t) {
		c, err := cluster.Start("127.0.0.1:0", 1)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return &Target{Brokers: c.Addrs()}
	}
	c, err := Shared()
	if err != nil {
		t.Fatal(err)
	}
	return &Target{Brokers: c.Addrs(), Kafka: c, prefix: uniquePrefix(t)}
}

// On returns a Target on a cluster the test started itself (a fault test
// that kills brokers), with names unique to the test.
func On(t testing.TB, c *Cluster) *Target {
	return &Target{Brokers: c.Addrs(), Kafka: c, prefix: uniquePrefix(t)}
}

// WithDefaultSessionBounds returns a cluster of the test's own whose
// brokers keep Apache Kafka's default group.min.session.timeout.ms (6 s),
// which the shared test clusters lower to 500 ms: one Apache Kafka node
// with BATON_KAFKA=real, an embedded cluster otherwise. It stops when t
// ends.
func WithDefaultSessionBounds(t testing.TB) *Target {
	t.Helper()
	if !Real(t) {
		c, err := cluster.Start("127.0.0.1:0", 1, kfake.GroupMinSessionTimeout(6*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return &Target{Brokers: c.Addrs()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := Start(ctx, Config{Nodes: 1, BrokerConfig: map[string]string{"group.min.session.timeout.ms": "6000"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return &Target{Brokers: c.Addrs(), Kafka: c}
}

// uniquePrefix is the test's name, cut to 40 characters, and a random
// suffix.
func uniquePrefix(t testing.TB) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	name := unsafe.ReplaceAllString(t.Name(), "-")
	if len(name) > 40 {
		name = name[:40]
	}
	return strings.ToLower(name) + "-" + hex.EncodeToString(b[:]) + "-"
}

// Name returns base made unique to the test on a shared cluster; on an
// embedded one, base itself.
func (tg *Target) Name(base string) string { return tg.prefix + base }

// Bootstrap returns the brokers as one comma-separated flag value.
func (tg *Target) Bootstrap() string { return strings.Join(tg.Brokers, ",") }

// CreateTopic creates a topic with the cluster's default replication
// factor; compacted if compact.
func (tg *Target) CreateTopic(t testing.TB, topic string, partitions int32, compact bool) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(tg.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var configs map[string]*string
	if compact {
		configs = map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, -1, configs, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating topic %s: %v", topic, err)
	}
	// A broker learns of a new topic from the controller a moment after
	// the create returns: wait until the one answering metadata lists it
	// whole, or a test's first request may find it missing.
	for {
		td, err := kadm.NewClient(cl).ListTopics(ctx, topic)
		if d, ok := td[topic]; err == nil && ok && d.Err == nil && len(d.Partitions) == int(partitions) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("topic %s: not listed with %d partitions after creating it: %v", topic, partitions, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

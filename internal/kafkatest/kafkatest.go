// Package kafkatest runs Apache Kafka on loopback for baton's tests: one
// broker for quick tests, three for fault tests, in KRaft mode (every node
// is both controller and broker). The jars come from the Maven registry
// through the embedded pom.xml, fetched once into a cache outside the
// repository ($BATON_KAFKA_CACHE, or the user's cache directory); Java 17
// runs them. No Docker.
//
// A Cluster's brokers are child processes of the test binary. Stop stops
// them and removes their data; the brokers are also killed by the kernel if
// the test binary dies first (Linux parent-death signal), so nothing
// outlives a test run.
//
// Nodes can be killed with SIGKILL and restarted with their data, to test
// what only a real cluster does: lose the leader of a partition or the
// group coordinator, elect a new one, and come back.
package kafkatest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/baton-streams/baton/internal/tick"
)

// Version is the Apache Kafka version the pom fetches.
const Version = "4.4.0"

//go:embed pom.xml
var pom []byte

const log4j = `rootLogger.level = WARN
rootLogger.appenderRef.stdout.ref = STDOUT
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = [%d] %p %m (%c)%n
logger.server.name = kafka.server.KafkaRaftServer
logger.server.level = INFO
logger.lifecycle.name = kafka.server.BrokerLifecycleManager
logger.lifecycle.level = INFO
`

// ErrNoJava is returned when java is not on PATH.
var ErrNoJava = errors.New("kafkatest: java not found on PATH: install a Java 17 or newer runtime (Debian: apt-get install openjdk-17-jre-headless)")

// ErrNoMaven is returned when the jars are not cached yet and mvn is not on
// PATH.
var ErrNoMaven = errors.New("kafkatest: mvn not found on PATH: install Apache Maven (Debian: apt-get install maven) to fetch Kafka's jars once")

// Config describes a cluster to start. The zero value is one node.
type Config struct {
	// Nodes is the number of combined controller+broker nodes (default 1).
	Nodes int
	// BrokerConfig adds or overrides server.properties entries on every
	// node.
	BrokerConfig map[string]string
	// Logf, if set, receives progress lines (fetching jars, node started).
	Logf func(format string, args ...any)
}

// Cluster is a running Apache Kafka cluster on loopback.
type Cluster struct {
	dir    string
	lib    string
	java   string
	logf   func(string, ...any)
	nodes  []*node
	mu     sync.Mutex // guards each node's cmd and done
	closed bool
}

type node struct {
	id         int
	brokerPort int
	ctrlPort   int
	dir        string
	props      string
	cmd        *exec.Cmd
	done       chan struct{}
}

// Start fetches the jars if needed, formats the nodes' storage and starts
// them, and returns once every broker is registered and serves metadata.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Nodes <= 0 {
		cfg.Nodes = 1
	}
	logf := cfg.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, ErrNoJava
	}
	lib, err := Jars(ctx, logf)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kafkatest-")
	if err != nil {
		return nil, fmt.Errorf("kafkatest: %w", err)
	}
	c := &Cluster{dir: dir, lib: lib, java: java, logf: logf}
	ports, err := freePorts(2 * cfg.Nodes)
	if err != nil {
		c.Stop()
		return nil, err
	}
	var voters []string
	for i := range cfg.Nodes {
		n := &node{id: i + 1, brokerPort: ports[2*i], ctrlPort: ports[2*i+1], dir: filepath.Join(dir, "node"+strconv.Itoa(i+1))}
		c.nodes = append(c.nodes, n)
		voters = append(voters, fmt.Sprintf("%d@127.0.0.1:%d", n.id, n.ctrlPort))
	}
	if err := os.WriteFile(filepath.Join(dir, "log4j2.properties"), []byte(log4j), 0o644); err != nil {
		c.Stop()
		return nil, fmt.Errorf("kafkatest: %w", err)
	}
	clusterID := newClusterID()
	for _, n := range c.nodes {
		if err := os.MkdirAll(n.dir, 0o755); err != nil {
			c.Stop()
			return nil, fmt.Errorf("kafkatest: %w", err)
		}
		n.props = filepath.Join(n.dir, "server.properties")
		if err := os.WriteFile(n.props, []byte(serverProperties(n, voters, cfg)), 0o644); err != nil {
			c.Stop()
			return nil, fmt.Errorf("kafkatest: %w", err)
		}
		out, err := exec.CommandContext(ctx, java, c.javaArgs("kafka.tools.StorageTool", "format", "-t", clusterID, "-c", n.props)...).CombinedOutput()
		if err != nil {
			c.Stop()
			return nil, fmt.Errorf("kafkatest: formatting node %d: %v\n%s", n.id, err, out)
		}
	}
	for _, n := range c.nodes {
		if err := c.startNode(n); err != nil {
			c.Stop()
			return nil, err
		}
	}
	if err := c.waitReady(ctx, 120*time.Second); err != nil {
		c.Stop()
		return nil, err
	}
	logf("kafkatest: %d node(s) ready at %s (logs in %s)", len(c.nodes), strings.Join(c.Addrs(), ","), dir)
	return c, nil
}

func serverProperties(n *node, voters []string, cfg Config) string {
	nodes := len(voters)
	rf := min(3, nodes)
	isr := max(1, min(2, nodes))
	props := map[string]string{
		"process.roles":                            "broker,controller",
		"node.id":                                  strconv.Itoa(n.id),
		"controller.quorum.voters":                 strings.Join(voters, ","),
		"listeners":                                fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", n.brokerPort, n.ctrlPort),
		"advertised.listeners":                     fmt.Sprintf("PLAINTEXT://127.0.0.1:%d", n.brokerPort),
		"controller.listener.names":                "CONTROLLER",
		"inter.broker.listener.name":               "PLAINTEXT",
		"listener.security.protocol.map":           "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
		"log.dirs":                                 filepath.Join(n.dir, "data"),
		"num.partitions":                           "1",
		"default.replication.factor":               strconv.Itoa(rf),
		"min.insync.replicas":                      strconv.Itoa(isr),
		"offsets.topic.replication.factor":         strconv.Itoa(rf),
		"offsets.topic.num.partitions":             "10",
		"transaction.state.log.replication.factor": strconv.Itoa(rf),
		"transaction.state.log.min.isr":            strconv.Itoa(isr),
		"transaction.state.log.num.partitions":     "10",
		// Baton creates every topic it uses; a typo must not create one.
		"auto.create.topics.enable": "false",
		// The tests crash instances and want to notice within seconds; a
		// production broker's minimum is 6 s, baton's default session.
		"group.min.session.timeout.ms": "500",
		// Small segments and a short shutdown keep restarts quick.
		"log.segment.bytes":                    strconv.Itoa(16 << 20),
		"controlled.shutdown.max.retries":      "1",
		"controlled.shutdown.retry.backoff.ms": "500",
	}
	for k, v := range cfg.BrokerConfig {
		props[k] = v
	}
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, props[k])
	}
	return b.String()
}

func (c *Cluster) javaArgs(main string, args ...string) []string {
	return append([]string{
		"-Xms128m", "-Xmx512m", "-XX:+UseG1GC", "-XX:TieredStopAtLevel=1",
		"-Djava.awt.headless=true",
		"-Dlog4j2.configurationFile=" + filepath.Join(c.dir, "log4j2.properties"),
		"-cp", filepath.Join(c.lib, "*"), main,
	}, args...)
}

func (c *Cluster) startNode(n *node) error {
	logf, err := os.OpenFile(filepath.Join(n.dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	cmd := exec.Command(c.java, c.javaArgs("kafka.Kafka", n.props)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("kafkatest: starting node %d: %w", n.id, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	c.mu.Lock()
	n.cmd, n.done = cmd, done
	c.mu.Unlock()
	return nil
}

// waitReady waits until every node answers a metadata request listing
// every node as a live broker. (kadm's BrokerMetadata can keep answering
// from a client's older view after a restart, so each broker is asked
// directly.)
func (c *Cluster) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		return fmt.Errorf("kafkatest: %w", err)
	}
	defer cl.Close()
	var last error
	for {
		for _, n := range c.nodes {
			select {
			case <-n.done:
				return fmt.Errorf("kafkatest: node %d exited during start-up; its log:\n%s", n.id, tail(filepath.Join(n.dir, "server.log"), 30))
			default:
			}
		}
		last = c.allSeeAll(ctx, cl)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafkatest: cluster not ready within %v: %v; logs in %s", timeout, last, c.dir)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *Cluster) allSeeAll(ctx context.Context, cl *kgo.Client) error {
	for _, n := range c.nodes {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(rctx, cl.Broker(n.id))
		cancel()
		if err != nil {
			return fmt.Errorf("node %d: %v", n.id, err)
		}
		if len(resp.Brokers) != len(c.nodes) || resp.ControllerID < 0 {
			return fmt.Errorf("node %d sees %d of %d brokers", n.id, len(resp.Brokers), len(c.nodes))
		}
	}
	return nil
}

// Addrs returns the brokers' bootstrap addresses, one per node, killed
// nodes included.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = "127.0.0.1:" + strconv.Itoa(n.brokerPort)
	}
	return out
}

// Lib is the directory of Apache Kafka's jars (its Java clients included),
// for a test that runs Java code of its own against the cluster.
func (c *Cluster) Lib() string { return c.lib }

// Nodes returns the number of nodes.
func (c *Cluster) Nodes() int { return len(c.nodes) }

// NodeOf returns the node (1-based, the broker id) listening on addr, or 0.
func (c *Cluster) NodeOf(addr string) int {
	for _, n := range c.nodes {
		if addr == "127.0.0.1:"+strconv.Itoa(n.brokerPort) {
			return n.id
		}
	}
	return 0
}

// Kill sends SIGKILL to node id (1-based) and waits until it is gone.
func (c *Cluster) Kill(id int) error {
	n, err := c.node(id)
	if err != nil {
		return err
	}
	c.mu.Lock()
	cmd, done := n.cmd, n.done
	c.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("kafkatest: node %d is not running", id)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
	c.mu.Lock()
	n.cmd = nil
	c.mu.Unlock()
	c.logf("kafkatest: node %d killed", id)
	return nil
}

// Restart starts a killed node again on its data and ports and waits until
// the cluster sees every broker again.
func (c *Cluster) Restart(ctx context.Context, id int) error {
	n, err := c.node(id)
	if err != nil {
		return err
	}
	c.mu.Lock()
	running := n.cmd != nil
	c.mu.Unlock()
	if running {
		return fmt.Errorf("kafkatest: node %d is running", id)
	}
	if err := c.startNode(n); err != nil {
		return err
	}
	if err := c.waitReady(ctx, 120*time.Second); err != nil {
		return err
	}
	c.logf("kafkatest: node %d restarted", id)
	return nil
}

// RestartFenced starts a killed node again once the cluster has moved every
// partition leadership off it (the controller fenced it when its session
// ran out: broker.session.timeout.ms, 9 s by default). A node restarted at
// once can still lead partitions for a few seconds and act on what its own
// log holds past its followers': Apache Kafka's transaction coordinator
// loads its log to the log end offset, and so can complete a transaction
// that the partition's next leader, which never got its PrepareCommit,
// aborts.
func (c *Cluster) RestartFenced(ctx context.Context, id int) error {
	start := time.Now()
	leads, lastErr := -1, error(nil)
	if !tick.Until(ctx, 2*time.Minute, 200*time.Millisecond, func() bool {
		n, err := c.PartitionsLedBy(ctx, id)
		if err != nil {
			lastErr = err
			return false
		}
		leads = n
		return n == 0
	}) {
		if leads < 0 {
			return fmt.Errorf("kafkatest: waiting for node %d to lead nothing: %v", id, lastErr)
		}
		return fmt.Errorf("kafkatest: node %d still leads %d partitions %v after it was killed", id, leads, time.Since(start).Round(100*time.Millisecond))
	}
	c.logf("kafkatest: node %d leads no partition after %v", id, time.Since(start).Round(100*time.Millisecond))
	return c.Restart(ctx, id)
}

// PartitionsLedBy counts the partitions whose leader is node id, as the
// cluster's metadata says.
func (c *Cluster) PartitionsLedBy(ctx context.Context, id int) (int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).Metadata(ctx)
	if err != nil {
		return 0, err
	}
	leads := 0
	for _, td := range md.Topics {
		for _, pd := range td.Partitions {
			if pd.Leader == int32(id) {
				leads++
			}
		}
	}
	return leads, nil
}

func (c *Cluster) node(id int) (*node, error) {
	if id < 1 || id > len(c.nodes) {
		return nil, fmt.Errorf("kafkatest: no node %d (cluster has %d)", id, len(c.nodes))
	}
	return c.nodes[id-1], nil
}

// Stop kills every node and removes the cluster's data. Safe to call twice.
func (c *Cluster) Stop() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	var waits []chan struct{}
	for _, n := range c.nodes {
		if n.cmd != nil {
			_ = n.cmd.Process.Signal(syscall.SIGKILL)
			waits = append(waits, n.done)
			n.cmd = nil
		}
	}
	c.mu.Unlock()
	for _, w := range waits {
		<-w
	}
	if os.Getenv("KAFKATEST_KEEP") == "" {
		_ = os.RemoveAll(c.dir)
	}
}

// Log returns the last lines of node id's log, for failure messages.
func (c *Cluster) Log(id int, lines int) string {
	n, err := c.node(id)
	if err != nil {
		return err.Error()
	}
	return tail(filepath.Join(n.dir, "server.log"), lines)
}

// Tool runs one of Kafka's own command-line tools (a main class such as
// org.apache.kafka.tools.consumer.ConsoleConsumer) with the cluster's jars
// and returns its standard output.
func (c *Cluster) Tool(ctx context.Context, stdin []byte, main string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, c.java, c.javaArgs(main, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = sysProcAttr()
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("kafkatest: %s: %v\n%s", main, err, stderr.String())
	}
	return out, nil
}

func tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("kafkatest: finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// newClusterID returns a random KRaft cluster id: 16 bytes, URL-safe
// base64 without padding, as kafka-storage random-uuid prints.
// It never starts with '-', which the storage tool would read as a flag.
func newClusterID() string {
	for {
		var b [16]byte
		_, _ = rand.Read(b[:])
		if id := base64.RawURLEncoding.EncodeToString(b[:]); id[0] != '-' {
			return id
		}
	}
}

// Jars returns the directory holding Kafka's jars, fetching them with
// Maven the first time (the cache is keyed by the pom's content, so a new
// version fetches anew). Concurrent callers, in other test binaries too,
// wait for one fetch.
func Jars(ctx context.Context, logf func(string, ...any)) (string, error) {
	root := os.Getenv("BATON_KAFKA_CACHE")
	if root == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		root = filepath.Join(base, "baton", "kafka")
	}
	sum := sha256.Sum256(pom)
	dir := filepath.Join(root, Version+"-"+hex.EncodeToString(sum[:6]))
	lib := filepath.Join(dir, "lib")
	if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
		return lib, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("kafkatest: jar cache: %w", err)
	}
	unlock, err := lockFile(filepath.Join(dir, "lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
		return lib, nil
	}
	mvn, err := exec.LookPath("mvn")
	if err != nil {
		return "", ErrNoMaven
	}
	logf("kafkatest: fetching Apache Kafka %s jars into %s", Version, dir)
	pomPath := filepath.Join(dir, "pom.xml")
	if err := os.WriteFile(pomPath, pom, 0o644); err != nil {
		return "", fmt.Errorf("kafkatest: %w", err)
	}
	_ = os.RemoveAll(lib)
	out, err := exec.CommandContext(ctx, mvn, "-B", "-q", "-f", pomPath, "dependency:copy-dependencies", "-DoutputDirectory="+lib).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("kafkatest: fetching Kafka's jars with Maven: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "complete"), nil, 0o644); err != nil {
		return "", fmt.Errorf("kafkatest: %w", err)
	}
	return lib, nil
}

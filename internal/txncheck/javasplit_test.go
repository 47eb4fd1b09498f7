package txncheck

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/counts"
	"github.com/baton-streams/baton/internal/kafkatest"
	"github.com/baton-streams/baton/internal/tick"
)

// EnvSplitKills opts in to TestJavaClientSplit and says how many times it
// kills the transaction coordinator; EnvSplitGiveUp (a duration) makes the
// Java producer give a commit up after that long instead of Kafka's
// default 60 s (max.block.ms), as baton gives a commit 10 s.
const (
	EnvSplitKills  = "BATON_SPLIT_KILLS"
	EnvSplitGiveUp = "BATON_SPLIT_GIVE_UP"
)

// javaTools finds javac and java, failing the test with what to install
// when they are missing.
func javaTools(t *testing.T) (javac, java string) {
	t.Helper()
	javac, err := exec.LookPath("javac")
	if err != nil {
		t.Fatalf("javac not found (%v): install a JDK, for example Debian's openjdk-17-jdk-headless", err)
	}
	java, err = exec.LookPath("java")
	if err != nil {
		t.Fatalf("java not found: %v", err)
	}
	return javac, java
}

// compileJava compiles testdata/src against the Kafka jars in lib and
// returns the classes' directory and the jars' classpath entry.
func compileJava(t *testing.T, javac, lib, src string) (classes, jars string) {
	t.Helper()
	classes = t.TempDir()
	jars = filepath.Join(lib, "*")
	if out, err := exec.Command(javac, "-cp", jars, "-d", classes, filepath.Join("testdata", src)).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	return classes, jars
}

// TestJavaClientSplit looks for the transaction split that baton's fault
// tests found with franz-go clients, with Apache Kafka's own Java clients
// and no baton code in the loop. testdata/Split.java copies topic in to
// topic out in read-process-write transactions (records and input
// offsets in one transaction per poll, as a Kafka Streams task commits),
// while the broker that coordinates its transactions is killed with
// SIGKILL and restarted at once, BATON_SPLIT_KILLS times. Afterwards every
// record of in must be in out exactly as often (read_committed), and no
// transaction may have been committed in some partitions and aborted in
// others (ReadSplits). It is a soak of its own, not part of the suite: it
// needs three Apache Kafka brokers and a JDK (javac).
func TestJavaClientSplit(t *testing.T) {
	kills, _ := strconv.Atoi(os.Getenv(EnvSplitKills))
	if kills <= 0 {
		t.Skipf("a soak of its own: %s=N kills the transaction coordinator N times (needs Java 17 with javac)", EnvSplitKills)
	}
	javac, java := javaTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	c, err := kafkatest.Start(ctx, kafkatest.Config{Nodes: 3, Logf: t.Logf})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	classes, jars := compileJava(t, javac, c.Lib(), "Split.java")
	brokers := c.Addrs()
	cl, adm := clients(t, brokers)
	const in, out, group, txnID = "in", "out", "split", "split-txn"
	ctx, cancel = context.WithTimeout(context.Background(), 60*time.Second)
	created, err := adm.CreateTopics(ctx, 4, 3, nil, in, out)
	cancel()
	if err == nil {
		err = created.Error()
	}
	if err != nil {
		t.Fatalf("creating %s and %s: %v", in, out, err)
	}

	// The input: a record every 5 ms, each value unique.
	feedCtx, stopFeed := context.WithCancel(context.Background())
	var feed sync.WaitGroup
	feed.Add(1)
	go func() {
		defer feed.Done()
		for i := 0; feedCtx.Err() == nil; i++ {
			cl.Produce(feedCtx, &kgo.Record{Topic: in, Value: []byte("v" + strconv.Itoa(i))}, nil)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	defer stopFeed()

	var stdout, stderr lockedBuffer
	args := []string{"-Xmx256m", "-cp", classes + string(os.PathListSeparator) + jars,
		"Split", strings.Join(brokers, ","), in, out, group, txnID}
	if s := os.Getenv(EnvSplitGiveUp); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("%s=%q: want a positive duration such as 5s", EnvSplitGiveUp, s)
		}
		args = append(args, strconv.FormatInt(d.Milliseconds(), 10))
	}
	cmd := exec.Command(java, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		t.Logf("Split.java's output:\n%s%s", stdout.String(), stderr.String())
	}()

	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	committing := tick.Until(ctx, 2*time.Minute, 200*time.Millisecond, func() bool { return strings.Contains(stdout.String(), "commits") })
	cancel()
	if !committing {
		t.Fatalf("Split.java made no 100 commits within 2 minutes")
	}
	for k := 1; k <= kills; k++ {
		time.Sleep(time.Duration(2000+rand.IntN(2000)) * time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		var coord kadm.FindCoordinatorResponse
		found := tick.Until(ctx, time.Minute, 200*time.Millisecond, func() bool {
			coord = adm.FindTxnCoordinators(ctx, txnID)[txnID]
			return coord.Err == nil
		})
		if !found {
			cancel()
			t.Fatalf("kill %d: the coordinator of %s: %v", k, txnID, coord.Err)
		}
		t.Logf("kill %d of %d: broker %d, the coordinator of %s", k, kills, coord.NodeID, txnID)
		if err := c.Kill(int(coord.NodeID)); err != nil {
			cancel()
			t.Fatal(err)
		}
		if err := c.Restart(ctx, int(coord.NodeID)); err != nil {
			cancel()
			t.Fatal(err)
		}
		// The next kill waits until every partition is whole again.
		whole := tick.Until(ctx, 3*time.Minute, 500*time.Millisecond, func() bool { return inSync(ctx, adm, c.Nodes()) })
		cancel()
		if !whole {
			t.Fatalf("kill %d: partitions not back in sync within 3 minutes", k)
		}
	}
	stopFeed()
	feed.Wait()
	if err := cl.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}

	// Split.java is done when the group's offsets reach the input's end.
	ctx, cancel = context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	caughtUp := func() bool {
		committed, err := adm.FetchOffsets(kadm.RequireStable(ctx), group)
		if err != nil {
			return false
		}
		done := true
		ends.Each(func(e kadm.ListedOffset) {
			o, ok := committed.Lookup(e.Topic, e.Partition)
			done = done && ok && o.Err == nil && o.At >= e.Offset
		})
		return done
	}
	if !tick.Until(ctx, 5*time.Minute, 500*time.Millisecond, caughtUp) {
		t.Fatalf("Split.java did not commit to the end of %s within 5 minutes", in)
	}
	_ = stdin.Close()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("Split.java: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("Split.java did not stop within 30 s of its input closing")
	}

	want, got := map[string]int{}, map[string]int{}
	for topic, m := range map[string]map[string]int{in: want, out: got} {
		if err := counts.Scan(ctx, brokers, topic, true, func(r *kgo.Record) { m[string(r.Value)]++ }); err != nil {
			t.Fatalf("reading %s: %v", topic, err)
		}
	}
	var wrong []string
	for v, n := range want {
		if got[v] != n {
			wrong = append(wrong, fmt.Sprintf("%s: %d in %s, %d in %s", v, n, in, got[v], out))
		}
	}
	for v, n := range got {
		if want[v] == 0 {
			wrong = append(wrong, fmt.Sprintf("%s: %d in %s, not in %s", v, n, out, in))
		}
	}
	t.Logf("%d records in %s, %d kills, %d copies wrong", len(want), in, kills, len(wrong))
	if len(wrong) > 0 {
		t.Errorf("%d records copied a wrong number of times, for example %s", len(wrong), strings.Join(wrong[:min(5, len(wrong))], "; "))
	}
	splits, err := ReadSplits(ctx, brokers, out)
	if err != nil {
		t.Errorf("reading the markers: %v", err)
	}
	for _, s := range splits {
		t.Errorf("the brokers split a transaction: %s", s)
	}
}

// inSync reports whether every partition of every topic, internal ones
// included, has all nodes in its in-sync replicas.
// clients returns a client of brokers and its admin client, closed when
// the test ends.
func clients(t *testing.T, brokers []string) (*kgo.Client, *kadm.Client) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

func inSync(ctx context.Context, adm *kadm.Client, nodes int) bool {
	topics, err := adm.ListTopicsWithInternal(ctx)
	if err != nil {
		return false
	}
	ok := true
	topics.EachPartition(func(p kadm.PartitionDetail) {
		ok = ok && p.Err == nil && p.Leader >= 0 && len(p.ISR) >= min(nodes, len(p.Replicas))
	})
	return ok
}

// lockedBuffer is a bytes.Buffer a child process writes while the test
// reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

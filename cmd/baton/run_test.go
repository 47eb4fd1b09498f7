package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/counts"
	"github.com/baton-streams/baton/internal/kafkatest"
)

// proc is a baton process started by a test.
type proc struct {
	cmd    *exec.Cmd
	lines  chan string // stdout lines
	stderr *strings.Builder
	done   chan error
}

func startBaton(t *testing.T, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(batonBin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, lines: make(chan string, 100), stderr: &strings.Builder{}, done: make(chan error, 1)}
	cmd.Stderr = &lockedWriter{b: p.stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		s := bufio.NewScanner(out)
		for s.Scan() {
			p.lines <- s.Text()
		}
		close(p.lines)
	}()
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		p.done <- nil
	})
	return p
}

type lockedWriter struct{ b *strings.Builder }

func (w *lockedWriter) Write(p []byte) (int, error) { return w.b.Write(p) }

// waitLine returns the first stdout line containing s.
func (p *proc) waitLine(t *testing.T, s string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("process ended before printing %q", s)
			}
			if strings.Contains(l, s) {
				return l
			}
		case <-deadline:
			t.Fatalf("no line with %q within %v", s, timeout)
		}
	}
}

// stop sends SIGTERM and returns the exit code.
func (p *proc) stop(t *testing.T, timeout time.Duration) int {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		return 0
	case <-time.After(timeout):
		t.Fatalf("process did not exit within %v of SIGTERM", timeout)
		return -1
	}
}

type statusDoc struct {
	AppID      string `json:"app_id"`
	Instance   string `json:"instance"`
	Generation int32  `json:"generation"`
	Leader     bool   `json:"leader"`
	Workers    int    `json:"workers"`
	Tasks      []struct {
		ID        string `json:"id"`
		Role      string `json:"role"`
		Lag       int64  `json:"lag"`
		Processed int64  `json:"processed"`
	} `json:"tasks"`
}

func getStatus(t *testing.T, addr string) statusDoc {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st statusDoc
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// e2e is the cluster a process test runs against, with its 4-partition
// input topic: by default a `baton cluster` process (the spec's
// two-terminal flow), with BATON_KAFKA=real the shared Apache Kafka
// cluster (internal/kafkatest). Names are unique to the test on a shared
// cluster.
type e2e struct {
	cluster              *proc // the `baton cluster` process; nil on Apache Kafka
	brokers              string
	client               *kgo.Client
	appID, lines, counts string
}

func clusterWithLines(t *testing.T) *e2e {
	t.Helper()
	e := &e2e{appID: "wc", lines: "lines", counts: "counts"}
	if kafkatest.Real(t) {
		tg := kafkatest.ForTest(t)
		e.brokers, e.appID, e.lines, e.counts = tg.Bootstrap(), tg.Name("wc"), tg.Name("lines"), tg.Name("counts")
	} else {
		e.cluster = startBaton(t, "cluster", "--listen", "127.0.0.1:0")
		e.brokers = strings.TrimPrefix(e.cluster.waitLine(t, "cluster ready: ", 10*time.Second), "cluster ready: ")
	}
	var err error
	e.client, err = kgo.NewClient(kgo.SeedBrokers(strings.Split(e.brokers, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.client.Close)
	resp, err := kadm.NewClient(e.client).CreateTopic(context.Background(), 4, -1, nil, e.lines)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating %s: %v", e.lines, err)
	}
	return e
}

// run starts `baton run wordcount` on the test's topics with extra flags
// and returns the process and its HTTP address.
func (e *e2e) run(t *testing.T, extra ...string) (*proc, string) {
	t.Helper()
	args := append([]string{"run", "wordcount", "--brokers", e.brokers, "--app-id", e.appID, "--input", e.lines,
		"--output", e.counts, "--http", "127.0.0.1:0"}, extra...)
	p := startBaton(t, args...)
	l := p.waitLine(t, "http: listening on ", 30*time.Second)
	return p, l[strings.LastIndex(l, " ")+1:]
}

// readCounts reads the output topic (read_committed): the last value per
// word.
func (e *e2e) readCounts(t *testing.T) map[string]int64 {
	t.Helper()
	got, err := counts.Read(context.Background(), strings.Split(e.brokers, ","), e.counts)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// flow writes a batch of records every 10 ms until stopped, and adds each
// batch's expected counts to want once the cluster acknowledged it.
type flow struct {
	mu   sync.Mutex
	want map[string]int64 // guarded by mu
	stop chan struct{}
	done chan error
}

// startFlow starts a flow whose i-th batch is batch(i): its records and
// what they add to the expected counts.
func (e *e2e) startFlow(batch func(i int) ([]*kgo.Record, map[string]int64)) *flow {
	f := &flow{want: map[string]int64{}, stop: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		for i := 0; ; i++ {
			select {
			case <-f.stop:
				f.done <- nil
				return
			case <-time.After(10 * time.Millisecond):
			}
			recs, add := batch(i)
			if err := e.client.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				f.done <- err
				return
			}
			f.mu.Lock()
			for k, n := range add {
				f.want[k] += n
			}
			f.mu.Unlock()
		}
	}()
	return f
}

// startWordFlow writes 20 lines a batch, each a word of 53 repeated per
// times, and expects every word's occurrences.
func (e *e2e) startWordFlow(per int) *flow {
	return e.startFlow(func(i int) ([]*kgo.Record, map[string]int64) {
		var recs []*kgo.Record
		add := map[string]int64{}
		for j := range 20 {
			w := fmt.Sprintf("w%d", (i*20+j)%53)
			add[w] += int64(per)
			recs = append(recs, &kgo.Record{Topic: e.lines, Key: []byte(strconv.Itoa(j)), Value: []byte(strings.TrimSpace(strings.Repeat(w+" ", per)))})
		}
		return recs, add
	})
}

// written returns the sum of the expected counts so far.
func (f *flow) written() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := int64(0)
	for _, c := range f.want {
		n += c
	}
	return n
}

// more waits until the flow's expected counts have grown by n, so that
// records flow through every step of a test however fast the steps go.
func (f *flow) more(t *testing.T, n int64) {
	t.Helper()
	target := f.written() + n
	waitUntil(t, 60*time.Second, fmt.Sprintf("%d written", target), func() bool { return f.written() >= target })
}

// end stops the flow and returns what it wrote.
func (f *flow) end(t *testing.T) map[string]int64 {
	t.Helper()
	close(f.stop)
	if err := <-f.done; err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.want)
}

// TestClusterAndRunProcesses drives the spec's two-terminal flow: a
// cluster process, two wordcount processes, records in, SIGTERM out.
func TestClusterAndRunProcesses(t *testing.T) {
	e := clusterWithLines(t)
	want := map[string]int64{}
	produce := func(n, from int) {
		var recs []*kgo.Record
		for i := range n {
			w := fmt.Sprintf("w%d", (from+i)%37)
			want[w] += 2
			recs = append(recs, &kgo.Record{Topic: e.lines, Key: []byte(strconv.Itoa(i)), Value: []byte(w + " " + w)})
		}
		if err := e.client.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	produce(500, 0)

	a, aAddr := e.run(t, "--state-dir", t.TempDir(), "--session-timeout", "2s")
	b, bAddr := e.run(t, "--state-dir", t.TempDir(), "--session-timeout", "2s")

	deadline := time.Now().Add(60 * time.Second)
	for {
		sa, sb := getStatus(t, aAddr), getStatus(t, bAddr)
		// Settled: every task active once, and no learner left (while one
		// restores, a follow-up round is still to come, and the leader
		// flag is read between rounds).
		actives, learners := 0, 0
		for _, st := range []statusDoc{sa, sb} {
			for _, task := range st.Tasks {
				switch task.Role {
				case "active":
					actives++
				case "learner":
					learners++
				}
			}
		}
		if actives == 8 && learners == 0 && len(sa.Tasks) > 0 && len(sb.Tasks) > 0 {
			if sa.AppID != e.appID || sa.Workers != 1 || sa.Instance == sb.Instance || sa.Leader == sb.Leader || sa.Generation < 1 {
				t.Errorf("status documents: %+v %+v", sa, sb)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the two instances never shared the 8 tasks: %+v %+v", sa, sb)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// More lines once the tasks are shared: the first 500 may all have
	// been processed by b, had b joined first and a taken its tasks after.
	produce(300, 100)
	// A task's processed counter appears with its first record.
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get("http://" + aAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		metrics, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var lacks []string
		for _, m := range []string{"baton_records_processed_total", "baton_task_lag_records", "baton_rebalances_total"} {
			if !strings.Contains(string(metrics), m) {
				lacks = append(lacks, m)
			}
		}
		if len(lacks) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %s", strings.Join(lacks, ", "))
		}
		time.Sleep(200 * time.Millisecond)
	}

	if code := a.stop(t, 60*time.Second); code != 0 {
		t.Errorf("SIGTERM: exit %d, want 0; stderr:\n%s", code, a.stderr)
	}
	produce(200, 200)
	e.waitExact(t, want, 60*time.Second)
	if code := b.stop(t, 60*time.Second); code != 0 {
		t.Errorf("SIGTERM: exit %d, want 0; stderr:\n%s", code, b.stderr)
	}
	if e.cluster != nil {
		if code := e.cluster.stop(t, 10*time.Second); code != 0 {
			t.Errorf("cluster: exit %d on SIGTERM", code)
		}
	}
}

func TestRunStartupErrors(t *testing.T) {
	cl := startBaton(t, "cluster", "--listen", "127.0.0.1:0")
	brokers := strings.TrimPrefix(cl.waitLine(t, "cluster ready: ", 10*time.Second), "cluster ready: ")
	dir := t.TempDir()
	base := []string{"run", "wordcount", "--app-id", "wc", "--input", "lines", "--output", "counts"}

	check := func(name, want string, args ...string) {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			_, errOut, code := runBaton(t, "", args...)
			if code == 0 {
				t.Fatalf("exit 0, want an error")
			}
			if time.Since(start) > 30*time.Second {
				t.Errorf("took %v, want under 30 s", time.Since(start))
			}
			if strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, want) || strings.Contains(errOut, "goroutine ") {
				t.Errorf("stderr %q: want one line naming %q", errOut, want)
			}
		})
	}
	check("missing state dir", "state-dir", append(base, "--brokers", brokers)...)
	check("missing brokers", "brokers", append(base, "--state-dir", dir)...)
	check("bad workers", "--workers", append(base, "--brokers", brokers, "--state-dir", dir, "--workers", "0")...)
	check("bad policy", "--policy", append(base, "--brokers", brokers, "--state-dir", dir, "--policy", "fast")...)
	check("bad guarantee", "--guarantee", append(base, "--brokers", brokers, "--state-dir", dir, "--guarantee", "twice")...)
	check("bad replication factor", "--replication-factor", append(base, "--brokers", brokers, "--state-dir", dir, "--replication-factor", "0")...)
	check("bad min insync replicas", "--min-insync-replicas", append(base, "--brokers", brokers, "--state-dir", dir, "--min-insync-replicas", "-1")...)
	check("min insync above replication", "--min-insync-replicas: must not exceed --replication-factor (1), got 2", append(base, "--brokers", brokers, "--state-dir", dir, "--replication-factor", "1", "--min-insync-replicas", "2")...)
	check("replication beyond the cluster", "replication factor: 2 exceeds the 1 brokers", append(base, "--brokers", brokers, "--state-dir", t.TempDir(), "--replication-factor", "2")...)
	check("bad autoscale headroom", "--autoscale-headroom: must be a fraction from 0 to 1", append(base, "--brokers", brokers, "--state-dir", dir, "--autoscale-headroom", "1.5")...)
	check("autoscale max below min", "--autoscale-max-instances: must be at least MinInstances (3), got 2", append(base, "--brokers", brokers, "--state-dir", dir, "--autoscale-min-instances", "3", "--autoscale-max-instances", "2")...)
	check("bad restore share", "--restore-share: want more than 0 and at most 1, got 0", append(base, "--brokers", brokers, "--state-dir", dir, "--restore-share", "0")...)
	check("bad block cache", "--block-cache-mib: want 0 to 1048576, got -1", append(base, "--brokers", brokers, "--state-dir", dir, "--block-cache-mib", "-1")...)
	check("bad purge interval", "--repartition-purge-interval", append(base, "--brokers", brokers, "--state-dir", dir, "--repartition-purge-interval", "-1s")...)
	check("bad transaction timeout", "transaction timeout", append(base, "--brokers", brokers, "--state-dir", dir, "--guarantee", "exactly-once", "--transaction-timeout", "1ms")...)

	// A second instance on a locked state dir refuses before contacting
	// the cluster (the brokers here do not exist).
	first := startBaton(t, append(base, "--brokers", brokers, "--state-dir", dir, "--http", "127.0.0.1:0")...)
	first.waitLine(t, "http: listening on", 20*time.Second)
	check("locked state dir", dir, append(base, "--brokers", "127.0.0.1:1", "--state-dir", dir)...)
	check("unreachable brokers", "127.0.0.1:1", append(base, "--brokers", "127.0.0.1:1", "--state-dir", t.TempDir())...)
}

package txncheck

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/baton-streams/baton/internal/kafkatest"
	"github.com/baton-streams/baton/internal/tick"
)

// EnvSplitRepro opts in to TestJavaClientSplitRepro (with BATON_KAFKA=real)
// and says how many attempts it makes on one cluster. EnvSplitReproWait
// (a duration, 15s by default) is how long a follower's fetch waits at the
// leader for data: how long an append stays unreplicated. EnvSplitReproInit
// (a duration, 0s by default) starts the second producer's
// initTransactions that long after the kill, while the killed broker
// restarts; "restart" starts it once the restarted broker is back in the
// cluster.
const (
	EnvSplitRepro     = "BATON_SPLIT_REPRO"
	EnvSplitReproWait = "BATON_SPLIT_REPRO_FETCH_WAIT"
	EnvSplitReproInit = "BATON_SPLIT_REPRO_INIT_AFTER"
	// EnvSplitReproKeep=1 keeps the first producer alive instead: its
	// commitTransaction goes on through the failover (max.block.ms 240 s),
	// as the Java client does by default, and no second producer starts.
	EnvSplitReproKeep = "BATON_SPLIT_REPRO_KEEP"
)

// TestJavaClientSplitRepro tries to make Apache Kafka split one transaction
// (commit it in some partitions, abort it in others) on purpose, with
// Kafka's own Java producer (testdata/Repro.java) and no baton code:
//
//  1. A 3-node cluster whose followers fetch with replica.fetch.min.bytes
//     1 MiB and replica.fetch.wait.max.ms EnvSplitReproWait: an append stays
//     on its leader alone for up to that long, while the followers stay in
//     the ISR. (A replication throttle cannot do this: Kafka never throttles
//     an in-sync replica.) broker.session.timeout.ms is 30 s, so that the
//     killed broker is back before the controller fences it.
//  2. The producer writes one record to each partition of a 6-partition
//     topic, adds offsets for a group (sendOffsetsToTransaction) and calls
//     commitTransaction.
//  3. As soon as the coordinator's own log of the transactional id's
//     __transaction_state partition holds the PrepareCommit (the test reads
//     the segment file), the producer's process and then the coordinator
//     are killed with SIGKILL, and the coordinator is restarted at once.
//  4. A new producer with the same transactional id calls
//     initTransactions, which fences the first and has the coordinator end
//     the pending transaction. (With EnvSplitReproKeep=1 the first
//     producer is not killed and its commitTransaction goes on instead.)
//  5. The markers are read back per partition (ReadEntries): a split is a
//     transaction with COMMIT in some partitions and ABORT in others. The
//     test fails on a split, and on a transaction decided both ways (COMMIT
//     and ABORT markers for it, from two coordinator epochs) even where
//     the COMMITs came first everywhere and the records agree.
//
// The brokers' INFO logs of the transaction coordinator and of partition
// leadership for the attempt are logged.
func TestJavaClientSplitRepro(t *testing.T) {
	attempts, _ := strconv.Atoi(os.Getenv(EnvSplitRepro))
	if attempts <= 0 || os.Getenv("BATON_KAFKA") != "real" {
		t.Skipf("an opt-in reproduction: BATON_KAFKA=real %s=N go test -count=1 -timeout 60m -run TestJavaClientSplitRepro -v ./internal/txncheck "+
			"makes N attempts (needs Java 17 with javac; %s=15s sets how long an append stays unreplicated, %s=restart starts the new producer once the killed broker is back, 5s that long after the kill, 0s by default; %s=1 keeps the first producer's commit going instead)",
			EnvSplitRepro, EnvSplitReproWait, EnvSplitReproInit, EnvSplitReproKeep)
	}
	wait := 15 * time.Second
	if s := os.Getenv(EnvSplitReproWait); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < time.Second {
			t.Fatalf("%s=%q: want a duration of 1s or more", EnvSplitReproWait, s)
		}
		wait = d
	}
	initAfter := time.Duration(0)
	if s := os.Getenv(EnvSplitReproInit); s == "restart" {
		initAfter = -1
	} else if s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			t.Fatalf("%s=%q: want a duration such as 0s or 5s, or restart", EnvSplitReproInit, s)
		}
		initAfter = d
	}
	javac, java := javaTools(t)
	var clusterDir string
	logsIn := regexp.MustCompile(`\(logs in (.+)\)$`)
	logf := func(format string, args ...any) {
		s := fmt.Sprintf(format, args...)
		if m := logsIn.FindStringSubmatch(s); m != nil {
			clusterDir = m[1]
		}
		t.Log(s)
	}
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	c, err := kafkatest.Start(ctx, kafkatest.Config{Nodes: 3, Logf: logf, BrokerConfig: map[string]string{
		"replica.fetch.min.bytes":   "1048576",
		"replica.fetch.wait.max.ms": ms(wait),
		"replica.lag.time.max.ms":   ms(max(30*time.Second, 3*wait)),
		"replica.socket.timeout.ms": ms(wait + 30*time.Second),
		// The group coordinator waits this long for its writes to
		// replicate, transaction markers in __consumer_offsets included
		// (5 s by default): longer than the fetch wait, or a marker there
		// times out and is written again every 5 s, never acknowledged.
		"offsets.commit.timeout.ms": ms(max(60*time.Second, 4*wait)),
		// The killed broker is up again 8 to 16 s after the kill on a
		// busy machine: within its session (9 s by default) only
		// sometimes. With 30 s it always takes its leaderships up again
		// from its own metadata before the controller fences it (when
		// the old session runs out), as a broker restarted at once does.
		"broker.session.timeout.ms": "30000",
	}})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	if clusterDir == "" {
		t.Fatal("kafkatest did not say where the cluster's logs are")
	}
	if os.Getenv("KAFKATEST_KEEP") != "" {
		t.Logf("the brokers' data and logs (server.log) stay in %s", clusterDir)
	}
	brokers := c.Addrs()
	cl, adm := clients(t, brokers)
	if missing, err := infoLogs(clusterDir, cl, c.Nodes()); err != nil {
		t.Fatalf("turning the transaction coordinator's logs to INFO: %v", err)
	} else if len(missing) > 0 {
		t.Logf("loggers the running brokers do not have (INFO from their restart on): %s", strings.Join(missing, " "))
	}
	classes, jars := compileJava(t, javac, c.Lib(), "Repro.java")
	r := &repro{t: t, c: c, adm: adm, dir: clusterDir, brokers: brokers, initAfter: initAfter, keep: os.Getenv(EnvSplitReproKeep) == "1",
		java: []string{java, "-Xmx192m", "-cp", classes + string(os.PathListSeparator) + jars, "Repro"}}
	outcomes := map[string]int{}
	for a := 1; a <= attempts; a++ {
		start := time.Now()
		o := r.attempt(a)
		outcomes[o]++
		t.Logf("attempt %d of %d: %s (%v)", a, attempts, o, time.Since(start).Round(time.Second))
		if a < attempts {
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			whole := tick.Until(ctx, 4*time.Minute, time.Second, func() bool { return inSync(ctx, adm, c.Nodes()) })
			cancel()
			if !whole {
				t.Fatalf("partitions not back in sync within 4 minutes")
			}
		}
	}
	var sum []string
	for _, o := range slices.Sorted(maps.Keys(outcomes)) {
		sum = append(sum, fmt.Sprintf("%d %s", outcomes[o], o))
	}
	t.Logf("%d attempts (followers' fetch wait %v): %s", attempts, wait, strings.Join(sum, "; "))
}

// The outcomes of an attempt.
const (
	outSplit     = "split"
	outCommitted = "committed everywhere"
	outAborted   = "aborted everywhere"
	outReplied   = "no attempt: PrepareCommit reached a follower before the kill"
	outUnknown   = "no markers read"
	outBothWays  = "decided both ways: COMMIT markers, then ABORT markers that found no open records"
)

type repro struct {
	t         *testing.T
	c         *kafkatest.Cluster
	adm       *kadm.Client
	dir       string
	brokers   []string
	java      []string
	initAfter time.Duration
	keep      bool // the first producer's commit goes on; no second producer
}

// attempt makes one transaction, kills its coordinator right after the
// PrepareCommit, and returns what became of the transaction.
func (r *repro) attempt(a int) string {
	t := r.t
	name := "repro-" + strconv.Itoa(a)
	topic, group, txnID := name, name+"-group", name+"-txn"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	created, err := r.adm.CreateTopics(ctx, 6, 3, nil, topic)
	if err == nil {
		err = created.Error()
	}
	if err != nil {
		t.Fatalf("creating %s: %v", topic, err)
	}
	// FindCoordinator creates the internal topics the first time.
	var md kadm.Metadata
	ready := tick.Until(ctx, 2*time.Minute, 200*time.Millisecond, func() bool {
		if r.adm.FindTxnCoordinators(ctx, txnID)[txnID].Err != nil || r.adm.FindGroupCoordinators(ctx, group)[group].Err != nil {
			return false
		}
		md, err = r.adm.Metadata(ctx, topic, "__transaction_state", "__consumer_offsets")
		if err != nil {
			return false
		}
		for _, td := range md.Topics {
			if td.Err != nil || len(td.Partitions) == 0 {
				return false
			}
			for _, pd := range td.Partitions {
				if pd.Leader < 0 {
					return false
				}
			}
		}
		return true
	})
	if !ready {
		t.Fatalf("attempt %d: no coordinators or leaders within 2 minutes (%v)", a, err)
	}
	ts := md.Topics["__transaction_state"].Partitions
	txnPart := int32(javaHash(txnID)&0x7fffffff) % int32(len(ts))
	coord := int(ts[txnPart].Leader)
	offs := md.Topics["__consumer_offsets"].Partitions
	groupPart := int32(javaHash(group)&0x7fffffff) % int32(len(offs))
	var leaders []string
	for p := range int32(6) {
		leaders = append(leaders, fmt.Sprintf("%s[%d]→%d", topic, p, md.Topics[topic].Partitions[p].Leader))
	}
	t.Logf("attempt %d: transactional id %s: __transaction_state-%d, led by node %d (replicas %v, ISR %v); group %s: __consumer_offsets-%d led by node %d; %s",
		a, txnID, txnPart, coord, ts[txnPart].Replicas, ts[txnPart].ISR, group, groupPart, offs[groupPart].Leader, strings.Join(leaders, " "))
	marks := r.logMarks()
	segDir := func(node int) string {
		return filepath.Join(r.dir, "node"+strconv.Itoa(node), "data", "__transaction_state-"+strconv.Itoa(int(txnPart)))
	}

	var out lockedBuffer
	begin := exec.Command(r.java[0], append(r.java[1:], "begin", strings.Join(r.brokers, ","), topic, "6", group, txnID)...)
	begin.Stdout, begin.Stderr = &out, &out
	if err := begin.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = begin.Wait(); close(exited) }()
	defer func() {
		_ = begin.Process.Kill()
		<-exited
		t.Logf("attempt %d: Repro begin's output:\n%s", a, out.String())
	}()
	committing := tick.Until(ctx, 5*time.Minute, 20*time.Millisecond, func() bool {
		select {
		case <-exited:
			return true
		default:
		}
		return strings.Contains(out.String(), "committing")
	})
	if !committing || !strings.Contains(out.String(), "committing") {
		t.Fatalf("attempt %d: Repro begin did not reach commitTransaction:\n%s", a, out.String())
	}
	var prep txnLogRecord
	found := tick.Until(ctx, 5*time.Minute, 2*time.Millisecond, func() bool {
		recs, _ := readTxnLog(segDir(coord))
		for _, rec := range recs {
			if rec.TxnID == txnID && rec.Status == 2 {
				prep = rec
				return true
			}
		}
		return false
	})
	if !found {
		t.Fatalf("attempt %d: no PrepareCommit for %s in node %d's log within 5 minutes:\n%s", a, txnID, coord, out.String())
	}
	if !r.keep {
		_ = begin.Process.Kill()
	}
	if err := r.c.Kill(coord); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	who := "the producer and node"
	if r.keep {
		who = "node"
	}
	t.Logf("attempt %d: node %d's log holds %s; %s %d killed", a, coord, prep, who, coord)
	replicated := false
	for n := 1; n <= r.c.Nodes(); n++ {
		recs, err := readTxnLog(segDir(n))
		t.Logf("attempt %d: node %d's __transaction_state-%d at the kill (%v): %s", a, n, txnPart, err, txnRecords(recs, txnID))
		if n != coord && slices.ContainsFunc(recs, func(rec txnLogRecord) bool { return rec.TxnID == txnID && rec.Status == 2 }) {
			replicated = true
		}
	}

	var initOut lockedBuffer
	initDone := make(chan error, 1)
	runInit := func() {
		cmd := exec.CommandContext(ctx, r.java[0], append(r.java[1:], "init", strings.Join(r.brokers, ","), txnID)...)
		cmd.Stdout, cmd.Stderr = &initOut, &initOut
		initDone <- cmd.Run()
	}
	if r.keep {
		go func() {
			<-exited
			initOut.Write([]byte("(no second producer: the first one's commitTransaction went on)\n"))
			initDone <- nil
		}()
	} else if r.initAfter >= 0 {
		go func() {
			time.Sleep(r.initAfter - time.Since(killed))
			runInit()
		}()
	}
	if err := r.c.Restart(ctx, coord); err != nil {
		t.Fatal(err)
	}
	t.Logf("attempt %d: node %d back %v after the kill", a, coord, time.Since(killed).Round(100*time.Millisecond))
	if r.initAfter < 0 && !r.keep {
		go runInit()
	}
	select {
	case err := <-initDone:
		t.Logf("attempt %d: Repro init (%v) %v after the kill:\n%s", a, err, time.Since(killed).Round(100*time.Millisecond), initOut.String())
		if r.keep {
			t.Logf("attempt %d: Repro begin ended %v after the kill:\n%s", a, time.Since(killed).Round(100*time.Millisecond), out.String())
		}
	case <-ctx.Done():
		t.Fatalf("attempt %d: Repro init did not end", a)
	}
	if d, err := WaitEnded(ctx, r.adm, txnID, 3*time.Minute); err != nil {
		t.Errorf("attempt %d: %v", a, err)
	} else {
		t.Logf("attempt %d: the coordinator now says: producer %d epoch %d, %s", a, d.ProducerID, d.ProducerEpoch, d.State)
	}

	// Every marker is written once the transaction ended; the reads of
	// the partitions whose leaders moved may still need a moment.
	rctx, rcancel := context.WithTimeout(ctx, 2*time.Minute)
	entries, err := ReadEntries(rctx, r.brokers, topic, "__consumer_offsets")
	rcancel()
	if err != nil {
		t.Errorf("attempt %d: reading the markers: %v", a, err)
	}
	var lines []string
	commits, aborts := 0, 0
	for _, e := range entries {
		if e.ProducerID != prep.ProducerID {
			continue
		}
		if !e.Control {
			lines = append(lines, fmt.Sprintf("%s@%d record epoch %d", e.Partition, e.Offset, e.Epoch))
			continue
		}
		m := "ABORT"
		if e.Commit {
			m = "COMMIT"
			commits++
		} else {
			aborts++
		}
		lines = append(lines, fmt.Sprintf("%s@%d %s epoch %d coordinator epoch %d", e.Partition, e.Offset, m, e.Epoch, e.CoordinatorEpoch))
	}
	t.Logf("attempt %d: producer %d's records and markers:\n  %s", a, prep.ProducerID, strings.Join(lines, "\n  "))
	for n := 1; n <= r.c.Nodes(); n++ {
		recs, err := readTxnLog(segDir(n))
		t.Logf("attempt %d: node %d's __transaction_state-%d now (%v): %s", a, n, txnPart, err, txnRecords(recs, txnID))
	}
	r.logLines(a, marks, []string{txnID, topic, fmt.Sprintf("__transaction_state-%d", txnPart), fmt.Sprintf("__consumer_offsets-%d", groupPart),
		"TransactionCoordinator", "TransactionStateManager", "TransactionMarker", "nclean"})

	outcome := outUnknown
	for _, s := range Splits(entries) {
		if s.ProducerID == prep.ProducerID {
			t.Errorf("attempt %d: the brokers split a transaction: %s", a, s)
			outcome = outSplit
		}
	}
	switch {
	case outcome == outSplit:
	case replicated:
		outcome = outReplied
	case commits > 0 && aborts == 0:
		outcome = outCommitted
	case aborts > 0 && commits == 0:
		outcome = outAborted
	case commits > 0:
		// The markers agree on the records (the COMMITs came first), but
		// two coordinators decided the transaction two ways.
		outcome = outBothWays
		t.Errorf("attempt %d: the brokers decided producer %d's transaction both ways: %d COMMIT and %d ABORT markers (see the coordinator epochs above)", a, prep.ProducerID, commits, aborts)
	}
	return outcome
}

// logMarks returns the sizes of the nodes' server logs: where an
// attempt's lines begin.
func (r *repro) logMarks() []int64 {
	marks := make([]int64, r.c.Nodes()+1)
	for n := 1; n <= r.c.Nodes(); n++ {
		if fi, err := os.Stat(filepath.Join(r.dir, "node"+strconv.Itoa(n), "server.log")); err == nil {
			marks[n] = fi.Size()
		}
	}
	return marks
}

// logLines logs each node's server log lines since marks that name one of
// words.
func (r *repro) logLines(a int, marks []int64, words []string) {
	for n := 1; n <= r.c.Nodes(); n++ {
		path := filepath.Join(r.dir, "node"+strconv.Itoa(n), "server.log")
		f, err := os.Open(path)
		if err != nil {
			r.t.Logf("attempt %d: node %d's log: %v", a, n, err)
			continue
		}
		_, _ = f.Seek(marks[n], 0)
		var kept []string
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			l := sc.Text()
			if strings.Contains(l, "Skipped the become-") {
				continue // a partition's unchanged state, on every metadata update
			}
			for _, w := range words {
				if strings.Contains(l, w) {
					kept = append(kept, l)
					break
				}
			}
		}
		f.Close()
		if len(kept) > 400 {
			kept = append(kept[:200], append([]string{"..."}, kept[len(kept)-200:]...)...)
		}
		r.t.Logf("attempt %d: node %d's server log (%s), the attempt's lines about its transaction:\n%s", a, n, path, strings.Join(kept, "\n"))
	}
}

// infoLogs turns the transaction coordinator's loggers, and those of
// partition leadership and log truncation, to INFO: on the running nodes
// through the admin API, and for restarts in the cluster's log4j2
// configuration.
func infoLogs(dir string, cl *kgo.Client, nodes int) (missing []string, err error) {
	loggers := []string{
		"kafka.coordinator.transaction",
		"org.apache.kafka.coordinator.transaction",
		"kafka.cluster.Partition",
		"kafka.server.ReplicaFetcherThread",
		"kafka.server.ReplicaManager",
		"org.apache.kafka.storage.internals.log.UnifiedLog",
		"state.change.logger",
	}
	f, err := os.OpenFile(filepath.Join(dir, "log4j2.properties"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	for i, l := range loggers {
		fmt.Fprintf(f, "logger.repro%d.name = %s\nlogger.repro%d.level = INFO\n", i, l, i)
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	// A running broker changes only the loggers it has: set those of
	// the classes, one at a time.
	live := []string{
		"root",
		"kafka.coordinator.transaction.TransactionCoordinator",
		"kafka.coordinator.transaction.TransactionStateManager",
		"kafka.coordinator.transaction.TransactionMarkerChannelManager",
		"kafka.coordinator.transaction.TransactionMarkerRequestCompletionHandler",
		"kafka.cluster.Partition",
		"kafka.server.ReplicaFetcherThread",
		"kafka.server.ReplicaManager",
		"org.apache.kafka.storage.internals.log.UnifiedLog",
		"state.change.logger",
	}
	for n := 1; n <= nodes; n++ {
		for _, l := range live {
			req := kmsg.NewPtrIncrementalAlterConfigsRequest()
			res := kmsg.NewIncrementalAlterConfigsRequestResource()
			res.ResourceType = kmsg.ConfigResourceTypeBrokerLogger
			res.ResourceName = strconv.Itoa(n)
			cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			cfg.Name, cfg.Op, cfg.Value = l, kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("INFO")
			res.Configs = append(res.Configs, cfg)
			req.Resources = append(req.Resources, res)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			resp, err := req.RequestWith(ctx, cl.Broker(n))
			cancel()
			if err != nil {
				return nil, fmt.Errorf("node %d: %w", n, err)
			}
			for _, rr := range resp.Resources {
				if rr.ErrorCode != 0 && n == 1 {
					missing = append(missing, l)
				}
			}
		}
	}
	return missing, nil
}

// javaHash is Java's String.hashCode of an ASCII string, with which Kafka
// picks a transactional id's __transaction_state partition (and a group's
// __consumer_offsets partition): abs(hash) % partitions.
func javaHash(s string) int32 {
	var h int32
	for i := 0; i < len(s); i++ {
		h = 31*h + int32(s[i])
	}
	return h
}

// txnLogRecord is one record of a __transaction_state partition as a
// broker's own segment files hold it, replicated or not.
type txnLogRecord struct {
	Offset      int64
	LeaderEpoch int32 // of the batch
	TxnID       string
	ProducerID  int64
	Epoch       int16
	Status      int8
	Tombstone   bool
}

var txnStatus = []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

func (r txnLogRecord) String() string {
	if r.Tombstone {
		return fmt.Sprintf("offset %d (leader epoch %d): %s tombstone", r.Offset, r.LeaderEpoch, r.TxnID)
	}
	st := strconv.Itoa(int(r.Status))
	if int(r.Status) < len(txnStatus) && r.Status >= 0 {
		st = txnStatus[r.Status]
	}
	return fmt.Sprintf("offset %d (leader epoch %d): %s producer %d epoch %d %s", r.Offset, r.LeaderEpoch, r.TxnID, r.ProducerID, r.Epoch, st)
}

func txnRecords(recs []txnLogRecord, txnID string) string {
	var s []string
	for _, r := range recs {
		if r.TxnID == txnID {
			s = append(s, r.String())
		}
	}
	if len(s) == 0 {
		return "none"
	}
	return "\n  " + strings.Join(s, "\n  ")
}

// readTxnLog parses the segment files (*.log) of a __transaction_state
// partition's directory: uncompressed record batches (magic 2) whose
// keys are (version int16, transactional id string) and whose values
// begin (version int16, producer id int64, producer epoch int16,
// timeout int32, status int8).
func readTxnLog(dir string) ([]txnLogRecord, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, errors.New("no segment")
	}
	slices.Sort(files)
	be := binary.BigEndian
	var out []txnLogRecord
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			return out, err
		}
		for len(b) >= 61 {
			base := int64(be.Uint64(b[0:8]))
			blen := int(be.Uint32(b[8:12]))
			if blen < 49 || 12+blen > len(b) {
				break
			}
			batch := b[:12+blen]
			b = b[12+blen:]
			if batch[16] != 2 || be.Uint16(batch[21:23])&0x27 != 0 { // not magic 2, compressed or control
				continue
			}
			epoch := int32(be.Uint32(batch[12:16]))
			recs := batch[61:]
			for range int(be.Uint32(batch[57:61])) {
				l, k := binary.Varint(recs)
				if k <= 0 || int(l) > len(recs)-k {
					break
				}
				rec := recs[k : k+int(l)]
				recs = recs[k+int(l):]
				rec = rec[1:] // attributes
				var vals [2]int64
				for i := range vals {
					v, k := binary.Varint(rec)
					if k <= 0 {
						break
					}
					vals[i], rec = v, rec[k:]
				}
				field := func() []byte {
					n, k := binary.Varint(rec)
					if k <= 0 || n < 0 || int(n) > len(rec)-k {
						rec = rec[max(k, 0):]
						return nil
					}
					f := rec[k : k+int(n)]
					rec = rec[k+int(n):]
					return f
				}
				key, value := field(), field()
				if len(key) < 4 {
					continue
				}
				n := int(be.Uint16(key[2:4]))
				if 4+n > len(key) {
					continue
				}
				r := txnLogRecord{Offset: base + vals[1], LeaderEpoch: epoch, TxnID: string(key[4 : 4+n])}
				if len(value) < 17 {
					r.Tombstone = true
				} else {
					r.ProducerID = int64(be.Uint64(value[2:10]))
					r.Epoch = int16(be.Uint16(value[10:12]))
					r.Status = int8(value[16])
				}
				out = append(out, r)
			}
		}
	}
	return out, nil
}

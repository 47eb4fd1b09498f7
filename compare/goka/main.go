// Command goka is the goka v1.1.16 peer of `baton bench versus`: the
// wordcount of `baton run wordcount`, written as a goka user would write it.
// The contract it keeps is compare/README.md; the choices it makes are in
// compare/goka/README.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	"github.com/lovoo/goka/codec"
	"github.com/lovoo/goka/storage"
)

type config struct {
	brokers      []string
	appID        string
	instance     string
	input        string
	output       string
	stateDir     string
	replication  int
	recoverAhead bool
	retention    time.Duration
}

// usageError is a start-up refusal: one line on stderr, exit 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("goka", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	brokers := fs.String("brokers", "", "Kafka bootstrap brokers HOST:PORT[,HOST:PORT]")
	fs.StringVar(&c.appID, "app-id", "", "application id: goka group names and internal topic names derive from it")
	fs.StringVar(&c.instance, "instance", "", "name of this instance (status lines, client ids)")
	fs.StringVar(&c.input, "input", "", "input topic (lines of text)")
	fs.StringVar(&c.output, "output", "", "output topic (word -> count)")
	fs.StringVar(&c.stateDir, "state-dir", "", "directory of the LevelDB stores of the group table")
	standbys := fs.String("standbys", "0", "standby replicas: goka has none, only 0 is accepted")
	guarantee := fs.String("guarantee", "at-least-once", "processing guarantee: goka has only at-least-once")
	fs.IntVar(&c.replication, "replication", 0, "replication factor of the internal topics goka creates (0: number of brokers, at most 3)")
	fs.BoolVar(&c.recoverAhead, "recover-ahead", false, "goka.WithRecoverAhead: recover the group table of all partitions before joining the group")
	fs.DurationVar(&c.retention, "repartition-retention", 24*time.Hour, "retention.ms of the repartition topic when this instance creates it")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, usageError{"usage: goka --brokers HOST:PORT --app-id ID --instance NAME --input TOPIC --output TOPIC --state-dir DIR [--standbys 0] [--guarantee at-least-once] [--replication N] [--recover-ahead] [--repartition-retention D]"}
		}
		return c, usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return c, usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	for _, req := range []struct{ name, val string }{
		{"brokers", *brokers}, {"app-id", c.appID}, {"instance", c.instance},
		{"input", c.input}, {"output", c.output}, {"state-dir", c.stateDir},
	} {
		if strings.TrimSpace(req.val) == "" {
			return c, usageError{fmt.Sprintf("missing required flag --%s", req.name)}
		}
	}
	for _, b := range strings.Split(*brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			c.brokers = append(c.brokers, b)
		}
	}
	if len(c.brokers) == 0 {
		return c, usageError{fmt.Sprintf("invalid --brokers %q: no broker address", *brokers)}
	}
	switch n, err := strconv.Atoi(*standbys); {
	case err != nil || n < 0:
		return c, usageError{fmt.Sprintf("invalid --standbys %q: want 0", *standbys)}
	case n != 0:
		return c, usageError{fmt.Sprintf("--standbys %d is not supported: goka has no standby replicas, only --standbys 0", n)}
	}
	switch *guarantee {
	case "at-least-once":
	case "exactly-once":
		return c, usageError{"--guarantee exactly-once is not supported: goka has no transactions, only at-least-once"}
	default:
		return c, usageError{fmt.Sprintf("invalid --guarantee %q: want at-least-once", *guarantee)}
	}
	if c.replication < 0 {
		return c, usageError{fmt.Sprintf("invalid --replication %d: want 0 (auto) or more", c.replication)}
	}
	if c.retention <= 0 {
		return c, usageError{fmt.Sprintf("invalid --repartition-retention %s: want a positive duration", c.retention)}
	}
	return c, nil
}

// Names of goka's groups and of the internal topics, all after the app id.
func splitGroup(app string) goka.Group  { return goka.Group(app + "-split") }
func countGroup(app string) goka.Group  { return goka.Group(app + "-count") }
func wordsTopic(app string) goka.Stream { return goka.Stream(app + "-words") }
func countTable(app string) goka.Table  { return goka.GroupTable(countGroup(app)) }
func taskID(sub int, p int32) string    { return fmt.Sprintf("%d_%d", sub, p) }
func logf(format string, a ...any)      { fmt.Fprintf(os.Stderr, "goka-peer: "+format+"\n", a...) }

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	cfg, err := parseFlags(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}

	// The state dir is created when missing and locked for this process
	// before the cluster is contacted.
	if err := os.MkdirAll(cfg.stateDir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "--state-dir %s: %v\n", cfg.stateDir, err)
		return 1
	}
	unlock, err := lockDir(cfg.stateDir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "--state-dir %s: %v\n", cfg.stateDir, err)
		return 1
	}
	defer unlock()

	sc := saramaConfig()
	goka.ReplaceGlobalConfig(sc)

	tmc := goka.NewTopicManagerConfig()
	tmb := goka.TopicManagerBuilderWithConfig(sc, tmc)
	if err := prepareTopics(cfg, sc, tmc); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	var processed atomic.Int64
	split, count, err := newProcessors(cfg, tmb, &processed)
	if err != nil {
		fmt.Fprintf(os.Stderr, "goka: %v\n", oneLine(err))
		return 1
	}

	sigCtx, stopSignals := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stopSignals()
	ctx, cancel := context.WithCancel(sigCtx)
	defer cancel()

	type result struct {
		name string
		err  error
	}
	results := make(chan result, 2)
	for name, p := range map[string]*goka.Processor{"split": split, "count": count} {
		go func() { results <- result{name, p.Run(ctx)} }()
	}

	// Status lines keep coming while the processors stop.
	statusCtx, stopStatus := context.WithCancel(context.Background())
	statusDone := make(chan struct{})
	go printStatus(statusCtx, cfg.instance, split, count, &processed, statusDone)
	defer func() { stopStatus(); <-statusDone }()

	failed := false
	pending := 2
	select {
	case <-sigCtx.Done():
		logf("signal received, stopping the processors")
	case r := <-results:
		pending--
		if r.err != nil {
			logf("processor %s stopped: %v", r.name, oneLine(r.err))
		} else {
			logf("processor %s stopped", r.name)
		}
		failed = true
	}
	cancel()

	// goka's processors wait for pending emits, commit and leave the group.
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	for ; pending > 0; pending-- {
		select {
		case r := <-results:
			if r.err != nil {
				logf("processor %s stopped with error: %v", r.name, oneLine(r.err))
			}
		case <-deadline.C:
			logf("processors did not stop within 60s")
			return 1
		}
	}
	if failed && sigCtx.Err() == nil {
		return 1
	}
	logf("stopped")
	return 0
}

func saramaConfig() *sarama.Config {
	sc := goka.DefaultConfig()
	// goka's default protocol version (2.0) is older than what Apache Kafka
	// 4.x still speaks for some requests; speak a 4.0 client's versions.
	sc.Version = sarama.V4_0_0_0
	// goka starts streams at the newest offset when the group has no
	// committed offset; the wordcount must count every line (Kafka Streams'
	// default is earliest), so start at the oldest.
	sc.Consumer.Offsets.Initial = sarama.OffsetOldest
	// Output timestamps: see timestamp.go.
	sc.Producer.Interceptors = []sarama.ProducerInterceptor{timestampInterceptor{}}
	return sc
}

// prepareTopics creates the internal topics (and the output topic if it is
// missing) with the input's partition count, before goka checks them.
func prepareTopics(cfg config, sc *sarama.Config, tmc *goka.TopicManagerConfig) error {
	client, err := sarama.NewClient(cfg.brokers, sc)
	if err != nil {
		return fmt.Errorf("--brokers %s: cannot reach the cluster: %v", strings.Join(cfg.brokers, ","), oneLine(err))
	}
	nbrokers := len(client.Brokers())
	client.Close()

	rf := cfg.replication
	if rf == 0 {
		rf = min(nbrokers, 3)
	}
	tmc.Table.Replication = rf
	tmc.Stream.Replication = rf
	tmc.Stream.Retention = cfg.retention

	tm, err := goka.NewTopicManager(cfg.brokers, sc, tmc)
	if err != nil {
		return fmt.Errorf("--brokers %s: %v", strings.Join(cfg.brokers, ","), oneLine(err))
	}
	defer tm.Close()

	parts, err := tm.Partitions(cfg.input)
	if err != nil || len(parts) == 0 {
		return fmt.Errorf("--input %s: topic not found in the cluster", cfg.input)
	}
	n := len(parts)

	// Several instances start at once: when creation fails because another
	// one created the topic first, look again.
	ensure := func(topic string, create func() error) error {
		var err error
		for attempt := 0; attempt < 5; attempt++ {
			if err = create(); err == nil {
				return nil
			}
			time.Sleep(500 * time.Millisecond)
			if p, perr := tm.Partitions(topic); perr == nil && len(p) > 0 {
				return nil
			}
		}
		return fmt.Errorf("topic %s: %v", topic, oneLine(err))
	}
	words := string(wordsTopic(cfg.appID))
	if err := ensure(words, func() error { return tm.EnsureStreamExists(words, n) }); err != nil {
		return err
	}
	table := string(countTable(cfg.appID))
	if err := ensure(table, func() error { return tm.EnsureTableExists(table, n) }); err != nil {
		return err
	}
	if p, err := tm.Partitions(cfg.output); err != nil || len(p) == 0 {
		create := func() error {
			return tm.EnsureTopicExists(cfg.output, n, rf, map[string]string{"cleanup.policy": "compact"})
		}
		if err := ensure(cfg.output, create); err != nil {
			return fmt.Errorf("--output %s: %v", cfg.output, err)
		}
	}
	return nil
}

func newProcessors(cfg config, tmb goka.TopicManagerBuilder, processed *atomic.Int64) (*goka.Processor, *goka.Processor, error) {
	words := wordsTopic(cfg.appID)
	output := goka.Stream(cfg.output)

	// Subtopology 0: split each line into words and repartition by word.
	splitGraph := goka.DefineGroup(splitGroup(cfg.appID),
		goka.Input(goka.Stream(cfg.input), new(codec.String), func(ctx goka.Context, msg any) {
			line, _ := msg.(string)
			hdr := timestampHeaders(ctx.Timestamp())
			for _, w := range strings.Fields(line) {
				ctx.Emit(words, w, w, goka.WithCtxEmitHeaders(hdr))
			}
			processed.Add(1)
		}),
		goka.Output(words, new(codec.String)),
	)

	// Subtopology 1: count each word in the group table (LevelDB, goka's
	// default storage) and emit word -> count.
	countGraph := goka.DefineGroup(countGroup(cfg.appID),
		goka.Input(words, new(codec.String), func(ctx goka.Context, _ any) {
			var n int64
			if v := ctx.Value(); v != nil {
				n = v.(int64)
			}
			n++
			hdr := timestampHeaders(ctx.Timestamp())
			ctx.SetValue(n, goka.WithCtxEmitHeaders(hdr))
			ctx.Emit(output, ctx.Key(), strconv.FormatInt(n, 10), goka.WithCtxEmitHeaders(hdr))
		}),
		goka.Persist(new(codec.Int64)),
		goka.Output(output, new(codec.String)),
	)

	common := func(name string) []goka.ProcessorOption {
		opts := []goka.ProcessorOption{
			goka.WithHasher(newMurmur2Hasher),
			goka.WithTopicManagerBuilder(tmb),
			goka.WithClientID(fmt.Sprintf("%s-%s-%s", cfg.appID, cfg.instance, name)),
			goka.WithStorageBuilder(storage.DefaultBuilder(filepath.Join(cfg.stateDir, "leveldb"))),
		}
		return opts
	}
	split, err := goka.NewProcessor(cfg.brokers, splitGraph, common("split")...)
	if err != nil {
		return nil, nil, fmt.Errorf("split processor: %w", err)
	}
	countOpts := common("count")
	if cfg.recoverAhead {
		countOpts = append(countOpts, goka.WithRecoverAhead())
	}
	count, err := goka.NewProcessor(cfg.brokers, countGraph, countOpts...)
	if err != nil {
		return nil, nil, fmt.Errorf("count processor: %w", err)
	}
	return split, count, nil
}

// Status lines.

type status struct {
	Engine    string   `json:"engine"`
	Instance  string   `json:"instance"`
	TimeMs    int64    `json:"time_ms"`
	State     string   `json:"state"`
	Active    []string `json:"active"`
	Standby   []string `json:"standby"`
	Warmup    []string `json:"warmup"`
	Processed int64    `json:"processed"`
}

var procStateNames = map[goka.State]string{
	goka.ProcStateIdle:     "Idle",
	goka.ProcStateStarting: "Starting",
	goka.ProcStateSetup:    "Setup",
	goka.ProcStateRunning:  "Running",
	goka.ProcStateStopping: "Stopping",
	goka.ProcStateStopped:  "Stopped",
}

func stateName(s goka.State) string {
	if n, ok := procStateNames[s]; ok {
		return n
	}
	return fmt.Sprintf("State%d", int(s))
}

// combinedState is "Running" when both processors run; otherwise the state
// of the one that does not (the split's first).
func combinedState(split, count *goka.Processor) string {
	for _, p := range []*goka.Processor{split, count} {
		if s := p.StateReader().State(); s != goka.ProcStateRunning {
			return stateName(s)
		}
	}
	return stateName(goka.ProcStateRunning)
}

// partitions lists the partitions the processor holds a partition processor
// for right now (assigned; for the count, recovering or running).
func partitions(p *goka.Processor, sub int) []string {
	var ids []int32
	for part := range p.Stats().Group {
		ids = append(ids, part)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		out = append(out, taskID(sub, id))
	}
	return out
}

func printStatus(ctx context.Context, instance string, split, count *goka.Processor, processed *atomic.Int64, done chan<- struct{}) {
	defer close(done)
	enc := json.NewEncoder(os.Stdout)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		st := status{
			Engine:    "goka",
			Instance:  instance,
			TimeMs:    time.Now().UnixMilli(),
			State:     combinedState(split, count),
			Active:    append(partitions(split, 0), partitions(count, 1)...),
			Standby:   []string{},
			Warmup:    []string{},
			Processed: processed.Load(),
		}
		if err := enc.Encode(st); err != nil {
			logf("writing status: %v", err)
		}
	}
}

// lockDir takes an exclusive flock on DIR/.lock so that two instances do
// not share a state dir.
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errors.New("locked by another instance")
		}
		return nil, err
	}
	return func() { f.Close() }, nil
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

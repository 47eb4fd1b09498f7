package baton

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/counts"
	"github.com/baton-streams/baton/internal/kafkatest"
	"github.com/baton-streams/baton/internal/txncheck"
	"github.com/baton-streams/baton/topology"
)

// harness is one cluster (embedded, or Apache Kafka with BATON_KAFKA=real:
// see internal/kafkatest) with a wordcount application on it.
type harness struct {
	t       *testing.T
	tg      *kafkatest.Target
	brokers []string
	appID   string
	input   string
	output  string
	words   map[string]int64 // occurrences produced so far
	// wrote counts, per input partition, the lines prefill and the
	// flow wrote and the cluster acknowledged: beside the partition's
	// end offset, it tells input the cluster holds twice (or lines
	// written elsewhere) from records processed twice.
	wrote  map[int32]int64
	mu     sync.Mutex // guards events and plans
	events []Event
	plans  []PlanStatus // every plan a leader computed, as it computed it
	apps   sync.Map     // instance id -> *App, for the listener
	wmu    sync.Mutex   // guards words while a flow produces
	runs   []*running   // every instance started, for diagnostics
	prod   *kgo.Client
	rng    *rand.Rand
	// injected: words whose history is not 1..n (a test wrote their
	// counts into a changelog itself, or made their state start over):
	// only their last value is checked.
	injected map[string]bool
	// window, when set before the first start, makes the application a
	// windowed wordcount (windowedWordCount): each line is stamped with
	// clock, which moves on a millisecond a line, and words counts each
	// word per window, keyed as the output is (the word, then the
	// window's start).
	window time.Duration
	// copies, once checkCopies was called, holds the stores of the
	// tasks that started processing, to compare with their changelogs.
	copies *copyCheck
	clock  time.Time
	// build, when set, makes the application instead of wordcount.
	build func() (*topology.Topology, error)
}

// count adds one occurrence of word, in a line stamped ts, to the
// expected output.
func (h *harness) count(word string, ts time.Time) {
	if h.window > 0 {
		ms, size := ts.UnixMilli(), h.window.Milliseconds()
		start := ms - ms%size // windows align to the epoch (ts is after 1970)
		word = string(binary.BigEndian.AppendUint64([]byte(word), uint64(start)))
	}
	h.words[word]++
}

// stamp returns the timestamp of the next line written: the clock for a
// windowed harness, else none (the producer's time).
func (h *harness) stamp() time.Time {
	if h.window == 0 {
		return time.Time{}
	}
	if h.clock.IsZero() {
		// Recent: Apache Kafka deletes records older than the topic's
		// retention by their timestamps, output included.
		h.clock = time.Now().Truncate(time.Second)
	}
	ts := h.clock
	h.clock = h.clock.Add(time.Millisecond)
	return ts
}

// windowedWordCount is wordcount with its counts per word and tumbling
// window of event time: a window's count is keyed by the word and the
// window's start (topology.WindowedCodec). The grace period is long
// enough that no record of the tests is late, whatever the order the
// repartition topic mixes them in.
func windowedWordCount(appID, input, output string, size time.Duration) (*topology.Topology, error) {
	b := topology.NewBuilder(appID)
	lines := topology.FromTopic(b, input, topology.Bytes, topology.String)
	words := topology.FlatMapValues(lines, strings.Fields)
	byWord := topology.GroupBy(words, func(_ []byte, word string) string { return word }, topology.String, "words")
	w := topology.TumblingWindows(size).Grace(time.Hour)
	topology.WindowCount(topology.WindowedBy(byWord, w), "counts").ToStream().To(output)
	return b.Build()
}

// testTimings are the group timings of the tests' instances: a short
// session, so that a crash is noticed within seconds.
func testTimings() []Option {
	return []Option{WithSessionTimeout(2 * time.Second), WithHeartbeatInterval(100 * time.Millisecond), WithRebalanceTimeout(3 * time.Second)}
}

func newHarness(t *testing.T, partitions int32) *harness {
	t.Helper()
	return newHarnessOn(t, kafkatest.ForTest(t), partitions)
}

// bareHarness is a harness with names from name and no topics yet.
func bareHarness(t *testing.T, brokers []string, name func(string) string) *harness {
	return &harness{t: t, brokers: brokers, appID: name("wc"), input: name("lines"), output: name("counts"),
		words: map[string]int64{}, wrote: map[int32]int64{}, rng: rand.New(rand.NewPCG(1, 2))}
}

// newHarnessOn is newHarness on tg's cluster, with names unique to the
// test.
func newHarnessOn(t *testing.T, tg *kafkatest.Target, partitions int32) *harness {
	t.Helper()
	h := bareHarness(t, tg.Brokers, tg.Name)
	h.tg = tg
	tg.CreateTopic(t, h.input, partitions, false)
	tg.CreateTopic(t, h.output, partitions, true)
	h.prod = testProducer(t, h.brokers)
	return h
}

// testProducer is the client that writes a test's input, closed when the
// test ends.
func testProducer(t *testing.T, brokers []string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produce writes n lines of random words and remembers the counts.
func (h *harness) produce(n int) {
	h.t.Helper()
	if err := h.produceErr(n); err != nil {
		h.t.Fatal(err)
	}
}

// flowVocab is the words of the lines produceErr writes. They reach every
// partition of a 4- or 8-partition repartition topic, so any count task
// an instance is given gets records (TestFlowVocabReachesEveryTask): a
// test waiting for an instance to write output must not depend on which
// tasks the assignor happened to give it.
var flowVocab = []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu", "nu", "tau"}

// produceErr writes n lines of random words and adds the words of the
// lines the cluster acknowledged to the expected counts. A line whose
// write failed may or may not be in the input: the error says that the
// expected counts are unknown from then on.
func (h *harness) produceErr(n int) error {
	var recs []*kgo.Record
	for i := range n {
		var line []string
		for range 1 + h.rng.IntN(5) {
			line = append(line, flowVocab[h.rng.IntN(len(flowVocab))])
		}
		recs = append(recs, &kgo.Record{Topic: h.input, Key: []byte(strconv.Itoa(i)), Value: []byte(strings.Join(line, " ")), Timestamp: h.stamp()})
	}
	var failed []string
	for _, r := range h.prod.ProduceSync(context.Background(), recs...) {
		if r.Err != nil {
			failed = append(failed, fmt.Sprintf("%q: %v", r.Record.Value, r.Err))
			continue
		}
		h.wrote[r.Record.Partition]++
		for _, w := range strings.Fields(string(r.Record.Value)) {
			h.count(w, r.Record.Timestamp)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("writing input: %d of %d lines failed, so the expected counts are unknown from here on: %s", len(failed), n, strings.Join(failed, "; "))
	}
	return nil
}

func (h *harness) listener(e Event) {
	var plan *PlanStatus
	if e.Kind == EventLeader {
		// The leader stored its plan before it reported it.
		if app, ok := h.apps.Load(e.Instance); ok {
			if p := app.(*App).Status().Plan; p != nil && p.Generation == e.Generation {
				plan = p
			}
		}
	}
	h.mu.Lock()
	h.events = append(h.events, e)
	if plan != nil {
		h.plans = append(h.plans, *plan)
	}
	h.mu.Unlock()
}

func (h *harness) eventsOf(kind EventKind) []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Event
	for _, e := range h.events {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

type running struct {
	app    *App
	cancel context.CancelFunc
	done   chan error
}

func (h *harness) start(id string, opts ...Option) *running {
	h.t.Helper()
	top, err := topology.WordCount(h.appID, h.input, h.output)
	switch {
	case h.build != nil:
		top, err = h.build()
	case h.window > 0:
		top, err = windowedWordCount(h.appID, h.input, h.output, h.window)
	}
	if err != nil {
		h.t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	all := append([]Option{WithBrokers(h.brokers...), WithAppID(h.appID), WithInstanceID(id),
		WithStateDir(h.t.TempDir()), WithAcceptableLag(10), WithLogger(logger), WithListener(h.listener)}, testTimings()...)
	all = append(all, opts...)
	app, err := New(top, all...)
	if err != nil {
		h.t.Fatal(err)
	}
	h.apps.Store(id, app)
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{app: app, cancel: cancel, done: make(chan error, 1)}
	h.runs = append(h.runs, r)
	r.done = goRun(h.t, ctx, app)
	h.t.Cleanup(func() {
		cancel()
		app.Leave()
		select {
		case <-r.done:
		case <-time.After(30 * time.Second):
			h.t.Errorf("instance %s did not stop", id)
		}
	})
	return r
}

// stop drains an instance and waits for Run to return.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("instance %s: %v", r.app.InstanceID(), err)
		}
		r.done <- nil
	case <-time.After(70 * time.Second):
		t.Fatalf("instance %s did not drain in time", r.app.InstanceID())
	}
}

// counts reads the output topic (read_committed) and returns the last value
// per word.
func (h *harness) counts() map[string]int64 {
	h.t.Helper()
	out, err := counts.Read(context.Background(), h.brokers, h.output)
	if err != nil {
		h.t.Fatalf("reading output: %v", err)
	}
	return out
}

// waitExact waits until the output holds exactly the produced counts,
// then checks every word's whole committed history: 1, 2, ..., its
// count, each once. A duplicate that later counts caught up with fails
// the test. Words in h.injected (a test wrote their counts itself) are
// checked by their last value only.
func (h *harness) waitExact(timeout time.Duration) {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	var got map[string]int64
	for time.Now().Before(deadline) {
		got = h.counts()
		if fmt.Sprint(got) == fmt.Sprint(h.words) {
			h.checkHistories()
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	var diff []string
	for w, n := range h.words {
		if got[w] != n {
			diff = append(diff, fmt.Sprintf("%s: got %d, want %d", w, got[w], n))
		}
	}
	for w, n := range got {
		if _, ok := h.words[w]; !ok {
			diff = append(diff, fmt.Sprintf("%s: got %d, never produced", w, n))
		}
	}
	slices.Sort(diff)
	if len(diff) > 10 {
		diff = append(diff[:10], fmt.Sprintf("... %d more", len(diff)-10))
	}
	// How the short or long words' histories break tells records never
	// processed (a history 1..k that stops early) from a store that lost
	// or replayed writes (a value repeated or skipped).
	if seqs, err := counts.Sequences(context.Background(), h.brokers, h.output); err == nil {
		wrong := map[string]int64{}
		for w, n := range h.words {
			if got[w] != n {
				wrong[w] = n
			}
		}
		for w := range seqs {
			if _, ok := wrong[w]; !ok {
				delete(seqs, w)
			}
		}
		h.t.Logf("committed output histories of the wrong words:\n%s", strings.Join(counts.Exact(seqs, wrong, 10), "\n"))
		h.traceWords(wrong)
	}
	h.diagnose()
	h.t.Fatalf("counts never matched (%d words produced):\n%s", len(h.words), strings.Join(diff, "\n"))
}

// checkHistories fails the test unless every word's committed output
// values are exactly 1..its count (counts.Exact).
func (h *harness) checkHistories() {
	h.t.Helper()
	seqs, err := counts.Sequences(context.Background(), h.brokers, h.output)
	if err != nil {
		h.t.Fatalf("reading output: %v", err)
	}
	want := maps.Clone(h.words)
	for w := range h.injected {
		delete(want, w)
		delete(seqs, w)
	}
	if bad := counts.Exact(seqs, want, 10); bad != nil {
		h.diagnose()
		h.t.Fatalf("the committed output is not exactly 1..n per word (final counts are right):\n%s", strings.Join(bad, "\n"))
	}
}

// TestFlowVocabReachesEveryTask: each of the 4 or 8 count tasks the
// end-to-end tests run gets some of the flow's words.
func TestFlowVocabReachesEveryTask(t *testing.T) {
	for _, n := range []int32{4, 8} {
		reached := map[int32]bool{}
		for _, w := range flowVocab {
			reached[topology.Partition([]byte(w), n)] = true
		}
		if len(reached) != int(n) {
			t.Errorf("the flow's words reach %d of %d partitions: %v", len(reached), n, reached)
		}
	}
}

func TestWordCountTwoInstances(t *testing.T) {
	h := newHarness(t, 4)
	h.produce(500)
	a := h.start("a")
	b := h.start("b")
	h.waitExact(60 * time.Second)
	h.produce(300)
	h.waitExact(30 * time.Second)
	a.stop(t)
	h.produce(200)
	h.waitExact(30 * time.Second)
	b.stop(t)
}

// diagnose logs, before a test gives up waiting, what every instance it
// started reports and where the runtime's goroutines are.
func (h *harness) diagnose() {
	for _, r := range h.runs {
		var b strings.Builder
		st := r.app.Status()
		fmt.Fprintf(&b, " generation %d, polling %v, last poll %s ago;", st.Generation, st.Polling, time.Since(st.PolledAt).Round(time.Millisecond))
		for _, ts := range st.Tasks {
			fmt.Fprintf(&b, " %s=%s(processed %d, lag %d, waiting %d)", ts.ID, ts.Role, ts.Processed, ts.Lag, ts.Waiting)
		}
		h.t.Logf("instance %s:%s", r.app.InstanceID(), b.String())
	}
	h.logTopics()
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	var mine []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		// The runtime's goroutines, not the tests' own.
		if strings.Contains(g, "baton-streams/baton") && !strings.Contains(g, "testing.tRunner") {
			mine = append(mine, g)
		}
	}
	h.t.Logf("runtime goroutines:\n%s", strings.Join(mine, "\n\n"))
}

// logTopics logs, per partition of the input, output, changelog and
// repartition topic, the start and end offset, the last stable offset and any open transaction, and the
// group's committed input offsets: enough to tell work never done from
// work done but not yet readable.
func (h *harness) logTopics() {
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.brokers...))
	if err != nil {
		h.t.Logf("diagnostics: %v", err)
		return
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	topics := []string{h.input, h.output}
	if top, err := topology.WordCount(h.appID, h.input, h.output); err == nil {
		for _, sub := range top.Subtopologies() {
			for _, st := range sub.Stores {
				topics = append(topics, st.Changelog)
			}
			topics = append(topics, sub.Repartition...)
		}
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		h.t.Logf("diagnostics: start offsets: %v", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		h.t.Logf("diagnostics: end offsets: %v", err)
	}
	stable, err := adm.ListCommittedOffsets(ctx, topics...)
	if err != nil {
		h.t.Logf("diagnostics: last stable offsets: %v", err)
	}
	committed, err := adm.FetchOffsets(ctx, h.appID)
	if err != nil {
		h.t.Logf("diagnostics: committed offsets: %v", err)
	}
	open := map[string][]string{}
	set := kadm.TopicsSet{}
	for _, topic := range topics {
		set.Add(topic)
	}
	if prods, err := adm.DescribeProducers(ctx, set); err != nil {
		h.t.Logf("diagnostics: producers: %v", err)
	} else {
		prods.EachProducer(func(d kadm.DescribedProducer) {
			if d.CurrentTxnStartOffset >= 0 {
				k := fmt.Sprintf("%s[%d]", d.Topic, d.Partition)
				open[k] = append(open[k], fmt.Sprintf("producer %d epoch %d from offset %d", d.ProducerID, d.ProducerEpoch, d.CurrentTxnStartOffset))
			}
		})
	}
	ends.Each(func(o kadm.ListedOffset) {
		k := fmt.Sprintf("%s[%d]", o.Topic, o.Partition)
		line := fmt.Sprintf("%s: end %d", k, o.Offset)
		if so, ok := starts.Lookup(o.Topic, o.Partition); ok && so.Offset > 0 {
			line += fmt.Sprintf(", start %d", so.Offset)
		}
		if so, ok := stable.Lookup(o.Topic, o.Partition); ok {
			line += fmt.Sprintf(", stable %d", so.Offset)
		}
		if co, ok := committed.Lookup(o.Topic, o.Partition); ok {
			line += fmt.Sprintf(", committed %d", co.At)
		}
		if o.Topic == h.input {
			line += fmt.Sprintf(", lines the harness wrote %d", h.wrote[o.Partition])
		}
		if txns := open[k]; len(txns) > 0 {
			line += ", open: " + strings.Join(txns, "; ")
		}
		h.t.Log(line)
	})
	// A transaction committed in some partitions and aborted in others
	// was split by the brokers (seen when a broker is killed during
	// EndTxn and restarted at once): no client can make its counts exact.
	sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer scancel()
	splits, err := txncheck.ReadSplits(sctx, h.brokers, topics...)
	if err != nil {
		h.t.Logf("diagnostics: transaction markers: %v", err)
	}
	for _, s := range splits {
		h.t.Logf("the brokers split a transaction: %s", s)
	}
}

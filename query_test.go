package baton

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/faultnet"
	"github.com/baton-streams/baton/internal/query"
	"github.com/baton-streams/baton/topology"
)

// queried is an instance of a query test: its App behind an HTTP server
// at the endpoint it told the group, and a cut for its network.
type queried struct {
	r   *running
	srv *httptest.Server
	cut *faultnet.Cutter
}

func (h *harness) startQueried(id string, opts ...Option) *queried {
	var app atomic.Pointer[App]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := app.Load(); a != nil {
			a.QueryHandler().ServeHTTP(w, r)
			return
		}
		http.Error(w, `{"error": "starting"}`, http.StatusServiceUnavailable)
	}))
	h.t.Cleanup(srv.Close)
	cut := &faultnet.Cutter{}
	r := h.start(id, append([]Option{WithEndpoint(srv.Listener.Addr().String()), WithKafkaOptions(kgo.Dialer(cut.Dial))}, opts...)...)
	app.Store(r.app)
	return &queried{r: r, srv: srv, cut: cut}
}

// readLoad is clients reading a known set of keys, continuously, through
// the instances' HTTP endpoints, each passing back the offset it last saw
// of each task. It keeps every answer for the check against the
// changelogs.
type readLoad struct {
	mu        sync.Mutex
	endpoints []string
	phase     string
	answers   []query.Answer
	counts    map[string]*phaseCounts
	errs      []string
	back      []string // answers older than their client had seen
	cancel    context.CancelFunc
	done      sync.WaitGroup
}

type phaseCounts struct {
	answered, refused int
	unfinished        int // reads still waiting when the load stopped
	latencies         []time.Duration
	why               []string // the first refusals
}

func (l *readLoad) setPhase(p string) {
	l.mu.Lock()
	l.phase = p
	l.mu.Unlock()
}

func (l *readLoad) setEndpoints(e ...string) {
	l.mu.Lock()
	l.endpoints = e
	l.mu.Unlock()
}

func startReadLoad(t *testing.T, clients int, keys []string, b query.Bounds, endpoints ...string) *readLoad {
	ctx, cancel := context.WithCancel(context.Background())
	l := &readLoad{endpoints: endpoints, phase: "steady", counts: map[string]*phaseCounts{}, cancel: cancel}
	cl := &http.Client{}
	for c := range clients {
		l.done.Add(1)
		go func() {
			defer l.done.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			seen := map[string]int64{} // task -> highest offset answered
			for ctx.Err() == nil {
				key := keys[rng.IntN(len(keys))]
				l.mu.Lock()
				ep := l.endpoints[rng.IntN(len(l.endpoints))]
				l.mu.Unlock()
				task := topology.TaskID(1, topology.Partition([]byte(key), 4))
				bb := b
				bb.MinOffset = seen[task]
				began := time.Now()
				a, err := query.Ask(ctx, cl, ep, "counts", []byte(key), bb, false)
				took := time.Since(began)
				l.mu.Lock()
				pc := l.counts[l.phase]
				if pc == nil {
					pc = &phaseCounts{}
					l.counts[l.phase] = pc
				}
				if ctx.Err() != nil {
					if took > 100*time.Millisecond {
						pc.unfinished++ // waiting for a copy when the load stopped
					}
					l.mu.Unlock()
					return
				}
				switch {
				case err == nil:
					pc.answered++
					pc.latencies = append(pc.latencies, took)
					l.answers = append(l.answers, a)
					if a.Task != task {
						l.errs = append(l.errs, fmt.Sprintf("key %q answered by task %s, not %s", key, a.Task, task))
					}
					if a.Offset < seen[task] {
						l.back = append(l.back, fmt.Sprintf("key %q: %s on %s answered at offset %d after the client saw %d", key, a.Role, a.Instance, a.Offset, seen[task]))
					}
					seen[task] = max(seen[task], a.Offset)
				case errors.Is(err, query.ErrUnavailable):
					pc.refused++
					if len(pc.why) < 3 {
						pc.why = append(pc.why, err.Error())
					}
				default:
					// An instance just stopped or cut off: its endpoint
					// refuses connections until the client's list drops it.
					var se *query.StatusError
					if errors.As(err, &se) {
						l.errs = append(l.errs, fmt.Sprintf("key %q through %s: %v", key, ep, err))
					}
					pc.refused++
					if len(pc.why) < 3 {
						pc.why = append(pc.why, err.Error())
					}
				}
				l.mu.Unlock()
			}
		}()
	}
	t.Cleanup(l.stop)
	return l
}

func (l *readLoad) stop() {
	l.cancel()
	l.done.Wait()
}

// report logs the share answered and the latencies of each phase.
func (l *readLoad) report(t *testing.T) {
	for _, p := range []string{"steady", "scale-out", "drain", "kill"} {
		pc := l.counts[p]
		if pc == nil {
			continue
		}
		sort.Slice(pc.latencies, func(i, j int) bool { return pc.latencies[i] < pc.latencies[j] })
		p99 := time.Duration(0)
		if n := len(pc.latencies); n > 0 {
			p99 = pc.latencies[n*99/100]
		}
		total := pc.answered + pc.refused
		t.Logf("%-9s %6d reads: %.2f%% answered, %d refused, %d unfinished, p99 %v", p, total, 100*float64(pc.answered)/float64(max(total, 1)), pc.refused, pc.unfinished, p99.Round(time.Microsecond))
		for _, w := range pc.why {
			t.Logf("  refused: %s", w)
		}
	}
}

// checkAnswers compares every answer with the changelog of its task at
// the offset it says it reflects: the value is that of the key's last
// changelog record before the offset, or none.
func (h *harness) checkAnswers(answers []query.Answer) {
	h.t.Helper()
	type entry struct {
		offset int64
		value  string
		del    bool
	}
	changelog := topology.ChangelogTopic(h.appID, "counts")
	history := map[int32]map[string][]entry{}
	read := func(part int32) map[string][]entry {
		if m, ok := history[part]; ok {
			return m
		}
		m := map[string][]entry{}
		h.eachChangelogRecord(changelog, part, func(r *kgo.Record) {
			m[string(r.Key)] = append(m[string(r.Key)], entry{r.Offset, string(r.Value), r.Value == nil})
		})
		history[part] = m
		return m
	}
	wrong := 0
	for _, a := range answers {
		_, part, err := topology.ParseTaskID(a.Task)
		if err != nil {
			h.t.Fatalf("answer with task %q: %v", a.Task, err)
		}
		es := read(part)[string(a.Key)]
		i := sort.Search(len(es), func(i int) bool { return es[i].offset >= a.Offset })
		want, found := "", false
		if i > 0 && !es[i-1].del {
			want, found = es[i-1].value, true
		}
		if found != a.Found || want != string(a.Value) {
			wrong++
			if wrong <= 5 {
				h.t.Errorf("key %q: %s on %s answered found=%v %q at offset %d; the changelog says found=%v %q there",
					a.Key, a.Role, a.Instance, a.Found, a.Value, a.Offset, found, want)
			}
		}
	}
	if wrong > 0 {
		h.t.Errorf("%d of %d answers differ from their changelogs", wrong, len(answers))
	}
	h.t.Logf("checked %d answers against the changelogs", len(answers))
}

// eachChangelogRecord calls fn for every record of topic[part] up to its
// end as of now, read committed.
func (h *harness) eachChangelogRecord(topic string, part int32, fn func(*kgo.Record)) {
	h.t.Helper()
	end := h.endOffset(topic, part)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.brokers...), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {part: kgo.NewOffset().AtStart()}}))
	if err != nil {
		h.t.Fatal(err)
	}
	defer cl.Close()
	for next := int64(0); next < end; {
		f := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			h.t.Fatalf("reading %s[%d]: at %d of %d: %v", topic, part, next, end, ctx.Err())
		}
		f.EachRecord(func(r *kgo.Record) {
			next = r.Offset + 1
			if r.Attrs.IsControl() {
				return
			}
			fn(r)
		})
	}
}

func (h *harness) endOffset(topic string, part int32) int64 {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(h.prod).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		h.t.Fatalf("end offsets of %s: %v", topic, err)
	}
	o, _ := ends.Lookup(topic, part)
	return o.Offset
}

// TestQueriesThroughMoves reads the counts of a known set of words,
// continuously, from three clients through the instances' HTTP
// endpoints, each passing back the offset it last saw, through a
// scale-out, a drain and a kill with a standby: with a lag bound under
// at-least-once, and from the active only under exactly-once (reads
// then wait through handovers). Every read is answered or refused as
// unavailable; every answer is the value its task's changelog held at
// the offset it reports, and no client ever gets an offset older than
// one it saw.
func TestQueriesThroughMoves(t *testing.T) {
	for _, c := range []struct {
		name      string
		bounds    query.Bounds
		guarantee Guarantee
	}{
		{"max-lag=10", query.Bounds{MaxLag: 10, Timeout: 5 * time.Second}, AtLeastOnce},
		{"active-only/exactly-once", query.Bounds{MaxLag: -1, Timeout: 5 * time.Second}, ExactlyOnce},
	} {
		t.Run(c.name, func(t *testing.T) { testQueriesThroughMoves(t, c.bounds, c.guarantee) })
	}
}

func testQueriesThroughMoves(t *testing.T, bounds query.Bounds, g Guarantee) {
	h := newHarness(t, 4)
	h.prefill(2000)
	opts := []Option{WithStandbys(1), WithGuarantee(g)}
	a := h.startQueried("a", opts...)
	b := h.startQueried("b", opts...)
	h.eventually(30*time.Second, "two instances to share the tasks", func() bool { return balanced(a.r, b.r) })
	keys := append([]string(nil), flowVocab...)
	for i := range 50 {
		keys = append(keys, "w"+strconv.Itoa(i))
	}
	f := h.startFlow(20 * time.Millisecond)
	load := startReadLoad(t, 3, keys, bounds, a.srv.Listener.Addr().String(), b.srv.Listener.Addr().String())
	time.Sleep(2 * time.Second)

	load.setPhase("scale-out")
	c := h.startQueried("c", opts...)
	load.setEndpoints(a.srv.Listener.Addr().String(), b.srv.Listener.Addr().String(), c.srv.Listener.Addr().String())
	h.eventually(60*time.Second, "three instances to share the tasks", func() bool { return balanced(a.r, b.r, c.r) })
	time.Sleep(time.Second)

	load.setPhase("drain")
	load.setEndpoints(a.srv.Listener.Addr().String(), c.srv.Listener.Addr().String())
	b.r.stop(t)
	h.eventually(60*time.Second, "a and c to share the tasks", func() bool { return balanced(a.r, c.r) })
	time.Sleep(time.Second)

	load.setPhase("kill")
	load.setEndpoints(a.srv.Listener.Addr().String())
	c.cut.Cut()
	c.srv.Close()
	h.eventually(60*time.Second, "a to own every task", func() bool { _, all := owners(a.r); return all })
	time.Sleep(3 * time.Second)
	f.stop()
	load.stop()
	c.r.app.Leave()

	load.report(t)
	for _, e := range load.errs {
		t.Error(e)
	}
	for _, e := range load.back {
		t.Error(e)
	}
	if len(load.answers) == 0 {
		t.Fatal("no read was answered")
	}
	h.checkAnswers(load.answers)
}

// TestRangeAndWindowReads reads key ranges across every task of a
// wordcount, and the windows of one word of a windowed wordcount, from
// one instance of two, and compares them with what was written.
func TestRangeAndWindowReads(t *testing.T) {
	ctx := context.Background()
	t.Run("range", func(t *testing.T) {
		h := newHarness(t, 4)
		h.prefill(500)
		a := h.startQueried("a")
		b := h.startQueried("b")
		h.eventually(30*time.Second, "two instances to share the tasks", func() bool { return balanced(a.r, b.r) })
		h.waitExact(60 * time.Second)
		var ra RangeAnswer
		h.eventually(30*time.Second, "the stores to hold every count", func() bool {
			var err error
			ra, err = a.r.app.Range(ctx, "counts", nil, nil, QueryLimit(10_000))
			return err == nil && len(ra.Entries) == 500
		})
		if ra.Truncated || len(ra.Tasks) != 4 {
			t.Errorf("whole range: truncated %v, %d tasks answered, want 4", ra.Truncated, len(ra.Tasks))
		}
		instances := map[string]bool{}
		for _, c := range ra.Tasks {
			instances[c.Instance] = true
		}
		if !instances["a"] || !instances["b"] {
			t.Errorf("answered by %v, want a's and b's tasks", instances)
		}
		for i, e := range ra.Entries {
			if i > 0 && string(ra.Entries[i-1].Key) >= string(e.Key) {
				t.Fatalf("entries out of order at %d: %q then %q", i, ra.Entries[i-1].Key, e.Key)
			}
			if string(e.Value) != "1" || e.Task != topology.TaskID(1, topology.Partition(e.Key, 4)) {
				t.Errorf("%q = %q in task %s", e.Key, e.Value, e.Task)
			}
		}
		// w1, w10..w19, w100..w199: 111 keys in [w1, w2).
		ra, err := b.r.app.Range(ctx, "counts", []byte("w1"), []byte("w2"), QueryLimit(500), MinOffsets(ra.Offsets()))
		if err != nil || len(ra.Entries) != 111 || ra.Truncated {
			t.Errorf("[w1, w2): %d entries, truncated %v, %v; want 111", len(ra.Entries), ra.Truncated, err)
		}
		ra, err = b.r.app.Range(ctx, "counts", []byte("w1"), []byte("w2"), QueryLimit(5))
		if err != nil || len(ra.Entries) != 5 || !ra.Truncated || string(ra.Entries[4].Key) != "w102" {
			t.Errorf("[w1, w2) limit 5: %d entries ending %q, truncated %v, %v; want w1, w10, w100, w101, w102", len(ra.Entries), ra.Entries[len(ra.Entries)-1].Key, ra.Truncated, err)
		}
		if _, err := b.r.app.Range(ctx, "counts", nil, nil, QueryLimit(-1)); !errors.Is(err, ErrBadQuery) {
			t.Errorf("limit -1: %v, want ErrBadQuery", err)
		}
		// The metrics count the reads asked of each instance, and those
		// its own copies answered: a's four range reads answered, b's
		// active copies served a's reads of b's tasks.
		if n := testutil.ToFloat64(a.r.app.e.Metrics().Queries.WithLabelValues("range", "answered")); n < 1 {
			t.Errorf("a: baton_queries_total{kind=range,outcome=answered} = %v", n)
		}
		if n := testutil.ToFloat64(b.r.app.e.Metrics().QueryServed.WithLabelValues("active")); n < 1 {
			t.Errorf("b: baton_query_reads_served_total{role=active} = %v", n)
		}
		// A key-value store has no windows to read.
		if _, err := a.r.app.Windows(ctx, "counts", []byte("w1"), time.UnixMilli(0), time.Now()); !errors.Is(err, ErrBadQuery) ||
			!strings.Contains(err.Error(), "key-value store") {
			t.Errorf("windows of the key-value store counts: %v, want ErrBadQuery naming its kind", err)
		}
		if _, err := a.r.app.Range(ctx, "sums", nil, nil); !errors.Is(err, ErrNoStore) {
			t.Errorf("a range of store sums: %v, want ErrNoStore", err)
		}
		if n := testutil.ToFloat64(a.r.app.e.Metrics().Queries.WithLabelValues("range", "no_store")); n != 1 {
			t.Errorf("a: baton_queries_total{kind=range,outcome=no_store} = %v, want 1", n)
		}
	})
	t.Run("windows", func(t *testing.T) {
		h := newHarness(t, 4)
		h.window = 50 * time.Millisecond
		h.produce(400) // 400 lines 1 ms apart: eight windows
		a := h.startQueried("a")
		b := h.startQueried("b")
		h.eventually(30*time.Second, "two instances to share the tasks", func() bool { return balanced(a.r, b.r) })
		h.waitExact(60 * time.Second)
		for _, word := range flowVocab[:4] {
			want := map[int64]int64{}   // window start (ms) -> count
			for k, n := range h.words { // the word, then the window's start (ms, big-endian)
				if len(k) == len(word)+8 && strings.HasPrefix(k, word) {
					want[int64(binary.BigEndian.Uint64([]byte(k[len(word):])))] = n
				}
			}
			var ra RangeAnswer
			h.eventually(30*time.Second, "the windows of "+word, func() bool {
				var err error
				ra, err = a.r.app.Windows(ctx, "counts", []byte(word), time.UnixMilli(0), time.Now().Add(time.Hour))
				return err == nil && len(ra.Entries) == len(want)
			})
			for _, e := range ra.Entries {
				n, _ := strconv.ParseInt(string(e.Value), 10, 64)
				if string(e.Key) != word || want[e.WindowStart.UnixMilli()] != n {
					t.Errorf("%s: window %v = %q (key %q), want %d", word, e.WindowStart, e.Value, e.Key, want[e.WindowStart.UnixMilli()])
				}
			}
			// A window store's keys are not the words: a key read is
			// refused, naming what to read instead.
			if _, err := a.r.app.Get(ctx, "counts", []byte(word)); !errors.Is(err, ErrBadQuery) || !strings.Contains(err.Error(), "read its windows instead") {
				t.Errorf("a key read of the window store: %v, want ErrBadQuery pointing at its windows", err)
			}
			// A window range: the windows from the second one on.
			if len(ra.Entries) > 1 {
				from := ra.Entries[1].WindowStart
				part, err := b.r.app.Windows(ctx, "counts", []byte(word), from, time.Now().Add(time.Hour))
				if err != nil || len(part.Entries) != len(ra.Entries)-1 || !part.Entries[0].WindowStart.Equal(from) {
					t.Errorf("%s from %v: %d windows, %v; want %d starting there", word, from, len(part.Entries), err, len(ra.Entries)-1)
				}
			}
		}
	})
}

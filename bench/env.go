package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/cluster"
	"github.com/baton-streams/baton/internal/faultnet"
	"github.com/baton-streams/baton/internal/tick"
	"github.com/baton-streams/baton/topology"
)

// ErrTimeout is returned when a bench waited too long for the group to
// reach a state (balanced, counts complete).
var ErrTimeout = errors.New("bench: timed out")

// env is one embedded cluster with a wordcount input and output topic, a
// producer that remembers what it produced, and the instances started on it.
type env struct {
	c          *cluster.Cluster
	brokers    []string
	cl         *kgo.Client // producer and admin
	dir        string      // state directories live under it
	input      string
	output     string
	partitions int32
	// suffix makes names unique on a cluster the bench did not start.
	suffix string

	mu    sync.Mutex // guards words and insts
	words map[string]int64
	insts []*instance
}

func newEnv(ctx context.Context, partitions int32) (*env, error) {
	return newEnvOn(ctx, nil, partitions)
}

// newEnvOn is newEnv on the cluster at brokers, with topic names (and
// appName's application ids) unique to this run; with no brokers, on a
// new embedded cluster.
func newEnvOn(ctx context.Context, brokers []string, partitions int32) (*env, error) {
	dir, err := os.MkdirTemp("", "baton-bench-")
	if err != nil {
		return nil, err
	}
	e := &env{dir: dir, input: "lines", output: "counts", partitions: partitions, words: map[string]int64{}}
	if len(brokers) == 0 {
		if e.c, err = cluster.Start("127.0.0.1:0", 1); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		e.brokers = e.c.Addrs()
	} else {
		e.brokers = brokers
		e.suffix = "-" + filepath.Base(dir)
		e.input += e.suffix
		e.output += e.suffix
	}
	e.cl, err = kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(1<<20))
	if err != nil {
		e.close()
		return nil, err
	}
	adm := kadm.NewClient(e.cl)
	compact := map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}
	rf := int16(-1) // the cluster's default
	if e.c != nil {
		rf = 1
	}
	if _, err := adm.CreateTopic(ctx, partitions, rf, nil, e.input); err != nil {
		e.close()
		return nil, fmt.Errorf("bench: creating %s: %w", e.input, err)
	}
	if _, err := adm.CreateTopic(ctx, partitions, rf, compact, e.output); err != nil {
		e.close()
		return nil, fmt.Errorf("bench: creating %s: %w", e.output, err)
	}
	return e, nil
}

// close stops every instance still running, then the cluster.
func (e *env) close() {
	e.mu.Lock()
	insts := append([]*instance(nil), e.insts...)
	e.mu.Unlock()
	for _, in := range insts {
		in.kill()
	}
	if e.cl != nil {
		if e.c == nil {
			// Topics on a cluster the bench did not start go with it,
			// the applications' internal ones too (their names carry
			// the suffix).
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			adm := kadm.NewClient(e.cl)
			if listed, err := adm.ListTopics(ctx); err == nil {
				var mine []string
				for _, name := range listed.Names() {
					if strings.Contains(name, e.suffix) {
						mine = append(mine, name)
					}
				}
				adm.DeleteTopics(ctx, mine...)
			}
			cancel()
		}
		e.cl.Close()
	}
	if e.c != nil {
		e.c.Close()
	}
	os.RemoveAll(e.dir)
}

// prefill produces n lines of one distinct word each, so that the count
// tasks hold n keys of state between them.
// newPrefilledEnv is newEnv with keys distinct words already counted into
// the input (see prefill).
func newPrefilledEnv(ctx context.Context, brokers []string, partitions int32, keys int) (*env, error) {
	e, err := newEnvOn(ctx, brokers, partitions)
	if err != nil {
		return nil, err
	}
	if err := e.prefill(ctx, keys); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

func (e *env) prefill(ctx context.Context, n int) error {
	const chunk = 20000
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		recs := make([]*kgo.Record, 0, hi-lo)
		e.mu.Lock()
		for i := lo; i < hi; i++ {
			w := "k" + strconv.Itoa(i)
			e.words[w]++
			recs = append(recs, &kgo.Record{Topic: e.input, Key: []byte(w), Value: []byte(w)})
		}
		e.mu.Unlock()
		if err := e.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return fmt.Errorf("bench: prefilling %s: %w", e.input, err)
		}
	}
	return nil
}

// vocab is the common words of the steady flow; each line also carries
// one of the prefilled keys, so the flow updates real state everywhere.
var vocab = strings.Fields("stream state task learner standby active instance worker kafka baton group plan move warm cold handover")

// flow produces lines at a steady rate until its context is done.
type flow struct {
	cancel   context.CancelFunc
	done     chan error
	produced atomic.Int64
}

// startFlow produces rate lines per second in ticks of 20ms; keys cycles
// through the prefilled keys (0: only common words).
func (e *env) startFlow(rate, keys int) *flow {
	ctx, cancel := context.WithCancel(context.Background())
	f := &flow{cancel: cancel, done: make(chan error, 1)}
	const every = 20 * time.Millisecond
	go func() {
		start := time.Now()
		n := 0
		f.done <- tick.Every(ctx, every, func() error {
			due := int(time.Since(start).Seconds()*float64(rate)) - n
			if due <= 0 {
				return nil
			}
			recs := make([]*kgo.Record, 0, due)
			e.mu.Lock()
			for range due {
				line := []string{vocab[n%len(vocab)], vocab[(n*7)%len(vocab)]}
				if keys > 0 {
					line = append(line, "k"+strconv.Itoa((n*7919)%keys))
				}
				for _, w := range line {
					e.words[w]++
				}
				// Keyed, so that lines spread evenly over the partitions
				// (unkeyed records stick to one partition per batch).
				recs = append(recs, &kgo.Record{Topic: e.input, Key: []byte(strconv.Itoa(n)), Value: []byte(strings.Join(line, " "))})
				n++
			}
			e.mu.Unlock()
			if err := e.cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				return fmt.Errorf("bench: producing: %w", err)
			}
			f.produced.Add(int64(len(recs)))
			return nil
		})
	}()
	return f
}

func (f *flow) stop() error {
	f.cancel()
	return <-f.done
}

// instance is one running App.
type instance struct {
	id     string
	app    *baton.App
	cancel context.CancelFunc
	done   chan error
	cut    *faultnet.Cutter
	reqs   *requestCounter

	stopped atomic.Bool
	err     error // Run's result once done is drained
}

// instanceConfig is what varies between the instances of a bench.
type instanceConfig struct {
	appID     string
	id        string
	opts      []baton.Option
	listener  baton.Listener
	countReqs bool
	// build, when set, makes the application instead of wordcount.
	build func(appID, input, output string) (*topology.Topology, error)
}

// start starts an instance of wordcount (or of ic.build's application)
// with Pebble state in its own directory; its connections can be cut
// (crash) and its requests counted.
func (e *env) start(ic instanceConfig) (*instance, error) {
	build := topology.WordCount
	if ic.build != nil {
		build = ic.build
	}
	top, err := build(ic.appID, e.input, e.output)
	if err != nil {
		return nil, err
	}
	in := &instance{id: ic.id, cut: &faultnet.Cutter{}, reqs: &requestCounter{}, done: make(chan error, 1)}
	kopts := []kgo.Opt{kgo.Dialer(in.cut.Dial)}
	if ic.countReqs {
		kopts = append(kopts, kgo.WithHooks(in.reqs))
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	opts := []baton.Option{baton.WithBrokers(e.brokers...), baton.WithAppID(ic.appID), baton.WithInstanceID(ic.id),
		baton.WithStateDir(filepath.Join(e.dir, ic.appID, ic.id)), baton.WithLogger(quiet),
		baton.WithKafkaOptions(kopts...)}
	if ic.listener != nil {
		opts = append(opts, baton.WithListener(ic.listener))
	}
	app, err := baton.New(top, append(opts, ic.opts...)...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	in.app, in.cancel = app, cancel
	e.mu.Lock()
	e.insts = append(e.insts, in)
	e.mu.Unlock()
	go func() { in.done <- app.Run(ctx) }()
	return in, nil
}

// drain cancels the instance's Run context (a graceful stop: its tasks
// move to warm copies first) without waiting for Run to return.
func (in *instance) drain() { in.cancel() }

// wait waits for Run to return, up to timeout.
func (in *instance) wait(timeout time.Duration) error {
	if in.stopped.Load() {
		return in.err
	}
	select {
	case err := <-in.done:
		in.err = err
		in.stopped.Store(true)
		return err
	case <-time.After(timeout):
		return fmt.Errorf("%w: instance %s did not stop within %v", ErrTimeout, in.id, timeout)
	}
}

// running reports whether Run has not returned yet.
func (in *instance) running() bool {
	if in.stopped.Load() {
		return false
	}
	select {
	case err := <-in.done:
		in.err = err
		in.stopped.Store(true)
		return false
	default:
		return true
	}
}

// crash cuts the instance's connections: it stops heartbeating and
// committing as if the process died. Its Run keeps going until kill.
func (in *instance) crash() { in.cut.Cut() }

// kill stops the instance at once, without draining.
func (in *instance) kill() {
	in.cancel()
	in.app.Leave()
	_ = in.wait(30 * time.Second)
}

// Kafka request keys of the group coordinator's protocol.
const (
	keyOffsetCommit    = 8
	keyOffsetFetch     = 9
	keyFindCoordinator = 10
	keyJoinGroup       = 11
	keyHeartbeat       = 12
	keyLeaveGroup      = 13
	keySyncGroup       = 14
)

// requestCounter counts the group-coordinator requests a client writes.
type requestCounter struct {
	heartbeats  atomic.Int64
	coordinator atomic.Int64 // heartbeats included
}

// OnBrokerWrite implements kgo.HookBrokerWrite.
func (r *requestCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		return
	}
	switch key {
	case keyHeartbeat:
		r.heartbeats.Add(1)
		r.coordinator.Add(1)
	case keyOffsetCommit, keyOffsetFetch, keyFindCoordinator, keyJoinGroup, keyLeaveGroup, keySyncGroup:
		r.coordinator.Add(1)
	}
}

// verify waits until the output topic holds, for every produced word, at
// least the count produced (at-least-once: a crash may replay). It returns
// the number of words checked and of words counted more than produced.
func (e *env) verify(ctx context.Context, timeout time.Duration) (words, over int, err error) {
	deadline := time.Now().Add(timeout)
	got := map[string]int64{}
	offsets := map[int32]int64{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.ConsumeTopics(e.output),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		return 0, 0, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for {
		// Read on from where the last pass stopped, up to the current end.
		ends, err := adm.ListEndOffsets(ctx, e.output)
		if err != nil {
			return 0, 0, err
		}
		want := map[int32]int64{}
		ends.Each(func(o kadm.ListedOffset) {
			if o.Offset > offsets[o.Partition] {
				want[o.Partition] = o.Offset
			}
		})
		rctx, cancel := context.WithDeadline(ctx, deadline)
		for len(want) > 0 {
			f := cl.PollFetches(rctx)
			if rctx.Err() != nil {
				cancel()
				return 0, 0, fmt.Errorf("%w reading %s", ErrTimeout, e.output)
			}
			f.EachRecord(func(r *kgo.Record) {
				n, _ := strconv.ParseInt(string(r.Value), 10, 64)
				got[string(r.Key)] = n
				offsets[r.Partition] = r.Offset + 1
				if r.Offset+1 >= want[r.Partition] {
					delete(want, r.Partition)
				}
			})
		}
		cancel()
		e.mu.Lock()
		low := ""
		words, over = len(e.words), 0
		for w, n := range e.words {
			switch {
			case got[w] < n:
				low = fmt.Sprintf("%s: %d < %d produced", w, got[w], n)
			case got[w] > n:
				over++
			}
		}
		e.mu.Unlock()
		if low == "" {
			return words, over, nil
		}
		if time.Now().After(deadline) {
			return 0, 0, fmt.Errorf("%w: a count is below its occurrences: %s", ErrTimeout, low)
		}
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// waitFor polls cond every 20ms until it holds or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func() bool) error {
	switch {
	case tick.Until(ctx, timeout, 20*time.Millisecond, cond):
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return fmt.Errorf("%w after %v waiting for %s", ErrTimeout, timeout, what)
}

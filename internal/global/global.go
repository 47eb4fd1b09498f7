// Package global keeps an App's global stores (topology.FromGlobalTopic):
// one state.Store per global store, filled from every partition of its
// topic before the App joins its group (Start, on the caller's
// goroutine), then kept up to date by a reader goroutine of its own until
// Stop. Tasks read the stores (Store) from their workers; Status is safe
// from any goroutine.
package global

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/errs"
	"github.com/baton-streams/baton/internal/topics"
	"github.com/baton-streams/baton/state"
	"github.com/baton-streams/baton/topology"
)

// A global store lives in <state-dir>/.global/<store> (state.OpenGlobal).
// Inside the state.Store, a record of the topic with key k is stored
// under 0x01 k, and the next offset to read of partition p under 0x00
// followed by p (4 bytes, big-endian), as 8 bytes big-endian. The records
// of one fetch and the partitions' new offsets go in one Apply, so after
// a crash the store holds exactly the records before the offsets it
// holds, partition by partition, and a restart reads only what it lacks.
// The store's own checkpoint is the sum of those offsets: it only grows,
// as Apply requires.
const (
	globalOffsetPrefix byte = 0x00
	globalDataPrefix   byte = 0x01
)

// Status is one global store as the App's Status reports it.
type Status struct {
	Name  string `json:"name"`
	Topic string `json:"topic"`
	// Ready is true once the store has read its topic up to the end
	// offsets listed when Run started; no task processes before.
	Ready bool `json:"ready"`
	// Lag is the records of the topic the store has not read: each
	// partition's end offset, as last fetched, minus the store's offset,
	// summed over the partitions.
	Lag int64 `json:"lag"`
	// Read is the records this Run applied to the store (tombstones
	// included, transaction markers not).
	Read int64 `json:"read"`
}

// Config is what the global stores need from the App's configuration.
type Config struct {
	AppID, InstanceID string
	Brokers           []string
	// ClientOpts are the options of the reader's client, besides the
	// brokers; the reader reads read_committed.
	ClientOpts []kgo.Opt
	StateDir   string
	Memory     bool // keep the stores in memory (no StateDir)
	StoreOpts  []state.Option
	Registerer prometheus.Registerer // nil: no metrics registered
	Log        *slog.Logger
}

// Stores are the App's global stores and their reader.
type Stores struct {
	cfg    Config
	admin  *kadm.Client // Start's
	stores []*globalStore
	byName map[string]*globalStore
	lag    *prometheus.GaugeVec

	cl      *kgo.Client
	lastErr map[topics.Partition]string // the last fetch error logged, per partition (reader only)
	cancel  context.CancelFunc
	done    chan struct{} // closed when the reader ends

	// failed is closed once err is set: the reader stopped on an error
	// the App must stop with.
	failOnce sync.Once
	err      error
	failed   chan struct{}
}

// globalStore is one global store.
type globalStore struct {
	spec topology.GlobalStoreSpec
	st   state.Store

	// next is the next offset to read per partition, and ends the end
	// offsets as last listed or fetched: the reader's own once it runs
	// (bootstrap's before).
	next map[int32]int64
	ends map[int32]int64
	// target is what start reads up to: each partition's end, as of
	// start (its last stable offset: the topic is read read_committed).
	target map[int32]int64

	ready atomic.Bool
	lag   atomic.Int64
	read  atomic.Int64
}

// New prepares the global stores of specs (nothing is opened until
// Start). A topology with global stores needs a state directory, as a
// stateful one does.
func New(specs []topology.GlobalStoreSpec, cfg Config) (*Stores, error) {
	g := &Stores{cfg: cfg, byName: map[string]*globalStore{}, lastErr: map[topics.Partition]string{}, failed: make(chan struct{})}
	for _, spec := range specs {
		if _, dup := g.byName[spec.Name]; dup {
			return nil, fmt.Errorf("%w: global store %q: made twice", errs.ErrConfig, spec.Name)
		}
		gs := &globalStore{spec: spec}
		g.stores = append(g.stores, gs)
		g.byName[spec.Name] = gs
	}
	if len(g.stores) > 0 && cfg.StateDir == "" && !cfg.Memory {
		return nil, fmt.Errorf("%w: state dir: required for a topology with global stores", errs.ErrConfig)
	}
	g.lag = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "baton_global_store_lag_records",
		Help:        "Records of a global store's topic the store has not read yet, summed over its partitions, by store.",
		ConstLabels: prometheus.Labels{"app_id": cfg.AppID, "instance": cfg.InstanceID}}, []string{"store"})
	if r := cfg.Registerer; r != nil && len(g.stores) > 0 {
		_ = r.Register(g.lag)
	}
	return g, nil
}

// Store returns the read-only view of a global store, or nil.
func (g *Stores) Store(name string) topology.Store {
	if g == nil {
		return nil
	}
	gs, ok := g.byName[name]
	if !ok || gs.st == nil {
		return nil
	}
	return globalView{gs}
}

// Status reports the global stores.
func (g *Stores) Status() []Status {
	if g == nil || len(g.stores) == 0 {
		return nil
	}
	out := make([]Status, 0, len(g.stores))
	for _, gs := range g.stores {
		out = append(out, Status{Name: gs.spec.Name, Topic: gs.spec.Topic, Ready: gs.ready.Load(), Lag: gs.lag.Load(), Read: gs.read.Load()})
	}
	return out
}

func (g *Stores) fail(err error) {
	g.failOnce.Do(func() {
		g.err = err
		close(g.failed)
	})
}

// Watch stops the member with the reader's error, if it fails while the
// member runs. It returns when the member's run context ends.
func (g *Stores) Watch(runCtx context.Context, stop context.CancelCauseFunc) {
	if g == nil || len(g.stores) == 0 {
		return
	}
	select {
	case <-runCtx.Done():
	case <-g.failed:
		stop(g.err)
	}
}

// Start opens the global stores and reads their topics up to the end
// offsets they have now, then starts the reader that keeps them up to
// date. It returns an error naming the topic if one does not exist; a
// topic that is not compacted is logged as a warning. If ctx ends first,
// it returns ctx's error.
func (g *Stores) Start(ctx context.Context, admin *kadm.Client) error {
	if len(g.stores) == 0 {
		return nil
	}
	g.admin = admin
	log := g.cfg.Log
	topics := make([]string, 0, len(g.stores))
	for _, gs := range g.stores {
		topics = append(topics, gs.spec.Topic)
	}
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	details, err := admin.ListTopics(lctx, topics...)
	if err != nil {
		return fmt.Errorf("baton: metadata of global store topics %s: %w", strings.Join(topics, ","), err)
	}
	parts := map[string]int32{}
	for _, gs := range g.stores {
		d, ok := details[gs.spec.Topic]
		if !ok || d.Err != nil || len(d.Partitions) == 0 {
			why := "it does not exist"
			if ok && d.Err != nil && !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
				why = d.Err.Error()
			}
			return fmt.Errorf("baton: global store %s: topic %s: %s; create it (compacted) before starting the application", gs.spec.Name, gs.spec.Topic, why)
		}
		parts[gs.spec.Topic] = int32(len(d.Partitions))
	}
	g.warnUncompacted(lctx, topics)
	if err := g.open(ctx, parts); err != nil {
		g.closeStores()
		return err
	}
	offsets := map[string]map[int32]kgo.Offset{}
	for _, gs := range g.stores {
		offsets[gs.spec.Topic] = map[int32]kgo.Offset{}
		for p, o := range gs.next {
			offsets[gs.spec.Topic][p] = kgo.NewOffset().At(o)
		}
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(g.cfg.Brokers...),
		kgo.FetchMaxWait(100 * time.Millisecond),
	}, append(g.cfg.ClientOpts, kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()))...)...)
	if err != nil {
		g.closeStores()
		return fmt.Errorf("%w: %v", errs.ErrConfig, err)
	}
	g.cl = cl
	cl.AddConsumePartitions(offsets)
	began := time.Now()
	for _, gs := range g.stores {
		log.Info("reading global store topic", "store", gs.spec.Name, "topic", gs.spec.Topic, "lag", gs.lag.Load())
	}
	var b state.Batch
	for !g.caughtUp() {
		if err := g.poll(ctx, &b); err != nil {
			g.Stop()
			return err
		}
		if ctx.Err() != nil {
			g.Stop()
			return ctx.Err()
		}
	}
	for _, gs := range g.stores {
		gs.ready.Store(true)
		log.Info("global store ready", "store", gs.spec.Name, "topic", gs.spec.Topic, "read", gs.read.Load(), "took", time.Since(began).Round(time.Millisecond))
	}
	rctx, rcancel := context.WithCancel(context.Background())
	g.cancel, g.done = rcancel, make(chan struct{})
	go g.run(rctx, &b)
	return nil
}

// warnUncompacted logs a warning for each topic whose cleanup policy is
// not compact: records its retention deletes are missing from the stores
// of instances that read the topic afterwards, so instances would hold
// different tables. It is not an error: the topic is not baton's, and
// one that keeps every record forever (retention.ms=-1) works.
func (g *Stores) warnUncompacted(ctx context.Context, topics []string) {
	rcs, err := g.admin.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		g.cfg.Log.Warn("describing the configs of global store topics; their cleanup policy is not checked", "topics", topics, "err", err)
		return
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			g.cfg.Log.Warn("describing the configs of a global store topic; its cleanup policy is not checked", "topic", rc.Name, "err", rc.Err)
			continue
		}
		policy := "delete" // Kafka's default
		for _, c := range rc.Configs {
			if c.Key == "cleanup.policy" && c.Value != nil {
				policy = *c.Value
			}
		}
		if !slices.Contains(strings.Split(strings.ReplaceAll(policy, " ", ""), ","), "compact") {
			g.cfg.Log.Warn("global store topic is not compacted: records its retention deletes are missing from the global stores of instances that read it afterwards; set cleanup.policy=compact",
				"topic", rc.Name, "cleanup.policy", policy)
		}
	}
}

// open opens each store, reads its partitions' offsets and wipes the
// stores whose offsets the topic cannot continue: past a partition's end
// (the topic was deleted and created again, or the state is another
// cluster's), before its start (records the store lacks are gone), or of
// a partition the topic no longer has.
func (g *Stores) open(ctx context.Context, parts map[string]int32) error {
	cfg, adm := g.cfg, g.admin
	for _, gs := range g.stores {
		var err error
		if cfg.Memory {
			gs.st = state.NewMemory(gs.spec.Name)
		} else if gs.st, err = state.OpenGlobal(cfg.StateDir, gs.spec.Name, cfg.Log, cfg.StoreOpts...); err != nil {
			return fmt.Errorf("baton: global store %s: %w", gs.spec.Name, err)
		}
		if gs.next, err = readGlobalOffsets(gs.st); err != nil {
			return fmt.Errorf("baton: global store %s: %w", gs.spec.Name, err)
		}
	}
	topics := slices.Collect(maps.Keys(parts))
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	starts, err := adm.ListStartOffsets(lctx, topics...)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return fmt.Errorf("baton: start offsets of global store topics %s: %w", strings.Join(topics, ","), err)
	}
	ends, err := adm.ListEndOffsets(lctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("baton: end offsets of global store topics %s: %w", strings.Join(topics, ","), err)
	}
	stable, err := adm.ListCommittedOffsets(lctx, topics...)
	if err == nil {
		err = stable.Error()
	}
	if err != nil {
		return fmt.Errorf("baton: last stable offsets of global store topics %s: %w", strings.Join(topics, ","), err)
	}
	for _, gs := range g.stores {
		topic, n := gs.spec.Topic, parts[gs.spec.Topic]
		why := ""
		for p, next := range gs.next {
			s, sok := starts.Lookup(topic, p)
			e, eok := ends.Lookup(topic, p)
			switch {
			case p >= n || !sok || !eok:
				why = fmt.Sprintf("it holds partition %d, which the topic does not have", p)
			case next > e.Offset:
				why = fmt.Sprintf("its offset %d of partition %d is past the partition's end %d (the topic was created again, or the state is another cluster's)", next, p, e.Offset)
			case next < s.Offset:
				why = fmt.Sprintf("its offset %d of partition %d is before the partition's start %d: records it lacks are gone", next, p, s.Offset)
			}
			if why != "" {
				break
			}
		}
		if why != "" {
			cfg.Log.Warn("global store cannot continue from its offsets; wiping it and reading its topic again", "store", gs.spec.Name, "topic", topic, "why", why)
			if err := gs.st.Wipe(); err != nil {
				return fmt.Errorf("baton: global store %s: wiping: %w", gs.spec.Name, err)
			}
			gs.next = map[int32]int64{}
		}
		gs.ends, gs.target = map[int32]int64{}, map[int32]int64{}
		lag := int64(0)
		for p := range n {
			s, _ := starts.Lookup(topic, p)
			e, _ := ends.Lookup(topic, p)
			ls, _ := stable.Lookup(topic, p)
			// A new store starts at the partition's start: the records
			// before are gone.
			gs.next[p] = max(gs.next[p], s.Offset)
			gs.ends[p], gs.target[p] = e.Offset, ls.Offset
			lag += e.Offset - gs.next[p]
		}
		gs.setLag(g, lag)
	}
	return nil
}

// readGlobalOffsets reads the partitions' offsets kept in st.
func readGlobalOffsets(st state.Store) (map[int32]int64, error) {
	out := map[int32]int64{}
	err := st.Iterate([]byte{globalOffsetPrefix}, []byte{globalDataPrefix}, func(k, v []byte) error {
		if len(k) != 5 || len(v) != 8 || int64(binary.BigEndian.Uint64(v)) < 0 {
			return fmt.Errorf("unreadable partition offset record %x=%x", k, v)
		}
		out[int32(binary.BigEndian.Uint32(k[1:]))] = int64(binary.BigEndian.Uint64(v))
		return nil
	})
	return out, err
}

func globalOffsetKey(p int32) []byte {
	return binary.BigEndian.AppendUint32([]byte{globalOffsetPrefix}, uint32(p))
}

func (gs *globalStore) setLag(g *Stores, lag int64) {
	gs.lag.Store(lag)
	g.lag.WithLabelValues(gs.spec.Name).Set(float64(lag))
}

// caughtUp reports whether every store has read its partitions up to
// the ends listed at start.
func (g *Stores) caughtUp() bool {
	for _, gs := range g.stores {
		for p, e := range gs.target {
			if gs.next[p] < e {
				return false
			}
		}
	}
	return true
}

// run is the reader's goroutine: it applies what the topics get until
// ctx ends.
func (g *Stores) run(ctx context.Context, b *state.Batch) {
	defer close(g.done)
	for ctx.Err() == nil {
		if err := g.poll(ctx, b); err != nil {
			g.cfg.Log.Error("global store reader stopped", "err", err)
			g.fail(err)
			return
		}
	}
}

// poll takes one fetch and applies it: each store's records and its
// partitions' new offsets in one Apply.
func (g *Stores) poll(ctx context.Context, b *state.Batch) error {
	f := g.cl.PollFetches(ctx)
	if ctx.Err() != nil {
		return nil
	}
	byTopic := map[string][]kgo.FetchTopicPartition{}
	var ferr error
	f.EachPartition(func(p kgo.FetchTopicPartition) {
		if p.Err != nil {
			if errors.Is(p.Err, context.Canceled) || errors.Is(p.Err, context.DeadlineExceeded) {
				return
			}
			if errors.Is(p.Err, kerr.OffsetOutOfRange) {
				if ferr == nil {
					ferr = fmt.Errorf("baton: global store topic %s[%d]: %w: records the store lacks are gone (deleted, or the topic was created again); restart the instance to read the topic again from scratch", p.Topic, p.Partition, p.Err)
				}
				return
			}
			if tp := (topics.Partition{Topic: p.Topic, Part: p.Partition}); g.lastErr[tp] != p.Err.Error() {
				g.lastErr[tp] = p.Err.Error() // the client retries: log each error once
				g.cfg.Log.Warn("fetching a global store topic", "topic", p.Topic, "partition", p.Partition, "err", p.Err)
			}
		}
		byTopic[p.Topic] = append(byTopic[p.Topic], p)
	})
	if ferr != nil {
		return ferr
	}
	for _, gs := range g.stores {
		if ps := byTopic[gs.spec.Topic]; len(ps) > 0 {
			if err := gs.apply(g, b, ps); err != nil {
				return err
			}
		}
	}
	return nil
}

// apply applies the fetched records of the store's partitions at or
// past their offsets, and the new offsets, in one Apply.
func (gs *globalStore) apply(g *Stores, b *state.Batch, ps []kgo.FetchTopicPartition) error {
	defer b.Reset()
	n := int64(0)
	moved := false
	key := make([]byte, 0, 64)
	for _, p := range ps {
		next := gs.next[p.Partition]
		for _, r := range p.Records {
			if r.Offset < next {
				continue
			}
			next = r.Offset + 1
			switch {
			case r.Attrs.IsControl():
			case r.Key == nil: // a lookup cannot find it
			case r.Value == nil:
				b.Delete(append(append(key[:0], globalDataPrefix), r.Key...))
				n++
			default:
				b.Put(append(append(key[:0], globalDataPrefix), r.Key...), r.Value)
				n++
			}
		}
		if next != gs.next[p.Partition] {
			b.Put(globalOffsetKey(p.Partition), binary.BigEndian.AppendUint64(nil, uint64(next)))
			gs.next[p.Partition] = next
			moved = true
		}
		if p.Err == nil && p.HighWatermark >= 0 {
			gs.ends[p.Partition] = max(gs.ends[p.Partition], p.HighWatermark)
		}
	}
	if moved {
		sum := int64(0)
		for _, o := range gs.next {
			sum += o
		}
		if err := gs.st.Apply(b, sum); err != nil {
			return fmt.Errorf("baton: global store %s: %w", gs.spec.Name, err)
		}
		gs.read.Add(n)
	}
	lag := int64(0)
	for p, e := range gs.ends {
		lag += max(0, e-gs.next[p])
	}
	gs.setLag(g, lag)
	return nil
}

// Stop ends the reader and closes the stores. Run calls it once its
// workers have stopped: nothing reads the stores any more.
func (g *Stores) Stop() {
	if g == nil || len(g.stores) == 0 {
		return
	}
	if g.cancel != nil {
		g.cancel()
		<-g.done
		g.cancel = nil
	}
	if g.cl != nil {
		g.cl.Close()
		g.cl = nil
	}
	g.closeStores()
}

func (g *Stores) closeStores() {
	for _, gs := range g.stores {
		if gs.st != nil {
			if err := gs.st.Close(); err != nil {
				g.cfg.Log.Warn("closing global store", "store", gs.spec.Name, "err", err)
			}
		}
		gs.ready.Store(false)
	}
}

// globalView is the read-only topology.Store of a global store that
// tasks read.
type globalView struct{ gs *globalStore }

// errReadOnly is what a write to a global store returns.
func (v globalView) errReadOnly(op string) error {
	return fmt.Errorf("baton: global store %s is read-only (%s): it is filled from topic %s only; produce to the topic to change it", v.gs.spec.Name, op, v.gs.spec.Topic)
}

func (v globalView) Get(key []byte) ([]byte, bool, error) {
	return v.gs.st.Get(append([]byte{globalDataPrefix}, key...))
}

func (v globalView) Put(_, _ []byte) error { return v.errReadOnly("put") }
func (v globalView) Delete(_ []byte) error { return v.errReadOnly("delete") }

func (v globalView) Iterate(start, end []byte, fn func(key, value []byte) error) error {
	lo, hi := []byte{globalDataPrefix}, []byte{globalDataPrefix + 1}
	if start != nil {
		lo = append(lo, start...)
	}
	if end != nil {
		hi = append([]byte{globalDataPrefix}, end...)
	}
	return v.gs.st.Iterate(lo, hi, func(k, val []byte) error { return fn(k[1:], val) })
}

package versus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/kafkatest"
	"github.com/baton-streams/baton/internal/tick"
)

// Config is one versus run.
type Config struct {
	Configurations []Configuration `json:"configurations"`
	Events         []string        `json:"events"`
	// Brokers is an existing cluster; empty: the harness starts Apache
	// Kafka with Nodes nodes and BrokerConfig (plus what the
	// configurations need) and stops it at the end.
	Brokers      []string          `json:"brokers,omitempty"`
	Nodes        int               `json:"nodes"`
	BrokerConfig map[string]string `json:"broker_config,omitempty"`
	Partitions   int32             `json:"partitions"`
	// Keys distinct words are prefilled, WordsPerLine to a line.
	Keys         int `json:"keys"`
	WordsPerLine int `json:"words_per_line"`
	// Rate is input lines per second during the script.
	Rate int `json:"rate"`
	// Steady is the window before each event, After the one after it;
	// BalanceCap the longest the script waits after the event for the
	// group to run balanced.
	Steady     time.Duration `json:"steady_ns"`
	After      time.Duration `json:"after_ns"`
	BalanceCap time.Duration `json:"balance_cap_ns"`
	// Backlog lines are processed from a cold start by 2 instances for
	// the throughput figure (0: not measured).
	Backlog int `json:"backlog"`
	// Guarantee is passed to every engine.
	Guarantee string `json:"guarantee"`
	// Queries clients read counts through the instances' GET /query
	// (engines that serve it, queryEngines) from the steady window on,
	// each read bounded by QueryMaxLag records (-1: the active only).
	// 0: no query load.
	Queries     int   `json:"queries"`
	QueryMaxLag int64 `json:"query_max_lag"`
	// QueryRate is each query client's reads per second (at most).
	QueryRate int `json:"query_rate"`
	// Prepare bounds the wait for the prefill to be processed and for the
	// group to balance before the steady window; Drain the wait for the
	// final counts.
	Prepare time.Duration `json:"prepare_ns"`
	Drain   time.Duration `json:"drain_ns"`
	// BatonExe is the baton binary (os.Executable when empty);
	// CompareDir holds the peers (default "compare"); WorkDir gets state
	// dirs, logs and built peers (a temporary directory when empty,
	// removed at the end).
	// SimScenarios is a directory for the scenario of every run (Predict
	// runs the simulator on each in any case).
	SimScenarios string    `json:"-"`
	BatonExe     string    `json:"-"`
	CompareDir   string    `json:"-"`
	WorkDir      string    `json:"-"`
	Log          io.Writer `json:"-"`
}

// DefaultConfig is the full benchmark.
func DefaultConfig() Config {
	return Config{Events: slices.Clone(Events), Nodes: 3, Partitions: 6, Keys: 1_000_000, WordsPerLine: 10, Rate: 1000,
		Steady: 30 * time.Second, After: 60 * time.Second, BalanceCap: 15 * time.Minute, Backlog: 2_000_000,
		Guarantee: "at-least-once", Prepare: 15 * time.Minute, Drain: 5 * time.Minute, Queries: 3, QueryMaxLag: 10000, QueryRate: 50}
}

// ShortConfig is the version that keeps the peers from rotting: seconds
// per engine, one event.
func ShortConfig() Config {
	return Config{Events: []string{"scale-out"}, Nodes: 1, Partitions: 6, Keys: 2000, WordsPerLine: 10, Rate: 200,
		Steady: 5 * time.Second, After: 15 * time.Second, BalanceCap: time.Minute, Backlog: 20000,
		Guarantee: "at-least-once", Prepare: 2 * time.Minute, Drain: time.Minute, Queries: 2, QueryMaxLag: 10000, QueryRate: 50}
}

// Validate names the first bad setting.
func (c Config) Validate() error {
	switch {
	case len(c.Configurations) == 0:
		return errors.New("versus: no engine configuration")
	case len(c.Events) == 0 && c.Backlog == 0:
		return errors.New("versus: no event and no backlog: nothing to measure")
	case c.Nodes < 1 && len(c.Brokers) == 0:
		return fmt.Errorf("versus: nodes: want >= 1, got %d", c.Nodes)
	case c.Partitions < 3:
		return fmt.Errorf("versus: partitions: want >= 3 (three instances share them), got %d", c.Partitions)
	case c.Keys < 1:
		return fmt.Errorf("versus: keys: want >= 1, got %d", c.Keys)
	case c.WordsPerLine < 1:
		return fmt.Errorf("versus: words per line: want >= 1, got %d", c.WordsPerLine)
	case c.Rate < 1:
		return fmt.Errorf("versus: rate: want >= 1 line/s, got %d", c.Rate)
	case c.Steady < time.Second || c.After < time.Second:
		return fmt.Errorf("versus: steady and after windows: want >= 1s, got %v and %v", c.Steady, c.After)
	case c.Backlog < 0:
		return fmt.Errorf("versus: backlog: want >= 0, got %d", c.Backlog)
	case c.Queries < 0 || c.QueryMaxLag < -1 || (c.Queries > 0 && c.QueryRate < 1):
		return fmt.Errorf("versus: queries %d at %d/s with max lag %d: want >= 0 clients, >= 1 read/s each, and a lag >= 0 (or -1: the active only)", c.Queries, c.QueryRate, c.QueryMaxLag)
	case c.Guarantee != "at-least-once" && c.Guarantee != "exactly-once":
		return fmt.Errorf("versus: guarantee %q: want at-least-once or exactly-once", c.Guarantee)
	}
	return nil
}

// Result is everything a versus run measured.
type Result struct {
	Config     Config       `json:"config"`
	Brokers    []string     `json:"brokers"`
	Runs       []Run        `json:"runs"`
	Throughput []Throughput `json:"throughput"`
}

// Run is one configuration through one event.
type Run struct {
	Configuration string        `json:"configuration"`
	Event         string        `json:"event"`
	AppID         string        `json:"app_id"`
	Figures       EventFigures  `json:"figures"`
	Counts        Counts        `json:"counts"`
	Produced      int64         `json:"produced_lines"`
	Elapsed       time.Duration `json:"elapsed_ns"`
	Error         string        `json:"error,omitempty"`
	// Unsupported is the engine's refusal of a setting the event needs
	// (the contract: a non-zero exit at start-up, before any status
	// line, with one line on stderr naming it).
	Unsupported string `json:"unsupported,omitempty"`
	// Recording is written to a file of its own.
	Recording *Recording `json:"-"`
	Window    Event      `json:"window"`
	// Prediction is what `baton sim` predicts for the run, from the
	// scenario of the group at the event (see Predict).
	Prediction *Prediction `json:"prediction,omitempty"`
	// Queries are the query load's figures (nil: no load, or an engine
	// that serves no queries).
	Queries *QueryWindows `json:"queries,omitempty"`
}

// Throughput is the time 2 instances took to process a backlog from a
// cold start, measured from outside, on the output topic: the backlog is
// done when the output holds one count per word occurrence (every engine
// emits one per occurrence), and the counts are then checked.
type Throughput struct {
	Configuration string `json:"configuration"`
	Lines         int    `json:"lines"`
	// FromStart is from the start of the 2 processes (start-up and group
	// join included) to the output holding every occurrence; FromFirst
	// from the first output record to then.
	FromStart time.Duration `json:"from_start_ns"`
	FromFirst time.Duration `json:"from_first_ns"`
	// LinesPerSec is Lines over FromStart, FirstPerSec over FromFirst.
	LinesPerSec float64 `json:"lines_per_sec"`
	FirstPerSec float64 `json:"first_per_sec"`
	// InputDone is when the status lines first showed every line
	// processed (read and split: the counting may still be behind).
	InputDone time.Duration `json:"input_done_ns"`
	Counts    Counts        `json:"counts"`
	Error     string        `json:"error,omitempty"`
}

func (c *Config) logf(format string, args ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, "versus: "+format+"\n", args...)
	}
}

// Execute runs every configuration through every event, then the backlog.
// A configuration's failure is recorded in its Run and the others go on;
// the error returned is the first failure (or the cluster's).
func Execute(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.BatonExe == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("versus: finding the baton binary: %w", err)
		}
		cfg.BatonExe = exe
	}
	if cfg.CompareDir == "" {
		cfg.CompareDir = "compare"
	}
	if cfg.WorkDir == "" {
		dir, err := os.MkdirTemp("", "baton-versus-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		cfg.WorkDir = dir
	}
	cmds := map[string]command{} // by commandKey
	for _, c := range cfg.Configurations {
		if _, ok := cmds[commandKey(c)]; ok {
			continue
		}
		cfg.logf("building engine %s", c.Engine)
		exe := cfg.BatonExe
		if c.Exe != "" {
			exe = c.Exe
		}
		cmd, err := buildEngine(c.Engine, exe, cfg.CompareDir, filepath.Join(cfg.WorkDir, "bin"))
		if err != nil {
			return nil, err
		}
		cmds[commandKey(c)] = cmd
	}
	res := &Result{Config: cfg, Brokers: cfg.Brokers}
	if len(cfg.Brokers) == 0 {
		bc := maps.Clone(cfg.BrokerConfig)
		if bc == nil {
			bc = map[string]string{}
		}
		for _, c := range cfg.Configurations {
			maps.Copy(bc, c.BrokerConfig)
		}
		cfg.logf("starting Apache Kafka, %d node(s)", cfg.Nodes)
		cl, err := kafkatest.Start(ctx, kafkatest.Config{Nodes: cfg.Nodes, BrokerConfig: bc, Logf: cfg.logf})
		if err != nil {
			return nil, err
		}
		defer cl.Stop()
		res.Brokers = cl.Addrs()
	}
	var first error
	for _, ev := range cfg.Events {
		for _, c := range cfg.Configurations {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			r := runEvent(ctx, cfg, res.Brokers, c, cmds[commandKey(c)], ev)
			if r.Error != "" && first == nil {
				first = fmt.Errorf("versus: %s, %s: %s", c.Name, ev, r.Error)
			}
			res.Runs = append(res.Runs, r)
		}
	}
	if err := Predict(res, cfg.SimScenarios); err != nil && first == nil {
		first = err
	}
	if cfg.Backlog > 0 {
		for _, c := range cfg.Configurations {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			t := runBacklog(ctx, cfg, res.Brokers, c, cmds[commandKey(c)])
			if t.Error != "" && first == nil {
				first = fmt.Errorf("versus: %s, backlog: %s", c.Name, t.Error)
			}
			res.Throughput = append(res.Throughput, t)
		}
	}
	return res, first
}

// session is one run's topics, instances, producer and output reader.
type session struct {
	cfg     Config
	conf    Configuration
	cmd     command
	brokers []string
	appID   string
	input   string
	output  string
	dir     string
	start   time.Time
	cl      *kgo.Client

	mu        sync.Mutex
	status    []Status
	arrivals  []Arrival
	measuring bool
	truth     map[string]int64
	last      map[string]int64
	seen      int64 // output records read
	lastSeen  time.Time
	firstAt   time.Duration // since start: the first output record read
	want      int64         // output records awaited (0: none)
	wantAt    time.Duration // since start: seen reached want
	bad       error

	produced atomic.Int64
	procs    map[string]*proc
	// endpoints are the instances' HTTP endpoints, for engines that serve
	// queries when the run has a query load.
	endpoints map[string]string
}

func newSession(ctx context.Context, cfg Config, brokers []string, conf Configuration, cmd command, what string) (*session, error) {
	id := fmt.Sprintf("versus-%s-%s-%d", conf.Name, what, time.Now().UnixNano()%1e9)
	s := &session{cfg: cfg, conf: conf, cmd: cmd, brokers: brokers, appID: id, input: id + "-in", output: id + "-out",
		dir: filepath.Join(cfg.WorkDir, id), truth: map[string]int64{}, last: map[string]int64{}, procs: map[string]*proc{}, endpoints: map[string]string{}}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return nil, err
	}
	s.cl = cl
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	for _, t := range []string{s.input, s.output} {
		resp, err := adm.CreateTopic(cctx, cfg.Partitions, -1, nil, t)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			cl.Close()
			return nil, fmt.Errorf("creating topic %s: %w", t, err)
		}
	}
	// Wait until metadata lists both topics whole.
	ok := tick.Until(cctx, 30*time.Second, 100*time.Millisecond, func() bool {
		td, err := adm.ListTopics(cctx, s.input, s.output)
		if err != nil {
			return false
		}
		for _, t := range []string{s.input, s.output} {
			if d, ok := td[t]; !ok || d.Err != nil || len(d.Partitions) != int(cfg.Partitions) {
				return false
			}
		}
		return true
	})
	if !ok {
		cl.Close()
		return nil, fmt.Errorf("topics %s and %s: not listed with %d partitions after creating them", s.input, s.output, cfg.Partitions)
	}
	s.start = time.Now()
	return s, nil
}

func (s *session) now() time.Duration { return time.Since(s.start) }

// read consumes the output from its start until ctx ends, with
// read_committed, recording arrivals and the last count per word.
func (s *session) read(ctx context.Context) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.brokers...), kgo.ConsumeTopics(s.output),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	for ctx.Err() == nil {
		f := cl.PollFetches(ctx)
		now := time.Now()
		at := now.Sub(s.start)
		s.mu.Lock()
		f.EachRecord(func(r *kgo.Record) {
			n, err := strconv.ParseInt(string(r.Value), 10, 64)
			if err != nil && s.bad == nil {
				s.bad = fmt.Errorf("output %s/%d@%d: value %q is not a decimal count", r.Topic, r.Partition, r.Offset, clip(string(r.Value)))
			}
			s.last[string(r.Key)] = n
			s.seen++
			s.lastSeen = now
			if s.seen == 1 {
				s.firstAt = at
			}
			if s.want > 0 && s.seen == s.want {
				s.wantAt = at
			}
			if s.measuring {
				s.arrivals = append(s.arrivals, Arrival{Partition: r.Partition, At: at, Latency: now.Sub(r.Timestamp)})
			}
		})
		s.mu.Unlock()
	}
	return nil
}

// words returns line i's words over keys distinct words.
func words(i, perLine, keys int) []string {
	ws := make([]string, perLine)
	for j := range ws {
		ws[j] = "w" + strconv.Itoa((i*perLine+j)%keys)
	}
	return ws
}

// produce sends lines [from, from+n) with the send time as timestamp and
// counts their words once the cluster has them all. It is not cancelled
// half-way (a line sent but not counted, or counted but not sent, would
// show as a wrong count): ctx only bounds it, with a minute more.
func (s *session) produce(ctx context.Context, from, n int) error {
	recs := make([]*kgo.Record, 0, n)
	now := time.Now()
	for i := from; i < from+n; i++ {
		ws := words(i, s.cfg.WordsPerLine, s.cfg.Keys)
		// Keyed, so that lines spread over the partitions.
		recs = append(recs, &kgo.Record{Topic: s.input, Key: []byte(strconv.Itoa(i)), Value: []byte(strings.Join(ws, " ")), Timestamp: now})
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := s.cl.ProduceSync(pctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("producing to %s: %w", s.input, err)
	}
	s.mu.Lock()
	for i := from; i < from+n; i++ {
		for _, w := range words(i, s.cfg.WordsPerLine, s.cfg.Keys) {
			s.truth[w]++
		}
	}
	s.mu.Unlock()
	s.produced.Add(int64(n))
	return nil
}

// prefill produces lines holding every key once (rounded up to whole
// lines).
func (s *session) prefill(ctx context.Context, lines int) error {
	const chunk = 5000
	for lo := 0; lo < lines; lo += chunk {
		if err := s.produce(ctx, lo, min(chunk, lines-lo)); err != nil {
			return err
		}
	}
	return nil
}

// flow produces rate lines/s, in ticks of 20ms, from line next on, until
// ctx ends.
func (s *session) flow(ctx context.Context, next int) error {
	t0 := time.Now()
	n := 0
	return tick.Every(ctx, 20*time.Millisecond, func() error {
		due := int(time.Since(t0).Seconds()*float64(s.cfg.Rate)) - n
		if due <= 0 {
			return nil
		}
		if err := s.produce(ctx, next+n, due); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		n += due
		return nil
	})
}

// startInstance starts instance name with standbys standby replicas.
func (s *session) startInstance(name string, standbys int) error {
	args := []string{"--brokers", strings.Join(s.brokers, ","), "--app-id", s.appID, "--instance", name,
		"--input", s.input, "--output", s.output, "--state-dir", filepath.Join(s.dir, name),
		"--standbys", strconv.Itoa(standbys), "--guarantee", s.cfg.Guarantee}
	if s.conf.Engine == "baton" {
		args = append(args, "--status-every", "1s")
	}
	if s.cfg.Queries > 0 && queryEngines[s.conf.Engine] {
		ep, err := freeEndpoint()
		if err != nil {
			return err
		}
		args = append(args, "--http", ep)
		s.endpoints[name] = ep
	}
	args = append(args, s.conf.Args...)
	p, err := startProc(name, s.cmd, args, filepath.Join(s.dir, name+".log"), func(l StatusLine) {
		at := s.now()
		s.mu.Lock()
		s.status = append(s.status, Status{At: at, Line: l})
		s.mu.Unlock()
	}, func(err error) {
		s.mu.Lock()
		if s.bad == nil {
			s.bad = err
		}
		s.mu.Unlock()
	})
	if err != nil {
		return err
	}
	s.procs[name] = p
	return nil
}

// snapshot copies the recording so far.
func (s *session) snapshot() Recording {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Recording{Start: s.start, Partitions: s.cfg.Partitions, Arrivals: slices.Clone(s.arrivals), Status: slices.Clone(s.status)}
}

// endpointsOf returns the HTTP endpoints of the named instances.
func (s *session) endpointsOf(names []string) []string {
	var out []string
	for _, n := range names {
		if ep, ok := s.endpoints[n]; ok {
			out = append(out, ep)
		}
	}
	return out
}

// printed reports whether instance name printed a status line.
func (s *session) printed(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.ContainsFunc(s.status, func(st Status) bool { return st.Line.Instance == name })
}

// check fails when a process ended that should run, or a line was bad.
func (s *session) check(running ...string) error {
	s.mu.Lock()
	bad := s.bad
	s.mu.Unlock()
	if bad != nil {
		return bad
	}
	for _, n := range running {
		if p := s.procs[n]; p != nil && p.exited() {
			log := filepath.Join(s.dir, n+".log")
			last, _ := os.ReadFile(log)
			return fmt.Errorf("instance %s exited: %v: %s (log: %s)", n, p.err, strings.TrimSpace(tail(string(last), 1)), log)
		}
	}
	return nil
}

// refused returns the last stderr line of an instance that exited with an
// error before printing any status line: the engine refused a setting.
func (s *session) refused() (string, bool) {
	s.mu.Lock()
	printed := map[string]bool{}
	for _, st := range s.status {
		printed[st.Line.Instance] = true
	}
	s.mu.Unlock()
	for _, n := range slices.Sorted(maps.Keys(s.procs)) {
		p := s.procs[n]
		if p.exited() && p.err != nil && !printed[n] {
			last, _ := os.ReadFile(filepath.Join(s.dir, n+".log"))
			return strings.TrimSpace(tail(string(last), 1)), true
		}
	}
	return "", false
}

// waitFor polls cond every 200ms until it holds, the running instances
// fail, or timeout passes.
func (s *session) waitFor(ctx context.Context, timeout time.Duration, what string, cond func() bool, running ...string) error {
	var failed error
	ok := tick.Until(ctx, timeout, 200*time.Millisecond, func() bool {
		if failed = s.check(running...); failed != nil {
			return true
		}
		return cond()
	})
	switch {
	case failed != nil:
		return failed
	case ok:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	}
	return fmt.Errorf("timed out after %v waiting for %s", timeout, what)
}

// sleep waits d while the running instances keep running.
func (s *session) sleep(ctx context.Context, d time.Duration, running ...string) error {
	err := s.waitFor(ctx, d, "", func() bool { return false }, running...)
	if err != nil && strings.HasPrefix(err.Error(), "timed out") {
		return nil
	}
	return err
}

// close stops every instance (gracefully, killed after 60s) and the
// producer.
func (s *session) close() {
	var wg sync.WaitGroup
	for _, p := range s.procs {
		wg.Go(func() { _ = p.stop(60 * time.Second) })
	}
	wg.Wait()
	s.cl.Close()
}

// counts waits until the output's last counts reach the input's
// occurrences for every word and the output has been quiet for 2s, up to
// timeout, then compares them.
func (s *session) counts(ctx context.Context, timeout time.Duration) Counts {
	_ = s.waitFor(ctx, timeout, "the final counts", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		if time.Since(s.lastSeen) < 2*time.Second {
			return false
		}
		for w, n := range s.truth {
			if s.last[w] < n {
				return false
			}
		}
		return true
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	return CheckCounts(s.truth, s.last)
}

// shape is who runs before an event and what the event does.
type shape struct {
	initial  []string
	standbys int
	live     []string // after the event
}

func shapeOf(event string) shape {
	switch event {
	case "scale-out":
		return shape{initial: []string{"a", "b"}, live: []string{"a", "b", "c"}}
	case "kill-standby1":
		return shape{initial: []string{"a", "b", "c"}, standbys: 1, live: []string{"a", "b"}}
	default: // scale-in, kill-standby0
		return shape{initial: []string{"a", "b", "c"}, live: []string{"a", "b"}}
	}
}

// runEvent runs one configuration through one event on fresh topics.
func runEvent(ctx context.Context, cfg Config, brokers []string, conf Configuration, cmd command, event string) Run {
	t0 := time.Now()
	r := Run{Configuration: conf.Name, Event: event}
	err := func() error {
		s, err := newSession(ctx, cfg, brokers, conf, cmd, event)
		if err != nil {
			return err
		}
		r.AppID = s.appID
		defer s.close()
		rctx, stopReading := context.WithCancel(ctx)
		readDone := make(chan error, 1)
		go func() { readDone <- s.read(rctx) }()
		defer func() { stopReading(); <-readDone }()

		sh := shapeOf(event)
		lines := (cfg.Keys + cfg.WordsPerLine - 1) / cfg.WordsPerLine
		cfg.logf("%s %s: prefilling %d lines (%d words)", conf.Name, event, lines, cfg.Keys)
		if err := s.prefill(ctx, lines); err != nil {
			return err
		}
		for _, n := range sh.initial {
			if err := s.startInstance(n, sh.standbys); err != nil {
				return err
			}
		}
		words := int64(lines * cfg.WordsPerLine)
		cfg.logf("%s %s: waiting for %v to process the prefill", conf.Name, event, sh.initial)
		err = s.waitFor(ctx, cfg.Prepare, "the prefill to be processed", func() bool {
			rec := s.snapshot()
			s.mu.Lock()
			seen := s.seen
			s.mu.Unlock()
			return ProcessedAt(rec.Status, s.now()) >= int64(lines) && seen >= words
		}, sh.initial...)
		if err != nil {
			if line, ok := s.refused(); ok {
				r.Unsupported = line
				return nil
			}
			return err
		}
		fctx, stopFlow := context.WithCancel(ctx)
		flowDone := make(chan error, 1)
		go func() { flowDone <- s.flow(fctx, lines) }()
		defer func() { stopFlow(); <-flowDone }()
		ready := s.now()
		err = s.waitFor(ctx, cfg.Prepare, "the group to run balanced before the event", func() bool {
			_, ok := BalancedAt(s.snapshot().Status, cfg.Partitions, sh.initial, ready)
			return ok
		}, sh.initial...)
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.measuring = true
		s.mu.Unlock()
		var load *queryLoad
		if len(s.endpoints) > 0 {
			load = s.startQueries(ctx, cfg.Queries, cfg.QueryRate, cfg.QueryMaxLag)
			load.setLive(s.endpointsOf(sh.initial))
			defer load.stop()
		}
		cfg.logf("%s %s: steady for %v", conf.Name, event, cfg.Steady)
		if err := s.sleep(ctx, cfg.Steady, sh.initial...); err != nil {
			return err
		}
		ev := Event{Name: event, At: s.now(), Steady: cfg.Steady, After: cfg.After, Live: sh.live}
		cfg.logf("%s %s: event", conf.Name, event)
		if load != nil && event != "scale-out" {
			// Readers stop asking the instance that goes, at once.
			load.setLive(s.endpointsOf(sh.live))
		}
		switch event {
		case "scale-out":
			err = s.startInstance("c", sh.standbys)
		case "scale-in":
			s.procs["c"].term()
		default:
			s.procs["c"].kill()
		}
		if err != nil {
			return err
		}
		if load != nil && event == "scale-out" {
			// Readers ask the new instance once it runs (its first
			// status line).
			go func() {
				if tick.Until(ctx, cfg.After, 100*time.Millisecond, func() bool { return s.printed("c") }) {
					load.setLive(s.endpointsOf(sh.live))
				}
			}()
		}
		if err := s.sleep(ctx, cfg.After, sh.live...); err != nil {
			return err
		}
		if _, ok := BalancedAt(s.snapshot().Status, cfg.Partitions, sh.live, ev.At); !ok {
			cfg.logf("%s %s: not balanced yet; waiting up to %v", conf.Name, event, cfg.BalanceCap)
			_ = s.waitFor(ctx, cfg.BalanceCap-cfg.After, "balance", func() bool {
				_, ok := BalancedAt(s.snapshot().Status, cfg.Partitions, sh.live, ev.At)
				return ok
			}, sh.live...)
		}
		if event == "scale-in" {
			if err := s.procs["c"].wait(60 * time.Second); err != nil {
				return err
			}
			if p := s.procs["c"]; p.err != nil {
				return fmt.Errorf("instance c: graceful stop: %v (log: %s)", p.err, filepath.Join(s.dir, "c.log"))
			}
		}
		var reads []Read
		if load != nil {
			reads = load.stop()
		}
		stopFlow()
		if err := <-flowDone; err != nil {
			flowDone <- nil
			return err
		}
		flowDone <- nil
		r.Produced = s.produced.Load()
		r.Window = ev
		rec := s.snapshot()
		rec.Reads = reads
		r.Recording = &rec
		r.Figures = Analyze(rec, ev)
		cfg.logf("%s %s: draining", conf.Name, event)
		r.Counts = s.counts(ctx, cfg.Drain)
		if load != nil {
			s.mu.Lock()
			truth := maps.Clone(s.truth)
			s.mu.Unlock()
			qw := AnalyzeQueries(reads, truth, ev, ev.At+r.Figures.TimeToBalance, r.Figures.Balanced)
			qw.Clients, qw.MaxLag, qw.Rate = cfg.Queries, cfg.QueryMaxLag, cfg.QueryRate
			r.Queries = &qw
		}
		if r.Counts.Lost > 0 {
			return fmt.Errorf("%d of %d words counted below their occurrences, e.g. %s", r.Counts.Lost, r.Counts.Words, strings.Join(r.Counts.Example, "; "))
		}
		if r.Counts.Over > 0 && (cfg.Guarantee == "exactly-once" || !strings.HasPrefix(event, "kill")) {
			return fmt.Errorf("%d of %d words over-counted without a crash to excuse it (%s), e.g. %s", r.Counts.Over, r.Counts.Words, cfg.Guarantee, strings.Join(r.Counts.Example, "; "))
		}
		return s.check()
	}()
	if err != nil {
		r.Error = err.Error()
		cfg.logf("%s %s: FAILED: %v", conf.Name, event, err)
	}
	r.Elapsed = time.Since(t0)
	return r
}

// commandKey names the command a configuration runs: its engine, and
// for a baton baseline its binary.
func commandKey(c Configuration) string { return c.Engine + "\x00" + c.Exe }

// runBacklog measures how long 2 instances take to process cfg.Backlog
// lines from a cold start.
func runBacklog(ctx context.Context, cfg Config, brokers []string, conf Configuration, cmd command) Throughput {
	t := Throughput{Configuration: conf.Name, Lines: cfg.Backlog}
	err := func() error {
		s, err := newSession(ctx, cfg, brokers, conf, cmd, "backlog")
		if err != nil {
			return err
		}
		defer s.close()
		cfg.logf("%s backlog: producing %d lines", conf.Name, cfg.Backlog)
		if err := s.prefill(ctx, cfg.Backlog); err != nil {
			return err
		}
		s.mu.Lock()
		s.want = int64(cfg.Backlog) * int64(cfg.WordsPerLine)
		s.mu.Unlock()
		rctx, stopReading := context.WithCancel(ctx)
		readDone := make(chan error, 1)
		go func() { readDone <- s.read(rctx) }()
		defer func() { stopReading(); <-readDone }()
		started := s.now()
		for _, n := range []string{"a", "b"} {
			if err := s.startInstance(n, 0); err != nil {
				return err
			}
		}
		err = s.waitFor(ctx, cfg.Prepare, "the output to hold every occurrence", func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.wantAt > 0
		}, "a", "b")
		if err != nil {
			return err
		}
		t.Counts = s.counts(ctx, time.Minute)
		s.mu.Lock()
		t.FromStart, t.FromFirst = s.wantAt-started, s.wantAt-s.firstAt
		s.mu.Unlock()
		t.LinesPerSec = float64(cfg.Backlog) / t.FromStart.Seconds()
		if t.FromFirst > 0 {
			t.FirstPerSec = float64(cfg.Backlog) / t.FromFirst.Seconds()
		}
		if at, ok := FirstProcessed(s.snapshot().Status, int64(cfg.Backlog)); ok {
			t.InputDone = at - started
		}
		if !t.Counts.Exact() {
			return fmt.Errorf("counts not exact: %d lost, %d over (%s)", t.Counts.Lost, t.Counts.Over, strings.Join(t.Counts.Example, "; "))
		}
		return nil
	}()
	if err != nil {
		t.Error = err.Error()
		cfg.logf("%s backlog: FAILED: %v", conf.Name, err)
	}
	return t
}

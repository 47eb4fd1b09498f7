// Package chaos runs wordcount on the embedded cluster under continuous
// input while instances join, drain, crash (their connections cut, as if
// killed) at any moment, while a learner warms (the leader) or as a task is
// handed over to them, and while the whole cluster restarts from its data
// directory, chosen at random from a seed.
// At the end it checks every count against the input: no count may be low
// (nothing lost), and no acknowledged input may be missing from the
// cluster. In at-least-once mode a count may be high (a duplicate) only
// if one of the word's tasks (the one that splits the input partition
// holding it, the one that counts its repartition partition) ran on an
// instance lost (crashed, failed, cut off by a restart) in the interval
// between two events in which it was lost (see Interval, Duplicate), and
// the duplicated occurrences may be no more than the lost instances'
// uncommitted work can count again (see Uncommitted, DuplicateBound; a
// member the group dropped while it went on processing, which says so
// with EventLost, counts as lost: see uncommitted.LostWork); in
// exactly-once mode every word's committed history of counts must be
// exactly 1, 2, ..., its occurrences.
package chaos

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/cluster"
	"github.com/baton-streams/baton/internal/counts"
	"github.com/baton-streams/baton/internal/faultnet"
	"github.com/baton-streams/baton/internal/tick"
	"github.com/baton-streams/baton/internal/txncheck"
	"github.com/baton-streams/baton/internal/uncommitted"
	"github.com/baton-streams/baton/topology"
)

// Config sets up a run. Zero fields take the defaults in parentheses.
type Config struct {
	Duration   time.Duration // how long events happen (1m)
	Seed       uint64        // chooses the events (1)
	Every      time.Duration // time between events (3s)
	Partitions int32         // input partitions (4)
	MaxAlive   int           // most instances at once (4)
	Out        io.Writer     // a line per event; nil: quiet
	Guarantee  baton.Guarantee
	// NoRestart leaves the cluster up for the whole run.
	NoRestart bool
	// External, when set, runs against an existing cluster (Apache Kafka)
	// instead of starting an embedded one.
	External *External
	// Cover are event kinds (see Kinds) that must happen at least once:
	// while one has not happened and it can happen now, the run picks it
	// (the run's rng picks among several such), instead of an event at
	// random. If one has not happened when Duration ends, events go on
	// for up to Duration more until it has. A kind the run cannot do
	// under the config is an error.
	Cover []string
}

// Kinds are the kinds of event a run picks from. "leader-crash" is
// counted as happened only if the leader crashed while a learner warmed,
// "handover-crash" only if the newcomer crashed once a stateful task was
// handed over to it; otherwise the event counts as "leader-crash-unseen"
// or "handover-crash-unseen" in Result.Events.
var Kinds = []string{"join", "drain", "crash", "leader-crash", "handover-crash", "cluster-restart", "broker-restart"}

// checkCover says why cfg's Cover cannot be met, if it cannot.
func checkCover(cfg Config) error {
	for _, k := range cfg.Cover {
		var why string
		switch k {
		case "join", "drain", "crash":
		case "leader-crash", "handover-crash":
			if cfg.MaxAlive < 3 {
				why = "it needs MaxAlive of at least 3"
			}
		case "cluster-restart":
			if cfg.NoRestart || cfg.External != nil {
				why = "the run restarts no embedded cluster (NoRestart or External)"
			}
		case "broker-restart":
			if cfg.NoRestart || cfg.External == nil || cfg.External.RestartBroker == nil {
				why = "the run restarts no broker (NoRestart, or no External.RestartBroker)"
			}
		default:
			return fmt.Errorf("chaos: Config.Cover: unknown event kind %q (known: %s)", k, strings.Join(Kinds, ", "))
		}
		if why != "" {
			return fmt.Errorf("chaos: Config.Cover: %q cannot happen: %s", k, why)
		}
	}
	return nil
}

// External is a cluster the run does not own.
type External struct {
	Brokers []string
	// Prefix starts the run's topic names and application id, so that
	// runs sharing a cluster do not meet.
	Prefix string
	// RestartBroker kills one broker (the run's rng picks which) and
	// starts it again on its data; nil: the run restarts nothing.
	RestartBroker func(ctx context.Context, rng *rand.Rand) (string, error)
}

// Result is what a run saw.
type Result struct {
	Seed       uint64         `json:"seed"`
	Guarantee  string         `json:"guarantee"`
	Events     map[string]int `json:"events"`
	RecordsIn  int64          `json:"records_in"`
	Words      int            `json:"words"`
	Lost       int64          `json:"lost"`       // occurrences missing from counts
	Duplicated int64          `json:"duplicated"` // occurrences counted twice
	LowWords   []string       `json:"low_words,omitempty"`
	// DuplicateBound is the most occurrences the lost instances'
	// uncommitted work (Uncommitted) can count again: under
	// at-least-once, Duplicated may not be more (see
	// uncommitted.DuplicateBound).
	DuplicateBound int64 `json:"duplicate_bound"`
	// Uncommitted is, per loss of an instance, the input its tasks may
	// have processed without committing it.
	Uncommitted []Uncommitted `json:"uncommitted,omitempty"`
	// InputLost counts occurrences the cluster acknowledged to the
	// producer but no longer holds in the input topic at the end (lost
	// by a cluster restart). Lost and Duplicated are measured against
	// the input the cluster does hold.
	InputLost int64 `json:"input_lost"`
	// Duplicates are the words counted high, in word order.
	Duplicates []Duplicate `json:"duplicates,omitempty"`
	// Histories, under exactly-once, are the words whose committed
	// history of counts is not exactly 1..n (counts.Exact), at most 20.
	Histories []string `json:"histories,omitempty"`
	// Splits, when exactly-once counts are wrong, are the transactions
	// the brokers committed in some partitions and aborted in others
	// (txncheck.Splits): a fault of the cluster no client can repair.
	Splits []string `json:"splits,omitempty"`
	// SplitsUnread says why the markers could not all be read.
	SplitsUnread string `json:"splits_unread,omitempty"`
	// Intervals say who ran which task between two events and who was
	// lost then: what excuses an at-least-once duplicate.
	Intervals []Interval `json:"intervals"`
	// Unsettled, when some word was still counted short as the wait for
	// the counts gave up, is what each live instance then reported and
	// the group's committed input offsets against the ends: input
	// committed to its end with counts short is data lost; input not
	// committed to its end is work that stopped.
	Unsettled string `json:"unsettled,omitempty"`
}

// OK reports whether the run kept its guarantee: nothing lost, neither
// counts nor acknowledged input; under exactly-once nothing duplicated
// and every word's committed history exactly 1..n; under at-least-once
// every duplicate excused: one of the word's tasks ran on an instance
// that was lost in the same interval (it crashed or failed, or a cluster
// restart cut it off: a member whose session ran out while the cluster
// was down loses its tasks without committing), and no more occurrences
// duplicated in all than DuplicateBound.
func (r Result) OK() bool {
	if r.Lost > 0 || r.InputLost > 0 {
		return false
	}
	if r.Guarantee == baton.ExactlyOnce.String() {
		return r.Duplicated == 0 && len(r.Duplicates) == 0 && len(r.Histories) == 0
	}
	return len(r.Unexcused()) == 0 && r.Duplicated <= r.DuplicateBound
}

func (r Result) String() string {
	var ev []string
	for _, k := range slices.Sorted(maps.Keys(r.Events)) {
		ev = append(ev, fmt.Sprintf("%s=%d", k, r.Events[k]))
	}
	lostIn := ""
	if r.InputLost > 0 {
		lostIn = fmt.Sprintf(" (input lost by the cluster: %d)", r.InputLost)
	}
	unexcused := ""
	if r.Guarantee != baton.ExactlyOnce.String() {
		unexcused = fmt.Sprintf(" of at most %d (the uncommitted work of %d losses)", r.DuplicateBound, len(r.Uncommitted))
		if r.Duplicated > r.DuplicateBound {
			unexcused += " - OVER THE BOUND"
		}
		if r.Duplicated > 0 {
			unexcused += fmt.Sprintf(" (%d of %d duplicated words unexcused)", len(r.Unexcused()), len(r.Duplicates))
		}
	}
	histories := ""
	if len(r.Histories) > 0 {
		histories = fmt.Sprintf("; committed histories not 1..n: %s", strings.Join(r.Histories, "; "))
	}
	if len(r.Splits) > 0 {
		histories += fmt.Sprintf("; transactions the brokers split: %s", strings.Join(r.Splits, "; "))
	}
	if r.SplitsUnread != "" {
		histories += fmt.Sprintf("; transaction markers not all read: %s", r.SplitsUnread)
	}
	return fmt.Sprintf("seed %d, %s: events %s; records in %d, words %d, lost %d, duplicated %d%s%s%s",
		r.Seed, r.Guarantee, strings.Join(ev, " "), r.RecordsIn, r.Words, r.Lost, r.Duplicated, unexcused, lostIn, histories)
}

// sessionTimeout is the instances' group session timeout.
const sessionTimeout = 2 * time.Second

type instance struct {
	id      string
	app     *baton.App
	cut     *faultnet.Cutter
	cancel  context.CancelFunc
	done    chan error
	started time.Time
}

type run struct {
	cfg     Config
	brokers []string
	dir     string
	dataDir string // the embedded cluster's persistence

	appID, lines, counts string
	// offsets reads the group's committed offsets and the end offsets of
	// the lines and repartition topics: around each loss, and every
	// 200 ms while input flows, into its history (what an instance the
	// group dropped without its knowing may have done twice: see
	// uncommitted.LostWork).
	offsets *uncommitted.Poller

	cmu     sync.Mutex
	cluster *cluster.Cluster // guarded by cmu
	start   time.Time
	rng     *rand.Rand

	mu     sync.Mutex
	failed int // instances whose Run returned an error
	alive  []*instance
	words  map[string]int64
	in     int64
	events []baton.Event
	next   int
	marks  []mark // when each event began
	losses []loss // when each instance was lost
	// uncommitted is, per loss, the work the lost instance may have done
	// without committing it; recordErr the first error reading it in an
	// instance's goroutine, recording the readings under way there (Add
	// under mu, and only until closed: then the counts are read, and a
	// loss no longer matters).
	uncommitted []Uncommitted
	recordErr   error
	recording   sync.WaitGroup
	closed      bool

	covered map[string]bool // the kinds of event that happened (the event loop's)
}

func (r *run) say(format string, args ...any) {
	if r.cfg.Out != nil {
		fmt.Fprintf(r.cfg.Out, "%6.1fs  %s\n", time.Since(r.start).Seconds(), fmt.Sprintf(format, args...))
	}
}

// Run performs one chaos run and returns what it saw. It returns an error
// only when the run itself could not be carried out.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if cfg.Duration == 0 {
		cfg.Duration = time.Minute
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	if cfg.Every == 0 {
		cfg.Every = 3 * time.Second
	}
	if cfg.Partitions == 0 {
		cfg.Partitions = 4
	}
	if cfg.MaxAlive == 0 {
		cfg.MaxAlive = 4
	}
	res := Result{Seed: cfg.Seed, Guarantee: cfg.Guarantee.String(), Events: map[string]int{}}
	if err := checkCover(cfg); err != nil {
		return res, err
	}
	dir, err := os.MkdirTemp("", "baton-chaos-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	r := &run{cfg: cfg, dir: dir, start: time.Now(), rng: rand.New(rand.NewPCG(cfg.Seed, 0xc4a05)), words: map[string]int64{},
		appID: "chaos", lines: "lines", counts: "counts", covered: map[string]bool{}}
	if ext := cfg.External; ext != nil {
		r.brokers = ext.Brokers
		r.appID, r.lines, r.counts = ext.Prefix+r.appID, ext.Prefix+r.lines, ext.Prefix+r.counts
	}
	if cfg.External == nil {
		r.dataDir = filepath.Join(dir, "cluster")
		c, err := cluster.Start("127.0.0.1:0", 1, kfake.DataDir(r.dataDir))
		if err != nil {
			return res, err
		}
		r.cluster, r.brokers = c, c.Addrs()
	}
	defer func() {
		r.cmu.Lock()
		defer r.cmu.Unlock()
		if r.cluster != nil {
			r.cluster.Close()
		}
	}()
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return res, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	r.offsets = uncommitted.NewPoller(adm, r.appID, r.lines, topology.RepartitionTopic(r.appID, "words"))
	compact := map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}
	for _, t := range []struct {
		name    string
		configs map[string]*string
	}{{r.lines, nil}, {r.counts, compact}} {
		resp, err := adm.CreateTopic(ctx, cfg.Partitions, -1, t.configs, t.name)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			return res, fmt.Errorf("chaos: creating topic %s: %w", t.name, err)
		}
	}
	defer r.stopAll()
	for range 2 {
		if _, err := r.startInstance(); err != nil {
			return res, err
		}
	}
	pctx, stopInput := context.WithCancel(ctx)
	produced := make(chan error, 1)
	go func() { produced <- r.produce(pctx, cl) }()
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		r.offsets.Poll(pctx)
	}()

	// Kinds to cover that have not happened when the duration ends get
	// up to as long again, on a loaded machine where a learner may warm
	// unseen several times in a row.
	deadline := time.Now().Add(cfg.Duration)
	coverBy := deadline.Add(cfg.Duration)
	for ctx.Err() == nil {
		if now := time.Now(); !now.Before(deadline) && (r.coveredAll() || !now.Before(coverBy)) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(cfg.Every):
		}
		begun := time.Now()
		kind, err := r.event()
		r.mu.Lock()
		r.marks = append(r.marks, mark{at: begun, event: kind})
		r.mu.Unlock()
		if err != nil {
			stopInput()
			return res, err
		}
		res.Events[kind]++
		r.covered[kind] = true
	}
	stopInput()
	r.mu.Lock()
	if r.failed > 0 {
		res.Events["failed"] = r.failed
	}
	r.mu.Unlock()
	if err := <-produced; err != nil {
		return res, err
	}
	<-polled
	r.say("input stopped; waiting for every count to settle")
	stored, parts, lines, err := r.readInput(ctx)
	if err != nil {
		return res, err
	}
	got, complete, err := r.settle(ctx, stored)
	if err != nil {
		return res, err
	}
	if !complete {
		res.Unsettled = r.unsettled(ctx)
	}
	// The counts are read: stop the instances, and with them the losses
	// and their readings of uncommitted work.
	r.stopAll()
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.recording.Wait()
	if cfg.Guarantee == baton.ExactlyOnce {
		seqs, err := counts.Sequences(ctx, r.brokers, r.counts)
		if err != nil {
			return res, fmt.Errorf("chaos: reading the output's history: %w", err)
		}
		res.Histories = counts.Exact(seqs, stored, 20)
	}
	words, err := r.wordPartitions(ctx, adm)
	if err != nil {
		return res, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.recordErr != nil {
		return res, r.recordErr
	}
	res.Intervals = intervals(r.start, time.Now(), r.marks, r.events, r.losses)
	res.Uncommitted = append(slices.Clone(r.uncommitted), uncommitted.LostWork(r.start, r.events, r.offsets.History())...)
	res.DuplicateBound = uncommitted.DuplicateBound(res.Uncommitted, lines)
	res.RecordsIn, res.Words = r.in, len(r.words)
	for w, n := range r.words {
		if stored[w] < n {
			res.InputLost += n - stored[w]
		}
	}
	for _, w := range slices.Sorted(maps.Keys(stored)) {
		want, have := stored[w], got[w]
		switch {
		case have < want:
			res.Lost += want - have
			res.LowWords = append(res.LowWords, w)
		case have > want:
			res.Duplicated += have - want
			d := Duplicate{Word: w, Extra: have - want, Tasks: []string{topology.TaskID(1, topology.Partition([]byte(w), words))}}
			for _, p := range parts[w] {
				d.Tasks = append(d.Tasks, topology.TaskID(0, p))
			}
			slices.Sort(d.Tasks)
			res.Duplicates = append(res.Duplicates, d)
		}
	}
	if cfg.Guarantee == baton.ExactlyOnce && !res.OK() {
		// Counts wrong under exactly-once: were transactions split by
		// the brokers (committed in some partitions, aborted in others)?
		r.mu.Unlock()
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		splits, err := txncheck.ReadSplits(sctx, r.brokers, r.counts, topology.ChangelogTopic(r.appID, "counts"), topology.RepartitionTopic(r.appID, "words"))
		cancel()
		r.mu.Lock()
		if err != nil {
			res.SplitsUnread = err.Error()
		}
		for _, sp := range splits {
			res.Splits = append(res.Splits, sp.String())
		}
	}
	return res, nil
}

// coveredAll reports whether every kind to cover has happened.
func (r *run) coveredAll() bool {
	for _, k := range r.cfg.Cover {
		if !r.covered[k] {
			return false
		}
	}
	return true
}

// event picks and performs one event, and returns its kind (with
// "-unseen" when the moment it waits for did not come; see Kinds).
func (r *run) event() (string, error) {
	r.mu.Lock()
	n := len(r.alive)
	r.mu.Unlock()
	choices := []string{}
	if n < r.cfg.MaxAlive {
		choices = append(choices, "join", "join")
	}
	if n > 1 {
		choices = append(choices, "drain", "crash")
	}
	if n > 1 && n < r.cfg.MaxAlive {
		choices = append(choices, "leader-crash", "handover-crash")
	}
	switch {
	case r.cfg.NoRestart:
	case r.cfg.External == nil:
		choices = append(choices, "cluster-restart")
	case r.cfg.External.RestartBroker != nil:
		choices = append(choices, "broker-restart")
	}
	// A kind to cover that has not happened yet comes first, when it can
	// happen now.
	var missing []string
	for _, k := range r.cfg.Cover {
		if !r.covered[k] && slices.Contains(choices, k) && !slices.Contains(missing, k) {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		choices = missing
	}
	kind := choices[r.rng.IntN(len(choices))]
	switch kind {
	case "cluster-restart", "broker-restart":
		return kind, r.restartCluster(kind)
	case "join":
		_, err := r.startInstance()
		return kind, err
	case "drain":
		victim := r.pick()
		r.say("%s drains", victim.id)
		victim.cancel()
		if err := r.wait(victim, 90*time.Second); err != nil {
			return kind, err
		}
	case "crash":
		victim := r.pick()
		r.say("%s crashes", victim.id)
		return kind, r.crash(victim, kind)
	case "handover-crash":
		// A new instance joins; it dies as soon as a stateful task has
		// been handed over to it, before or while it processes it.
		newcomer, handover, err := r.joinAndAwait(15*time.Second, func(e baton.Event, newcomer string) bool {
			return e.Kind == baton.EventAssigned && e.Instance == newcomer && strings.HasPrefix(e.Task, "1_")
		})
		if err != nil {
			return kind, err
		}
		r.say("%s crashes as a task is handed over to it (handover seen: %v)", newcomer.id, handover != nil)
		if err := r.crash(newcomer, kind); err != nil || handover == nil {
			return kind + "-unseen", err
		}
	case "leader-crash":
		// A new instance joins; the leader dies as soon as it starts a learner.
		// It counts as such only if the learner was still warming
		// when the leader was cut off.
		_, learner, err := r.joinAndAwait(10*time.Second, func(e baton.Event, _ string) bool {
			return e.Kind == baton.EventLearner
		})
		if err != nil {
			return kind, err
		}
		leader := r.leader()
		if leader == nil {
			r.say("no leader to crash")
			return kind + "-unseen", nil
		}
		warm := learner != nil && r.warming(*learner, time.Now())
		r.say("%s (leader) crashes while a learner warms (learner seen: %v, still warming: %v)", leader.id, learner != nil, warm)
		if err := r.crash(leader, kind); err != nil || !warm {
			return kind + "-unseen", err
		}
	}
	return kind, nil
}

// restartCluster stops the whole cluster and starts it again from its data
// directory on the same address, as an operator restarting Kafka would.
// Instances and the producer stay up and reconnect.
//
// On an external cluster, one broker is killed and restarted instead.
//
// Every instance alive counts as lost, and its uncommitted work is
// recorded: the committed offsets and end offsets read just before the
// cluster (the broker) goes down and again once it is back, each range
// from the lower committed offset to the higher end offset (a commit that
// lands after the first reading, or a commit the restart loses, or
// records that arrive after it only widen the ranges; see
// uncommitted.Ranges). The second reading waits until the instances have
// given up the tasks they ran (see awaitGivenUp).
func (r *run) restartCluster(kind string) error {
	now := time.Now()
	r.mu.Lock()
	alive := slices.Clone(r.alive)
	for _, in := range alive {
		r.losses = append(r.losses, loss{at: now, instance: in.id})
	}
	r.mu.Unlock()
	tasks := map[string][]string{}
	for _, in := range alive {
		tasks[in.id] = r.activeTasks(in, now)
	}
	before, err := r.offsets.Read(context.Background())
	if err != nil {
		return err
	}
	if ext := r.cfg.External; ext != nil {
		what, err := ext.RestartBroker(context.Background(), r.rng)
		r.say("%s", what)
		if err != nil {
			return err
		}
		r.awaitGivenUp(tasks, now)
		return r.recordUncommitted(kind, now, tasks, before)
	}
	if err := r.restartEmbedded(); err != nil {
		return err
	}
	r.awaitGivenUp(tasks, now)
	return r.recordUncommitted(kind, now, tasks, before)
}

// awaitGivenUp waits until every instance cut off by a restart at since
// (and still alive) has lost or revoked each task it ran then, for at
// most the session timeout and a second after the cluster is back.
// Usually they lost them while the cluster was down, and this returns at
// once. But a member the cluster kept through the restart may go on
// processing after it is back and lose its tasks only when its session
// runs out there: what it processes until then is done again, so the end
// offsets must be read after it. A task still held past the wait belongs
// to a member that kept its session: it commits that work itself.
func (r *run) awaitGivenUp(tasks map[string][]string, since time.Time) {
	var held []string
	given := tick.Until(context.Background(), sessionTimeout+time.Second, 20*time.Millisecond, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		held = nil
		for _, id := range slices.Sorted(maps.Keys(tasks)) {
			alive := slices.ContainsFunc(r.alive, func(in *instance) bool { return in.id == id })
			if still := stillHeld(r.events, id, tasks[id], since); alive && len(still) > 0 {
				held = append(held, fmt.Sprintf("%s %v", id, still))
			}
		}
		return len(held) == 0
	})
	if !given {
		r.say("still held since the restart: %s", strings.Join(held, ", "))
	}
}

// restartEmbedded closes the embedded cluster and starts it again.
func (r *run) restartEmbedded() error {
	r.cmu.Lock()
	defer r.cmu.Unlock()
	r.say("the cluster restarts")
	r.cluster.Close()
	r.cluster = nil
	down := time.Duration(500+r.rng.IntN(1500)) * time.Millisecond
	time.Sleep(down)
	var err error
	for range 50 { // the port may take a moment to be free again
		var c *cluster.Cluster
		if c, err = cluster.Start(r.brokers[0], 1, kfake.DataDir(r.dataDir)); err == nil {
			r.cluster = c
			r.say("the cluster is back after %v", down)
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("chaos: restarting the cluster: %w", err)
}

// activeTasks are the tasks instance in ran as active when it was lost
// (lost tasks count from since on): what its events say (activeAt) and
// what its status says, together (a task in either may have uncommitted
// work).
func (r *run) activeTasks(in *instance, since time.Time) []string {
	// Status outside r.mu: the instance's listener takes r.mu.
	st := in.app.Status()
	r.mu.Lock()
	tasks := activeAt(r.events, in.id, since)
	r.mu.Unlock()
	for _, ts := range st.Tasks {
		if ts.Role == "active" && !slices.Contains(tasks, ts.ID) {
			tasks = append(tasks, ts.ID)
		}
	}
	slices.Sort(tasks)
	return tasks
}

// recordUncommitted reads the offsets once more (after the loss) and
// records, for each instance lost at at and the tasks it ran then, the
// work it may have done without committing it (see uncommitted.Ranges).
func (r *run) recordUncommitted(cause string, at time.Time, tasks map[string][]string, before ...uncommitted.Offsets) error {
	after, err := r.offsets.Read(context.Background())
	if err != nil {
		return err
	}
	var us []Uncommitted
	for _, id := range slices.Sorted(maps.Keys(tasks)) {
		ranges, err := uncommitted.Ranges(tasks[id], append(before, after)...)
		if err != nil {
			return fmt.Errorf("chaos: the uncommitted work of %s (%s): %w", id, cause, err)
		}
		us = append(us, Uncommitted{Instance: id, Cause: cause, At: at.Sub(r.start), Tasks: ranges})
		var rs []string
		for _, task := range slices.Sorted(maps.Keys(ranges)) {
			rs = append(rs, fmt.Sprintf("%s [%d, %d)", task, ranges[task].From, ranges[task].To))
		}
		r.say("%s's uncommitted work (%s): %s", id, cause, strings.Join(rs, ", "))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.uncommitted = append(r.uncommitted, us...)
	return nil
}

// joinAndAwait starts an instance and waits up to timeout for an event
// that match accepts (given the newcomer's id). It returns the newcomer
// and the event, nil if it did not come.
func (r *run) joinAndAwait(timeout time.Duration, match func(e baton.Event, newcomer string) bool) (*instance, *baton.Event, error) {
	r.mu.Lock()
	since := len(r.events)
	r.mu.Unlock()
	newcomer, err := r.startInstance()
	if err != nil {
		return nil, nil, err
	}
	var seen *baton.Event
	tick.Until(context.Background(), timeout, 20*time.Millisecond, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, e := range r.events[since:] {
			if match(e, newcomer.id) {
				seen = &e
				return true
			}
		}
		return false
	})
	return newcomer, seen, nil
}

// warming reports whether the learner that learner started is still
// warming at the moment at: no learner-ready for its task on its
// instance came in between.
func (r *run) warming(learner baton.Event, at time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e.Kind == baton.EventLearnerReady && e.Instance == learner.Instance && e.Task == learner.Task &&
			!e.Time.Before(learner.Time) && e.Time.Before(at) {
			return false
		}
	}
	return true
}

func (r *run) pick() *instance {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.alive[r.rng.IntN(len(r.alive))]
}

// leader returns the instance that leads the group, waiting up to 5 s
// for one to say so (none may, in the middle of a rebalance); nil if none
// does.
func (r *run) leader() *instance {
	var leader *instance
	tick.Until(context.Background(), 5*time.Second, 50*time.Millisecond, func() bool {
		r.mu.Lock()
		alive := slices.Clone(r.alive)
		r.mu.Unlock()
		// Status outside r.mu: the instances' listeners take r.mu.
		for _, in := range alive {
			if in.app.Status().Leader {
				leader = in
				return true
			}
		}
		return false
	})
	return leader
}

// crash cuts an instance off the cluster (the group sees it die at the
// session timeout), records the work it did without committing it (read
// at once: cut off, it processes nothing more), then stops its
// process-side remains.
func (r *run) crash(in *instance, cause string) error {
	now := time.Now()
	in.cut.Cut()
	r.lose(in.id, true)
	tasks := r.activeTasks(in, now)
	r.remove(in)
	go func() {
		in.cancel()
		in.app.Leave()
		<-in.done
	}()
	return r.recordUncommitted(cause, now, map[string][]string{in.id: tasks})
}

// lose records that an instance was lost now; ends: it stops for good.
func (r *run) lose(id string, ends bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.losses = append(r.losses, loss{at: time.Now(), instance: id, ends: ends})
}

func (r *run) remove(in *instance) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, x := range r.alive {
		if x == in {
			r.alive = append(r.alive[:k], r.alive[k+1:]...)
			return
		}
	}
}

func (r *run) wait(in *instance, timeout time.Duration) error {
	r.remove(in)
	select {
	case err := <-in.done:
		if err != nil {
			return fmt.Errorf("chaos: %s: %w", in.id, err)
		}
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("chaos: %s did not drain within %v", in.id, timeout)
	}
}

func (r *run) startInstance() (*instance, error) {
	r.mu.Lock()
	r.next++
	id := "i" + strconv.Itoa(r.next)
	r.mu.Unlock()
	top, err := topology.WordCount(r.appID, r.lines, r.counts)
	if err != nil {
		return nil, err
	}
	cut := &faultnet.Cutter{}
	app, err := baton.New(top, baton.WithBrokers(r.brokers...), baton.WithAppID(r.appID), baton.WithInstanceID(id),
		baton.WithGuarantee(r.cfg.Guarantee), baton.WithTransactionTimeout(5*time.Second),
		baton.WithStateDir(filepath.Join(r.dir, id)), baton.WithSessionTimeout(sessionTimeout),
		baton.WithHeartbeatInterval(100*time.Millisecond), baton.WithRebalanceTimeout(3*time.Second),
		baton.WithAcceptableLag(50), baton.WithStandbys(r.rng.IntN(2)), baton.WithDrainTimeout(30*time.Second),
		baton.WithKafkaOptions(kgo.Dialer(cut.Dial)), baton.WithLogger(slog.New(slog.DiscardHandler)),
		baton.WithListener(func(e baton.Event) {
			r.mu.Lock()
			r.events = append(r.events, e)
			r.mu.Unlock()
		}))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{id: id, app: app, cut: cut, cancel: cancel, done: make(chan error, 1), started: time.Now()}
	go func() {
		err := app.Run(ctx)
		if err != nil && ctx.Err() == nil {
			// It stopped by itself: report it, and count it as a crash.
			r.say("%s stopped with an error: %v", id, err)
			now := time.Now()
			r.lose(id, true)
			r.mu.Lock()
			r.failed++
			record := !r.closed
			if record {
				r.recording.Add(1)
			}
			r.mu.Unlock()
			if record {
				// Its tasks: those it ran, and those it lost in its
				// whole life (it may have lost them as it failed).
				tasks := r.activeTasks(in, in.started)
				if err := r.recordUncommitted("failed", now, map[string][]string{id: tasks}); err != nil {
					r.mu.Lock()
					if r.recordErr == nil {
						r.recordErr = err
					}
					r.mu.Unlock()
				}
				r.recording.Done()
			}
			r.remove(in)
		}
		in.done <- err
	}()
	r.mu.Lock()
	r.alive = append(r.alive, in)
	r.mu.Unlock()
	r.say("%s joins", id)
	return in, nil
}

func (r *run) stopAll() {
	r.mu.Lock()
	alive := append([]*instance(nil), r.alive...)
	r.alive = nil
	r.mu.Unlock()
	for _, in := range alive {
		in.cancel()
		in.app.Leave()
	}
	for _, in := range alive {
		select {
		case <-in.done:
		case <-time.After(20 * time.Second):
		}
	}
}

// produce writes lines of words from a small vocabulary until ctx ends,
// remembering every occurrence it got acknowledged. Line n goes to input
// partition n mod Partitions, and its words name that partition: a
// word's input is in one partition, so a duplicate of it points at few
// tasks (see Duplicate).
func (r *run) produce(ctx context.Context, cl *kgo.Client) error {
	n := 0
	return tick.Every(ctx, 20*time.Millisecond, func() error {
		var recs []*kgo.Record
		counted := map[string]int64{}
		for range 10 {
			p := int32(n) % r.cfg.Partitions
			k := n / int(r.cfg.Partitions)
			line := fmt.Sprintf("p%d.w%d p%d.v%d", p, k%125, p, (k*7)%78)
			for _, w := range strings.Fields(line) {
				counted[w]++
			}
			recs = append(recs, &kgo.Record{Topic: r.lines, Partition: p, Key: []byte(strconv.Itoa(n)), Value: []byte(line)})
			n++
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			return fmt.Errorf("chaos: producing: %w", err)
		}
		r.mu.Lock()
		for w, c := range counted {
			r.words[w] += c
		}
		r.in += int64(len(recs))
		r.mu.Unlock()
		return nil
	})
}

// readInput counts the words of every line the input topic holds, says
// which input partitions hold each word (sorted), and gives each
// partition's lines with their numbers of words, in offset order.
func (r *run) readInput(ctx context.Context) (map[string]int64, map[string][]int32, map[int32][]uncommitted.Line, error) {
	out := map[string]int64{}
	parts := map[string][]int32{}
	lines, err := uncommitted.ReadLines(ctx, r.brokers, r.lines, func(rec *kgo.Record, words []string) {
		for _, w := range words {
			out[w]++
			if !slices.Contains(parts[w], rec.Partition) {
				parts[w] = append(parts[w], rec.Partition)
				slices.Sort(parts[w])
			}
		}
	})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("chaos: reading the input back: %w", err)
	}
	return out, parts, lines, nil
}

// wordPartitions returns the partitions of the repartition topic the
// words go through: a word is counted by the task of its partition there.
func (r *run) wordPartitions(ctx context.Context, adm *kadm.Client) (int32, error) {
	topic := topology.RepartitionTopic(r.appID, "words")
	td, err := adm.ListTopics(ctx, topic)
	if err == nil {
		err = td.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("chaos: listing %s: %w", topic, err)
	}
	n := int32(len(td[topic].Partitions))
	if n == 0 {
		return 0, fmt.Errorf("chaos: %s has no partitions", topic)
	}
	return n, nil
}

// settle waits until the counts stop changing and every word is counted at
// least as often as it occurred (or two minutes pass), and returns them
// and whether every word was.
func (r *run) settle(ctx context.Context, input map[string]int64) (map[string]int64, bool, error) {
	deadline := time.Now().Add(2 * time.Minute)
	var last map[string]int64
	for {
		got, err := counts.Read(ctx, r.brokers, r.counts)
		if err != nil {
			return nil, false, err
		}
		complete := true
		for w, n := range input {
			complete = complete && got[w] >= n
		}
		if (complete && fmt.Sprint(got) == fmt.Sprint(last)) || time.Now().After(deadline) {
			return got, complete, nil
		}
		last = got
		time.Sleep(time.Second)
	}
}

// unsettled describes, for a run whose counts never settled, what every
// live instance reports (its group generation, whether a poll of its
// input is under way and when the last one returned, and per task its
// role, the records it processed and those polled and waiting) and, per
// task, the group's committed input offset against the input's end.
func (r *run) unsettled(ctx context.Context) string {
	var b strings.Builder
	r.mu.Lock()
	alive := slices.Clone(r.alive)
	r.mu.Unlock()
	for _, in := range alive {
		st := in.app.Status()
		fmt.Fprintf(&b, "%s: generation %d, polling %v, last poll %s ago;", in.id, st.Generation, st.Polling,
			time.Since(st.PolledAt).Round(time.Millisecond))
		for _, ts := range st.Tasks {
			fmt.Fprintf(&b, " %s=%s(processed %d, waiting %d, lag %d)", ts.ID, ts.Role, ts.Processed, ts.Waiting, ts.Lag)
		}
		b.WriteString("\n")
	}
	o, err := r.offsets.ReadOnce(ctx)
	if err != nil {
		fmt.Fprintf(&b, "offsets unread: %v", err)
		return b.String()
	}
	b.WriteString("input committed/end:")
	for _, id := range slices.Sorted(maps.Keys(o.End)) {
		fmt.Fprintf(&b, " %s %d/%d", id, o.Committed[id], o.End[id])
	}
	return b.String()
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/term"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/cluster"
	"github.com/baton-streams/baton/instance"
	"github.com/baton-streams/baton/internal/counts"
	"github.com/baton-streams/baton/internal/tick"
	"github.com/baton-streams/baton/internal/uncommitted"
	"github.com/baton-streams/baton/topology"
)

var demoCmd = &cobra.Command{
	Use:   "demo",
	Short: "Watch a stateful group scale out while records flow, on an embedded cluster",
	Long: `demo starts an embedded Kafka-compatible cluster, a producer of text lines and
two wordcount instances with real state (Pebble, in a temporary directory).
While records flow, a third instance joins: it warms learners, and tasks move
to it in cooperative handovers. The demo prints what happens as it happens,
then the handover gap of every moved task, and checks every count.`,
	Args: cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		if auto, _ := cmd.Flags().GetBool("autoscale"); auto {
			return runAutoscaleDemo(cmd.Context(), os.Stdout)
		}
		if !term.IsTerminal(int(os.Stdout.Fd())) {
			return runDemo(cmd.Context(), os.Stdout, nil)
		}
		pg := newProgress(os.Stdout) // learners' restores as bars
		defer pg.stop()
		return runDemo(cmd.Context(), pg.Writer(), pg)
	},
}

func init() {
	demoCmd.Flags().Bool("autoscale", false, "instead: a load spike then a lull, with a supervisor that starts and drains instances as the group's autoscale recommendation says")
	rootCmd.AddCommand(demoCmd)
}

// The wordcount both demos run: its application id (the group), its input
// and output topics, and the name of the repartition between the tasks
// that split lines (0_p) and those that count words (1_p).
const (
	demoApp    = "demo"
	demoLines  = "lines"
	demoCounts = "counts"
	demoWords  = "words"
)

// demo is one run of the demo: the cluster, the instances, the producer and
// what was seen.
type demo struct {
	out     io.Writer
	start   time.Time
	brokers []string
	dir     string
	// offsets reads the group's committed offsets and the end offsets of
	// the lines and repartition topics every 200 ms (see pollOffsets): what
	// verify bounds the lost tasks' work done again with.
	offsets *uncommitted.Poller

	mu     sync.Mutex
	events []baton.Event
	words  map[string]int64
	joinAt time.Time // when i3 joined; the story starts here
	quiet  bool      // the summary is printed: stop narrating
	apps   map[string]*baton.App
	stops  map[string]context.CancelFunc
	dones  map[string]chan error

	// build makes an instance's topology and opts adds to its options;
	// the plain demo's when nil.
	build func() (*topology.Topology, error)
	opts  []baton.Option
	// listener, when set, also receives every event; terse narrates only
	// the stateful tasks' moves.
	listener baton.Listener
	terse    bool
}

func newDemo(out io.Writer) *demo {
	return &demo{out: out, start: time.Now(), words: map[string]int64{}, apps: map[string]*baton.App{},
		stops: map[string]context.CancelFunc{}, dones: map[string]chan error{}}
}

func (d *demo) say(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.quiet {
		return
	}
	fmt.Fprintf(d.out, "%6.1fs  %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, args...))
}

// runDemo runs the demo, narrating to out; with pg, learners' progress
// shows as bars instead of lines.
func runDemo(ctx context.Context, out io.Writer, pg *progress) error {
	if ctx == nil {
		ctx = context.Background()
	}
	d := newDemo(out)
	cleanup, err := d.setUp()
	if err != nil {
		return err
	}
	defer cleanup()
	fmt.Fprintln(out, "baton demo: wordcount on an embedded cluster; a third instance joins while records flow.")

	fmt.Fprintln(out, "Tasks 0_p split lines (stateless); tasks 1_p count words in a Pebble store (stateful).")
	fmt.Fprintln(out)
	d.say("cluster ready at %s", strings.Join(d.brokers, ","))

	cl, err := d.createTopics(ctx, distinct)
	if err != nil {
		return err
	}
	defer cl.Close()
	defer d.pollOffsets(ctx, cl)()

	defer d.stopAll()
	for _, id := range []string{"i1", "i2"} {
		if err := d.startInstance(id); err != nil {
			return err
		}
	}
	if err := d.waitFor(ctx, 40*time.Second, "i1 and i2 to share the work", func() bool { return d.balanced("i1", "i2") }); err != nil {
		return err
	}
	d.say("i1 and i2 run all %d tasks; starting a steady producer (about 1000 lines/s)", 2*partitions)

	pctx, stopProducer := context.WithCancel(ctx)
	produced := make(chan error, 1)
	go func() { produced <- d.produce(pctx, cl, func() int { return 20 }) }()
	time.Sleep(3 * time.Second)

	d.say("i3 joins the group")
	joinAt := time.Now()
	d.mu.Lock()
	d.joinAt = joinAt
	d.mu.Unlock()
	if err := d.startInstance("i3"); err != nil {
		stopProducer()
		return err
	}
	watch, stopWatch := context.WithCancel(ctx)
	if pg != nil {
		d.mu.Lock()
		i3 := d.apps["i3"]
		d.mu.Unlock()
		go pg.watch(watch, i3.Status)
	} else {
		go d.watchLearners(watch)
	}
	err = d.waitFor(ctx, 40*time.Second, "i3 to take its share", func() bool { return d.balanced("i1", "i2", "i3") && d.noLearners() })
	stopWatch()
	if err != nil {
		stopProducer()
		return err
	}
	balancedIn := time.Since(joinAt)
	d.say("balanced: every instance runs its share, no learner left (%.1fs after the join)", balancedIn.Seconds())
	time.Sleep(3 * time.Second)
	stopProducer()
	if err := <-produced; err != nil {
		return err
	}
	d.say("producer stopped; checking every count")
	verified, err := d.verify(ctx)
	if err != nil {
		return err
	}
	d.summary(verified, balancedIn)
	return nil
}

// setUp starts the embedded cluster and makes the state directory; the
// returned func undoes both.
func (d *demo) setUp() (func(), error) {
	dir, err := os.MkdirTemp("", "baton-demo-")
	if err != nil {
		return nil, err
	}
	c, err := cluster.Start("127.0.0.1:0", 1)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	d.dir, d.brokers = dir, c.Addrs()
	return func() { c.Close(); os.RemoveAll(dir) }, nil
}

// createTopics creates the input and output topics and writes n distinct
// words: real state, thousands of words in every count task. It returns
// the producer to go on with.
func (d *demo) createTopics(ctx context.Context, n int) (*kgo.Client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(d.brokers...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return nil, err
	}
	adm := kadm.NewClient(cl)
	compact := map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, demoLines); err != nil {
		cl.Close()
		return nil, err
	}
	if _, err := adm.CreateTopic(ctx, partitions, 1, compact, demoCounts); err != nil {
		cl.Close()
		return nil, err
	}
	var recs []*kgo.Record
	for i := range n {
		w := "w" + strconv.Itoa(i)
		d.words[w]++
		recs = append(recs, &kgo.Record{Topic: demoLines, Key: []byte(w), Value: []byte(w)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		cl.Close()
		return nil, err
	}
	d.say("produced %d distinct words: the counts' state to move", n)
	return cl, nil
}

func (d *demo) startInstance(id string) error {
	build := d.build
	if build == nil {
		build = func() (*topology.Topology, error) { return topology.WordCount(demoApp, demoLines, demoCounts) }
	}
	top, err := build()
	if err != nil {
		return err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	listen := d.listen
	if d.listener != nil {
		listen = func(e baton.Event) { d.listen(e); d.listener(e) }
	}
	opts := append([]baton.Option{baton.WithBrokers(d.brokers...), baton.WithAppID(demoApp), baton.WithInstanceID(id),
		baton.WithStateDir(d.dir + "/" + id), baton.WithAcceptableLag(100), baton.WithLogger(quiet),
		baton.WithSessionTimeout(3 * time.Second), baton.WithRebalanceTimeout(5 * time.Second), baton.WithListener(listen)}, d.opts...)
	app, err := baton.New(top, opts...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	d.mu.Lock()
	d.apps[id], d.stops[id], d.dones[id] = app, cancel, done
	d.mu.Unlock()
	go func() { done <- app.Run(ctx) }()
	return nil
}

func (d *demo) stopAll() {
	d.mu.Lock()
	ids := make([]string, 0, len(d.apps))
	for id := range d.apps {
		ids = append(ids, id)
	}
	d.mu.Unlock()
	for _, id := range ids {
		d.stops[id]()
		d.apps[id].Leave()
	}
	for _, id := range ids {
		select {
		case <-d.dones[id]:
		case <-time.After(20 * time.Second):
		}
	}
}

// listen prints what matters as it happens.
func (d *demo) listen(e baton.Event) {
	d.mu.Lock()
	d.events = append(d.events, e)
	app := d.apps[e.Instance]
	story := !d.joinAt.IsZero()
	terse := d.terse
	d.mu.Unlock()
	if !story {
		return
	}
	if terse && (e.Kind == baton.EventLeader || !strings.HasPrefix(e.Task, "1_")) {
		return
	}
	switch e.Kind {
	case baton.EventLeader:
		if app == nil {
			return
		}
		if p := app.Status().Plan; p != nil {
			for _, r := range p.Reasons {
				if strings.HasPrefix(r, "learner ") || strings.HasPrefix(r, "revoke ") || strings.HasPrefix(r, "orphan ") {
					d.say("leader %s: %s", e.Instance, r)
				}
			}
		}
	case baton.EventLearner:
		what := fmt.Sprintf("%d records", e.Lag)
		if e.Lag == instance.UnknownLag {
			what = "its state"
		}
		d.say("%s starts a learner for %s: restoring %s from the changelog while the owner keeps processing", e.Instance, e.Task, what)
	case baton.EventLearnerReady:
		d.say("%s: learner %s is caught up (lag %d); %s rejoins at once", e.Instance, e.Task, e.Lag, e.Instance)
	case baton.EventRevoked:
		d.say("%s commits and hands over %s", e.Instance, e.Task)
	case baton.EventLost:
		d.say("%s lost %s without a commit: its work since the last commit is done again", e.Instance, e.Task)
	case baton.EventAssigned:
		lag := fmt.Sprint(e.Lag)
		if e.Lag == instance.UnknownLag {
			lag = "unknown"
		}
		d.say("%s runs %s (%s, lag %s)", e.Instance, e.Task, e.Detail, lag)
	}
}

// watchLearners prints learners' progress twice a second.
func (d *demo) watchLearners(ctx context.Context) {
	_ = tick.Every(ctx, 500*time.Millisecond, func() error {
		d.mu.Lock()
		app := d.apps["i3"]
		d.mu.Unlock()
		var parts []string
		for _, t := range app.Status().Tasks {
			if t.Role == "learner" {
				parts = append(parts, fmt.Sprintf("%s lag %d", t.ID, t.Lag))
			}
		}
		if len(parts) > 0 {
			d.say("i3 learners: %s", strings.Join(parts, ", "))
		}
		return nil
	})
}

// distinct is the number of distinct words the demo starts with: the
// state the counts carry (about 75,000 keys per count task).
const distinct = 300000

// partitions of the input: 2 tasks each (split, count).
const partitions = 6

// produce writes lines of three words every 20ms until ctx is done:
// perTick() lines each time.
func (d *demo) produce(ctx context.Context, cl *kgo.Client, perTick func() int) error {
	vocab := strings.Fields("stream state task learner standby active instance worker kafka baton group plan move warm cold handover")
	n := 0
	return tick.Every(ctx, 20*time.Millisecond, func() error {
		var recs []*kgo.Record
		d.mu.Lock()
		for range perTick() {
			line := []string{vocab[n%len(vocab)], vocab[(n*7)%len(vocab)], "w" + strconv.Itoa(n%distinct)}
			for _, w := range line {
				d.words[w]++
			}
			recs = append(recs, &kgo.Record{Topic: demoLines, Key: []byte(strconv.Itoa(n)), Value: []byte(strings.Join(line, " "))})
			n++
		}
		d.mu.Unlock()
		if len(recs) == 0 {
			return nil
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			return fmt.Errorf("producing: %w", err)
		}
		return nil
	})
}

func (d *demo) owners(ids ...string) map[string]string {
	out := map[string]string{}
	for _, id := range ids {
		d.mu.Lock()
		app := d.apps[id]
		d.mu.Unlock()
		for _, t := range app.Status().Tasks {
			if t.Role == "active" {
				out[t.ID] = id
			}
		}
	}
	return out
}

func (d *demo) balanced(ids ...string) bool {
	o := d.owners(ids...)
	if len(o) != 2*partitions {
		return false
	}
	for _, id := range ids {
		n := 0
		for task, owner := range o {
			if owner == id && strings.HasPrefix(task, "1_") {
				n++
			}
		}
		if n == 0 {
			return false
		}
	}
	return true
}

func (d *demo) noLearners() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, app := range d.apps {
		for _, t := range app.Status().Tasks {
			if t.Role == "learner" {
				return false
			}
		}
	}
	return true
}

func (d *demo) waitFor(ctx context.Context, timeout time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("demo: timed out waiting for %s", what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// pollOffsets reads, through cl, the group's committed offsets and the end
// offsets of the lines and repartition topics every 200 ms into
// d.offsets' history, from now until the returned func is called (it
// waits for the polling to end).
func (d *demo) pollOffsets(ctx context.Context, cl *kgo.Client) (stop func()) {
	d.offsets = uncommitted.NewPoller(kadm.NewClient(cl), demoApp, demoLines, topology.RepartitionTopic(demoApp, demoWords))
	pctx, cancel := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		d.offsets.Poll(pctx)
	}()
	return func() { cancel(); <-polled }
}

// verify waits until the output topic holds the produced counts: exactly
// them, or, once an instance lost tasks without a commit, at least them
// and no more occurrences above them in all than the lost tasks'
// uncommitted work can count again (at-least-once does the lost work
// again; it never drops any, and it redoes no more than that work). What
// it found is the verification line the summary ends with.
func (d *demo) verify(ctx context.Context) (string, error) {
	deadline := time.Now().Add(30 * time.Second)
	var lines map[int32][]uncommitted.Line // the input, read once tasks were lost
	for {
		got, err := counts.Read(ctx, d.brokers, demoCounts)
		if err != nil {
			return "", err
		}
		d.mu.Lock()
		events := slices.Clone(d.events)
		lost := d.lostLocked()
		d.mu.Unlock()
		var bound int64
		if len(lost) > 0 {
			if lines == nil {
				if lines, err = uncommitted.ReadLines(ctx, d.brokers, demoLines, nil); err != nil {
					return "", fmt.Errorf("demo: tasks were lost (%s), and the input to bound their work with could not be read: %w",
						strings.Join(lost, ", "), err)
				}
			}
			if bound, err = d.lostBound(ctx, events, lines); err != nil {
				return "", err
			}
		}
		d.mu.Lock()
		excess, bad := compareCounts(d.words, got, len(lost) > 0, bound)
		words := len(d.words)
		d.mu.Unlock()
		if bad == "" {
			return verifiedLine(words, excess, bound, lost), nil
		}
		if time.Now().After(deadline) {
			if len(lost) > 0 {
				bad += " (after " + strings.Join(lost, ", ") + ")"
			}
			return "", errors.New("demo: counts are wrong: " + bad)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// lostBound is the most occurrences the uncommitted work of the tasks
// events say were lost can count again (uncommitted.LostWork weighed by
// uncommitted.DuplicateBound against the input's lines). It first records
// one more reading of the offsets, so that every loss in events has a
// reading after it.
func (d *demo) lostBound(ctx context.Context, events []baton.Event, lines map[int32][]uncommitted.Line) (int64, error) {
	if d.offsets == nil {
		return 0, errors.New("demo: tasks were lost, but no offsets were read to bound their work with")
	}
	if err := d.offsets.Record(ctx); err != nil {
		return 0, fmt.Errorf("demo: reading the offsets to bound the lost tasks' work: %w", err)
	}
	return uncommitted.DuplicateBound(uncommitted.LostWork(d.start, events, d.offsets.History()), lines), nil
}

// compareCounts checks the counts read against those produced. With no
// task lost, each must be equal. When tasks were lost (at-least-once
// redid their uncommitted work), each must be at least equal, and the
// excess, the occurrences counted above the produced ones summed over
// every word, at most bound (what that work can count again). A word
// counted but never produced is wrong either way. excess is returned
// whatever the verdict; bad says what fails: the first word, in sorted
// order, whose count is wrong by itself, else an excess over the bound
// (with the first word over). It walks the maps once each and sorts
// nothing: the demo polls it over hundreds of thousands of words.
func compareCounts(want, got map[string]int64, lost bool, bound int64) (excess int64, bad string) {
	first, firstOver := "", "" // the first word wrong by itself, the first over
	for w, n := range want {
		g := got[w]
		if g > n {
			excess += g - n
			if firstOver == "" || w < firstOver {
				firstOver = w
			}
		}
		if (g < n || g > n && !lost) && (first == "" || w < first) {
			first = w
		}
	}
	for w := range got {
		if _, ok := want[w]; !ok && (first == "" || w < first) {
			first = w
		}
	}
	switch {
	case first != "":
		bad = fmt.Sprintf("%s: got %d, want %d", first, got[first], want[first])
	case lost && excess > bound:
		bad = fmt.Sprintf("the counts exceed the occurrences by %d (the first word over: %s: got %d, want %d), "+
			"more than the %d the lost tasks' uncommitted work could count again", excess, firstOver, got[firstOver], want[firstOver], bound)
	}
	return excess, bad
}

// lostLocked lists the tasks lost without a commit ("i2 lost 1_1"), in the
// order they were lost; d.mu is held.
func (d *demo) lostLocked() []string {
	var lost []string
	for _, e := range d.events {
		if e.Kind == baton.EventLost {
			lost = append(lost, e.Instance+" lost "+e.Task)
		}
	}
	return lost
}

// verifiedLine is the verification's result as the summary's last line:
// with tasks lost, the excess counted and the bound it kept within.
func verifiedLine(words int, excess, bound int64, lost []string) string {
	if len(lost) == 0 {
		return fmt.Sprintf("Verified: all %d words have exactly the count of their occurrences.", words)
	}
	return fmt.Sprintf("Verified: all %d words have at least the count of their occurrences, %d more than it, "+
		"within the %d the lost tasks' uncommitted work could count again (%s).", words, excess, bound, strings.Join(lost, ", "))
}

// summary prints the handover of every moved task and the result.
func (d *demo) summary(verified string, balancedIn time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.quiet = true
	type move struct {
		task, from, to string
		last, first    time.Time
		lag            int64
		replayed       int64
	}
	// A task may move more than once (a stateless task that stood in on
	// the new instance goes back): each last record on its owner begins
	// a move, which the next assignment and first record complete.
	moves := map[string][]*move{}
	for _, e := range d.events {
		if e.Time.Before(d.joinAt) {
			continue
		}
		ms := moves[e.Task]
		var m *move
		if len(ms) > 0 {
			m = ms[len(ms)-1]
		}
		switch e.Kind {
		case baton.EventLastRecord:
			moves[e.Task] = append(ms, &move{task: e.Task, from: e.Instance, last: e.Time})
		case baton.EventAssigned:
			if m == nil || m.to != "" {
				m = &move{task: e.Task}
				moves[e.Task] = append(ms, m)
			}
			m.to, m.lag = e.Instance, e.Lag
		case baton.EventFirstRecord:
			if m != nil && e.Instance == m.to && m.first.IsZero() {
				m.first = e.Time
			}
		case baton.EventRestored:
			if m != nil {
				m.replayed = e.Replayed
			}
		}
	}
	fmt.Fprintln(d.out)
	fmt.Fprintln(d.out, "Handovers (gap: last record processed by the old owner to the first by the new one):")
	fmt.Fprintf(d.out, "  %-5s %-4s %-4s %10s %8s %10s\n", "task", "from", "to", "gap", "lag", "replayed")
	ids := make([]string, 0, len(moves))
	for id := range moves {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		for _, m := range moves[id] {
			if m.from == "" || m.to == "" {
				continue
			}
			gap := "-"
			if !m.first.IsZero() && !m.last.IsZero() {
				gap = m.first.Sub(m.last).Round(time.Millisecond).String()
			}
			fmt.Fprintf(d.out, "  %-5s %-4s %-4s %10s %8d %10d\n", m.task, m.from, m.to, gap, m.lag, m.replayed)
		}
	}
	fmt.Fprintln(d.out)
	fmt.Fprintln(d.out, "Records processed per instance:")
	ids = ids[:0]
	for id := range d.apps {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		var n int64
		for _, t := range d.apps[id].Status().Tasks {
			n += t.Processed
		}
		fmt.Fprintf(d.out, "  %s  %d\n", id, n)
	}
	fmt.Fprintln(d.out)
	fmt.Fprintf(d.out, "%s Time to balance after the join: %.1fs.\n", verified, balancedIn.Seconds())
}

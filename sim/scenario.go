package sim

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/baton-streams/baton/assign"
	"github.com/baton-streams/baton/lifecycle"
)

// Scenario is a parsed scenario file: the group at time 0, the events that
// happen to it and what is expected of the outcome. Every random choice a
// scenario asks for (a state size drawn from a range) is made at parse time
// from Seed, so a Scenario value is fully concrete.
type Scenario struct {
	Name      string
	Seed      uint64
	Config    assign.Config
	Timing    Timing
	Limit     time.Duration // simulated time after which the run stops
	Tasks     []TaskSpec
	Instances []InstanceSpec
	Events    []Event
	Expects   []Expect

	// Input is the group's input rate over time (records/s), piecewise
	// constant from the `load` lines, ramps taken in steps of a second;
	// empty when the scenario has no load. LoadChanges are the lines as
	// written, and WorkerRate is what one worker processes per second.
	Input       []LoadStep
	LoadChanges []LoadChange
	WorkerRate  float64
	// Autoscalers are the `autoscale` lines, at most one of each kind.
	Autoscalers []AutoscaleSpec
}

// Timing holds the protocol delays of the model.
type Timing struct {
	// Heartbeat is the members' heartbeat interval: a member that did
	// not ask for a rebalance learns of it at its next heartbeat
	// (Kafka's heartbeat.interval.ms). Default 3s.
	Heartbeat time.Duration
	// Join is the time from the last member's JoinGroup of a round to
	// the leader's plan, Sync from the plan to the members' assignments.
	// Default 100ms each.
	Join, Sync time.Duration
	// Session is how long the group takes to notice a crashed member
	// (session.timeout.ms). Default 45s.
	Session time.Duration
	// Commit is the commit interval: a crash makes the new owner
	// reprocess the input since the last commit. Default 30s.
	Commit time.Duration
	// Probing is the probing rebalance interval of the probing policy
	// (probing.rebalance.interval.ms). Default 10m.
	Probing time.Duration
	// Start is the time from when an active can run (its plan applied,
	// its state restored) to its first record: its owner fetches its
	// input. Default 0.
	Start time.Duration
	// Early is when, after its assignment, a member of a cooperative
	// group sends one heartbeat ahead of its timer, which then starts
	// again from it (franz-go's, 500ms); 0: none. Not under eager.
	Early time.Duration
}

// DefaultTiming returns Kafka's client defaults.
func DefaultTiming() Timing {
	return Timing{
		Heartbeat: 3 * time.Second,
		Join:      100 * time.Millisecond,
		Sync:      100 * time.Millisecond,
		Session:   45 * time.Second,
		Commit:    30 * time.Second,
		Probing:   10 * time.Minute,
		Early:     500 * time.Millisecond,
	}
}

// Defaults of the model for fields a scenario leaves out.
const (
	DefaultRestoreRate = 100000 // records/s an instance restores
	DefaultStateSize   = 1e6    // records of state per stateful task
	DefaultInputRate   = 10     // records/s a task writes to its changelog
	DefaultLimit       = 24 * time.Hour
)

// TaskSpec describes one task.
type TaskSpec struct {
	ID       assign.TaskID
	Stateful bool
	Load     float64
	State    float64 // records in the changelog at time 0
	Rate     float64 // records/s the task writes while it processes
	// Dealt: no instance line names the task (active= or standby=), so
	// its time-0 placement in Scenario.Instances, its active and its
	// standbys, is the parser's deal, which a policy with
	// Policy.SettledStart replaces.
	Dealt bool
}

// InstanceSpec describes one instance present at time 0.
type InstanceSpec struct {
	ID       string
	Capacity int
	Rack     string
	// Process is the instance's process id, which orders the clients of
	// the probing policy (Kafka Streams deals its tasks over its clients
	// in the order of their random process ids); empty: the id orders
	// it (ProcessKey).
	Process string
	Restore float64 // records/s
	// Active and Standby place tasks explicitly; tasks placed nowhere are
	// dealt to the instances in proportion to capacity (TaskSpec.Dealt).
	Active, Standby []assign.TaskID
	// Disk is state of stateful tasks the instance holds on disk at time
	// 0 in no role (left there by an earlier move), each some records
	// behind its changelog's end.
	Disk []DiskCopy
	// Beat is the instance's first heartbeat after time 0; its next ones
	// follow every heartbeat. 0: a heartbeat after 0 (as if it got its
	// assignment at 0).
	Beat time.Duration
}

// DiskCopy is a task's state on an instance's disk, Lag records behind
// the changelog's end.
type DiskCopy struct {
	Task assign.TaskID
	Lag  float64
}

// EventKind names what happens in an Event.
type EventKind string

// The events of a scenario.
const (
	EventJoin     EventKind = "join"     // a new instance joins
	EventCrash    EventKind = "crash"    // an instance dies; the group notices after the session timeout
	EventLeave    EventKind = "leave"    // an instance drains and leaves (scale-in)
	EventRestart  EventKind = "restart"  // an instance stops, keeps its disk and comes back after Down
	EventCapacity EventKind = "capacity" // an instance's capacity changes; it rejoins
	EventSlow     EventKind = "slow"     // an instance's restore rate changes
)

// Event is one line `at TIME KIND ...` of a scenario.
type Event struct {
	At       time.Duration
	Kind     EventKind
	Instance InstanceSpec // for join: the new instance; otherwise only ID is used
	Capacity int          // capacity events
	Restore  float64      // slow events
	Down     time.Duration
	Line     int
}

// Expect is one `expect ...` assertion.
type Expect struct {
	Text     string // the line, without "expect"
	Kind     string // balanced, unavailable, unavailable-seconds, moves, moves-per-task, restored, rebalances, no-thrash
	By       time.Duration
	Max      float64
	Policies []string // empty: every policy
	Line     int
}

// ParseError is a scenario error that names the line.
type ParseError struct {
	Name string
	Line int
	Msg  string
}

func (e *ParseError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.Name, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s", e.Name, e.Line, e.Msg)
}

type parser struct {
	name     string
	line     int
	sc       *Scenario
	rng      *rand.Rand
	taskIdx  map[assign.TaskID]int
	instIdx  map[string]bool
	nextAuto int
	limitSet bool
}

// Parse reads a scenario. name is used in error messages (a file name).
func Parse(name string, r io.Reader) (*Scenario, error) {
	p := &parser{
		name:    name,
		sc:      &Scenario{Name: name, Seed: 1, Config: assign.DefaultConfig(), Timing: DefaultTiming(), Limit: DefaultLimit},
		taskIdx: map[assign.TaskID]int{},
		instIdx: map[string]bool{},
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	var lines [][]string
	var lineNo []int
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		f := strings.Fields(text)
		if len(f) == 0 {
			continue
		}
		lines = append(lines, f)
		lineNo = append(lineNo, n)
	}
	if err := sc.Err(); err != nil {
		return nil, &ParseError{Name: name, Msg: err.Error()}
	}
	// The seed line is read first wherever it is, so that every random
	// draw depends on it alone.
	for i, f := range lines {
		if f[0] == "seed" {
			p.line = lineNo[i]
			if len(f) != 2 {
				return nil, p.errf("want `seed N`")
			}
			v, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return nil, p.errf("seed %q is not a non-negative integer", f[1])
			}
			p.sc.Seed = v
		}
	}
	p.rng = rand.New(rand.NewPCG(p.sc.Seed, 0x5eed))
	for i, f := range lines {
		p.line = lineNo[i]
		if err := p.parseLine(f); err != nil {
			return nil, err
		}
	}
	p.line = 0
	if err := p.finish(); err != nil {
		return nil, err
	}
	return p.sc, nil
}

// ParseString is Parse on a string.
func ParseString(name, text string) (*Scenario, error) {
	return Parse(name, bytes.NewReader([]byte(text)))
}

func (p *parser) errf(format string, args ...any) error {
	return &ParseError{Name: p.name, Line: p.line, Msg: fmt.Sprintf(format, args...)}
}

// kv splits key=value arguments; bare words are returned as flags.
func (p *parser) kv(args []string, allowed ...string) (map[string]string, error) {
	m := map[string]string{}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok {
			k, v = a, ""
		}
		found := false
		for _, al := range allowed {
			if al == k {
				found = true
			}
		}
		if !found {
			return nil, p.errf("unknown setting %q (want one of %s)", k, strings.Join(allowed, ", "))
		}
		if _, dup := m[k]; dup {
			return nil, p.errf("%q given twice", k)
		}
		m[k] = v
	}
	return m, nil
}

func (p *parser) num(key, v string, min float64) (float64, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, p.errf("%s=%q is not a number", key, v)
	}
	if f < min {
		return 0, p.errf("%s must be >= %v, got %v", key, min, f)
	}
	return f, nil
}

// Scenario size limits: a typo of a few digits must be an error on its
// line, not an attempt to simulate a billion instances.
const (
	maxInstances = 100_000
	maxTasks     = 2_000_000
)

// count reads a number of things to create, at most limit.
func (p *parser) count(key, v string, min, limit int) (int, error) {
	n, err := p.integer(key, v, min)
	if err != nil {
		return 0, err
	}
	if n > limit {
		return 0, p.errf("%s=%d is more than this simulator takes (%d)", key, n, limit)
	}
	return n, nil
}

func (p *parser) integer(key, v string, min int) (int, error) {
	f, err := p.num(key, v, float64(min))
	if err != nil {
		return 0, err
	}
	if f != math.Trunc(f) || f > 1e9 {
		return 0, p.errf("%s must be a whole number, got %v", key, v)
	}
	return int(f), nil
}

func (p *parser) dur(key, v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, p.errf("%s=%q is not a duration like 500ms, 10s or 5m", key, v)
	}
	return d, nil
}

// numRange parses "1e6" or "1e6..1e7"; a range is drawn uniformly per task.
func (p *parser) numRange(key, v string, min float64) (lo, hi float64, err error) {
	a, b, isRange := strings.Cut(v, "..")
	if lo, err = p.num(key, a, min); err != nil {
		return
	}
	hi = lo
	if isRange {
		if hi, err = p.num(key, b, min); err != nil {
			return
		}
		if hi < lo {
			return 0, 0, p.errf("%s range %q is empty", key, v)
		}
	}
	return lo, hi, nil
}

func (p *parser) draw(lo, hi float64) float64 {
	if lo == hi {
		return lo
	}
	return math.Round(lo + p.rng.Float64()*(hi-lo))
}

func (p *parser) parseLine(f []string) error {
	args := f[1:]
	switch f[0] {
	case "seed":
		return nil // read before the other lines
	case "name":
		if len(args) == 0 {
			return p.errf("want `name TEXT`")
		}
		p.sc.Name = strings.Join(args, " ")
	case "config":
		m, err := p.kv(args, "standbys", "max_learners", "acceptable_lag", "worker_rate", "separate_buckets")
		if err != nil {
			return err
		}
		if v, ok := m["worker_rate"]; ok {
			if p.sc.WorkerRate, err = p.num("worker_rate", v, 0); err != nil {
				return err
			}
			if p.sc.WorkerRate == 0 {
				return p.errf("worker_rate must be > 0")
			}
		}
		c := &p.sc.Config
		if v, ok := m["standbys"]; ok {
			if c.Standbys, err = p.integer("standbys", v, 0); err != nil {
				return err
			}
		}
		if v, ok := m["max_learners"]; ok {
			if c.MaxLearners, err = p.integer("max_learners", v, 1); err != nil {
				return err
			}
		}
		if v, ok := m["acceptable_lag"]; ok {
			n, err := p.integer("acceptable_lag", v, 0)
			if err != nil {
				return err
			}
			c.AcceptableLag = int64(n)
		}
		if v, ok := m["separate_buckets"]; ok {
			switch v {
			case "true":
				c.SeparateBuckets = true
			case "false":
				c.SeparateBuckets = false
			default:
				return p.errf("separate_buckets must be true or false, got %q", v)
			}
		}
	case "timing":
		m, err := p.kv(args, "heartbeat", "join", "sync", "session", "commit", "probing", "early", "start")
		if err != nil {
			return err
		}
		t := &p.sc.Timing
		for k, dst := range map[string]*time.Duration{"heartbeat": &t.Heartbeat, "join": &t.Join, "sync": &t.Sync, "session": &t.Session, "commit": &t.Commit, "probing": &t.Probing, "early": &t.Early, "start": &t.Start} {
			if v, ok := m[k]; ok {
				if *dst, err = p.dur(k, v); err != nil {
					return err
				}
			}
		}
		if t.Commit == 0 || t.Probing == 0 {
			return p.errf("commit and probing intervals must be > 0")
		}
	case "limit":
		if len(args) != 1 {
			return p.errf("want `limit DURATION`")
		}
		d, err := p.dur("limit", args[0])
		if err != nil {
			return err
		}
		if d == 0 {
			return p.errf("limit must be > 0")
		}
		p.sc.Limit = d
		p.limitSet = true
	case "task":
		return p.parseTask(args)
	case "tasks":
		return p.parseTasks(args)
	case "instance":
		return p.parseInstance(args)
	case "instances":
		return p.parseInstances(args)
	case "at":
		return p.parseEvent(args)
	case "expect":
		return p.parseExpect(args)
	case "load":
		return p.parseLoad(0, args)
	case "autoscale":
		return p.parseAutoscale(args)
	default:
		return p.errf("unknown directive %q (want name, seed, config, timing, limit, task, tasks, instance, instances, load, autoscale, at or expect)", f[0])
	}
	return nil
}

// task ID... [stateless] [load=N] [state=N|A..B] [rate=N]
func (p *parser) parseTask(args []string) error {
	var ids []string
	for len(args) > 0 && !strings.Contains(args[0], "=") && args[0] != "stateless" {
		ids = append(ids, args[0])
		args = args[1:]
	}
	if len(ids) == 0 {
		return p.errf("want `task ID... [stateless] [load=N] [state=N] [rate=N]`")
	}
	m, err := p.kv(args, "stateless", "load", "state", "rate")
	if err != nil {
		return err
	}
	_, stateless := m["stateless"]
	return p.addTasks(ids, !stateless, m)
}

// tasks stateful=N stateless=M [load=..] [state=..] [rate=..]: ids 1_p and 0_p.
func (p *parser) parseTasks(args []string) error {
	m, err := p.kv(args, "stateful", "stateless", "load", "state", "rate")
	if err != nil {
		return err
	}
	for _, b := range []struct {
		key      string
		sub      string
		stateful bool
	}{{"stateful", "1", true}, {"stateless", "0", false}} {
		v, ok := m[b.key]
		if !ok {
			continue
		}
		n, err := p.count(b.key, v, 0, maxTasks-len(p.taskIdx))
		if err != nil {
			return err
		}
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("%s_%d", b.sub, i)
		}
		if err := p.addTasks(ids, b.stateful, m); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) addTasks(ids []string, stateful bool, m map[string]string) error {
	load, rate := 1.0, float64(DefaultInputRate)
	lo, hi := float64(DefaultStateSize), float64(DefaultStateSize)
	var err error
	if v, ok := m["load"]; ok {
		if load, err = p.num("load", v, 0); err != nil {
			return err
		}
		if load == 0 {
			return p.errf("load must be > 0")
		}
	}
	if v, ok := m["rate"]; ok {
		if rate, err = p.num("rate", v, 0); err != nil {
			return err
		}
	}
	if v, ok := m["state"]; ok {
		if lo, hi, err = p.numRange("state", v, 0); err != nil {
			return err
		}
	}
	if !stateful {
		lo, hi = 0, 0
	}
	for _, id := range ids {
		if _, dup := p.taskIdx[assign.TaskID(id)]; dup {
			return p.errf("task %q is defined twice", id)
		}
		p.taskIdx[assign.TaskID(id)] = len(p.sc.Tasks)
		p.sc.Tasks = append(p.sc.Tasks, TaskSpec{ID: assign.TaskID(id), Stateful: stateful, Load: load, State: p.draw(lo, hi), Rate: rate})
	}
	return nil
}

func (p *parser) instanceSettings(spec *InstanceSpec, m map[string]string) error {
	var err error
	spec.Capacity, spec.Restore = 1, DefaultRestoreRate
	if v, ok := m["capacity"]; ok {
		if spec.Capacity, err = p.integer("capacity", v, 1); err != nil {
			return err
		}
	}
	if v, ok := m["restore"]; ok {
		if spec.Restore, err = p.num("restore", v, 0); err != nil {
			return err
		}
		if spec.Restore == 0 {
			return p.errf("restore must be > 0")
		}
	}
	spec.Rack = m["rack"]
	if v, ok := m["process"]; ok {
		if v == "" || strings.Contains(v, ",") {
			return p.errf("bad process %q", v)
		}
		spec.Process = v
	}
	return nil
}

func (p *parser) taskList(key, v string) ([]assign.TaskID, error) {
	var out []assign.TaskID
	for _, id := range strings.Split(v, ",") {
		if id == "" {
			continue
		}
		if _, ok := p.taskIdx[assign.TaskID(id)]; !ok {
			return nil, p.errf("%s names unknown task %q (define tasks before the instances that hold them)", key, id)
		}
		out = append(out, assign.TaskID(id))
	}
	return out, nil
}

func (p *parser) newInstanceID(id string) error {
	if id == "" || strings.ContainsAny(id, "=,") {
		return p.errf("bad instance id %q", id)
	}
	if p.instIdx[id] {
		return p.errf("instance %q is defined twice", id)
	}
	p.instIdx[id] = true
	return nil
}

// diskList parses `T:LAG,T:LAG`.
func (p *parser) diskList(v string) ([]DiskCopy, error) {
	var out []DiskCopy
	for _, item := range strings.Split(v, ",") {
		if item == "" {
			continue
		}
		id, lag, ok := strings.Cut(item, ":")
		if !ok {
			return nil, p.errf("disk=%q: want TASK:LAG, the records the state is behind its changelog's end", item)
		}
		if _, err := p.taskList("disk", id); err != nil {
			return nil, err
		}
		n, err := p.num("disk lag of "+id, lag, 0)
		if err != nil {
			return nil, err
		}
		out = append(out, DiskCopy{Task: assign.TaskID(id), Lag: n})
	}
	return out, nil
}

// instance ID [capacity=N] [restore=N] [rack=R] [process=P] [active=T,T] [standby=T,T] [disk=T:LAG,T:LAG]
func (p *parser) parseInstance(args []string) error {
	if len(args) == 0 || strings.Contains(args[0], "=") {
		return p.errf("want `instance ID [capacity=N] [restore=N] [rack=R] [process=P] [active=T,..] [standby=T,..] [disk=T:LAG,..] [beat=D]`")
	}
	active, standby := lifecycle.Active.String(), lifecycle.Standby.String()
	m, err := p.kv(args[1:], "capacity", "restore", "rack", "process", active, standby, "disk", "beat")
	if err != nil {
		return err
	}
	spec := InstanceSpec{ID: args[0]}
	if err := p.newInstanceID(spec.ID); err != nil {
		return err
	}
	if err := p.instanceSettings(&spec, m); err != nil {
		return err
	}
	if spec.Active, err = p.taskList(active, m[active]); err != nil {
		return err
	}
	if spec.Standby, err = p.taskList(standby, m[standby]); err != nil {
		return err
	}
	if spec.Disk, err = p.diskList(m["disk"]); err != nil {
		return err
	}
	if v, ok := m["beat"]; ok {
		if spec.Beat, err = p.dur("beat", v); err != nil {
			return err
		}
		if spec.Beat == 0 {
			return p.errf("beat must be > 0")
		}
	}
	p.sc.Instances = append(p.sc.Instances, spec)
	return nil
}

func (p *parser) autoIDs(n int) ([]string, error) {
	var ids []string
	for len(ids) < n {
		p.nextAuto++
		id := fmt.Sprintf("i%d", p.nextAuto)
		if p.instIdx[id] {
			continue
		}
		if err := p.newInstanceID(id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// instances N [capacity=N] [restore=N] [racks=K]: ids i1..iN.
func (p *parser) parseInstances(args []string) error {
	if len(args) == 0 {
		return p.errf("want `instances N [capacity=N] [restore=N] [racks=K]`")
	}
	n, err := p.count("instances", args[0], 1, maxInstances-len(p.instIdx))
	if err != nil {
		return err
	}
	m, err := p.kv(args[1:], "capacity", "restore", "racks")
	if err != nil {
		return err
	}
	racks := 0
	if v, ok := m["racks"]; ok {
		if racks, err = p.integer("racks", v, 1); err != nil {
			return err
		}
	}
	ids, err := p.autoIDs(n)
	if err != nil {
		return err
	}
	for i, id := range ids {
		spec := InstanceSpec{ID: id}
		if err := p.instanceSettings(&spec, m); err != nil {
			return err
		}
		if racks > 0 {
			spec.Rack = fmt.Sprintf("r%d", i%racks+1)
		}
		p.sc.Instances = append(p.sc.Instances, spec)
	}
	return nil
}

// at TIME join ID|N [capacity=N] [restore=N] [rack=R] [process=P]
// at TIME crash|leave ID
// at TIME restart ID [down=D]
// at TIME capacity ID N
// at TIME slow ID RATE
func (p *parser) parseEvent(args []string) error {
	if len(args) >= 2 && args[1] == "load" {
		at, err := p.dur("time", args[0])
		if err != nil {
			return err
		}
		return p.parseLoad(at, args[2:])
	}
	if len(args) < 3 {
		return p.errf("want `at TIME EVENT ...` with EVENT one of join, crash, leave, restart, capacity, slow, load")
	}
	at, err := p.dur("time", args[0])
	if err != nil {
		return err
	}
	ev := Event{At: at, Kind: EventKind(args[1]), Line: p.line}
	ev.Instance.ID = args[2]
	rest := args[3:]
	switch ev.Kind {
	case EventJoin:
		m, err := p.kv(rest, "capacity", "restore", "rack", "process")
		if err != nil {
			return err
		}
		var ids []string
		if n, err := strconv.Atoi(args[2]); err == nil {
			if _, ok := m["process"]; ok {
				return p.errf("process= names one instance: join it by id")
			}
			if n < 1 {
				return p.errf("join count must be >= 1")
			}
			if n > maxInstances-len(p.instIdx) {
				return p.errf("join %d is more instances than this simulator takes (%d in all)", n, maxInstances)
			}
			if ids, err = p.autoIDs(n); err != nil {
				return err
			}
		} else {
			if err := p.newInstanceID(args[2]); err != nil {
				return err
			}
			ids = []string{args[2]}
		}
		for _, id := range ids {
			e := ev
			e.Instance = InstanceSpec{ID: id}
			if err := p.instanceSettings(&e.Instance, m); err != nil {
				return err
			}
			p.sc.Events = append(p.sc.Events, e)
		}
		return nil
	case EventCrash, EventLeave:
		if len(rest) != 0 {
			return p.errf("want `at TIME %s ID`", ev.Kind)
		}
	case EventRestart:
		m, err := p.kv(rest, "down")
		if err != nil {
			return err
		}
		ev.Down = 10 * time.Second
		if v, ok := m["down"]; ok {
			if ev.Down, err = p.dur("down", v); err != nil {
				return err
			}
		}
	case EventCapacity:
		if len(rest) != 1 {
			return p.errf("want `at TIME capacity ID N`")
		}
		if ev.Capacity, err = p.integer("capacity", rest[0], 1); err != nil {
			return err
		}
	case EventSlow:
		if len(rest) != 1 {
			return p.errf("want `at TIME slow ID RECORDS_PER_SECOND`")
		}
		if ev.Restore, err = p.num("restore rate", rest[0], 0); err != nil {
			return err
		}
		if ev.Restore == 0 {
			return p.errf("restore rate must be > 0")
		}
	default:
		return p.errf("unknown event %q (want join, crash, leave, restart, capacity, slow or load)", args[1])
	}
	if !p.instIdx[ev.Instance.ID] {
		return p.errf("%s names unknown instance %q", ev.Kind, ev.Instance.ID)
	}
	p.sc.Events = append(p.sc.Events, ev)
	return nil
}

// expect balanced by T | unavailable <= N | unavailable-seconds <= N |
// moves <= N | moves-per-task <= N | restored <= N | rebalances <= N |
// no-thrash; each may end with policy=P,P.
func (p *parser) parseExpect(args []string) error {
	e := Expect{Text: strings.Join(args, " "), Line: p.line}
	if n := len(args); n > 0 {
		if v, ok := strings.CutPrefix(args[n-1], "policy="); ok {
			for _, name := range strings.Split(v, ",") {
				if _, err := ParsePolicy(name); err != nil {
					return p.errf("%v", err)
				}
				e.Policies = append(e.Policies, name)
			}
			args = args[:n-1]
		}
	}
	if len(args) == 0 {
		return p.errf("want `expect WHAT ...`")
	}
	e.Kind = args[0]
	switch e.Kind {
	case "balanced":
		if len(args) != 3 || args[1] != "by" {
			return p.errf("want `expect balanced by TIME`")
		}
		d, err := p.dur("by", args[2])
		if err != nil {
			return err
		}
		e.By = d
	case "unavailable", "unavailable-seconds", "moves", "moves-per-task", "restored", "rebalances":
		if len(args) != 3 || args[1] != "<=" {
			return p.errf("want `expect %s <= N`", e.Kind)
		}
		v, err := p.num(e.Kind, args[2], 0)
		if err != nil {
			return err
		}
		e.Max = v
	case "no-thrash":
		if len(args) != 1 {
			return p.errf("want `expect no-thrash`")
		}
	default:
		return p.errf("unknown expectation %q (want balanced, unavailable, unavailable-seconds, moves, moves-per-task, restored, rebalances or no-thrash)", e.Kind)
	}
	p.sc.Expects = append(p.sc.Expects, e)
	return nil
}

// finish deals the tasks that no instance line placed and checks the whole.
func (p *parser) finish() error {
	sc := p.sc
	if len(sc.Instances) == 0 {
		return &ParseError{Name: p.name, Msg: "no instances at time 0 (add `instances N` or `instance ID`)"}
	}
	if len(sc.Tasks) == 0 {
		return &ParseError{Name: p.name, Msg: "no tasks (add `tasks stateful=N` or `task ID`)"}
	}
	placed := map[assign.TaskID]string{}
	named := map[assign.TaskID]bool{}
	for _, in := range sc.Instances {
		roles := map[assign.TaskID]bool{}
		for _, id := range in.Active {
			if other, ok := placed[id]; ok {
				return &ParseError{Name: p.name, Msg: fmt.Sprintf("task %q is active on both %q and %q", id, other, in.ID)}
			}
			placed[id] = in.ID
			roles[id] = true
		}
		for _, id := range in.Standby {
			named[id] = true
			if roles[id] {
				return &ParseError{Name: p.name, Msg: fmt.Sprintf("instance %q holds task %q in two roles", in.ID, id)}
			}
			if !sc.Tasks[p.taskIdx[id]].Stateful {
				return &ParseError{Name: p.name, Msg: fmt.Sprintf("instance %q: stateless task %q cannot be a %s", in.ID, id, lifecycle.Standby)}
			}
		}
		onDisk := map[assign.TaskID]bool{}
		for _, d := range in.Disk {
			if roles[d.Task] || onDisk[d.Task] || slices.Contains(in.Standby, d.Task) {
				return &ParseError{Name: p.name, Msg: fmt.Sprintf("instance %q holds task %q on disk twice, or on disk and in a role (a role's copy is on disk already)", in.ID, d.Task)}
			}
			onDisk[d.Task] = true
			if !sc.Tasks[p.taskIdx[d.Task]].Stateful {
				return &ParseError{Name: p.name, Msg: fmt.Sprintf("instance %q: stateless task %q has no state on disk", in.ID, d.Task)}
			}
		}
	}
	sort.SliceStable(sc.Events, func(i, j int) bool { return sc.Events[i].At < sc.Events[j].At })
	if err := p.finishLoad(); err != nil {
		return err
	}
	p.deal(placed)
	for i, t := range sc.Tasks {
		if _, ok := placed[t.ID]; !ok && !named[t.ID] {
			sc.Tasks[i].Dealt = true
		}
	}
	return nil
}

// deal places unplaced tasks as actives in proportion to capacity, stateful
// and stateless separately, and gives stateful ones the configured
// standbys on the following instances.
func (p *parser) deal(placed map[assign.TaskID]string) {
	sc := p.sc
	n := len(sc.Instances)
	total := 0
	for _, in := range sc.Instances {
		total += in.Capacity
	}
	for _, stateful := range []bool{true, false} {
		var todo []int
		count := make([]int, n)
		for i, t := range sc.Tasks {
			if t.Stateful != stateful {
				continue
			}
			if owner, ok := placed[t.ID]; ok {
				for j, in := range sc.Instances {
					if in.ID == owner {
						count[j]++
					}
				}
				continue
			}
			todo = append(todo, i)
		}
		if len(todo) == 0 {
			continue
		}
		bucket := len(todo)
		for _, c := range count {
			bucket += c
		}
		// Quotas: floor of the share, the remainder to the largest
		// fractional parts (ties by instance order).
		quota := make([]int, n)
		frac := make([]float64, n)
		sum := 0
		for j, in := range sc.Instances {
			share := float64(bucket) * float64(in.Capacity) / float64(total)
			quota[j] = int(share)
			frac[j] = share - float64(quota[j])
			sum += quota[j]
		}
		order := make([]int, n)
		for j := range order {
			order[j] = j
		}
		sort.SliceStable(order, func(a, b int) bool { return frac[order[a]] > frac[order[b]] })
		for k := 0; sum < bucket; k++ {
			quota[order[k%n]]++
			sum++
		}
		j := 0
		for _, ti := range todo {
			for count[j] >= quota[j] {
				j = (j + 1) % n
			}
			in := &sc.Instances[j]
			in.Active = append(in.Active, sc.Tasks[ti].ID)
			count[j]++
			if stateful {
				for k := 1; k <= sc.Config.Standbys && k < n; k++ {
					sb := &sc.Instances[(j+k)%n]
					sb.Standby = append(sb.Standby, sc.Tasks[ti].ID)
				}
			}
		}
	}
}

package bench

import (
	"context"
	"runtime/metrics"
	"strings"
	"sync"
	"time"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/internal/tick"
)

// Progress is one sample in which a task processed records on an
// instance: N records since the previous sample of that task there.
type Progress struct {
	At       time.Duration `json:"at_ns"` // since the recording started
	Instance string        `json:"instance"`
	Task     string        `json:"task"`
	N        int64         `json:"n"`
}

// Recording is what a recorder saw: processing progress and events, with
// times relative to Start.
type Recording struct {
	Start    time.Time     `json:"start"`
	Interval time.Duration `json:"sample_interval_ns"`
	Progress []Progress    `json:"-"`
	// Waiting is, at each sample, an active task's records polled and
	// waiting to be processed (Status' TaskStatus.Waiting), when any.
	Waiting []Progress `json:"-"`
	// FetchWait and LoopWait are, at each sample, how long ago each
	// instance's last poll of its input came back (N, in nanoseconds;
	// Task empty): in FetchWait when a poll was under way (it waited for
	// the fetch), in LoopWait when none was asked for (the loop had not
	// asked).
	FetchWait []Progress `json:"-"`
	LoopWait  []Progress `json:"-"`
	// Input is, at each sample that saw more of the input acknowledged by
	// the cluster than the one before, how much more (Task and Instance
	// empty; see WatchInput).
	Input []Progress `json:"-"`
	// Runtime is the process at each sample: what separates a stall of
	// the tasks from one of the process (the sampler late, the
	// collector's share of the CPU).
	Runtime []RuntimeSample `json:"-"`
	Events  []baton.Event   `json:"-"`
}

// Recorder samples the Status of the instances it watches and collects
// their events. Its Listen method is the instances' Listener. Its methods
// are safe for concurrent use.
type Recorder struct {
	start    time.Time
	interval time.Duration

	mu        sync.Mutex // guards the fields below
	runtime   []RuntimeSample
	events    []baton.Event
	insts     []watched
	last      map[[2]string]int64 // (instance, task) -> processed at the last sample
	prog      []Progress
	waiting   []Progress
	fetchWait []Progress
	loopWait  []Progress
	input     []Progress
	produced  func() int64 // the input acknowledged so far; nil: not watched
	lastIn    int64
	totals    map[string]int64 // by task id prefix "<subtopology>_"
}

// watched is an instance a Recorder samples.
type watched struct {
	id  string
	app *baton.App
}

// NewRecorder returns a Recorder that samples every interval once Run;
// times are relative to now.
func NewRecorder(interval time.Duration) *Recorder {
	return &Recorder{start: time.Now(), interval: interval, last: map[[2]string]int64{}, totals: map[string]int64{}}
}

// Listen is a baton.Listener: it only appends.
func (r *Recorder) Listen(e baton.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// Watch adds an instance, known as id, to the sampled ones.
func (r *Recorder) Watch(id string, app *baton.App) {
	r.mu.Lock()
	r.insts = append(r.insts, watched{id, app})
	r.mu.Unlock()
}

// WatchInput has every sample note how much of the input the cluster
// acknowledged (produced counts it): a pause of every task that is a
// pause of the input shows there too.
func (r *Recorder) WatchInput(produced func() int64) {
	r.mu.Lock()
	r.produced = produced
	r.mu.Unlock()
}

// Run samples until ctx is done.
func (r *Recorder) Run(ctx context.Context) {
	_ = tick.Every(ctx, r.interval, func() error { r.Sample(); return nil })
}

// RuntimeSample is the process's CPU time, all of it and the garbage
// collector's (runtime/metrics: estimates, comparable with each other
// only), as a sample began.
type RuntimeSample struct {
	At         time.Duration
	CPU, GCCPU float64 // seconds
}

var runtimeMetrics = []string{"/cpu/classes/total:cpu-seconds", "/cpu/classes/gc/total:cpu-seconds"}

// Sample takes one sample now.
func (r *Recorder) Sample() {
	ms := make([]metrics.Sample, len(runtimeMetrics))
	for i, name := range runtimeMetrics {
		ms[i].Name = name
	}
	metrics.Read(ms)
	rs := RuntimeSample{At: time.Since(r.start)}
	if ms[0].Value.Kind() == metrics.KindFloat64 && ms[1].Value.Kind() == metrics.KindFloat64 {
		rs.CPU, rs.GCCPU = ms[0].Value.Float64(), ms[1].Value.Float64()
	}
	r.mu.Lock()
	r.runtime = append(r.runtime, rs)
	if r.produced != nil {
		if n := r.produced(); n > r.lastIn {
			r.input = append(r.input, Progress{At: rs.At, N: n - r.lastIn})
			r.lastIn = n
		}
	}
	insts := append([]watched(nil), r.insts...)
	r.mu.Unlock()
	for _, in := range insts {
		st := in.app.Status()
		at := time.Since(r.start)
		r.mu.Lock()
		if !st.PolledAt.IsZero() {
			p := Progress{At: at, Instance: in.id, N: int64(time.Since(st.PolledAt))}
			if st.Polling {
				r.fetchWait = append(r.fetchWait, p)
			} else {
				r.loopWait = append(r.loopWait, p)
			}
		}
		active := map[string]bool{}
		for _, t := range st.Tasks {
			if t.Role != "active" {
				continue
			}
			active[t.ID] = true
			if t.Waiting > 0 {
				r.waiting = append(r.waiting, Progress{At: at, Instance: in.id, Task: t.ID, N: t.Waiting})
			}
			k := [2]string{in.id, t.ID}
			prev := r.last[k] // 0 for a task new here
			if t.Processed < prev {
				prev = 0 // a new task object: it came back here
			}
			r.last[k] = t.Processed
			if n := t.Processed - prev; n > 0 {
				r.prog = append(r.prog, Progress{At: at, Instance: in.id, Task: t.ID, N: n})
				if i := strings.IndexByte(t.ID, '_'); i >= 0 {
					r.totals[t.ID[:i+1]] += n
				}
			}
		}
		for k := range r.last {
			if k[0] == in.id && !active[k[1]] {
				delete(r.last, k) // revoked: its counter starts over if it comes back
			}
		}
		r.mu.Unlock()
	}
}

// progressedSince reports whether each of tasks showed progress, on any
// instance, in a sample taken at or after t.
func (r *Recorder) progressedSince(t time.Duration, tasks []string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	seen := map[string]bool{}
	for i := len(r.prog) - 1; i >= 0 && r.prog[i].At >= t; i-- {
		seen[r.prog[i].Task] = true
	}
	for _, id := range tasks {
		if !seen[id] {
			return false
		}
	}
	return true
}

// Snapshot returns a copy of what was recorded so far.
func (r *Recorder) Snapshot() Recording {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Recording{Start: r.start, Interval: r.interval, Runtime: append([]RuntimeSample(nil), r.runtime...),
		Progress: append([]Progress(nil), r.prog...), Waiting: append([]Progress(nil), r.waiting...),
		FetchWait: append([]Progress(nil), r.fetchWait...), LoopWait: append([]Progress(nil), r.loopWait...),
		Input: append([]Progress(nil), r.input...), Events: append([]baton.Event(nil), r.events...)}
}

// total is the records processed by the tasks of one subtopology (prefix
// "<subtopology>_") over the whole recording.
func (r *Recorder) total(prefix string) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.totals[prefix]
}

package sim

import (
	"math"
	"sort"
	"strings"
	"time"
)

// Load and lag. A scenario with `load` lines gives the group an input rate
// over time, spread over the tasks by their load (weight), and every
// worker processes at most Scenario.WorkerRate records/s. An instance's
// capacity (workers × WorkerRate) is shared among the tasks it processes
// by weight; a task that is not processing (revoked, restoring, unowned,
// paused) processes nothing. A task's lag grows at its input rate minus
// what it processes and never goes below 0. Between two changes every
// rate is constant, so a task's lag is max(0, lag + (in - out)·dt)
// exactly, and the total lag, a sum of such convex pieces, peaks at the
// instants where something changes: the model samples them all.

// LoadStep is the group's input rate from At on.
type LoadStep struct {
	At   time.Duration
	Rate float64 // records/s over all tasks
}

// LoadChange is one `load` line as written: `load RATE` (At 0) or
// `at TIME load RATE|xFACTOR [ramp DURATION]`.
type LoadChange struct {
	At     time.Duration
	Rate   float64 // the rate reached at At+Ramp
	From   float64 // the rate in effect just before At
	Factor float64 // xFACTOR of the base rate, 0 if the rate was given
	Ramp   time.Duration
	Line   int
}

// rampStep is the step in which ramps are taken; maxRamp the longest
// ramp a scenario may ask for.
const (
	rampStep = time.Second
	maxRamp  = 24 * time.Hour
)

// load RATE
// at TIME load RATE|xF [ramp D]
func (p *parser) parseLoad(at time.Duration, args []string) error {
	usage := "want `load RECORDS_PER_SECOND` or `at TIME load RECORDS_PER_SECOND|xFACTOR [ramp DURATION]`"
	if len(args) == 0 {
		return p.errf("%s", usage)
	}
	c := LoadChange{At: at, Line: p.line}
	v := args[0]
	var err error
	if f, ok := strings.CutPrefix(v, "x"); ok {
		if c.Factor, err = p.num("load factor", f, 0); err != nil {
			return err
		}
		if c.Factor == 0 {
			return p.errf("load factor must be > 0 (write `load 0` for no input)")
		}
	} else if c.Rate, err = p.num("load", v, 0); err != nil {
		return err
	}
	switch rest := args[1:]; {
	case len(rest) == 0:
	case len(rest) == 2 && rest[0] == "ramp":
		if c.Ramp, err = p.dur("ramp", rest[1]); err != nil {
			return err
		}
		if c.Ramp > maxRamp {
			return p.errf("ramp %v is longer than this simulator takes (%v)", c.Ramp, maxRamp)
		}
	default:
		return p.errf("%s", usage)
	}
	if at == 0 && (c.Factor != 0 || c.Ramp != 0) {
		return p.errf("the load at time 0 is a rate in records/s, with no factor and no ramp")
	}
	p.sc.LoadChanges = append(p.sc.LoadChanges, c)
	return nil
}

// finishLoad checks the load lines against each other and the rest of the
// scenario, and expands them into Scenario.Input.
func (p *parser) finishLoad() error {
	sc := p.sc
	errAt := func(line int, format string, args ...any) error {
		p.line = line
		err := p.errf(format, args...)
		p.line = 0
		return err
	}
	if len(sc.LoadChanges) == 0 {
		if len(sc.Autoscalers) > 0 {
			return errAt(sc.Autoscalers[0].Line, "autoscale needs a load: add `load RECORDS_PER_SECOND` and `config worker_rate=N`")
		}
		return nil
	}
	sort.SliceStable(sc.LoadChanges, func(i, j int) bool { return sc.LoadChanges[i].At < sc.LoadChanges[j].At })
	first := sc.LoadChanges[0]
	if first.At != 0 || first.Factor != 0 {
		return errAt(first.Line, "the load at time 0 is not set: add `load RECORDS_PER_SECOND` before the `at TIME load` lines")
	}
	for _, c := range sc.LoadChanges[1:] {
		if c.At == 0 {
			return errAt(c.Line, "load at time 0 given twice (line %d and here)", first.Line)
		}
	}
	if sc.WorkerRate == 0 {
		return errAt(first.Line, "load needs the rate a worker processes: add `config worker_rate=RECORDS_PER_SECOND`")
	}
	if !p.limitSet {
		return errAt(first.Line, "a scenario with load runs until its limit: add `limit DURATION`")
	}
	baseRate := first.Rate
	steps := []LoadStep{{At: 0, Rate: baseRate}}
	rateAt := func(at time.Duration) float64 {
		r := steps[0].Rate
		for _, s := range steps {
			if s.At > at {
				break
			}
			r = s.Rate
		}
		return r
	}
	for i := 1; i < len(sc.LoadChanges); i++ {
		c := &sc.LoadChanges[i]
		if c.Factor != 0 {
			c.Rate = c.Factor * baseRate
		}
		c.From = rateAt(c.At - 1)
		// A change cuts a ramp still under way.
		k := len(steps)
		for k > 0 && steps[k-1].At >= c.At {
			k--
		}
		steps = steps[:k]
		if c.Ramp == 0 {
			steps = append(steps, LoadStep{At: c.At, Rate: c.Rate})
			continue
		}
		n := int(math.Ceil(float64(c.Ramp) / float64(rampStep)))
		for j := 1; j <= n; j++ {
			steps = append(steps, LoadStep{At: c.At + c.Ramp*time.Duration(j)/time.Duration(n), Rate: c.From + (c.Rate-c.From)*float64(j)/float64(n)})
		}
	}
	sc.LoadChanges[0].From = baseRate
	sc.Input = steps
	return nil
}

// spike returns the first load change that raises the rate, if any.
func (sc *Scenario) spike() (LoadChange, bool) {
	for _, c := range sc.LoadChanges[min(1, len(sc.LoadChanges)):] {
		if c.Rate > c.From {
			return c, true
		}
	}
	return LoadChange{}, false
}

// LoadFigures are the figures of a run with load.
type LoadFigures struct {
	// SpikeAt is when the first rise of the input begins; -1 if it never
	// rises. Bound is the lag that counts as absorbed: the lag when the
	// spike began plus one evaluation interval of the input before it.
	SpikeAt time.Duration
	Bound   float64
	// FirstNew is the time from SpikeAt until an instance that joined
	// after it first processes a task; Absorbed until the total lag is
	// first back at or under Bound after it went above (0 if it never
	// did), and Settled until it is back under Bound for the rest of the
	// run. -1: never. AboveBound is the time the lag spent above Bound
	// from SpikeAt on.
	FirstNew, Absorbed, Settled time.Duration
	AboveBound                  time.Duration
	// PeakLag is the highest total lag, at PeakAt; PeakSeconds is it in
	// seconds of the input rate of that moment.
	PeakLag     float64
	PeakAt      time.Duration
	PeakSeconds float64
	// Changes counts the autoscaler's changes of the instance count.
	Changes int
	// Instances running: fewest and most at once, at the end, and their
	// integral over time.
	MinInstances, MaxInstances, EndInstances int
	InstanceSeconds                          float64
	EndLag                                   float64
}

// LoadPoint is a once-a-second sample of a run with load.
type LoadPoint struct {
	At        time.Duration
	Instances int
	Lag       float64
	Rate      float64
}

// loadModel is the input and lag of every task during a run.
type loadModel struct {
	steps  []LoadStep
	rate   float64   // the group's input rate now
	weight []float64 // each task's share of the input and of its owner's capacity
	lag    []float64 // records not processed, per task
	in     []float64 // input rate per task
	out    []float64 // what the task can process per second now
	wsum   []float64 // per instance, the weight it processes
	total  float64
	dirty  bool // in and out must be worked out again

	spike     LoadChange
	hasSpike  bool
	spikeInst int  // first instance index after the spike began; -1 before
	exceeded  bool // the lag went above the bound since the spike began
	above     bool // the lag is above the bound
	lastObs   time.Duration
	interval  time.Duration
	fig       LoadFigures
}

// loadTick is how often a run with load samples its lag and instances.
const loadTick = time.Second

func (e *engine) initLoad() {
	sc := e.sc
	m := &loadModel{steps: sc.Input, spikeInst: -1, dirty: true, interval: 15 * time.Second}
	n := len(e.tasks)
	m.weight, m.lag, m.in, m.out = make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	sum := 0.0
	for _, t := range sc.Tasks {
		sum += t.Load
	}
	for i, t := range sc.Tasks {
		m.weight[i] = t.Load / sum
	}
	m.spike, m.hasSpike = sc.spike()
	m.fig = LoadFigures{SpikeAt: -1, FirstNew: -1, Absorbed: -1, Settled: -1, MinInstances: e.nRunning, MaxInstances: e.nRunning}
	if m.hasSpike {
		m.fig.SpikeAt = m.spike.At
		e.push(m.spike.At, evLoadStep, -1)
	}
	for i, s := range m.steps {
		e.push(s.At, evLoadStep, i)
	}
	e.push(loadTick, evLoadTick, 0)
	e.load = m
	e.loadShares()
}

// loadShares works out every task's input rate and processing rate.
func (e *engine) loadShares() {
	m := e.load
	if !m.dirty {
		return
	}
	m.dirty = false
	if len(m.wsum) < len(e.insts) {
		m.wsum = make([]float64, len(e.insts))
	}
	clear(m.wsum)
	for i, t := range e.tasks {
		m.in[i] = m.rate * m.weight[i]
		if t.processing {
			m.wsum[t.owner] += m.weight[i]
		}
	}
	for i, t := range e.tasks {
		m.out[i] = 0
		if t.processing {
			in := e.insts[t.owner]
			m.out[i] = float64(in.spec.Capacity) * e.sc.WorkerRate * m.weight[i] / m.wsum[t.owner]
		}
	}
}

// advanceLoad brings every task's lag from e.now to t.
func (e *engine) advanceLoad(t time.Duration) {
	m := e.load
	dt := (t - e.now).Seconds()
	m.fig.InstanceSeconds += float64(e.nRunning) * dt
	total := 0.0
	for i := range m.lag {
		l := m.lag[i] + (m.in[i]-m.out[i])*dt
		if l < eps {
			l = 0
		}
		m.lag[i] = l
		total += l
	}
	m.total = total
}

// observeLoad takes the figures at e.now, after the lag was brought up to
// it.
func (e *engine) observeLoad() {
	m := e.load
	f := &m.fig
	if m.total > f.PeakLag {
		f.PeakLag, f.PeakAt = m.total, e.now
		if m.rate > 0 {
			f.PeakSeconds = m.total / m.rate
		}
	}
	f.MinInstances = min(f.MinInstances, e.nRunning)
	f.MaxInstances = max(f.MaxInstances, e.nRunning)
	if !m.hasSpike || e.now < m.spike.At {
		return
	}
	if m.spikeInst < 0 {
		m.spikeInst = len(e.insts)
		f.Bound = m.total + m.spike.From*m.interval.Seconds()
	}
	if m.above {
		f.AboveBound += e.now - m.lastObs
	}
	m.lastObs = e.now
	switch above := m.total > f.Bound+eps; {
	case above && !m.above:
		m.exceeded = true
		f.Settled = -1
	case !above && m.above:
		if f.Absorbed < 0 {
			f.Absorbed = e.now - m.spike.At
		}
		f.Settled = e.now - m.spike.At
	}
	m.above = m.total > f.Bound+eps
}

// loadProcessing notes a task that starts or stops processing.
func (e *engine) loadProcessing(t *taskState, on bool) {
	m := e.load
	m.dirty = true
	if on && m.spikeInst >= 0 && t.owner >= m.spikeInst && m.fig.FirstNew < 0 {
		m.fig.FirstNew = e.now - m.spike.At
	}
}

func (e *engine) loadEvent(ev event) {
	m := e.load
	switch ev.kind {
	case evLoadStep:
		if ev.arg >= 0 {
			m.rate = m.steps[ev.arg].Rate
			m.dirty = true
		}
	case evLoadTick:
		e.res.LoadSeries = append(e.res.LoadSeries, LoadPoint{At: e.now, Instances: e.nRunning, Lag: m.total, Rate: m.rate})
		if e.now+loadTick <= e.sc.Limit {
			e.push(e.now+loadTick, evLoadTick, 0)
		}
	}
}

func (e *engine) finishLoad() {
	m := e.load
	f := m.fig
	if m.hasSpike && !m.exceeded {
		f.Absorbed, f.Settled = 0, 0
	}
	if e.scaler != nil {
		f.Changes = e.scaler.changes
	}
	f.EndInstances = e.nRunning
	f.EndLag = m.total
	e.res.Load = &f
}

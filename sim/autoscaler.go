package sim

import (
	"fmt"
	"time"

	"github.com/baton-streams/baton/autoscale"
)

// Autoscaler kinds.
const (
	AutoscaleBaton = "baton"         // the autoscale package's recommendation; scale-in drains
	AutoscaleLag   = "lag-threshold" // KEDA's Kafka scaler and an HPA; scale-in is a plain pod deletion
)

// AutoscaleSpec is one `autoscale` line.
type AutoscaleSpec struct {
	Kind string
	// Interval is the time between evaluations (default 15s, the HPA's
	// sync period); Startup the time from the decision to start an
	// instance until it joins the group (default 30s).
	Interval, Startup time.Duration
	// Capacity and Restore of the instances it starts; default the first
	// instance's.
	Capacity int
	Restore  float64
	Baton    autoscale.Config // kind baton
	HPA      HPAConfig        // kind lag-threshold
	Line     int
}

// autoscale baton [min=N] [max=N] [headroom=F] [out=D] [in=D] [drain=D] [step=N] [interval=D] [startup=D] [capacity=N] [restore=N]
// autoscale lag-threshold [threshold=N] [min=N] [max=N] [partitions=N] [idle] [tolerance=F] [up=D] [down=D] [interval=D] [startup=D] [capacity=N] [restore=N]
func (p *parser) parseAutoscale(args []string) error {
	if len(args) == 0 || (args[0] != AutoscaleBaton && args[0] != AutoscaleLag) {
		return p.errf("want `autoscale baton [settings]` or `autoscale lag-threshold [settings]`")
	}
	for _, a := range p.sc.Autoscalers {
		if a.Kind == args[0] {
			return p.errf("autoscale %s given twice (line %d and here)", a.Kind, a.Line)
		}
	}
	common := []string{"interval", "startup", "capacity", "restore", "min", "max"}
	spec := AutoscaleSpec{Kind: args[0], Interval: 15 * time.Second, Startup: 30 * time.Second, Line: p.line}
	var keys []string
	if spec.Kind == AutoscaleBaton {
		keys = append(common, "headroom", "out", "in", "drain", "step")
	} else {
		keys = append(common, "threshold", "partitions", "idle", "tolerance", "up", "down")
	}
	m, err := p.kv(args[1:], keys...)
	if err != nil {
		return err
	}
	durs := map[string]*time.Duration{"interval": &spec.Interval, "startup": &spec.Startup}
	ints := map[string]*int{"capacity": &spec.Capacity}
	floats := map[string]*float64{"restore": &spec.Restore}
	if spec.Kind == AutoscaleBaton {
		c := &spec.Baton
		*c = autoscale.DefaultConfig()
		durs["out"], durs["in"], durs["drain"] = &c.OutWindow, &c.InWindow, &c.DrainTime
		ints["min"], ints["max"], ints["step"] = &c.MinInstances, &c.MaxInstances, &c.MaxStep
		floats["headroom"] = &c.Headroom
	} else {
		c := &spec.HPA
		*c = DefaultHPAConfig()
		durs["up"], durs["down"] = &c.UpWindow, &c.DownWindow
		ints["min"], ints["max"], ints["partitions"] = &c.Min, &c.Max, &c.Partitions
		floats["threshold"], floats["tolerance"] = &c.Threshold, &c.Tolerance
		if v, ok := m["idle"]; ok {
			if v != "" {
				return p.errf("idle takes no value (it allows idle consumers: replicas beyond the partitions)")
			}
			c.AllowIdle = true
		}
	}
	for _, k := range keys {
		v, ok := m[k]
		if !ok || k == "idle" {
			continue
		}
		switch {
		case durs[k] != nil:
			if *durs[k], err = p.dur(k, v); err != nil {
				return err
			}
		case ints[k] != nil:
			if *ints[k], err = p.integer(k, v, 0); err != nil {
				return err
			}
		case floats[k] != nil:
			if *floats[k], err = p.num(k, v, 0); err != nil {
				return err
			}
		}
	}
	if spec.Interval == 0 {
		return p.errf("interval must be > 0")
	}
	if _, ok := m["capacity"]; ok && spec.Capacity == 0 {
		return p.errf("capacity must be >= 1")
	}
	if _, ok := m["restore"]; ok && spec.Restore == 0 {
		return p.errf("restore must be > 0")
	}
	if spec.Kind == AutoscaleBaton {
		if err := spec.Baton.Validate(); err != nil {
			return p.errf("autoscale baton: %v", err)
		}
	} else {
		c := spec.HPA
		switch {
		case c.Threshold == 0:
			return p.errf("threshold must be > 0")
		case c.Min < 1:
			return p.errf("min must be >= 1")
		case c.Max < c.Min:
			return p.errf("max (%d) must be >= min (%d)", c.Max, c.Min)
		case c.Tolerance >= 1:
			return p.errf("tolerance must be below 1, got %v", c.Tolerance)
		}
	}
	if spec.Kind == AutoscaleBaton && spec.Baton.MaxInstances > maxInstances || spec.Kind == AutoscaleLag && spec.HPA.Max > maxInstances {
		return p.errf("max is more instances than this simulator takes (%d)", maxInstances)
	}
	p.sc.Autoscalers = append(p.sc.Autoscalers, spec)
	return nil
}

// AutoscalerKinds returns the kinds of the scenario's autoscale lines, in
// the order they were written.
func (sc *Scenario) AutoscalerKinds() []string {
	var out []string
	for _, a := range sc.Autoscalers {
		out = append(out, a.Kind)
	}
	return out
}

// scaler drives the group's size: at every evaluation it works out a
// target and starts or stops instances to reach it, as a supervisor would.
type scaler struct {
	spec AutoscaleSpec
	rec  *autoscale.Recommender // baton
	hpa  *HPA                   // lag-threshold

	starts   []startReq
	pending  int // starts neither joined nor cancelled
	nextID   int
	reserved map[string]bool // instance ids the scenario uses
	lastLag  float64
	changes  int
}

type startReq struct {
	id        string
	cancelled bool
}

func (e *engine) newScaler(kind string) error {
	var spec *AutoscaleSpec
	for i := range e.sc.Autoscalers {
		if e.sc.Autoscalers[i].Kind == kind {
			spec = &e.sc.Autoscalers[i]
		}
	}
	if spec == nil {
		return fmt.Errorf("sim: %s: no `autoscale %s` line (the scenario has %v)", e.sc.Name, kind, e.sc.AutoscalerKinds())
	}
	s := &scaler{spec: *spec, reserved: map[string]bool{}}
	if s.spec.Capacity == 0 {
		s.spec.Capacity = e.sc.Instances[0].Capacity
	}
	if s.spec.Restore == 0 {
		s.spec.Restore = e.sc.Instances[0].Restore
	}
	for _, in := range e.sc.Instances {
		s.reserved[in.ID] = true
	}
	for _, ev := range e.sc.Events {
		s.reserved[ev.Instance.ID] = true
	}
	switch kind {
	case AutoscaleBaton:
		rec, err := autoscale.New(spec.Baton)
		if err != nil {
			return fmt.Errorf("sim: %s: line %d: %w", e.sc.Name, spec.Line, err)
		}
		s.rec = rec
	default:
		s.hpa = NewHPA(spec.HPA, len(e.tasks))
	}
	e.scaler = s
	e.res.Autoscaler = kind
	e.push(0, evAutoscale, 0)
	return nil
}

// replicas is the count the supervisor manages: members that are not
// leaving, and instances starting.
func (e *engine) replicas() int {
	n := e.scaler.pending
	for _, in := range e.insts {
		if in.running && in.inGroup && !in.leaving {
			n++
		}
	}
	return n
}

// evaluate runs one evaluation of the autoscaler and acts on it.
func (e *engine) evaluate() {
	s := e.scaler
	lag := e.load.total
	cur := e.replicas()
	var target int
	var why string
	if s.rec != nil {
		moves := e.learners
		for _, t := range e.tasks {
			if t.owner < 0 {
				moves++
			}
		}
		r, err := s.rec.Recommend(autoscale.Observation{
			Now:                time.Unix(0, 0).UTC().Add(e.now),
			Instances:          max(cur, 1),
			WorkersPerInstance: s.spec.Capacity,
			InputRate:          e.load.rate,
			WorkerRate:         e.sc.WorkerRate,
			Lag:                int64(lag),
			LagDraining:        e.now > 0 && lag < s.lastLag,
			Moves:              moves,
		})
		if err != nil {
			e.fail(fmt.Errorf("sim: %s: autoscale at %s: %w", e.sc.Name, fmtTime(e.now), err))
			return
		}
		target, why = r.Instances, r.Reason
	} else {
		target, why = s.hpa.Scale(e.now, max(cur, 1), lag)
	}
	s.lastLag = lag
	if e.now+s.spec.Interval < e.sc.Limit {
		e.push(e.now+s.spec.Interval, evAutoscale, 0)
	}
	if target == cur {
		return
	}
	s.changes++
	e.note(e.now, "autoscale", fmt.Sprintf("%s: %d -> %d instances: %s", s.spec.Kind, cur, target, why))
	for ; cur < target; cur++ {
		id := ""
		for id == "" || s.reserved[id] {
			s.nextID++
			id = fmt.Sprintf("as%d", s.nextID)
		}
		s.reserved[id] = true
		s.starts = append(s.starts, startReq{id: id})
		s.pending++
		e.push(e.now+s.spec.Startup, evStarted, len(s.starts)-1)
	}
	// Fewer: instances still starting go first (the newest first), then
	// the newest members.
	for k := len(s.starts) - 1; k >= 0 && cur > target; k-- {
		if st := &s.starts[k]; !st.cancelled && e.byIDOK(st.id) < 0 {
			st.cancelled = true
			s.pending--
			cur--
		}
	}
	for k := len(e.insts) - 1; k >= 0 && cur > target; k-- {
		in := e.insts[k]
		if in.running && in.inGroup && !in.leaving {
			// The rule's supervisor lets an instance leave as the policy
			// does (smooth drains); a pod the HPA deletes leaves at once.
			if s.rec != nil {
				e.leave(in)
			} else {
				e.leaveNow(in)
			}
			cur--
		}
	}
}

// byIDOK returns the index of the instance with the id, or -1.
func (e *engine) byIDOK(id string) int {
	if i, ok := e.byID[id]; ok {
		return i
	}
	return -1
}

// started: an instance the autoscaler started is up and joins the group.
func (e *engine) started(k int) {
	s := e.scaler
	st := &s.starts[k]
	if st.cancelled {
		return
	}
	s.pending--
	e.join(InstanceSpec{ID: st.id, Capacity: s.spec.Capacity, Restore: s.spec.Restore})
}

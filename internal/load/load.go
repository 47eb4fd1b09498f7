package load

import (
	"maps"
	"math"
	"slices"
	"time"

	"github.com/baton-streams/baton/topology"
)

// Default figures of a Meter and of the step.
const (
	// DefaultSmoothing is a Meter's time constant: a load follows a change
	// of the busy time by about 63% in this time.
	DefaultSmoothing = 2 * time.Minute
	// DefaultSettle is how long a task is watched before its load counts
	// as measured.
	DefaultSettle = 30 * time.Second
	// DefaultStep is the step loads are reported in: 5% of a worker.
	DefaultStep = 0.05
)

// Meter keeps an exponentially weighted mean of each active task's busy
// time per second of wall time. The zero value needs its fields set; a
// zero Smoothing or Settle means the default.
type Meter struct {
	Smoothing time.Duration // the mean's time constant
	Settle    time.Duration // how long a task is watched before Loads lists it

	tasks map[string]*meter
}

type meter struct {
	since, last time.Time // first and last observation
	// mean is the weighted mean of the busy share; weight is the sum of
	// the weights given to observations, below 1 until the task has been
	// watched for several time constants: mean/weight corrects the pull
	// towards 0 of a mean that starts at 0.
	mean, weight float64
}

// Observe takes, at time at, the busy time each active task took since
// the previous observation. A task seen for the first time starts being
// watched at at (its busy time is not counted: the span it covers is
// unknown); a task missing from busy is no longer active here and is
// forgotten. An observation not after a task's last one is ignored for
// that task.
func (m *Meter) Observe(at time.Time, busy map[string]time.Duration) {
	if m.tasks == nil {
		m.tasks = map[string]*meter{}
	}
	for id := range m.tasks {
		if _, ok := busy[id]; !ok {
			delete(m.tasks, id)
		}
	}
	tau := m.Smoothing
	if tau <= 0 {
		tau = DefaultSmoothing
	}
	for id, b := range busy {
		t := m.tasks[id]
		if t == nil {
			m.tasks[id] = &meter{since: at, last: at}
			continue
		}
		dt := at.Sub(t.last)
		if dt <= 0 {
			continue
		}
		share := max(0, b.Seconds()/dt.Seconds())
		// The busy share was share all along the span dt: the mean decays
		// by e^(-dt/tau) and takes share for the rest.
		a := -math.Expm1(-dt.Seconds() / tau.Seconds())
		t.mean += a * (share - t.mean)
		t.weight += a * (1 - t.weight)
		t.last = at
	}
}

// Loads returns the load of each task watched for at least Settle at at.
func (m *Meter) Loads(at time.Time) map[string]float64 {
	settle := m.Settle
	if settle <= 0 {
		settle = DefaultSettle
	}
	out := map[string]float64{}
	for id, t := range m.tasks {
		if t.weight > 0 && at.Sub(t.since) >= settle {
			out[id] = t.mean / t.weight
		}
	}
	return out
}

// Quantise returns the loads a member reports for measured loads, given
// what it reported before (prev): each a whole number of steps, at least
// one. A task keeps its previous figure while its measured load is less
// than one step away from it, so that a load that wavers around the
// middle between two steps does not flip between them at every join; it
// moves to the nearest step once it is a step or more away. A step of
// zero or less means DefaultStep.
func Quantise(measured, prev map[string]float64, step float64) map[string]float64 {
	if step <= 0 {
		step = DefaultStep
	}
	out := make(map[string]float64, len(measured))
	for id, l := range measured {
		if p, ok := prev[id]; ok && math.Abs(l-p) < step*(1-1e-9) { // a step away, give or take rounding
			out[id] = p
			continue
		}
		out[id] = max(1, math.Round(l/step)) * step
	}
	return out
}

// Estimate returns a load for each of tasks (task ids "<subtopology>_<p>"):
// its load in known if it has one, else the mean of the known loads of
// its subtopology's tasks, else the mean of every known load, else 1. The
// last two cover a subtopology nobody has measured yet: the mean of the
// others keeps its tasks on the scale of the measured ones, and with
// nothing measured every task weighs the same.
func Estimate(tasks []string, known map[string]float64) map[string]float64 {
	type sum struct {
		total float64
		n     int
	}
	bySub := map[int]sum{}
	var all sum
	// Sorted, so that the sums (and so the means) do not depend on map
	// order.
	for _, id := range slices.Sorted(maps.Keys(known)) {
		l := known[id]
		all.total += l
		all.n++
		if sub, _, err := topology.ParseTaskID(id); err == nil {
			s := bySub[sub]
			s.total += l
			s.n++
			bySub[sub] = s
		}
	}
	out := make(map[string]float64, len(tasks))
	for _, id := range tasks {
		if l, ok := known[id]; ok {
			out[id] = l
			continue
		}
		sub, _, err := topology.ParseTaskID(id)
		switch s := bySub[sub]; {
		case err == nil && s.n > 0:
			out[id] = s.total / float64(s.n)
		case all.n > 0:
			out[id] = all.total / float64(all.n)
		default:
			out[id] = 1
		}
	}
	return out
}

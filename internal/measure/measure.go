// Package measure holds the figures an instance measures for autoscaling
// (docs/autoscaling.md): input lag, input rates and the rate a fully busy
// worker sustains. It is pure: no goroutines, clock or I/O. The runtime's
// loop feeds it what it reads and owns every value it makes.
package measure

import "time"

// Window is how far back the rates look: long enough to smooth the
// reads every few seconds, short enough to follow a change of load.
const Window = 30 * time.Second

// Reading is one reading of two cumulative figures: Count, and Base, the
// figure Count is measured against (seconds of wall time for an offset,
// seconds of busy time for records processed).
type Reading struct {
	At          time.Time
	Count, Base float64
}

// Meter keeps the readings of the last Window and gives the growth of
// Count per unit of Base over it. A reading whose figures went down (a
// topic deleted and created again, the workers started again) starts the
// window over, as does one from before the last.
type Meter struct {
	Window   time.Duration
	readings []Reading
}

// Add adds a reading and forgets those the window no longer needs.
func (m *Meter) Add(r Reading) {
	if n := len(m.readings); n > 0 {
		last := m.readings[n-1]
		if r.Count < last.Count || r.Base < last.Base || r.At.Before(last.At) {
			m.readings = m.readings[:0]
		}
	}
	m.readings = append(m.readings, r)
	// Keep the newest reading at or before the window's start: the
	// growth is measured from it.
	cut := r.At.Add(-m.Window)
	drop := 0
	for drop+1 < len(m.readings) && !m.readings[drop+1].At.After(cut) {
		drop++
	}
	m.readings = append(m.readings[:0], m.readings[drop:]...)
}

// Ratio is the growth of Count per unit of Base between the oldest and
// the newest reading, or 0 when Base did not grow (one reading, or no
// busy time).
func (m *Meter) Ratio() float64 {
	if len(m.readings) < 2 {
		return 0
	}
	first, last := m.readings[0], m.readings[len(m.readings)-1]
	db := last.Base - first.Base
	if db <= 0 {
		return 0
	}
	return (last.Count - first.Count) / db
}

// Rates turns reads of partitions' end offsets into the rate at which
// records arrive on each, in records per second. K names a partition.
type Rates[K comparable] struct {
	window time.Duration
	parts  map[K]*Meter
}

// NewRates returns Rates that look window back.
func NewRates[K comparable](window time.Duration) *Rates[K] {
	return &Rates[K]{window: window, parts: map[K]*Meter{}}
}

// Observe adds one read of end offsets made at at. Partitions the read
// does not have are forgotten.
func (r *Rates[K]) Observe(at time.Time, ends map[K]int64) {
	for tp := range r.parts {
		if _, ok := ends[tp]; !ok {
			delete(r.parts, tp)
		}
	}
	for tp, end := range ends {
		m := r.parts[tp]
		if m == nil {
			m = &Meter{Window: r.window}
			r.parts[tp] = m
		}
		m.Add(Reading{At: at, Count: float64(end), Base: seconds(at)})
	}
}

// Rate is the records per second that arrived on tp over the window; 0
// until it was read twice.
func (r *Rates[K]) Rate(tp K) float64 {
	if m := r.parts[tp]; m != nil {
		return m.Ratio()
	}
	return 0
}

func seconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// InputLag is a task's lag in records: over its input partitions, the end
// offset minus the position (the next offset the task processes), never
// below 0. A partition whose end is unknown counts 0.
func InputLag(ends, positions map[string]int64) int64 {
	var lag int64
	for topic, end := range ends {
		lag += max(0, end-positions[topic])
	}
	return lag
}

// SecondsBehind is how far a task with records of lag is behind, in
// seconds, at now: now minus the timestamp of the last record it
// processed, or, before it processed one since it became active here
// (processedHere false), now minus when it became active. It is 0 when
// the task has no lag, and never below 0 (a record timestamped in the
// future).
func SecondsBehind(lag int64, lastRecord time.Time, processedHere bool, activeSince, now time.Time) float64 {
	if lag <= 0 {
		return 0
	}
	from := lastRecord
	if !processedHere {
		from = activeSince
	}
	if from.IsZero() {
		return 0
	}
	return max(0, now.Sub(from).Seconds())
}

package baton

import (
	"time"
)

// The figures an instance measures for autoscaling (docs/autoscaling.md):
// input lag, input rates and the rate a fully busy worker sustains. The
// helpers in this file are pure; the loop feeds them what it reads.

// meterWindow is how far back the rates look: long enough to smooth the
// reads every few seconds, short enough to follow a change of load.
const meterWindow = 30 * time.Second

// reading is one reading of two cumulative figures: count, and base, the
// figure count is measured against (seconds of wall time for an offset,
// seconds of busy time for records processed).
type reading struct {
	at          time.Time
	count, base float64
}

// meter keeps the readings of the last window and gives the growth of
// count per unit of base over it. A reading whose figures went down
// (a topic deleted and created again, the workers started again) starts
// the window over, as does one from before the last.
type meter struct {
	window   time.Duration
	readings []reading
}

func (m *meter) add(r reading) {
	if n := len(m.readings); n > 0 {
		last := m.readings[n-1]
		if r.count < last.count || r.base < last.base || r.at.Before(last.at) {
			m.readings = m.readings[:0]
		}
	}
	m.readings = append(m.readings, r)
	// Keep the newest reading at or before the window's start: the
	// growth is measured from it.
	cut := r.at.Add(-m.window)
	drop := 0
	for drop+1 < len(m.readings) && !m.readings[drop+1].at.After(cut) {
		drop++
	}
	m.readings = append(m.readings[:0], m.readings[drop:]...)
}

// ratio is the growth of count per unit of base between the oldest and
// the newest reading, or 0 when base did not grow (one reading, or no
// busy time).
func (m *meter) ratio() float64 {
	if len(m.readings) < 2 {
		return 0
	}
	first, last := m.readings[0], m.readings[len(m.readings)-1]
	db := last.base - first.base
	if db <= 0 {
		return 0
	}
	return (last.count - first.count) / db
}

// offsetRates turns reads of partitions' end offsets into the rate at
// which records arrive on each, in records per second.
type offsetRates struct {
	window time.Duration
	parts  map[topicPart]*meter
}

func newOffsetRates(window time.Duration) *offsetRates {
	return &offsetRates{window: window, parts: map[topicPart]*meter{}}
}

// observe adds one read of end offsets made at at. Partitions the read
// does not have are forgotten.
func (r *offsetRates) observe(at time.Time, ends map[topicPart]int64) {
	for tp := range r.parts {
		if _, ok := ends[tp]; !ok {
			delete(r.parts, tp)
		}
	}
	for tp, end := range ends {
		m := r.parts[tp]
		if m == nil {
			m = &meter{window: r.window}
			r.parts[tp] = m
		}
		m.add(reading{at: at, count: float64(end), base: seconds(at)})
	}
}

// rate is the records per second that arrived on tp over the window; 0
// until it was read twice.
func (r *offsetRates) rate(tp topicPart) float64 {
	if m := r.parts[tp]; m != nil {
		return m.ratio()
	}
	return 0
}

func seconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// inputLag is a task's lag in records: over its input partitions, the end
// offset minus the position (the next offset the task processes), never
// below 0. A partition whose end is unknown counts 0.
func inputLag(ends, positions map[string]int64) int64 {
	var lag int64
	for topic, end := range ends {
		lag += max(0, end-positions[topic])
	}
	return lag
}

// secondsBehind is how far a task with records of lag is behind, in
// seconds, at now: now minus the timestamp of the last record it
// processed, or, before it processed one since it became active here
// (processedHere false), now minus when it became active. It is 0 when
// the task has no lag, and never below 0 (a record timestamped in the
// future).
func secondsBehind(lag int64, lastRecord time.Time, processedHere bool, activeSince, now time.Time) float64 {
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

// Package govern paces the restores of warm copies (standbys and
// learners) so that they take the capacity active tasks leave free:
// processing has priority. Every App of a process reports into one
// Pressure when its active tasks process records; a loop about to take
// the next restored chunk of its warm copies asks Pace how long to wait
// first. It has no goroutines and reads no clock: times are given.
package govern

import (
	"sync/atomic"
	"time"
)

// Pressure is when active tasks of this process last had records to
// process. Safe for use by any goroutine.
type Pressure struct {
	last atomic.Int64 // unix nanos; 0: never
}

// Process is the pressure of every App in this process: they share its
// cores, so one App's warm restores yield to another's active tasks too.
var Process = &Pressure{}

// Busy records that active tasks had records to process at now.
func (p *Pressure) Busy(now time.Time) {
	n := now.UnixNano()
	for {
		old := p.last.Load()
		if old >= n || p.last.CompareAndSwap(old, n) {
			return
		}
	}
}

// Since reports whether active tasks had records to process within d
// before now.
func (p *Pressure) Since(now time.Time, d time.Duration) bool {
	last := p.last.Load()
	return last != 0 && now.UnixNano()-last <= d.Nanoseconds()
}

// Policy is how warm restores yield.
type Policy struct {
	// Share is the part of the time warm restores may write while active
	// tasks are busy, in (0, 1]: after a chunk that took t to write, the
	// next waits t*(1-Share)/Share. 1 never waits.
	Share float64
	// Window is how recently active tasks must have had records for
	// restores to yield: actives idle for longer leave the restores at
	// full speed.
	Window time.Duration
}

// DefaultPolicy yields half of the time while active tasks process:
// a warm copy's restore takes at most about twice as long as on an idle
// group, however loaded its actives are.
var DefaultPolicy = Policy{Share: 0.5, Window: time.Second}

// Pause is how long to wait, at now, before taking the next restored
// chunk of warm copies after one that took took to write.
func (pol Policy) Pause(p *Pressure, now time.Time, took time.Duration) time.Duration {
	if pol.Share >= 1 || pol.Share <= 0 || took <= 0 || !p.Since(now, pol.Window) {
		return 0
	}
	return time.Duration(float64(took) * (1 - pol.Share) / pol.Share)
}

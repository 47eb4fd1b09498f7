// Package govern paces the restores of warm copies (standbys and
// learners) so that they take the capacity active tasks leave free:
// processing has priority. Every App of a process reports into one
// Pressure when its active tasks process records; a loop about to take
// the next restored chunk of its warm copies asks Pause how long to wait
// first. A Catchup keeps that yielding from starving a warm copy whose
// changelog grows faster than its share lets it restore. The package has
// no goroutines and reads no clock: times are given.
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
	// Catchup is the length of the windows over which a Catchup judges
	// whether the warm copies still catch up (see Catchup); 0 judges
	// none, and restores yield however far they fall behind.
	Catchup time.Duration
	// Caught is the lag within which a warm store counts as caught up:
	// Catchup never finds it behind. The engine sets the acceptable lag
	// of a learner (what it needs to take over) here.
	Caught int64
}

// DefaultPolicy yields half of the time while active tasks process,
// unless a warm copy did not gain on its changelog over two seconds.
var DefaultPolicy = Policy{Share: 0.5, Window: time.Second, Catchup: 2 * time.Second}

// Pause is how long to wait, at now, before taking the next restored
// chunk of warm copies after one that took took to write. lags is every
// warm store's lag after the chunk (the changelog records it still lacks,
// by any key that names the store); c, when not nil, is the membership's
// Catchup, which lags feeds: while it finds a store behind, Pause is 0.
func (pol Policy) Pause(p *Pressure, c *Catchup, now time.Time, took time.Duration, lags map[string]int64) time.Duration {
	if c != nil && pol.Catchup > 0 && c.Behind(now, pol.Catchup, pol.Caught, lags) {
		return 0
	}
	if pol.Share >= 1 || pol.Share <= 0 || took <= 0 || !p.Since(now, pol.Window) {
		return 0
	}
	return time.Duration(float64(took) * (1 - pol.Share) / pol.Share)
}

// Catchup keeps yielding from starving a warm copy. At the end of each
// window it compares every warm store's lag with the lowest lag that
// store had at an earlier window's end. A store that is not caught up
// (more than the policy's Caught records to restore) and did not reach a
// new low is not catching up at its share: its changelog grows as fast
// as it restores, or faster. It is then behind until it is caught up, and
// while any store is behind, restores run at full speed. So a warm copy
// yields only while yielding still lets it gain on its changelog, and
// one that cannot finishes in at most a window plus the time restoring at
// full speed takes: as long as that outpaces its changelog, it finishes
// however loaded the actives are. A store seen for the first time sets
// its low; one no longer given is forgotten. The zero value is ready to
// use; one Catchup belongs to one loop.
type Catchup struct {
	end    time.Time        // the current window's end; zero before the first
	low    map[string]int64 // each store's lowest lag at a window's end
	behind map[string]bool  // the stores found behind and not caught up since
}

// Behind takes the warm stores' lags at now and reports whether one of
// them is behind: found, at the end of a window (of length window), above
// caught and no lower than its lowest lag at an earlier window's end, and
// not within caught since.
func (c *Catchup) Behind(now time.Time, window time.Duration, caught int64, lags map[string]int64) bool {
	if c.low == nil {
		c.low, c.behind = map[string]int64{}, map[string]bool{}
	}
	if c.end.IsZero() {
		c.end = now.Add(window)
		for k, lag := range lags {
			c.low[k] = lag
		}
		return false
	}
	if !now.Before(c.end) {
		c.end = now.Add(window)
		for k := range c.low {
			if _, ok := lags[k]; !ok {
				delete(c.low, k)
				delete(c.behind, k)
			}
		}
		for k, lag := range lags {
			low, ok := c.low[k]
			switch {
			case lag <= caught:
				delete(c.behind, k)
				c.low[k] = lag
			case !ok || lag < low:
				c.low[k] = lag
			default:
				c.behind[k] = true
			}
		}
	}
	return len(c.behind) > 0
}

package govern

import (
	"testing"
	"time"
)

func TestPause(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var p Pressure
	pol := Policy{Share: 0.5, Window: time.Second}
	if d := pol.Pause(&p, nil, t0, 20*time.Millisecond, nil); d != 0 {
		t.Errorf("actives never busy: pause %v, want 0 (full speed)", d)
	}
	p.Busy(t0)
	p.Busy(t0.Add(-time.Hour)) // an older report does not move it back
	for _, c := range []struct {
		name string
		pol  Policy
		at   time.Duration
		took time.Duration
		want time.Duration
	}{
		{"busy now, half the time", pol, 0, 20 * time.Millisecond, 20 * time.Millisecond},
		{"busy within the window", pol, time.Second, 20 * time.Millisecond, 20 * time.Millisecond},
		{"idle past the window", pol, time.Second + time.Nanosecond, 20 * time.Millisecond, 0},
		{"a quarter of the time", Policy{Share: 0.25, Window: time.Second}, 0, 10 * time.Millisecond, 30 * time.Millisecond},
		{"share 1 never waits", Policy{Share: 1, Window: time.Second}, 0, 10 * time.Millisecond, 0},
	} {
		if got := c.pol.Pause(&p, nil, t0.Add(c.at), c.took, nil); got != c.want {
			t.Errorf("%s: pause %v, want %v", c.name, got, c.want)
		}
	}
}

// TestRestoreTimeBound: however busy the actives, warm restores write at
// least Share of the time, so a restore that took T on an idle group
// takes at most T/Share.
func TestRestoreTimeBound(t *testing.T) {
	var p Pressure
	now := time.Unix(1000, 0)
	pol := DefaultPolicy
	var c Catchup
	var wrote, waited time.Duration
	lag := int64(1 << 30) // no flow: every chunk gains on the changelog
	for range 1000 {
		p.Busy(now)
		took := 7 * time.Millisecond
		now = now.Add(took)
		wrote += took
		lag -= 1000
		d := pol.Pause(&p, &c, now, took, map[string]int64{"0_0/s": lag})
		now = now.Add(d)
		waited += d
	}
	if total := wrote + waited; float64(total) > float64(wrote)/pol.Share+1 {
		t.Errorf("restore took %v for %v of writes: more than 1/%v of it", total, wrote, pol.Share)
	}
	if waited == 0 {
		t.Error("restores never yielded to busy actives")
	}
}

func TestCatchupBehind(t *testing.T) {
	t0 := time.Unix(1000, 0)
	w := 2 * time.Second
	var c Catchup
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	steps := []struct {
		at   time.Duration
		lags map[string]int64
		want bool
		why  string
	}{
		{0, map[string]int64{"a": 500, "b": 50}, false, "the first lags set each store's low"},
		{time.Second, map[string]int64{"a": 900, "b": 50}, false, "within the window: no verdict yet"},
		{2 * time.Second, map[string]int64{"a": 400, "b": 70}, false, "a at a new low; b within the caught-up lag"},
		{3 * time.Second, map[string]int64{"a": 999, "b": 70}, false, "no verdict until the window ends"},
		{4 * time.Second, map[string]int64{"a": 400, "b": 70}, true, "a no lower than its low"},
		{5 * time.Second, map[string]int64{"a": 100, "b": 70}, true, "the verdict holds through the window"},
		{6 * time.Second, map[string]int64{"a": 390, "b": 70}, true, "a at a new low, but behind until caught up"},
		{8 * time.Second, map[string]int64{"a": 100, "b": 70}, false, "a caught up"},
		{10 * time.Second, map[string]int64{"a": 400, "b": 70}, true, "a behind again: its low is the caught-up lag"},
		{12 * time.Second, map[string]int64{"b": 70, "c": 5000}, false, "a forgotten; c new: its low is set"},
		{14 * time.Second, map[string]int64{"b": 70, "c": 5000}, true, "c no lower"},
		{16 * time.Second, map[string]int64{"b": 70, "a": 900}, false, "c forgotten; a given again after it was forgotten: a new low"},
	}
	for i, s := range steps {
		if got := c.Behind(at(s.at), w, 100, s.lags); got != s.want {
			t.Errorf("step %d (%s): behind %v, want %v", i, s.why, got, s.want)
		}
	}
}

// restoreRun simulates a warm restore of lag records against a changelog
// growing by flow records a second, with busy actives all along: each
// chunk takes at most maxChunk records and cost per record to write, and
// the policy's pause follows it. It returns when the store caught up (or
// after limit) and how long it yielded.
func restoreRun(pol Policy, c *Catchup, lag, flow int64, limit time.Duration) (took, yielded time.Duration, caught bool) {
	const maxChunk, cost = 2000, 10 * time.Microsecond // full speed: 100,000 records/s
	var p Pressure
	t0 := time.Unix(1000, 0)
	now := t0
	grow := func(d time.Duration) int64 { return int64(float64(flow) * d.Seconds()) }
	for now.Sub(t0) < limit {
		if lag <= pol.Caught {
			return now.Sub(t0), yielded, true
		}
		p.Busy(now)
		n := min(lag, maxChunk)
		d := time.Duration(n) * cost
		now = now.Add(d)
		lag += grow(d) - n
		w := pol.Pause(&p, c, now, d, map[string]int64{"1_0/counts": lag})
		now = now.Add(w)
		lag += grow(w)
		yielded += w
	}
	return now.Sub(t0), yielded, false
}

// TestCatchupNeverStarves: a learner whose changelog grows faster than
// its share of the time restores (70,000 records/s against 50,000 at half
// of full speed) never catches up while it yields, and does with Catchup,
// still yielding in the windows after its progress. A flow its share
// outpaces leaves the yielding as it was.
func TestCatchupNeverStarves(t *testing.T) {
	pol := Policy{Share: 0.5, Window: time.Second, Catchup: 2 * time.Second, Caught: 10_000}
	if _, _, caught := restoreRun(Policy{Share: 0.5, Window: time.Second, Caught: 10_000}, nil, 1_000_000, 70_000, 10*time.Minute); caught {
		t.Fatal("the learner caught up at half speed against a faster flow: the case does not show starvation")
	}
	took, yielded, caught := restoreRun(pol, &Catchup{}, 1_000_000, 70_000, 10*time.Minute)
	if !caught {
		t.Fatalf("with Catchup the learner did not catch up in %v (yielded %v)", took, yielded)
	}
	if yielded == 0 {
		t.Errorf("with Catchup the learner never yielded (%v to catch up)", took)
	}
	t.Logf("70,000 records/s against 100,000 at full speed: caught up in %v, yielded %v", took, yielded)

	slow, slowYield, caught := restoreRun(pol, &Catchup{}, 1_000_000, 20_000, 10*time.Minute)
	plain, plainYield, caught2 := restoreRun(Policy{Share: 0.5, Window: time.Second}, nil, 1_000_000, 20_000, 10*time.Minute)
	if !caught || !caught2 {
		t.Fatalf("a flow of 20,000 records/s: caught up %v with Catchup, %v without", caught, caught2)
	}
	if slow > plain+2*time.Second || slowYield == 0 {
		t.Errorf("a flow the share outpaces: %v (yielded %v) with Catchup, against %v (yielded %v) without", slow, slowYield, plain, plainYield)
	}
}

package govern

import (
	"testing"
	"time"
)

func TestPause(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var p Pressure
	pol := Policy{Share: 0.5, Window: time.Second}
	if d := pol.Pause(&p, t0, 20*time.Millisecond); d != 0 {
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
		if got := c.pol.Pause(&p, t0.Add(c.at), c.took); got != c.want {
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
	var wrote, waited time.Duration
	for range 1000 {
		p.Busy(now)
		took := 7 * time.Millisecond
		now = now.Add(took)
		wrote += took
		d := pol.Pause(&p, now, took)
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

package sim

import (
	"math"
	"testing"
	"time"
)

func runLoad(t *testing.T, text, autoscaler string) *Result {
	t.Helper()
	sc, err := ParseString("load.txt", text)
	if err != nil {
		t.Fatal(err)
	}
	pol, _ := ParsePolicy("smooth")
	r, err := Run(sc, pol, Options{Autoscaler: autoscaler, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range r.Violations {
		t.Error(v)
	}
	if r.Load == nil {
		t.Fatal("no load figures")
	}
	return r
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

// TestLoadLag works the lag out by hand: one instance of one worker at 100
// records/s, two tasks; the input goes from 50 to 150 records/s for a
// minute, so each task's lag grows at 75 - 50 = 25/s, then drains at
// 50/s.
func TestLoadLag(t *testing.T) {
	r := runLoad(t, `
task T1 stateless
task T2 stateless
instance A active=T1,T2
config worker_rate=100
limit 5m
load 50
at 1m load 150
at 2m load 50
`, "")
	f := r.Load
	if !near(f.PeakLag, 3000) || f.PeakAt != 2*time.Minute {
		t.Errorf("peak lag %v at %v, want 3000 at 2m", f.PeakLag, f.PeakAt)
	}
	// At the peak's instant the input is still 150/s.
	if !near(f.PeakSeconds, 20) {
		t.Errorf("peak lag in seconds %v, want 20", f.PeakSeconds)
	}
	// The bound is the lag before the spike (0) plus 15 s of the input
	// before it (50/s); the lag is back at 750 45 s after 2m.
	if !near(f.Bound, 750) || f.Absorbed != 105*time.Second || f.Settled != f.Absorbed {
		t.Errorf("bound %v, absorbed %v, settled %v after the spike; want 750 and 1m45s", f.Bound, f.Absorbed, f.Settled)
	}
	// Above 750 from 1m15s (50/s × 15 s) to 2m45s, counted from the
	// samples a second apart.
	if f.AboveBound < 89*time.Second || f.AboveBound > 90*time.Second {
		t.Errorf("above the bound for %v, want 1m29s to 1m30s", f.AboveBound)
	}
	if f.SpikeAt != time.Minute || f.FirstNew != -1 || f.EndLag != 0 || f.MinInstances != 1 || f.MaxInstances != 1 || !near(f.InstanceSeconds, 300) {
		t.Errorf("figures %+v", *f)
	}
	// The series has a sample a second.
	if n := len(r.LoadSeries); n != 300 {
		t.Errorf("%d samples, want 300", n)
	}
	for _, p := range r.LoadSeries {
		if p.At == 90*time.Second && !near(p.Lag, 1500) {
			t.Errorf("lag at 1m30s %v, want 1500", p.Lag)
		}
	}
}

// TestLoadUnavailable: a task whose owner crashed gets no processing until
// the group reassigns it, and the survivor, fully busy, never works the
// backlog off.
func TestLoadUnavailable(t *testing.T) {
	r := runLoad(t, `
task T1 stateless
task T2 stateless
instance A active=T1
instance B active=T2
config worker_rate=100
timing heartbeat=1s join=100ms sync=100ms session=10s
limit 3m
load 100
at 1m crash B
`, "")
	// B's last heartbeat was at 1m (a heartbeat every second from 0):
	// expelled at 1m10s, when A's heartbeat learns of the round;
	// reassigned join + sync later: 10.2 s at 50/s.
	if f := r.Load; !near(f.PeakLag, 510) || !near(f.EndLag, 510) || f.SpikeAt != -1 {
		t.Errorf("peak lag %v, end lag %v, spike at %v; want 510, 510, -1", f.PeakLag, f.EndLag, f.SpikeAt)
	}
}

// TestAutoscaleDeterministic: the same scenario under an autoscaler gives
// the same trace.
func TestAutoscaleDeterministic(t *testing.T) {
	sc := loadScenario(t, "../scenarios/autoscale-spike-small.txt")
	a, _ := trace(t, sc)
	b, _ := trace(t, sc)
	if string(a) != string(b) {
		t.Fatal("two runs differ")
	}
}

// TestAutoscaleSpike1000 runs the 1,000-instance spike under both
// autoscalers: the baton rule absorbs the spike and changes the count
// fewer times than the lag threshold, which follows the lag down to its
// minimum and up again.
func TestAutoscaleSpike1000(t *testing.T) {
	if testing.Short() {
		t.Skip("about 20 s")
	}
	sc := loadScenario(t, "../scenarios/autoscale-spike-1000.txt")
	pol, _ := ParsePolicy("smooth")
	got := map[string]*LoadFigures{}
	for _, kind := range []string{AutoscaleBaton, AutoscaleLag} {
		r, err := Run(sc, pol, Options{Autoscaler: kind})
		if err != nil {
			t.Fatal(err)
		}
		got[kind] = r.Load
		t.Logf("%s: %d changes, first new processing %v, absorbed %v, settled %v, peak lag %.0f, instances %d..%d",
			kind, r.Load.Changes, r.Load.FirstNew, r.Load.Absorbed, r.Load.Settled, r.Load.PeakLag, r.Load.MinInstances, r.Load.MaxInstances)
	}
	b, l := got[AutoscaleBaton], got[AutoscaleLag]
	if b.Settled < 0 || b.FirstNew < 0 {
		t.Errorf("baton: settled %v, first new instance processing %v: want both", b.Settled, b.FirstNew)
	}
	if b.Changes >= l.Changes {
		t.Errorf("baton changed the count %d times, lag-threshold %d: want fewer", b.Changes, l.Changes)
	}
}

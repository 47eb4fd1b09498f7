package baton

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/autoscale"
	"github.com/baton-streams/baton/topology"
)

// withInputLagInterval reads the input's offsets every d instead of
// DefaultInputLagInterval, so that a test sees figures sooner.
func withInputLagInterval(d time.Duration) Option { return func(c *config) { c.InputEvery = d } }

func TestAutoscaleConfigIsChecked(t *testing.T) {
	top, err := topology.WordCount("wc", "lines", "counts")
	if err != nil {
		t.Fatal(err)
	}
	cfg := autoscale.DefaultConfig()
	cfg.Headroom = 2
	_, err = New(top, WithBrokers("localhost:9092"), WithMemoryState(), WithAutoscale(cfg))
	if !errors.Is(err, ErrConfig) || !errors.Is(err, autoscale.ErrInvalidConfig) || !strings.Contains(err.Error(), "Headroom") {
		t.Errorf("err = %v, want ErrConfig and autoscale.ErrInvalidConfig naming Headroom", err)
	}
}

// perRecord is what the test's processor takes per record: one worker
// processes at most 1/perRecord records per second of busy time.
const perRecord = 2 * time.Millisecond

// TestInputLagAndDesiredInstances: input arrives at 400 records a second
// on the only instance, whose one worker processes at most 500 a second:
// its tasks run behind their input, and with a headroom of 100% the
// instance, leading the group, recommends more instances than it is. (A
// worker slower than its input would fall ever further behind, and the
// loop waits for each batch it processes: the test keeps the batches
// short.) A second instance joins: only the leader publishes the
// recommendation.
func TestInputLagAndDesiredInstances(t *testing.T) {
	tg, in, appID, top := slowTopology(t, perRecord)
	cfg := autoscale.DefaultConfig()
	cfg.OutWindow = 0 // scale out on the first evaluation that needs it
	cfg.Headroom = 1  // 400/s needs the capacity of 800/s: two workers
	start := func(id string) (*App, *prometheus.Registry) {
		reg := prometheus.NewRegistry()
		app, err := New(top, append(testTimings(), WithBrokers(tg.Brokers...), WithAppID(appID), WithInstanceID(id), WithMetrics(reg),
			WithLogger(slog.New(slog.DiscardHandler)), WithAutoscale(cfg), withInputLagInterval(200*time.Millisecond))...)
		if err != nil {
			t.Fatal(err)
		}
		runUntilCleanup(t, app)
		return app, reg
	}

	// 400 records a second, against at most 500 a worker does.
	prod := testProducer(t, tg.Brokers)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		every := time.NewTicker(100 * time.Millisecond)
		defer every.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-every.C:
			}
			var recs []*kgo.Record
			for j := range 40 {
				recs = append(recs, &kgo.Record{Topic: in, Key: []byte(fmt.Sprint(j)), Value: []byte(fmt.Sprint(i))}) // keys spread over both partitions
			}
			if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Errorf("producing: %v", err)
				return
			}
		}
	}()
	t.Cleanup(func() { close(stop); wg.Wait() })

	a, regA := start("a")
	var st Status
	waitFor(t, 60*time.Second, func() bool {
		st = a.Status()
		return st.Autoscale != nil && st.Autoscale.DesiredInstances > 1 && st.Autoscale.WorkerRate > 0 && st.Autoscale.InputRate > 0 &&
			len(st.Tasks) == 2 && st.Tasks[0].Input != nil && st.Tasks[0].Input.Records > 0 && st.Tasks[0].Input.Seconds > 0
	}, func() string {
		var inputs []string
		for _, ts := range st.Tasks {
			if ts.Input != nil {
				inputs = append(inputs, fmt.Sprintf("%s %+v", ts.ID, *ts.Input))
			}
		}
		return fmt.Sprintf("status: %+v autoscale %+v; inputs %v", st, st.Autoscale, inputs)
	})
	as := st.Autoscale
	t.Logf("worker rate %.0f/s; task 0_0 input %+v; recommendation %+v", st.WorkerRate, *st.Tasks[0].Input, *as)
	if max := float64(time.Second / perRecord); st.WorkerRate > max || as.WorkerRate > max {
		t.Errorf("worker rate %v (status) / %v (autoscale): more than the %v records a second a worker can do", st.WorkerRate, as.WorkerRate, max)
	}
	if as.Instances != 1 || as.WorkersPerInstance != 1 || as.Needed < as.DesiredInstances || !strings.Contains(as.Reason, "scale out 1 →") && !strings.Contains(as.Reason, "recommended before; 1 run now") {
		t.Errorf("autoscale = %+v, want 1 instance of 1 worker, scaling out (or holding the scale-out while the new instance is not there)", as)
	}
	for _, ts := range st.Tasks {
		if ts.Role != "active" || ts.Input == nil || ts.Input.Rate <= 0 {
			t.Errorf("task %s: role %s, input %+v: want active with input arriving", ts.ID, ts.Role, ts.Input)
		}
	}
	// Present, and above 0 where the figure cannot have fallen to 0 since
	// the status was read (lags can).
	got := gather(t, regA)
	for name, positive := range map[string]bool{"baton_desired_instances": true, "baton_group_input_lag_records": false,
		"baton_group_input_records_per_second": true, "baton_worker_records_per_busy_second": true,
		`baton_input_lag_records{task="0_0"}`: false, `baton_input_lag_seconds{task="0_0"}`: false,
		`baton_input_records_per_second{task="0_1"}`: true, `baton_worker_busy_seconds_total{worker="0"}`: true} {
		if v, ok := got[name]; !ok || positive && v <= 0 {
			t.Errorf("metric %s = %v (present %v), want it present%s", name, v, ok, map[bool]string{true: " and above 0"}[positive])
		}
	}
	if v := got["baton_desired_instances"]; v <= 1 {
		t.Errorf("baton_desired_instances = %v, want above 1", v)
	}

	// A second instance: the group has one leader, and only it has the
	// recommendation.
	b2, regB := start("b")
	var leader, other *App
	var otherReg *prometheus.Registry
	waitFor(t, 60*time.Second, func() bool {
		sa, sb := a.Status(), b2.Status()
		switch {
		case sa.Leader && !sb.Leader:
			leader, other, otherReg = a, b2, regB
		case sb.Leader && !sa.Leader:
			leader, other, otherReg = b2, a, regA
		default:
			return false
		}
		ls, os := leader.Status(), other.Status()
		if ls.Autoscale == nil || os.Autoscale != nil || len(os.Tasks) == 0 || ls.Autoscale.Instances != 2 {
			return false
		}
		_, has := gather(t, otherReg)["baton_desired_instances"]
		return !has
	}, func() string { return fmt.Sprintf("a: %+v\nb: %+v", a.Status(), b2.Status()) })
	// The other instance still measures and publishes its own figures.
	waitFor(t, 30*time.Second, func() bool {
		os := other.Status()
		return os.WorkerRate > 0 && len(os.Tasks) > 0 && os.Tasks[0].Input != nil
	}, func() string { return fmt.Sprintf("%+v", other.Status()) })
}

// waitFor waits until cond holds, failing the test with what() after
// timeout.
func waitFor(t *testing.T, timeout time.Duration, cond func() bool, what func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not reached in %v: %s", timeout, what())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// gather returns the registry's samples by name and labels other than
// the app id and instance, as name{label="value",...}.
func gather(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				if l.GetName() != "app_id" && l.GetName() != "instance" {
					labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
			}
			key := mf.GetName()
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			switch {
			case m.Gauge != nil:
				out[key] = m.GetGauge().GetValue()
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

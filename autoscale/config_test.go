package autoscale

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	tests := []struct {
		name   string
		change func(*Config)
		field  string
		says   string
	}{
		{"headroom negative", func(c *Config) { c.Headroom = -0.1 }, "Headroom", "from 0 to 1"},
		{"headroom as a percentage", func(c *Config) { c.Headroom = 20 }, "Headroom", "got 20"},
		{"headroom NaN", func(c *Config) { c.Headroom = math.NaN() }, "Headroom", "got NaN"},
		{"out-window negative", func(c *Config) { c.OutWindow = -time.Second }, "OutWindow", "negative"},
		{"in-window shorter than out-window", func(c *Config) { c.InWindow = 10 * time.Second }, "InWindow", "at least OutWindow (30s)"},
		{"drain time zero", func(c *Config) { c.DrainTime = 0 }, "DrainTime", "more than zero"},
		{"min zero", func(c *Config) { c.MinInstances = 0 }, "MinInstances", "at least 1"},
		{"max below min", func(c *Config) { c.MinInstances, c.MaxInstances = 4, 3 }, "MaxInstances", "at least MinInstances (4), got 3"},
		{"max step negative", func(c *Config) { c.MaxStep = -1 }, "MaxStep", "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.change(&c)
			err := c.Validate()
			checkFieldError(t, err, ErrInvalidConfig, tt.field, tt.says)
			if r, err2 := New(c); r != nil || err2 == nil || err2.Error() != err.Error() {
				t.Errorf("New = %v, %v; want nil and %v", r, err2, err)
			}
		})
	}
}

func TestConfigValidateEdges(t *testing.T) {
	for _, c := range []Config{
		{Headroom: 0, OutWindow: 0, InWindow: 0, DrainTime: time.Nanosecond, MinInstances: 1, MaxInstances: 1},
		{Headroom: 1, OutWindow: time.Minute, InWindow: time.Minute, DrainTime: time.Hour, MinInstances: 3, MaxInstances: 3, MaxStep: 1},
	} {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
}

func TestObservationValidate(t *testing.T) {
	good := Observation{Now: start, Instances: 2, WorkersPerInstance: 1, InputRate: 10, WorkerRate: 5}
	tests := []struct {
		name   string
		change func(*Observation)
		field  string
		says   string
	}{
		{"no instances", func(o *Observation) { o.Instances = 0 }, "Instances", "at least 1"},
		{"no workers", func(o *Observation) { o.WorkersPerInstance = 0 }, "WorkersPerInstance", "at least 1"},
		{"input negative", func(o *Observation) { o.InputRate = -1 }, "InputRate", "got -1"},
		{"input NaN", func(o *Observation) { o.InputRate = math.NaN() }, "InputRate", "got NaN"},
		{"input infinite", func(o *Observation) { o.InputRate = math.Inf(1) }, "InputRate", "got +Inf"},
		{"worker rate negative", func(o *Observation) { o.WorkerRate = -1 }, "WorkerRate", "not measured yet"},
		{"worker rate infinite", func(o *Observation) { o.WorkerRate = math.Inf(1) }, "WorkerRate", "got +Inf"},
		{"lag negative", func(o *Observation) { o.Lag = -1 }, "Lag", "negative"},
		{"moves negative", func(o *Observation) { o.Moves = -1 }, "Moves", "negative"},
		{"time went back", func(o *Observation) { o.Now = start.Add(-time.Second) }, "Now", "before the previous evaluation"},
	}
	t.Run("time went back within a run of equal needs", func(t *testing.T) {
		r, err := New(DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		for _, at := range []time.Duration{0, 10 * time.Second} {
			o := good
			o.Now = start.Add(at)
			if _, err := r.Recommend(o); err != nil {
				t.Fatal(err)
			}
		}
		o := good
		o.Now = start.Add(5 * time.Second)
		_, err = r.Recommend(o)
		checkFieldError(t, err, ErrInvalidObservation, "Now", "before the previous evaluation")
	})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := New(DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			before, err := r.Recommend(good)
			if err != nil {
				t.Fatal(err)
			}
			o := good
			tt.change(&o)
			_, err = r.Recommend(o)
			checkFieldError(t, err, ErrInvalidObservation, tt.field, tt.says)
			// A rejected observation leaves no trace.
			after, err := r.Recommend(good)
			if err != nil || after != before {
				t.Errorf("after a rejected observation: %+v, %v; want %+v", after, err, before)
			}
		})
	}
}

func checkFieldError(t *testing.T, err, kind error, field, says string) {
	t.Helper()
	var fe *FieldError
	switch {
	case err == nil:
		t.Fatalf("no error; want one naming %s", field)
	case !errors.Is(err, kind):
		t.Errorf("%v: not an %v", err, kind)
	case !errors.As(err, &fe):
		t.Errorf("%v: not a *FieldError", err)
	case fe.Field != field:
		t.Errorf("%v: names %q, want %s", err, fe.Field, field)
	case !strings.Contains(err.Error(), says):
		t.Errorf("%v: does not say %q", err, says)
	}
}

func TestCount(t *testing.T) {
	for v, want := range map[float64]string{
		0: "0", 0.5: "0.5", 7: "7", 12.34: "12.3", 850: "850", 999.6: "1k",
		9100: "9.1k", 42000: "42k", 123456: "123k", 999960: "1M", 1234567: "1.23M", 5e9: "5G",
	} {
		if got := count(v); got != want {
			t.Errorf("count(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestDur(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0s", 30 * time.Second: "30s", 5 * time.Minute: "5m", 70 * time.Second: "1m10s",
		time.Hour: "1h", 90 * time.Minute: "1h30m", 1500 * time.Millisecond: "1.5s",
	} {
		if got := dur(d); got != want {
			t.Errorf("dur(%v) = %q, want %q", d, got, want)
		}
	}
}

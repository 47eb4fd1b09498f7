package autoscale

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baton-streams/baton/internal/golden"
)

var update = flag.Bool("update", false, "rewrite golden traces in testdata/scenarios")

// TestScenarios runs every script in testdata/scenarios/*.txt and compares
// the trace it prints with the .golden file next to it.
//
// Script commands, one per line (# starts a comment):
//
//	config [headroom=F] [out-window=D] [in-window=D] [drain=D] [min=N] [max=N] [step=N] [workers=N]
//	                         a new Recommender from DefaultConfig with these
//	                         changes; workers is the script's workers per
//	                         instance (default 1)
//	at D [FIELD=V...]        one evaluation at D after the start
//	every D from D to D [FIELD=V...]
//	                         one evaluation every D over the span, both ends
//	                         included
//	expect N                 the last recommendation is N instances
//
// Fields of an observation: instances=N workers=N input=R worker=R lag=R
// draining=yes|no moves=N, where R may end in k or M (42k, 1.2M). A field
// keeps its value until a line sets it again, except instances: it
// follows the last recommendation (the shell applies it at once) unless
// the line sets it.
func TestScenarios(t *testing.T) {
	golden.Scripts(t, "testdata/scenarios/*.txt", runScript, *update)
}

var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func runScript(script string) (string, error) {
	var out strings.Builder
	var r *Recommender
	obs := Observation{Instances: 1, WorkersPerInstance: 1}
	var last Recommendation
	evaluate := func(at time.Duration, set map[string]string) error {
		if r == nil {
			return fmt.Errorf("no config yet")
		}
		o := obs
		if err := setFields(&o, set); err != nil {
			return err
		}
		o.Now = start.Add(at)
		rec, err := r.Recommend(o)
		if err != nil {
			return err
		}
		fmt.Fprintf(&out, "  %s: %d → %d (needed %d): %s\n", dur(at), o.Instances, rec.Instances, rec.Needed, rec.Reason)
		obs, last = o, rec
		obs.Instances = rec.Instances
		return nil
	}
	for n, line := range strings.Split(script, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			if line != "" {
				out.WriteString(line + "\n")
			}
			continue
		}
		out.WriteString("> " + line + "\n")
		f := strings.Fields(line)
		args := kv(f[1:])
		var err error
		switch f[0] {
		case "config":
			cfg := DefaultConfig()
			if err = setConfig(&cfg, args); err != nil {
				break
			}
			if w, ok := args["workers"]; ok {
				obs.WorkersPerInstance, err = strconv.Atoi(w)
				if err != nil {
					break
				}
			}
			r, err = New(cfg)
		case "at":
			var at time.Duration
			if len(f) < 2 {
				err = fmt.Errorf("at needs a time")
				break
			}
			if at, err = time.ParseDuration(f[1]); err == nil {
				err = evaluate(at, args)
			}
		case "every":
			if len(f) < 6 || f[2] != "from" || f[4] != "to" {
				err = fmt.Errorf("want: every D from D to D [FIELD=V...]")
				break
			}
			var step, from, to time.Duration
			if step, err = time.ParseDuration(f[1]); err != nil {
				break
			}
			if from, err = time.ParseDuration(f[3]); err != nil {
				break
			}
			if to, err = time.ParseDuration(f[5]); err != nil {
				break
			}
			if step <= 0 {
				err = fmt.Errorf("the step must be more than zero")
				break
			}
			for at := from; at <= to && err == nil; at += step {
				err = evaluate(at, args)
			}
		case "expect":
			var want int
			if len(f) < 2 {
				err = fmt.Errorf("expect needs a number")
			} else if want, err = strconv.Atoi(f[1]); err == nil && last.Instances != want {
				err = fmt.Errorf("recommended %d instances, want %d", last.Instances, want)
			}
			if err == nil {
				out.WriteString("  ok\n")
			}
		default:
			err = fmt.Errorf("unknown command %q", f[0])
		}
		if err != nil {
			return out.String(), fmt.Errorf("line %d: %s: %v", n+1, line, err)
		}
	}
	return out.String(), nil
}

func setConfig(c *Config, args map[string]string) error {
	for k, v := range args {
		var err error
		switch k {
		case "headroom":
			c.Headroom, err = strconv.ParseFloat(v, 64)
		case "out-window":
			c.OutWindow, err = time.ParseDuration(v)
		case "in-window":
			c.InWindow, err = time.ParseDuration(v)
		case "drain":
			c.DrainTime, err = time.ParseDuration(v)
		case "min":
			c.MinInstances, err = strconv.Atoi(v)
		case "max":
			c.MaxInstances, err = strconv.Atoi(v)
		case "step":
			c.MaxStep, err = strconv.Atoi(v)
		case "workers":
		default:
			err = fmt.Errorf("unknown config key %q", k)
		}
		if err != nil {
			return fmt.Errorf("%s=%s: %v", k, v, err)
		}
	}
	return nil
}

func setFields(o *Observation, args map[string]string) error {
	for k, v := range args {
		var err error
		switch k {
		case "instances":
			o.Instances, err = strconv.Atoi(v)
		case "workers":
			o.WorkersPerInstance, err = strconv.Atoi(v)
		case "input":
			o.InputRate, err = parseRate(v)
		case "worker":
			o.WorkerRate, err = parseRate(v)
		case "lag":
			var l float64
			l, err = parseRate(v)
			o.Lag = int64(l)
		case "draining":
			o.LagDraining, err = yesNo(v)
		case "moves":
			o.Moves, err = strconv.Atoi(v)
		default:
			err = fmt.Errorf("unknown field %q", k)
		}
		if err != nil {
			return fmt.Errorf("%s=%s: %v", k, v, err)
		}
	}
	return nil
}

func parseRate(s string) (float64, error) {
	mult := 1.0
	switch {
	case strings.HasSuffix(s, "k"):
		mult, s = 1e3, strings.TrimSuffix(s, "k")
	case strings.HasSuffix(s, "M"):
		mult, s = 1e6, strings.TrimSuffix(s, "M")
	}
	v, err := strconv.ParseFloat(s, 64)
	return v * mult, err
}

func yesNo(s string) (bool, error) {
	switch s {
	case "yes":
		return true, nil
	case "no":
		return false, nil
	}
	return false, fmt.Errorf("want yes or no")
}

func kv(fields []string) map[string]string {
	m := map[string]string{}
	for _, f := range fields {
		if k, v, ok := strings.Cut(f, "="); ok {
			m[k] = v
		}
	}
	return m
}

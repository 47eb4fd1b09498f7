package assign

import (
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/baton-streams/baton/internal/golden"
)

var update = flag.Bool("update", false, "rewrite golden traces in testdata/scenarios")

// TestScenarios runs every script in testdata/scenarios/*.txt and compares
// the trace it prints with the .golden file next to it. Every round is also
// checked against the guarantees (smooth policy).
//
// Script commands, one per line (# starts a comment):
//
//	config standbys=N max_learners=N acceptable_lag=N [separate_buckets=true]
//	tasks ID... [stateless=ID,ID] [load=ID:X,ID:X]  declare the tasks
//	size N                   records a learner restores from zero (default 10000)
//	instance ID [capacity=N] [rack=R] [active=..] [standby=..] [learner=..] [lag=ID:N,..]
//	policy NAME              smooth (default), cooperative or eager
//	assign                   one round: print the decisions and plan, apply it
//	lag ID TASK=N            set an instance's lag on a task
//	catchup                  every learner and standby reaches lag 0
//	crash ID | join ID [capacity=N] [rack=R] | leave ID | capacity ID N
//	stabilize                rounds until the plan is stable; learners
//	                         restore a third of the state per round
//	expect balanced          the current plan is stable and balanced
func TestScenarios(t *testing.T) {
	golden.Scripts(t, "testdata/scenarios/*.txt", runScript, *update)
}

func runScript(script string) (string, error) {
	var out strings.Builder
	w := newWorld(DefaultConfig(), nil, 1)
	w.restore = func(l, size int64) int64 { return max(0, l-size/3) }
	w.drift = func() int64 { return 0 }
	size := int64(10000)
	policy := Smooth
	var last Plan
	var lastState State
	round := 0
	doAssign := func() error {
		round++
		s := w.state()
		plan, err := Assign(s, policy)
		if err != nil {
			return err
		}
		if policy == Smooth {
			if err := Check(s, plan); err != nil {
				return fmt.Errorf("round %d: %v", round, err)
			}
		}
		fmt.Fprintf(&out, "round %d (%s)\n", round, policy)
		for _, r := range plan.Reasons {
			fmt.Fprintf(&out, "  why: %s %s on %s: %s\n", r.Kind, r.Task, r.Instance, r.Why)
		}
		out.WriteString(table(plan))
		last, lastState = plan, s
		w.apply(plan)
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
			w.cfg.Standbys = atoi(args["standbys"], w.cfg.Standbys)
			w.cfg.MaxLearners = atoi(args["max_learners"], w.cfg.MaxLearners)
			w.cfg.AcceptableLag = int64(atoi(args["acceptable_lag"], int(w.cfg.AcceptableLag)))
			if v, ok := args["separate_buckets"]; ok {
				w.cfg.SeparateBuckets = v == "true"
			}
		case "size":
			size = int64(atoi(f[1], 0))
			for id := range w.size {
				w.size[id] = size
			}
		case "tasks":
			stateless := strings.Split(args["stateless"], ",")
			loads := kvList(args["load"])
			for _, id := range f[1:] {
				if strings.Contains(id, "=") {
					continue
				}
				load := 1.0
				if l, ok := loads[id]; ok {
					load, _ = strconv.ParseFloat(l, 64)
				}
				w.tasks = append(w.tasks, Task{ID: TaskID(id), Stateful: !slices.Contains(stateless, id), Load: load})
				w.size[TaskID(id)] = size
			}
		case "instance", "join":
			w.join(f[1], atoi(args["capacity"], 1), args["rack"])
			m := w.insts[f[1]]
			m.Active, m.Standby, m.Learner = ids2(args["active"]), ids2(args["standby"]), ids2(args["learner"])
			for _, id := range m.Active {
				m.Lag[id] = 0
			}
			for id, l := range kvList(args["lag"]) {
				m.Lag[TaskID(id)] = int64(atoi(l, 0))
			}
		case "policy":
			policy, err = ParsePolicy(f[1])
		case "assign":
			err = doAssign()
		case "lag":
			m := w.insts[f[1]]
			for id, l := range kvList(f[2]) {
				m.Lag[TaskID(id)] = int64(atoi(l, 0))
			}
		case "catchup":
			for _, m := range w.insts {
				for _, id := range append(slices.Clone(m.Learner), m.Standby...) {
					m.Lag[id] = 0
				}
			}
		case "crash":
			w.crash(f[1])
		case "leave":
			w.insts[f[1]].Leaving = true
		case "capacity":
			w.insts[f[1]].Capacity = atoi(f[2], 1)
		case "stabilize":
			for k := 0; ; k++ {
				if k == 50 {
					return out.String(), fmt.Errorf("line %d: not stable after 50 rounds", n+1)
				}
				if err = doAssign(); err != nil || settled(lastState, last) {
					break
				}
			}
		case "expect":
			if !settled(lastState, last) {
				err = fmt.Errorf("the last plan is not stable")
			} else {
				err = checkBalanced(lastState, last)
			}
			if err == nil {
				out.WriteString("  ok: stable and balanced\n")
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

func kv(fields []string) map[string]string {
	m := map[string]string{}
	for _, f := range fields {
		if k, v, ok := strings.Cut(f, "="); ok {
			m[k] = v
		}
	}
	return m
}

func kvList(s string) map[string]string {
	m := map[string]string{}
	for _, p := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(p, ":"); ok {
			m[k] = v
		} else if k, v, ok := strings.Cut(p, "="); ok {
			m[k] = v
		}
	}
	return m
}

func ids2(s string) []TaskID {
	var out []TaskID
	for _, p := range strings.Split(s, ",") {
		if p != "" {
			out = append(out, TaskID(p))
		}
	}
	return out
}

func atoi(s string, def int) int {
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return def
	}
	return n
}

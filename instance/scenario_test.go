package instance

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
// the trace it prints (each input, then the effects it asked for) with the
// .golden file next to it.
//
// Tasks of subtopology 0 have one store, "counts"; tasks of subtopology 1
// are stateless; other subtopologies are unknown. Script commands, one per
// line (# starts a comment):
//
//	config acceptable=N commit=N lags=N drain=N   before anything else
//	disk TASK STORE=CP...                         state on disk at start
//	assignment [active=IDS] [standby=IDS] [learner=IDS] [followup] [gen=N led=N]
//	assigned IDS [req=N] | revoked IDS [req=N] | lost IDS [req=N] [abort=SEQ]
//	aborted SEQ
//	opened TASK [STORE=CP...] [end.STORE=N...] [err=TEXT]
//	progress TASK STORE CHECKPOINT [end=N]
//	ends SEQ [TASK.STORE=N...] [failed=TASK.STORE,...]
//	commit-done SEQ [err=TEXT] [TASK.STORE=CP...]
//	tick [N] | stop [restart] | leave-now | led [all-leaving] [followup]
//
// IDS is a comma-separated list.
func TestScenarios(t *testing.T) {
	golden.Scripts(t, "testdata/scenarios/*.txt", runScript, *update)
}

func testStores(id string) ([]string, error) {
	switch {
	case strings.HasPrefix(id, "0_"):
		return []string{"counts"}, nil
	case strings.HasPrefix(id, "1_"):
		return nil, nil
	}
	return nil, fmt.Errorf("unknown task %q", id)
}

func runScript(script string) (string, error) {
	var out strings.Builder
	cfg := Config{AcceptableLag: 10, CommitTicks: 2, LagTicks: 5, DrainTicks: 20, Stores: testStores}
	disk := map[string]map[string]int64{}
	var c *Core
	core := func() *Core {
		if c == nil {
			c = New(cfg, disk)
			printEffects(&out, c.Ready())
		}
		return c
	}
	for n, line := range strings.Split(script, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			if strings.HasPrefix(line, "#") {
				out.WriteString(line + "\n")
			}
			continue
		}
		f := strings.Fields(line)
		kv, flags, err := parseArgs(f[1:])
		if err != nil {
			return out.String(), fmt.Errorf("line %d: %v", n+1, err)
		}
		fail := func(format string, args ...any) (string, error) {
			return out.String(), fmt.Errorf("line %d: %s: %s", n+1, line, fmt.Sprintf(format, args...))
		}
		var in Input
		switch f[0] {
		case "config":
			if c != nil {
				return fail("config must come first")
			}
			for k, v := range kv {
				x, err := strconv.Atoi(v)
				if err != nil {
					return fail("%s: %v", k, err)
				}
				switch k {
				case "acceptable":
					cfg.AcceptableLag = int64(x)
				case "commit":
					cfg.CommitTicks = x
				case "lags":
					cfg.LagTicks = x
				case "drain":
					cfg.DrainTicks = x
				default:
					return fail("unknown setting %s", k)
				}
			}
			continue
		case "disk":
			if c != nil || len(flags) != 1 {
				return fail("disk TASK STORE=CP before anything else")
			}
			disk[flags[0]] = ints(kv)
			continue
		case "assignment":
			a := Assignment{Active: ids(kv["active"]), Standby: ids(kv["standby"]), Learner: ids(kv["learner"]), Followup: slices.Contains(flags, "followup")}
			a.Generation, a.LedGeneration = int32(atoi(kv["gen"])), int32(atoi(kv["led"]))
			if v, ok := kv["sent"]; ok {
				// sent=TASK:LAG,...: the lags the subscription reported.
				a.Subscribed = map[string]int64{}
				for _, tl := range ids(v) {
					id, lag, _ := strings.Cut(tl, ":")
					a.Subscribed[id] = int64(UnknownLag)
					if lag != "?" {
						a.Subscribed[id] = int64(atoi(lag))
					}
				}
			}
			in = a
		case "assigned", "revoked", "lost":
			if len(flags) != 1 {
				return fail("want a list of tasks")
			}
			req := atoi(kv["req"])
			switch f[0] {
			case "assigned":
				in = Assigned{Tasks: ids(flags[0]), Request: req}
			case "revoked":
				in = Revoked{Tasks: ids(flags[0]), Request: req}
			default:
				in = Lost{Tasks: ids(flags[0]), Request: req, Abort: atoi(kv["abort"])}
			}
		case "aborted":
			if len(flags) != 1 {
				return fail("aborted SEQ")
			}
			in = Aborted{Seq: atoi(flags[0])}
		case "opened":
			if len(flags) != 1 {
				return fail("opened TASK ...")
			}
			o := Opened{Task: flags[0], Checkpoints: map[string]int64{}, Ends: map[string]int64{}, Err: kv["err"]}
			for k, v := range kv {
				switch {
				case k == "err":
				case strings.HasPrefix(k, "end."):
					o.Ends[strings.TrimPrefix(k, "end.")] = int64(atoi(v))
				default:
					o.Checkpoints[k] = int64(atoi(v))
				}
			}
			in = o
		case "progress":
			if len(flags) != 3 {
				return fail("progress TASK STORE CHECKPOINT [end=N]")
			}
			end := int64(-1)
			if v, ok := kv["end"]; ok {
				end = int64(atoi(v))
			}
			in = Progress{Task: flags[0], Store: flags[1], Checkpoint: int64(atoi(flags[2])), End: end}
		case "ends":
			if len(flags) != 1 {
				return fail("ends SEQ ...")
			}
			e := Ends{Seq: atoi(flags[0]), Ends: map[Key]int64{}}
			for k, v := range kv {
				if k == "failed" {
					for _, s := range ids(v) {
						e.Failed = append(e.Failed, key(s))
					}
					continue
				}
				e.Ends[key(k)] = int64(atoi(v))
			}
			in = e
		case "commit-done":
			if len(flags) != 1 {
				return fail("commit-done SEQ ...")
			}
			d := CommitDone{Seq: atoi(flags[0]), Err: kv["err"], Checkpoints: map[string]map[string]int64{}}
			for k, v := range kv {
				if k == "err" {
					continue
				}
				kk := key(k)
				if d.Checkpoints[kk.Task] == nil {
					d.Checkpoints[kk.Task] = map[string]int64{}
				}
				d.Checkpoints[kk.Task][kk.Store] = int64(atoi(v))
			}
			in = d
		case "tick":
			times := 1
			if len(flags) == 1 {
				times = atoi(flags[0])
			}
			fmt.Fprintf(&out, "> %s\n", line)
			for range times {
				core().Step(Tick{})
				fx := c.Ready()
				printEffects(&out, fx)
				if err := rejoinsLast(fx); err != nil {
					return fail("%v", err)
				}
			}
			continue
		case "stop":
			in = Stop{Restart: slices.Contains(flags, "restart")}
		case "leave-now":
			in = LeaveNow{}
		case "led":
			in = Led{AllLeaving: slices.Contains(flags, "all-leaving"), FollowupWithoutMoves: slices.Contains(flags, "followup")}
		case "rolled-back":
			in = RolledBack{}
		case "polled":
			in = Polled{}
		case "rewound":
			in = Rewound{Err: kv["err"]}
		default:
			return fail("unknown command")
		}
		fmt.Fprintf(&out, "> %s\n", line)
		before := core().Rewind()
		core().Step(in)
		fx := c.Ready()
		printEffects(&out, fx)
		if err := rejoinsLast(fx); err != nil {
			return fail("%v", err)
		}
		if after := c.Rewind(); after != before {
			fmt.Fprintf(&out, "  = rewind %s\n", after)
		}
	}
	return out.String(), nil
}

func printEffects(out *strings.Builder, fx []Effect) {
	for _, e := range fx {
		fmt.Fprintf(out, "  %s\n", e)
	}
}

func parseArgs(args []string) (map[string]string, []string, error) {
	kv := map[string]string{}
	var flags []string
	for _, a := range args {
		if k, v, ok := strings.Cut(a, "="); ok {
			if _, dup := kv[k]; dup {
				return nil, nil, fmt.Errorf("%s given twice", k)
			}
			kv[k] = v
			continue
		}
		flags = append(flags, a)
	}
	return kv, flags, nil
}

func ids(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func key(s string) Key {
	t, st, _ := strings.Cut(s, ".")
	return Key{Task: t, Store: st}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func ints(kv map[string]string) map[string]int64 {
	out := map[string]int64{}
	for k, v := range kv {
		out[k] = int64(atoi(v))
	}
	return out
}

// rejoinsLast checks one step's effects: a Rejoin comes after the step's
// Publish, for the group reads the subscription it rejoins with from the
// published snapshot at once (a leaving flag or a learner's lag published
// after the rejoin would miss the round).
func rejoinsLast(fx []Effect) error {
	rejoin := -1
	for i, e := range fx {
		switch e.(type) {
		case Rejoin:
			if rejoin < 0 {
				rejoin = i
			}
		case Publish:
			if rejoin >= 0 {
				return fmt.Errorf("effect %d asks to rejoin before effect %d publishes the state the rejoin reports", rejoin, i)
			}
		}
	}
	return nil
}

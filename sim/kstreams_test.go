package sim

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-streams/baton/assign"
	"github.com/baton-streams/baton/lifecycle"
)

// ksState builds a leader's input: clients in process order, each written
// "id cap=N active=T,T standby=T,T learner=T,T lag=T:N,T:N" (a running
// active needs no lag).
func ksState(t *testing.T, cfg assign.Config, stateful, stateless int, clients ...string) assign.State {
	t.Helper()
	s := assign.State{Config: cfg}
	for p := range stateful {
		s.Tasks = append(s.Tasks, assign.Task{ID: assign.TaskID(fmt.Sprintf("1_%d", p)), Stateful: true, Load: 1})
	}
	for p := range stateless {
		s.Tasks = append(s.Tasks, assign.Task{ID: assign.TaskID(fmt.Sprintf("0_%d", p)), Load: 1})
	}
	for _, line := range clients {
		f := strings.Fields(line)
		in := assign.Instance{ID: f[0], Capacity: 1, Lag: map[assign.TaskID]int64{}}
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			var ids []assign.TaskID
			for _, x := range strings.Split(v, ",") {
				if x != "" {
					ids = append(ids, assign.TaskID(x))
				}
			}
			switch k {
			case "cap":
				fmt.Sscan(v, &in.Capacity)
			case "active":
				in.Active = ids
				for _, id := range ids {
					if strings.HasPrefix(string(id), "1_") {
						in.Lag[id] = 0
					}
				}
			case "standby":
				in.Standby = ids
			case "learner":
				in.Learner = ids
			case "lag":
				for _, x := range ids {
					id, n, _ := strings.Cut(string(x), ":")
					var l int64
					fmt.Sscan(n, &l)
					in.Lag[assign.TaskID(id)] = l
				}
			default:
				t.Fatalf("bad client field %q", kv)
			}
		}
		slices.Sort(in.Active)
		slices.Sort(in.Standby)
		slices.Sort(in.Learner)
		s.Instances = append(s.Instances, in)
	}
	return s
}

// planText is a plan in one line per client: "id A:.. S:.. L:.. R:..".
func planText(p assign.Plan) string {
	var b strings.Builder
	j := func(ids []assign.TaskID) string {
		s := make([]string, len(ids))
		for i, id := range ids {
			s[i] = string(id)
		}
		return strings.Join(s, ",")
	}
	for _, ip := range p.Instances {
		fmt.Fprintf(&b, "%s A:%s S:%s L:%s R:%s\n", ip.ID, j(ip.Active), j(ip.Standby), j(ip.Learner), j(ip.Revoked))
	}
	return b.String()
}

func ksPlan(t *testing.T, s assign.State, wantProbe bool, want string) assign.Plan {
	t.Helper()
	p, probe, err := assignKStreams(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := planText(p); got != want {
		t.Errorf("plan:\n%swant:\n%s", got, want)
	}
	if probe != wantProbe {
		t.Errorf("probe %v, want %v", probe, wantProbe)
	}
	pol, _ := ParsePolicy("probing")
	for _, v := range CheckPlan(s, p, pol.Checks) {
		t.Errorf("check: %s", v)
	}
	return p
}

// TestKStreamsScaleOut is the scale-out measured on Kafka Streams 4.4:
// six tasks on b and a, c joins, process order b, a, c. The target deals
// 1_0..1_5 over b, a, c, so two tasks move between the old clients.
func TestKStreamsScaleOut(t *testing.T) {
	cfg := assign.Config{MaxLearners: 2, AcceptableLag: 10000}
	// Round 1: every active stays; warm-ups go to the first two
	// movements in task order: 1_2 on c and 1_3 on b.
	s := ksState(t, cfg, 6, 0, "b active=1_0,1_2,1_4", "a active=1_1,1_3,1_5", "c")
	ksPlan(t, s, true, "b A:1_0,1_2,1_4 S: L:1_3 R:\na A:1_1,1_3,1_5 S: L: R:\nc A: S: L:1_2 R:\n")
	// Round 2, the probing rebalance: both warm-ups are caught up.
	// 1_2 and 1_3 are revoked (they go to c and b in the follow-up);
	// 1_4 and 1_5 get warm-ups on a and c.
	s = ksState(t, cfg, 6, 0, "b active=1_0,1_2,1_4 learner=1_3 lag=1_3:0", "a active=1_1,1_3,1_5", "c learner=1_2 lag=1_2:0")
	p := ksPlan(t, s, true, "b A:1_0,1_4 S: L: R:1_2\na A:1_1,1_5 S: L:1_4 R:1_3\nc A: S: L:1_5 R:\n")
	if !p.Followup {
		t.Errorf("revocations without a follow-up")
	}
	// The follow-up: 1_2 and 1_3 are assigned; the warm-ups stay.
	s = ksState(t, cfg, 6, 0, "b active=1_0,1_4 lag=1_2:0,1_3:0", "a active=1_1,1_5 learner=1_4 lag=1_3:0,1_4:90000", "c learner=1_5 lag=1_2:0,1_5:90000")
	ksPlan(t, s, true, "b A:1_0,1_3,1_4 S: L: R:\na A:1_1,1_5 S: L:1_4 R:\nc A:1_2 S: L:1_5 R:\n")
	// Round 3: the second warm-ups are caught up and the target is
	// reached: b {1_0,1_3}, a {1_1,1_4}, c {1_2,1_5}.
	s = ksState(t, cfg, 6, 0, "b active=1_0,1_3,1_4 lag=1_2:500", "a active=1_1,1_5 learner=1_4 lag=1_3:500,1_4:0", "c active=1_2 learner=1_5 lag=1_5:0")
	ksPlan(t, s, false, "b A:1_0,1_3 S: L: R:1_4\na A:1_1 S: L: R:1_5\nc A:1_2 S: L: R:\n")
	s = ksState(t, cfg, 6, 0, "b active=1_0,1_3 lag=1_4:0", "a active=1_1 lag=1_4:0,1_5:0", "c active=1_2 lag=1_5:0")
	ksPlan(t, s, false, "b A:1_0,1_3 S: L: R:\na A:1_1,1_4 S: L: R:\nc A:1_2,1_5 S: L: R:\n")
}

// TestKStreamsScaleOutScenario runs the measured scale-out in the
// simulator: c is balanced only after the second probing rebalance. The
// process ids order the clients b, a, c as Java compares UUIDs (9f..
// is negative), not as their text sorts.
func TestKStreamsScaleOutScenario(t *testing.T) {
	sc, err := ParseString("kstreams-scale-out", `
config max_learners=2 acceptable_lag=10000
timing probing=1m
task 1_0 1_1 1_2 1_3 1_4 1_5 state=2e5 rate=10
instance a process=5c0e9a38-0000-4000-8000-000000000000 active=1_1,1_3,1_5
instance b process=9f3d2b71-0000-4000-8000-000000000000 active=1_0,1_2,1_4
at 10s join c process=7e000000-0000-4000-8000-000000000000
`)
	if err != nil {
		t.Fatal(err)
	}
	e := newChecked(t, sc, "probing")
	r := runToEnd(t, e)
	for _, v := range r.Violations {
		t.Error(v)
	}
	var probes []time.Duration
	for _, en := range r.Timeline {
		if en.Kind == "rebalance" && strings.HasSuffix(en.Text, "probing rebalance") {
			probes = append(probes, en.At)
		}
	}
	if len(probes) != 2 {
		t.Fatalf("probing rebalances at %v, want two", probes)
	}
	if !r.Balanced || r.BalancedAt < probes[1] {
		t.Errorf("balanced %v at %v, want balanced after the second probing rebalance (%v)", r.Balanced, r.BalancedAt, probes[1])
	}
	owners := map[string][]assign.TaskID{}
	for _, tk := range e.tasks {
		owners[e.insts[tk.owner].spec.ID] = append(owners[e.insts[tk.owner].spec.ID], tk.spec.ID)
	}
	if got := fmt.Sprint(owners["b"], owners["a"], owners["c"]); got != "[1_0 1_3] [1_1 1_4] [1_2 1_5]" {
		t.Errorf("owners b, a, c: %s", got)
	}
	if r.Moves != 4 {
		t.Errorf("%d moves, want 4 (1_2, 1_3, then 1_4, 1_5)", r.Moves)
	}
}

// TestKStreamsOrphans: after a crash no client is caught up on 1_1; the
// most caught up (z) takes it and its target y warms up. 1_2 has no copy
// anywhere: its target z takes it and restores.
func TestKStreamsOrphans(t *testing.T) {
	cfg := assign.Config{MaxLearners: 2, AcceptableLag: 10000}
	s := ksState(t, cfg, 3, 0, "x active=1_0", "y lag=1_1:50000", "z lag=1_1:20000")
	ksPlan(t, s, true, "x A:1_0 S: L: R:\ny A: S: L:1_1 R:\nz A:1_1,1_2 S: L: R:\n")
}

// TestKStreamsStandbys: c is new. Standbys are placed afresh (least
// loaded), then 1_2's target c is not caught up while a, caught up, holds
// its new standby: they swap. The standbys on c (1_1 placed, 1_2 from the
// swap) move to caught-up clients and c keeps them as warm-ups.
func TestKStreamsStandbys(t *testing.T) {
	cfg := assign.Config{Standbys: 1, MaxLearners: 2, AcceptableLag: 10000}
	s := ksState(t, cfg, 3, 0, "a active=1_0,1_2 standby=1_1 lag=1_1:0", "b active=1_1 standby=1_0,1_2 lag=1_0:0,1_2:0", "c")
	ksPlan(t, s, true, "a A:1_0,1_2 S:1_1 L: R:\nb A:1_1 S:1_0,1_2 L: R:\nc A: S: L:1_1,1_2 R:\n")
	// With one warm-up, 1_2's standby movement finds the budget spent:
	// c loses the standby.
	cfg.MaxLearners = 1
	s.Config = cfg
	ksPlan(t, s, true, "a A:1_0,1_2 S:1_1 L: R:\nb A:1_1 S:1_0,1_2 L: R:\nc A: S: L:1_1 R:\n")
}

// TestKStreamsStateless: stateful tasks over threads, then each stateless
// task to the client with the fewest actives per thread (ties: process
// order).
func TestKStreamsStateless(t *testing.T) {
	cfg := assign.Config{MaxLearners: 2, AcceptableLag: 10000}
	s := ksState(t, cfg, 3, 3, "a cap=2", "b")
	ksPlan(t, s, false, "a A:0_0,0_2,1_0,1_2 S: L: R:\nb A:0_1,1_1 S: L: R:\n")
	// A stateless task moving owner is revoked first, like any active.
	s = ksState(t, cfg, 0, 2, "a active=0_0,0_1", "b")
	p := ksPlan(t, s, false, "a A:0_0 S: L: R:0_1\nb A: S: L: R:\n")
	if !p.Followup {
		t.Error("a revocation without a follow-up")
	}
}

// TestKStreamsThreads: round-robin, then balanced over threads.
func TestKStreamsThreads(t *testing.T) {
	s := ksState(t, assign.Config{MaxLearners: 2}, 8, 0, "a cap=3", "b")
	ksPlan(t, s, false, "a A:1_0,1_1,1_2,1_3,1_4,1_6 S: L: R:\nb A:1_5,1_7 S: L: R:\n")
}

func TestKStreamsOrders(t *testing.T) {
	ids := []assign.TaskID{"1_10", "T1", "0_3", "1_9", "A", "1_2"}
	slices.SortFunc(ids, compareTaskIDs)
	if got := fmt.Sprint(ids); got != "[0_3 1_2 1_9 1_10 A T1]" {
		t.Errorf("task order %s", got)
	}
	ps := []string{"x", "7fffffff-ffff-ffff-ffff-ffffffffffff", "80000000-0000-0000-0000-000000000000", "00000000-0000-0000-8000-000000000000", "00000000-0000-0000-0000-000000000000", "b"}
	slices.SortFunc(ps, compareProcesses)
	want := "[80000000-0000-0000-0000-000000000000 00000000-0000-0000-8000-000000000000 00000000-0000-0000-0000-000000000000 7fffffff-ffff-ffff-ffff-ffffffffffff b x]"
	if got := fmt.Sprint(ps); got != want {
		t.Errorf("process order %s\nwant %s", got, want)
	}
}

func TestProcessAttribute(t *testing.T) {
	sc, err := ParseString("p", "task 1_0\ninstance a process=p9\ninstance b\nat 1s join c process=p1\n")
	if err != nil {
		t.Fatal(err)
	}
	if sc.Instances[0].ProcessKey() != "p9" || sc.Instances[1].ProcessKey() != "b" || sc.Events[0].Instance.Process != "p1" {
		t.Errorf("processes %+v %+v", sc.Instances, sc.Events[0].Instance)
	}
	if _, err := ParseString("p", "task 1_0\ninstance a\nat 1s join 2 process=p1\n"); err == nil {
		t.Error("join 2 process=p1 parsed")
	}
}

// placement is the engine's assignment, one line per instance in the
// engine's order: "id A:.. S:.. L:..", each list in byte order.
func placement(e *engine) string {
	var b strings.Builder
	for _, in := range e.insts {
		var a, s, l []string
		for _, tk := range e.tasks {
			if tk.owner == in.idx {
				a = append(a, string(tk.spec.ID))
			}
		}
		for ti, c := range in.copies {
			switch c.role {
			case lifecycle.Standby:
				s = append(s, string(e.tasks[ti].spec.ID))
			case lifecycle.Learner:
				l = append(l, string(e.tasks[ti].spec.ID))
			}
		}
		slices.Sort(a)
		slices.Sort(s)
		slices.Sort(l)
		fmt.Fprintf(&b, "%s A:%s S:%s L:%s\n", in.spec.ID, strings.Join(a, ","), strings.Join(s, ","), strings.Join(l, ","))
	}
	return b.String()
}

func startEngine(t *testing.T, text, policy string) (*Scenario, *engine) {
	t.Helper()
	sc, err := ParseString("s", text)
	if err != nil {
		t.Fatal(err)
	}
	return sc, newChecked(t, sc, policy)
}

// settledScenario leaves every task to the deal. The instances come a, b,
// c; their processes order them b, c, a. The capacity event changes
// nothing but makes a rebalance.
const settledScenario = `
config standbys=1 max_learners=2 acceptable_lag=100
timing probing=1m
tasks stateful=7 stateless=3 state=1e6
instance a process=p3
instance b process=p1
instance c process=p2
at 10s capacity a 1
limit 1h
`

// TestKStreamsSettledStart: under probing the tasks of the deal start on
// Kafka Streams' target (the stateful tasks round-robin over b, c, a;
// standbys on the least loaded client; stateless by fewest actives), so
// a rebalance of the same group moves nothing.
func TestKStreamsSettledStart(t *testing.T) {
	_, e := startEngine(t, settledScenario, "probing")
	want := "a A:0_1,1_2,1_5 S:1_1,1_4 L:\nb A:0_2,1_0,1_3,1_6 S:1_2,1_5 L:\nc A:0_0,1_1,1_4 S:1_0,1_3,1_6 L:\n"
	if got := placement(e); got != want {
		t.Errorf("time 0:\n%swant:\n%s", got, want)
	}
	r := runToEnd(t, e)
	for _, v := range r.Violations {
		t.Error(v)
	}
	if r.Rebalances == 0 {
		t.Fatal("no rebalance")
	}
	if got := placement(e); r.Moves != 0 || got != want {
		t.Errorf("after %d rebalances: %d moves, placement:\n%s", r.Rebalances, r.Moves, got)
	}
}

// TestKStreamsStartKeepsExplicit: tasks a scenario places stay where it
// put them under probing, whether every task is placed (as `baton bench
// versus` writes them) or some are left to the deal; smooth keeps the
// deal.
func TestKStreamsStartKeepsExplicit(t *testing.T) {
	explicit := `
config standbys=1
tasks stateful=4 stateless=1
instance a process=p2 active=1_0,1_1,1_2 standby=1_3
instance b process=p1 active=1_3,0_0 standby=1_0
at 10s join c
`
	_, e := startEngine(t, explicit, "probing")
	if got, want := placement(e), "a A:1_0,1_1,1_2 S:1_3 L:\nb A:0_0,1_3 S:1_0 L:\n"; got != want {
		t.Errorf("every task placed: time 0:\n%swant:\n%s", got, want)
	}

	mixed := `
config standbys=1
tasks stateful=6 stateless=2
instance a process=p2 active=1_0,1_1 standby=1_2
instance b process=p1
instance c process=p3
`
	sc, e := startEngine(t, mixed, "probing")
	for _, tk := range e.tasks {
		if id := tk.spec.ID; (id == "1_0" || id == "1_1") && e.insts[tk.owner].spec.ID != "a" {
			t.Errorf("mixed: %s active on %s, want a", id, e.insts[tk.owner].spec.ID)
		}
	}
	if c := e.insts[0].copies[e.taskIx["1_2"]]; c == nil || c.role != lifecycle.Standby {
		t.Errorf("mixed: a lost its standby of 1_2:\n%s", placement(e))
	}
	for _, tk := range sc.Tasks {
		if want := tk.ID != "1_0" && tk.ID != "1_1" && tk.ID != "1_2"; tk.Dealt != want {
			t.Errorf("mixed: %s dealt %v, want %v", tk.ID, tk.Dealt, want)
		}
	}

	// Smooth starts from the deal, as parsed: blocks in instance order.
	sc, e = startEngine(t, settledScenario, "smooth")
	var want strings.Builder
	for _, in := range sc.Instances {
		a := slices.Clone(in.Active)
		slices.Sort(a)
		s := slices.Clone(in.Standby)
		slices.Sort(s)
		fmt.Fprintf(&want, "%s A:%s S:%s L:\n", in.ID, strings.Join(toStrings(a), ","), strings.Join(toStrings(s), ","))
	}
	if got := placement(e); got != want.String() || !strings.HasPrefix(got, "a A:0_0,1_0,1_1,1_2 ") {
		t.Errorf("smooth: time 0:\n%swant the deal:\n%s", got, want.String())
	}
}

func toStrings(ids []assign.TaskID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = string(id)
	}
	return out
}

// TestTimeToShares: under probing, an instance leaving a group of three
// leaves its two stateful tasks to the other two, which run their shares
// once those are restored (about 2.2 s: the others' heartbeat, the
// round, 217,000 records at 100,000/s), while warm-ups toward Kafka
// Streams' new target go on until the probing rebalance a minute later:
// the group holds its shares long before it is balanced.
func TestTimeToShares(t *testing.T) {
	sc, err := ParseString("s", `
config standbys=0 max_learners=2 acceptable_lag=10000
timing heartbeat=3s session=45s commit=30s probing=1m
task 1_0 1_1 1_2 1_3 1_4 1_5 state=217000 rate=1000
instance a restore=100000 beat=1.5s process=793e7b8d-8057-4865-8bd7-3e6ff1dde406 active=1_2,1_5
instance b restore=100000 beat=1.5s process=904fbbaa-e9d8-4fd4-ad70-773bc746cca0 active=1_0,1_3
instance c restore=100000 beat=1.5s process=ff2cf436-1b32-47cd-a3cb-62e70a50a116 active=1_1,1_4
at 0s leave c
limit 1h
`)
	if err != nil {
		t.Fatal(err)
	}
	r := runToEnd(t, newChecked(t, sc, "probing"))
	if !r.SharesHeld || r.TimeToShares < 1500*time.Millisecond || r.TimeToShares > 5*time.Second {
		t.Errorf("shares held %v after %v, want held within a few seconds (a heartbeat and a restore)", r.SharesHeld, r.TimeToShares)
	}
	if !r.Balanced || r.TimeToBalance < time.Minute {
		t.Errorf("balanced %v after %v, want not before the probing rebalance (1m)", r.Balanced, r.TimeToBalance)
	}
}

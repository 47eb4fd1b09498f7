package assign

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// TestParseID: parseID accepts exactly the ids "<sub>_<part>" that two
// numbers of at most nine digits print as, and returns those numbers.
func TestParseID(t *testing.T) {
	want := func(id TaskID) (int32, int32, bool) {
		a, b, found := strings.Cut(string(id), "_")
		if !found || len(a) > 9 || len(b) > 9 {
			return 0, 0, false
		}
		s, err1 := strconv.Atoi(a)
		p, err2 := strconv.Atoi(b)
		if err1 != nil || err2 != nil || s < 0 || p < 0 || fmt.Sprintf("%d_%d", s, p) != string(id) {
			return 0, 0, false
		}
		return int32(s), int32(p), true
	}
	check := func(id TaskID) {
		t.Helper()
		s, p, ok := parseID(id)
		ws, wp, wok := want(id)
		if ok != wok || (ok && (s != ws || p != wp)) {
			t.Fatalf("parseID(%q) = %d, %d, %v; want %d, %d, %v", id, s, p, ok, ws, wp, wok)
		}
		if s2, p2, ok2 := parseIDBytes(id); ok2 != ok || s2 != s || p2 != p {
			t.Fatalf("parseIDBytes(%q) = %d, %d, %v; parseID %d, %d, %v", id, s2, p2, ok2, s, p, ok)
		}
	}
	for _, id := range []TaskID{"", "_", "1_", "_1", "0_0", "1_3", "01_3", "1_03", "1_0", "10_0", "1__3", "1_3_", "+1_3",
		"1_-3", "-1_3", "1 _3", "a_1", "1_a", "999999999_999999999", "1000000000_1", "1_1000000000", "1_999999999",
		"12_345", "9_99999999", "0_00", "00_0", "1_3\x00", "\x001_3", "1\x00_3", "١_٣"} {
		check(id)
	}
	rng := rand.New(rand.NewPCG(5, 5))
	alphabet := []byte("0123456789_0_1_9a\x00\xff/:-+ ")
	for range 300000 {
		b := make([]byte, rng.IntN(22))
		for j := range b {
			b[j] = alphabet[rng.IntN(len(alphabet))]
		}
		check(TaskID(b))
	}
	for range 100000 {
		check(TaskID(fmt.Sprintf("%d_%d", rng.IntN(1<<rng.IntN(31)), rng.IntN(1<<rng.IntN(31)))))
	}
}

// TestTaskIndex: the grid and the id table find the same tasks, present or
// not, and the grid is used when the ids allow it.
func TestTaskIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	for _, c := range []struct {
		subs, parts int
		grid        bool
	}{{1, 1, true}, {3, 1000, true}, {12, 50, true}, {2, 20000, true}} {
		var tasks []Task
		var absent []TaskID
		for s := range c.subs {
			for p := range c.parts {
				id := TaskID(fmt.Sprintf("%d_%d", s, p))
				if rng.IntN(5) == 0 {
					absent = append(absent, id) // a hole in the grid
					continue
				}
				tasks = append(tasks, Task{ID: id, Load: 1})
			}
			absent = append(absent, TaskID(fmt.Sprintf("%d_%d", s, c.parts)), TaskID(fmt.Sprintf("%d_0%d", s, 1)), TaskID(fmt.Sprintf("0%d_%d", s, 1)))
		}
		absent = append(absent, TaskID(fmt.Sprintf("%d_0", c.subs)), "x", "", "_", "1_", "-1_0", "4294967297_0")
		rng.Shuffle(len(tasks), func(i, j int) { tasks[i], tasks[j] = tasks[j], tasks[i] })
		var x taskIndex
		x.init(tasks, new(scratch))
		if x.grid != c.grid {
			t.Fatalf("%d subtopologies of %d: grid %v, want %v", c.subs, c.parts, x.grid, c.grid)
		}
		var tb idTable
		tb.init(len(tasks), new(scratch))
		for k := range tasks {
			if !x.insert(k) || !tb.insert(tasks, k) {
				t.Fatalf("task %d reported as a duplicate", k)
			}
		}
		if x.insert(rng.IntN(len(tasks))) {
			t.Fatal("a duplicate id was inserted")
		}
		ids := append([]TaskID(nil), absent...)
		for _, task := range tasks {
			ids = append(ids, task.ID)
		}
		rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		got, want := make([]int32, len(ids)), make([]int32, len(ids))
		x.findAll(ids, got)
		tb.findAll(tasks, ids, want)
		for j, id := range ids {
			if got[j] != want[j] || x.find(id) != int(want[j]) {
				t.Fatalf("id %q: grid findAll %d, find %d; id table %d", id, got[j], x.find(id), want[j])
			}
		}
	}
	// Ids the grid cannot hold.
	for _, ids := range [][]TaskID{{"1_0", "a"}, {"1_0", "01_1"}, {"1_0", "900000_0"}, {"1_0", "1_900000"}, {"1_1", "1_01"}} {
		var tasks []Task
		for _, id := range ids {
			tasks = append(tasks, Task{ID: id, Load: 1})
		}
		var x taskIndex
		x.init(tasks, new(scratch))
		if x.grid {
			t.Fatalf("%q: indexed by the grid", ids)
		}
	}
}

// gridless renames every id of s so that the grid cannot index it: a zero
// byte appended keeps the ids in the same order.
func gridless(s State) State {
	rename := func(ids []TaskID) []TaskID {
		var out []TaskID
		for _, id := range ids {
			out = append(out, id+"\x00")
		}
		return out
	}
	out := State{Config: s.Config}
	for _, task := range s.Tasks {
		task.ID += "\x00"
		out.Tasks = append(out.Tasks, task)
	}
	for _, in := range s.Instances {
		in.Active, in.Standby, in.Learner = rename(in.Active), rename(in.Standby), rename(in.Learner)
		lag := map[TaskID]int64{}
		for id, l := range in.Lag {
			lag[id+"\x00"] = l
		}
		in.Lag = lag
		out.Instances = append(out.Instances, in)
	}
	return out
}

// TestGridSameAsIDTable: a state whose ids the grid indexes gets the plan,
// reasons included, and the validation errors that it gets when its ids
// go through the id table.
func TestGridSameAsIDTable(t *testing.T) {
	planText := func(s State, p Policy) string {
		plan, err := Assign(s, p)
		if err != nil {
			t.Fatal(err)
		}
		data, err := json.Marshal(plan)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(data), `\u0000`, "")
		for _, r := range plan.Reasons {
			text += fmt.Sprintf("\n%s %s %s %s", r.Kind, strings.TrimSuffix(string(r.Task), "\x00"), r.Instance, r.Why)
		}
		return text
	}
	var states []State
	for seed := uint64(1); seed <= 40; seed++ {
		s := randomState(seed) // ids "<sub>_<letter>": as numbers instead
		for k := range s.Tasks {
			s.Tasks[k].ID = numbered(s.Tasks[k].ID)
		}
		for k := range s.Instances {
			in := &s.Instances[k]
			for _, l := range [][]TaskID{in.Active, in.Standby, in.Learner} {
				for j := range l {
					l[j] = numbered(l[j])
				}
			}
			lag := map[TaskID]int64{}
			for id, l := range in.Lag {
				lag[numbered(id)] = l
			}
			in.Lag = lag
		}
		states = append(states, s)
	}
	states = append(states, scaleOutState(2000, 110))
	rng := rand.New(rand.NewPCG(9, 9))
	for n, s := range states {
		for _, p := range Policies {
			for _, in := range []State{s, shuffled(s, rng)} {
				var x taskIndex
				x.init(in.Tasks, new(scratch))
				if !x.grid {
					t.Fatalf("state %d: not indexed by the grid", n)
				}
				if got, want := planText(in, p), planText(gridless(in), p); got != want {
					t.Fatalf("state %d, policy %s: the grid's plan differs\ngrid     %s\nid table %s", n, p, got, want)
				}
			}
		}
	}
	// Invalid states: the same error, field and all.
	broken := []func(s *State){
		func(s *State) { s.Tasks[3].ID = s.Tasks[1].ID },
		func(s *State) { s.Instances[1].Active[0] = "7_0" },
		func(s *State) { s.Instances[1].Active[0] = "1_01" },
		func(s *State) { s.Instances[0].Standby = append(s.Instances[0].Standby, s.Instances[0].Active[0]) },
		func(s *State) { s.Instances[0].Lag["1_999"] = 3 },
		func(s *State) { s.Instances[0].Lag["x"] = 3 },
		func(s *State) {
			for id := range s.Instances[0].Lag {
				s.Instances[0].Lag[id] = -1
			}
		},
	}
	for k, breakIt := range broken {
		s := scaleOutState(200, 11)
		breakIt(&s)
		_, err := Assign(s, Smooth)
		_, err2 := Assign(gridless(s), Smooth)
		var fe *FieldError
		if err == nil || err2 == nil || !errors.As(err, &fe) || err.Error() != strings.ReplaceAll(err2.Error(), `\x00`, "") {
			t.Fatalf("broken state %d: grid %v; id table %v", k, err, err2)
		}
	}
}

// numbered turns "<sub>_<letter>" into "<sub>_<number>", in the same order.
func numbered(id TaskID) TaskID {
	s, p, _ := strings.Cut(string(id), "_")
	return TaskID(fmt.Sprintf("%s_%d", s, p[0]-'a'))
}

package assign

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// randomIDs draws distinct ids that often share long prefixes, of
// lengths around eight bytes, with zero and high bytes.
func randomIDs(rng *rand.Rand, n int) []Task {
	alphabet := []byte{0, '_', '0', '1', '9', 'a', 0xff}
	seen := map[TaskID]bool{}
	var tasks []Task
	for len(tasks) < n {
		b := make([]byte, 1+rng.IntN(12))
		for j := range b {
			b[j] = alphabet[rng.IntN(len(alphabet))]
		}
		if id := TaskID(b); !seen[id] {
			seen[id] = true
			tasks = append(tasks, Task{ID: id, Load: 1})
		}
	}
	return tasks
}

// TestSortIDs: the radix sort by prefix orders ids as strings.Compare.
func TestSortIDs(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, n := range []int{0, 1, 2, 10, 1000, 20000} {
		tasks := randomIDs(rng, n)
		var got []TaskID
		for _, o := range sortIDs(tasks, new(scratch)) {
			got = append(got, tasks[o.k].ID)
		}
		want := make([]TaskID, 0, n)
		for _, task := range tasks {
			want = append(want, task.ID)
		}
		slices.SortFunc(want, func(a, b TaskID) int { return strings.Compare(string(a), string(b)) })
		if !slices.Equal(got, want) {
			t.Fatalf("%d ids: sortIDs disagrees with strings.Compare", n)
		}
		if tasksSorted(tasks) != slices.IsSortedFunc(tasks, func(a, b Task) int { return strings.Compare(string(a.ID), string(b.ID)) }) {
			t.Fatalf("%d ids: tasksSorted is wrong", n)
		}
	}
}

// TestIDTable: find and findAll agree with a map, for present and absent ids.
func TestIDTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	all := randomIDs(rng, 6000)
	tasks, absent := all[:5000], all[5000:]
	var tb idTable
	tb.init(len(tasks), new(scratch))
	for k := range tasks {
		if !tb.insert(tasks, k) {
			t.Fatalf("task %d reported as a duplicate", k)
		}
	}
	if tb.insert(append(slices.Clone(tasks), tasks[3]), len(tasks)) {
		t.Fatal("a duplicate id was inserted")
	}
	var ids []TaskID
	var want []int32
	for k, task := range tasks {
		ids = append(ids, task.ID)
		want = append(want, int32(k))
	}
	for _, task := range absent {
		ids = append(ids, task.ID)
		want = append(want, -1)
	}
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i]; want[i], want[j] = want[j], want[i] })
	got := make([]int32, len(ids))
	tb.findAll(tasks, ids, got)
	for j, id := range ids {
		if got[j] != want[j] || tb.find(tasks, id) != int(want[j]) {
			t.Fatalf("id %q: findAll %d, find %d, want %d", id, got[j], tb.find(tasks, id), want[j])
		}
	}
}

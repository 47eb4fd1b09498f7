package topology

import (
	"errors"
	"flag"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var (
	seedFlag = flag.Uint64("topology.seed", 0, "seed of the randomized tests (0: a random one, logged)")
	update   = flag.Bool("update", false, "rewrite the golden files in testdata")
)

// testSeed returns the seed to use and logs it, so a failure can be
// replayed with -topology.seed.
func testSeed(t *testing.T) uint64 {
	seed := *seedFlag
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay with -topology.seed=%d)", seed, seed)
	return seed
}

func TestWordCountShape(t *testing.T) {
	topo, err := WordCount("wc", "lines", "counts-out")
	if err != nil {
		t.Fatal(err)
	}
	subs := topo.Subtopologies()
	if len(subs) != 2 {
		t.Fatalf("%d subtopologies, want 2:\n%s", len(subs), topo)
	}
	rep := RepartitionTopic("wc", "words")
	if rep != "wc-words-repartition" {
		t.Fatalf("RepartitionTopic = %q", rep)
	}
	s0, s1 := subs[0], subs[1]
	check := func(what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	check("0.ID", s0.ID, 0)
	check("0.Sources", s0.Sources, []string{"lines"})
	check("0.Sinks", s0.Sinks, []string{rep})
	check("0.Repartition", s0.Repartition, []string{rep})
	check("0.Stores", len(s0.Stores), 0)
	check("0.Stateful", s0.Stateful(), false)
	check("1.Stateful", s1.Stateful(), true)
	check("1.ID", s1.ID, 1)
	check("1.Sources", s1.Sources, []string{rep})
	check("1.Sinks", s1.Sinks, []string{"counts-out"})
	check("1.Repartition", s1.Repartition, []string{rep})
	check("1.Stores", s1.Stores, []StoreSpec{{Name: "counts", Changelog: "wc-counts-changelog", Kind: KeyValueStore}})
	golden(t, "wordcount.txt", topo.String())
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -update to accept):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// TestWordCountExact runs wordcount over random lines on random partition
// counts and checks every output record against a count kept by hand.
func TestWordCountExact(t *testing.T) {
	seed := testSeed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	vocab := []string{"a", "b", "the", "Go", "go", "GO", "kafka", "é", "naïve", "日本", "x-y", "42", "ok!", "\u00e9t\u00e9", "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"}
	spaces := []string{" ", "  ", "\t", "\n", "\r\n", "\v", "\f", "\u00a0", "\u0085", "\u2003", "\u3000"}
	for round := range 20 {
		inParts := int32(1 + rng.IntN(6))
		outParts := int32(1 + rng.IntN(6))
		topo, err := WordCount("wc", "in", "out")
		if err != nil {
			t.Fatal(err)
		}
		d := newDriver(t, topo, map[string]int32{"in": inParts, "out": outParts})
		want := map[string]int{}
		total := 0
		for range 1 + rng.IntN(300) {
			var line strings.Builder
			if rng.IntN(2) == 0 {
				line.WriteString(spaces[rng.IntN(len(spaces))])
			}
			for i := range rng.IntN(12) {
				if i > 0 {
					line.WriteString(spaces[rng.IntN(len(spaces))])
				}
				w := vocab[rng.IntN(len(vocab))]
				line.WriteString(w)
				want[w]++
				total++
			}
			if rng.IntN(3) == 0 {
				line.WriteString(spaces[rng.IntN(len(spaces))])
			}
			var key []byte
			if rng.IntN(4) > 0 {
				key = []byte(strconv.Itoa(rng.IntN(1000)))
			}
			d.input("in", rng.Int32N(inParts), key, []byte(line.String()))
		}
		if err := d.run(); err != nil {
			t.Fatalf("seed %d round %d: %v", seed, round, err)
		}
		repParts := d.parts["wc-words-repartition"]
		if repParts != inParts {
			t.Fatalf("repartition topic has %d partitions, want the input's %d", repParts, inParts)
		}
		// Every word's records are on its partition, counting 1, 2, ... n.
		got := map[string]int{}
		outRecords := 0
		for p := range outParts {
			for _, r := range d.records("out", p) {
				w := string(r.Key)
				if wp := Partition(r.Key, outParts); wp != p {
					t.Fatalf("seed %d round %d: %q on out[%d], want partition %d", seed, round, w, p, wp)
				}
				got[w]++
				if string(r.Value) != strconv.Itoa(got[w]) {
					t.Fatalf("seed %d round %d: %q occurrence %d has count %q", seed, round, w, got[w], r.Value)
				}
				outRecords++
			}
		}
		if outRecords != total {
			t.Errorf("seed %d round %d: %d output records, want one per word occurrence: %d", seed, round, outRecords, total)
		}
		for _, w := range slices.Sorted(maps.Keys(want)) {
			if got[w] != want[w] {
				t.Errorf("seed %d round %d: count(%q) = %d, want %d", seed, round, w, got[w], want[w])
			}
			task := TaskID(1, Partition([]byte(w), repParts))
			v, ok, _ := d.store(task, "counts").Get([]byte(w))
			if !ok || string(v) != strconv.Itoa(want[w]) {
				t.Errorf("seed %d round %d: store counts of %s has %q=%q (present %t), want %d", seed, round, task, w, v, ok, want[w])
			}
		}
		for _, w := range slices.Sorted(maps.Keys(got)) {
			if want[w] == 0 {
				t.Errorf("seed %d round %d: counted %q, which is not in the input", seed, round, w)
			}
		}
		// Subtopology 0 is stateless: its tasks have no stores.
		for id, st := range d.stores {
			if strings.HasPrefix(id, "0_") && len(st) > 0 {
				t.Errorf("task %s has stores %v", id, slices.Sorted(mapKeys(st)))
			}
		}
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func TestWordCountBadNames(t *testing.T) {
	for _, c := range []struct{ app, in, out string }{
		{"", "in", "out"},
		{"w c", "in", "out"},
		{"wc", "", "out"},
		{"wc", "in", "out/x"},
		{"wc", "in", "in"}, // would read its own output: a cycle
	} {
		if _, err := WordCount(c.app, c.in, c.out); !isInvalid(err) {
			t.Errorf("WordCount(%q, %q, %q) = %v, want ErrInvalid", c.app, c.in, c.out, err)
		}
	}
}

func isInvalid(err error) bool { return errors.Is(err, ErrInvalid) }

package counts

import (
	"strings"
	"testing"
)

func TestExact(t *testing.T) {
	want := map[string]int64{"a": 3, "b": 1}
	for _, c := range []struct {
		name string
		seqs map[string][]int64
		bad  string // a word of the first problem; "" when exact
	}{
		{"exact", map[string][]int64{"a": {1, 2, 3}, "b": {1}}, ""},
		{"duplicate hidden by the last value", map[string][]int64{"a": {1, 2, 2, 3}, "b": {1}}, "a: value 3 of 4 is 2, want 3 (repeated"},
		{"duplicate at the end", map[string][]int64{"a": {1, 2, 3, 3}, "b": {1}}, "a: value 4 of 4 is 3, want 4 (repeated"},
		{"gap", map[string][]int64{"a": {1, 3}, "b": {1}}, "a: value 2 of 2 is 3, want 2 (skipped to"},
		{"short", map[string][]int64{"a": {1, 2}, "b": {1}}, "a: 2 values 1..2, want 1..3"},
		{"missing", map[string][]int64{"a": {1, 2, 3}}, "b: 0 values 1..0, want 1..1"},
		{"out of order", map[string][]int64{"a": {2, 1, 3}, "b": {1}}, "a: value 1 of 3 is 2, want 1"},
		{"never produced", map[string][]int64{"a": {1, 2, 3}, "b": {1}, "c": {1}}, "c: 1 values (last 1), never produced"},
	} {
		got := Exact(c.seqs, want, 10)
		switch {
		case c.bad == "" && got != nil:
			t.Errorf("%s: %v, want exact", c.name, got)
		case c.bad != "" && (len(got) == 0 || !strings.HasPrefix(got[0], c.bad)):
			t.Errorf("%s: %q, want a first line starting %q", c.name, got, c.bad)
		}
	}
	many := map[string][]int64{}
	for _, w := range []string{"a", "b", "c", "d"} {
		many[w] = []int64{7}
	}
	if got := Exact(many, map[string]int64{}, 2); len(got) != 3 || got[2] != "... 2 more" {
		t.Errorf("max 2: %q, want 2 lines and a count of the rest", got)
	}
}

package sim

import (
	"bytes"
	"encoding/xml"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-streams/baton/internal/golden"
)

var update = flag.Bool("update", false, "rewrite the golden traces in testdata/golden")

// scenarioFiles are the shipped scenarios small enough for a unit test.
func scenarioFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../scenarios/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios found: %v", err)
	}
	var out []string
	for _, f := range files {
		if !strings.Contains(f, "large") && !strings.Contains(f, "-1000") {
			out = append(out, f)
		}
	}
	return out
}

func loadScenario(t *testing.T, file string) *Scenario {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc, err := Parse(filepath.Base(file), f)
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// trace is the golden form of a scenario: the smooth policy's detailed
// timeline, then every policy's summary and verdicts. A scenario with
// autoscalers runs under smooth once per autoscaler instead, with each
// timeline.
func trace(t *testing.T, sc *Scenario) ([]byte, []*Result) {
	t.Helper()
	var b bytes.Buffer
	if kinds := sc.AutoscalerKinds(); len(kinds) > 0 {
		pol, _ := ParsePolicy("smooth")
		var rs []*Result
		for _, kind := range kinds {
			r, err := Run(sc, pol, Options{Detail: true, Check: true, Autoscaler: kind})
			if err != nil {
				t.Fatalf("%s: %v", kind, err)
			}
			fmt.Fprintf(&b, "timeline, policy smooth, autoscaler %s\n", kind)
			r.WriteTimeline(&b)
			fmt.Fprintln(&b)
			rs = append(rs, r)
		}
		WriteComparison(&b, rs)
		fmt.Fprintln(&b)
		for _, r := range rs {
			WriteExpects(&b, r.Policy, CheckExpects(sc, r))
		}
		return b.Bytes(), rs
	}
	var rs []*Result
	for _, name := range PolicyNames {
		pol, err := ParsePolicy(name)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Run(sc, pol, Options{Detail: true, Check: true})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if name == "smooth" {
			fmt.Fprintf(&b, "timeline, policy smooth\n")
			r.WriteTimeline(&b)
			fmt.Fprintln(&b)
		}
		rs = append(rs, r)
	}
	WriteComparison(&b, rs)
	fmt.Fprintln(&b)
	for _, r := range rs {
		WriteExpects(&b, r.Policy, CheckExpects(sc, r))
	}
	return b.Bytes(), rs
}

// TestScenarios runs every shipped scenario under every policy: the smooth
// policy keeps its guarantees at every round, every expectation holds, and
// the trace matches the golden file (go test ./sim -update rewrites them).
func TestScenarios(t *testing.T) {
	for _, file := range scenarioFiles(t) {
		name := strings.TrimSuffix(filepath.Base(file), ".txt")
		t.Run(name, func(t *testing.T) {
			sc := loadScenario(t, file)
			got, rs := trace(t, sc)
			for _, r := range rs {
				if r.Policy == "smooth" || r.Policy == "probing" {
					for _, v := range r.Violations {
						t.Errorf("%s: %s", r.Policy, v)
					}
				}
				for _, v := range CheckExpects(sc, r) {
					if !v.OK {
						t.Errorf("%s: line %d: expect %s: got %s", r.Policy, v.Expect.Line, v.Expect.Text, v.Got)
					}
				}
			}
			golden.Check(t, filepath.Join("testdata", "golden", name+".txt"), got, *update)
		})
	}
}

// TestDeterministic: the same scenario gives the same result, line for
// line, run after run.
func TestDeterministic(t *testing.T) {
	sc := loadScenario(t, "../scenarios/scale-out.txt")
	a, _ := trace(t, sc)
	b, _ := trace(t, sc)
	if !bytes.Equal(a, b) {
		t.Fatalf("two runs differ:\n%s", golden.FirstDiff(string(a), string(b)))
	}
}

// newChecked is an engine for sc under the named policy, with details
// and every plan checked.
func newChecked(t *testing.T, sc *Scenario, policy string) *engine {
	t.Helper()
	pol, err := ParsePolicy(policy)
	if err != nil {
		t.Fatal(err)
	}
	e, err := newEngine(sc, pol, Options{Detail: true, Check: true})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// runToEnd runs e to the end of its scenario, failing t on an engine
// error, and returns the result.
func runToEnd(t *testing.T, e *engine) *Result {
	t.Helper()
	e.loop()
	if e.err != nil {
		t.Fatal(e.err)
	}
	e.finish()
	return e.res
}

// TestSeedScenarios checks the seed's expected outcomes beyond the
// scenario files' own expectations.
func TestSeedScenarios(t *testing.T) {
	run := func(file string) (*engine, *Result) {
		e := newChecked(t, loadScenario(t, "../scenarios/"+file), "smooth")
		return e, runToEnd(t, e)
	}
	owners := func(e *engine) map[string]int {
		m := map[string]int{}
		for _, t := range e.tasks {
			if t.owner >= 0 {
				m[e.insts[t.owner].spec.ID]++
			}
		}
		return m
	}
	// Seed 1: S4's first learner is for a task of S1 or S2, nothing is
	// revoked before it is ready, and the group ends 2/1/1/1.
	e, r := run("seed-1-join.txt")
	var first Entry
	for _, en := range r.Timeline {
		if en.Kind == "learner" || en.Kind == "revoke" {
			first = en
			break
		}
	}
	if first.Kind != "learner" || !strings.HasPrefix(first.Text, "S4 learns T") {
		t.Errorf("seed 1: first decision is %q, want a learner on S4", first.Text)
	}
	if !strings.Contains(first.Text, "T1") && !strings.Contains(first.Text, "T2") && !strings.Contains(first.Text, "T3") && !strings.Contains(first.Text, "T4") {
		t.Errorf("seed 1: learner %q is not for a task of S1 or S2", first.Text)
	}
	if o := owners(e); o["S4"] != 1 || r.Moves != 1 {
		t.Errorf("seed 1: owners %v, moves %d; want S4 with one task after one move", o, r.Moves)
	}
	// Seed 2: after S1's crash the group ends 2/2/1 without learners.
	e, _ = run("seed-2-crash-while-learning.txt")
	o := owners(e)
	counts := []int{o["S2"], o["S3"], o["S4"]}
	twos := 0
	for _, c := range counts {
		if c == 2 {
			twos++
		}
	}
	if twos != 2 || o["S2"]+o["S3"]+o["S4"] != 5 || e.learners != 0 {
		t.Errorf("seed 2: owners %v, learners %d; want 2/2/1 and none", o, e.learners)
	}
	// Seed 3: it must not end skewed.
	e, r = run("seed-3-join-and-crash.txt")
	o = owners(e)
	for _, id := range []string{"S2", "S3", "S4"} {
		if o[id] < 1 || o[id] > 2 {
			t.Errorf("seed 3: owners %v; want every instance within one task of the others", o)
			break
		}
	}
	if !r.Balanced {
		t.Errorf("seed 3: not balanced at the end")
	}
}

// TestPlot: the plot is well-formed XML with one line per run and panel,
// and stays small however long the series.
func TestPlot(t *testing.T) {
	sc := loadScenario(t, "../scenarios/scale-out.txt")
	var rs []*Result
	for _, name := range PolicyNames {
		pol, _ := ParsePolicy(name)
		r, err := Run(sc, pol, Options{})
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	long := *rs[0]
	for i := range 100000 {
		long.Series = append(long.Series, Point{At: long.End + time.Duration(i)*time.Millisecond, Unavailable: i % 7})
	}
	long.End += 100 * time.Second
	rs = append(rs, &long)
	var b bytes.Buffer
	if err := WritePlot(&b, "scale <out>", rs); err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(b.Bytes(), new(struct{})); err != nil {
		t.Fatalf("not XML: %v", err)
	}
	if n := strings.Count(b.String(), "<polyline"); n != 2*len(rs) {
		t.Errorf("%d polylines, want %d", n, 2*len(rs))
	}
	if b.Len() > 200000 {
		t.Errorf("plot of %d points is %d bytes", len(long.Series), b.Len())
	}
}

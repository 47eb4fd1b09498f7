package sim

import (
	"errors"
	"strings"
	"testing"
)

func TestParseErrors(t *testing.T) {
	base := "task T1\ninstance A active=T1\n"
	loadBase := base + "config worker_rate=10\nlimit 1h\nload 10\n"
	cases := []struct {
		text string
		line int
		want string
	}{
		{"bogus 1\n", 1, "unknown directive"},
		{base + "at 10s crash B\n", 3, "unknown instance"},
		{base + "at soon crash A\n", 3, "not a duration"},
		{base + "at 1s explode A\n", 3, "unknown event"},
		{"task T1 state=big\ninstance A\n", 1, "not a number"},
		{"task T1 load=0\ninstance A\n", 1, "load must be > 0"},
		{"task T1\ntask T1\ninstance A\n", 2, "defined twice"},
		{"task T1\ninstance A capacity=0\n", 2, "capacity must be >= 1"},
		{"task T1\ninstance A capacity=1.5\n", 2, "whole number"},
		{"task T1\ninstance A colour=red\n", 2, "unknown setting"},
		{"task T1\ninstance A beat=0s\n", 2, "beat must be > 0"},
		{"task T1\ninstance A beat=soon\n", 2, "not a duration"},
		{"instance A active=T9\n", 1, "unknown task"},
		{base + "expect balanced soon\n", 3, "expect balanced by"},
		{base + "expect moves < 3\n", 3, "expect moves <= N"},
		{base + "expect happiness\n", 3, "unknown expectation"},
		{base + "expect no-thrash policy=magic\n", 3, "unknown policy"},
		{base + "config max_learners=0\n", 3, "max_learners must be >= 1"},
		{base + "timing heartbeat=-1s\n", 3, "not a duration"},
		{base + "seed -4\n", 3, "seed"},
		{base + "at 1s slow A 0\n", 3, "restore rate must be > 0"},
		{base + "at 1s join 0\n", 3, "join count"},
		{base + "instance A\n", 3, "defined twice"},
		{"tasks stateful=2\n", 0, "no instances"},
		{"instance A\n", 0, "no tasks"},
		{"task T1\ninstance A active=T1\ninstance B active=T1\n", 0, "active on both"},
		{base + "load fast\n", 3, "not a number"},
		{base + "load -5\n", 3, "load must be >= 0"},
		{loadBase + "at 1m load x0\n", 6, "factor must be > 0"},
		{loadBase + "at 1m load xx\n", 6, "not a number"},
		{loadBase + "at 1m load x2 ramp\n", 6, "want `load"},
		{loadBase + "at 1m load x2 ramp soon\n", 6, "not a duration"},
		{loadBase + "at 1m load x2 slowly 1m\n", 6, "want `load"},
		{base + "load x3\n", 3, "at time 0 is a rate"},
		{loadBase + "at 1m load x2 ramp 1000h\n", 6, "longer than this simulator takes"},
		{loadBase + "load 20\n", 6, "given twice"},
		{base + "limit 1h\nconfig worker_rate=10\nat 1m load 20\n", 5, "load at time 0 is not set"},
		{base + "limit 1h\nload 10\n", 4, "worker_rate"},
		{base + "config worker_rate=10\nload 10\n", 4, "add `limit"},
		{base + "config worker_rate=0\n", 3, "worker_rate must be > 0"},
		{base + "autoscale baton\n", 3, "autoscale needs a load"},
		{loadBase + "autoscale magic\n", 6, "want `autoscale baton"},
		{loadBase + "autoscale\n", 6, "want `autoscale baton"},
		{loadBase + "autoscale baton headroom=2\n", 6, "Headroom"},
		{loadBase + "autoscale baton min=5 max=2\n", 6, "MaxInstances"},
		{loadBase + "autoscale baton threshold=5\n", 6, "unknown setting"},
		{loadBase + "autoscale baton interval=0s\n", 6, "interval must be > 0"},
		{loadBase + "autoscale baton startup=later\n", 6, "not a duration"},
		{loadBase + "autoscale lag-threshold threshold=0\n", 6, "threshold must be > 0"},
		{loadBase + "autoscale lag-threshold min=0\n", 6, "min must be >= 1"},
		{loadBase + "autoscale lag-threshold min=5 max=2\n", 6, "max (2) must be >= min (5)"},
		{loadBase + "autoscale lag-threshold idle=yes\n", 6, "idle takes no value"},
		{loadBase + "autoscale lag-threshold tolerance=1\n", 6, "tolerance must be below 1"},
		{loadBase + "autoscale lag-threshold max=1e6\n", 6, "more instances than this simulator takes"},
		{loadBase + "autoscale baton\nautoscale baton\n", 7, "given twice"},
		{"task T1\ninstance A disk=T9:5\n", 2, "unknown task"},
		{"task T1\ninstance A disk=T1\n", 2, "want TASK:LAG"},
		{"task T1\ninstance A disk=T1:-5\n", 2, "must be >= 0"},
		{"task T1\ntask T2 stateless\ninstance A active=T1 disk=T2:5\n", 0, "no state on disk"},
		{"task T1\ninstance A active=T1 disk=T1:5\n", 0, "on disk and in a role"},
		{"task T1 T2\ninstance A active=T1 standby=T2 disk=T2:5\n", 0, "on disk and in a role"},
	}
	for _, c := range cases {
		_, err := ParseString("s.txt", c.text)
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("%q: got %v, want a ParseError", c.text, err)
			continue
		}
		if pe.Line != c.line || !strings.Contains(pe.Msg, c.want) {
			t.Errorf("%q: got %q (line %d), want line %d and %q", c.text, err, pe.Line, c.line, c.want)
		}
		if c.line > 0 && !strings.HasPrefix(err.Error(), "s.txt:") {
			t.Errorf("%q: error %q does not name the file and line", c.text, err)
		}
	}
}

func TestParseDeals(t *testing.T) {
	sc, err := ParseString("s", "config standbys=1\ntasks stateful=7 stateless=3\ninstances 2 capacity=1\ninstance big capacity=2\n")
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, in := range sc.Instances {
		count[in.ID] = len(in.Active)
		for _, sb := range in.Standby {
			for _, a := range in.Active {
				if a == sb {
					t.Errorf("%s holds %s twice", in.ID, a)
				}
			}
		}
	}
	// 7 stateful over capacities 1,1,2 is 1.75,1.75,3.5; 3 stateless is
	// 0.75,0.75,1.5: big gets 3 or 4 and 1 or 2.
	if count["big"] < 4 || count["big"] > 6 || count["i1"]+count["i2"]+count["big"] != 10 {
		t.Errorf("dealt %v", count)
	}
}

// FuzzParse: no input makes the parser panic.
func FuzzParse(f *testing.F) {
	f.Add("task T1\ninstance A active=T1\nat 1s join 2\nexpect balanced by 1m\n")
	f.Add("tasks stateful=3 stateless=1 state=1..5\ninstances 2 racks=2\nat 1s restart i1 down=1s\n")
	f.Add("at 1s capacity A 2\n")
	f.Add("task T1\ninstance A\nconfig worker_rate=10\nlimit 1h\nload 10\nat 1m load x3 ramp 1m\nautoscale baton max=4\nautoscale lag-threshold threshold=5\n")
	f.Fuzz(func(t *testing.T, text string) {
		ParseString("fuzz", text)
	})
}

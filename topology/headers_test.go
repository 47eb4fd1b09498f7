package topology

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func hdrs(kv ...string) Headers {
	var h Headers
	for i := 0; i+1 < len(kv); i += 2 {
		h = append(h, Header{Key: kv[i], Value: []byte(kv[i+1])})
	}
	return h
}

func (h Headers) String() string {
	var parts []string
	for _, x := range h {
		parts = append(parts, x.Key+":"+string(x.Value))
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// TestHeadersCopyOnChange: With and Without return copies; Get finds the
// last header of a key.
func TestHeadersCopyOnChange(t *testing.T) {
	h := hdrs("trace", "a", "schema", "1", "trace", "b")
	if v, ok := h.Get("trace"); !ok || string(v) != "b" {
		t.Errorf("Get(trace) = %q, %v; want the last one, b", v, ok)
	}
	if _, ok := h.Get("none"); ok {
		t.Error("Get(none) found a header")
	}
	w := h.With("trace", []byte("c"))
	if got := w.String(); got != "{schema:1 trace:c}" {
		t.Errorf("With(trace, c) = %s", got)
	}
	if got := h.Without("trace").String(); got != "{schema:1}" {
		t.Errorf("Without(trace) = %s", got)
	}
	if got := h.String(); got != "{trace:a schema:1 trace:b}" {
		t.Errorf("h changed under With/Without: %s", got)
	}
	if Headers(nil).Without("x") != nil {
		t.Error("Without on nil is not nil")
	}
}

// TestHeadersTravel: an input record's headers reach the records derived
// from it: through stateless operations and a repartition to an
// aggregation's output (the headers of the record that updated it),
// changed on the way by SetHeaders; and through the Processor API, where
// a processor changes them on the record it forwards.
func TestHeadersTravel(t *testing.T) {
	b := NewBuilder("app")
	lines := FromTopic(b, "lines", String, String)
	words := FlatMapValues(lines, func(l string) []string { return strings.Fields(l) })
	stamped := SetHeaders(words, func(_ string, w string, h Headers) Headers { return h.With("word", []byte(w)) })
	MapValues(stamped, strings.ToUpper).To("upper")
	counts := Count(GroupBy(stamped, func(_, w string) string { return w }, String, "by-word"), "counts")
	counts.ToTopic("counts")
	top, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	d := newDriver(t, top, map[string]int32{"lines": 1, "upper": 1, "counts": 1})
	d.inputWith("lines", 0, nil, []byte("x y"), time.Time{}, hdrs("trace", "t1"))
	d.inputWith("lines", 0, nil, []byte("x"), time.Time{}, hdrs("trace", "t2", "schema", "7"))
	if err := d.run(); err != nil {
		t.Fatal(err)
	}
	got := func(topic string) []string {
		var out []string
		for _, r := range d.records(topic, 0) {
			out = append(out, fmt.Sprintf("%s=%s %s", r.Key, r.Value, r.Headers))
		}
		return out
	}
	if want := []string{"=X {trace:t1 word:x}", "=Y {trace:t1 word:y}", "=X {trace:t2 schema:7 word:x}"}; !slices.Equal(got("upper"), want) {
		t.Errorf("upper:\n%q\nwant\n%q", got("upper"), want)
	}
	if want := []string{"x=1 {trace:t1 word:x}", "y=1 {trace:t1 word:y}", "x=2 {trace:t2 schema:7 word:x}"}; !slices.Equal(got("counts"), want) {
		t.Errorf("counts:\n%q\nwant\n%q", got("counts"), want)
	}

	pb := NewBuilder("papp")
	pb.AddSource("in", "in")
	pb.AddProcessor("tag", ProcessorFunc(func(ctx NodeContext, rec Record) error {
		rec.Headers = rec.Headers.Without("secret").With("seen-by", []byte("tag"))
		return ctx.Forward(rec)
	}), "in")
	pb.AddSink("out", "out", "tag")
	ptop, err := pb.Build()
	if err != nil {
		t.Fatal(err)
	}
	pd := newDriver(t, ptop, map[string]int32{"in": 1, "out": 1})
	pd.inputWith("in", 0, []byte("k"), []byte("v"), time.Time{}, hdrs("secret", "s", "trace", "t9"))
	if err := pd.run(); err != nil {
		t.Fatal(err)
	}
	if r := pd.records("out", 0); len(r) != 1 || r[0].Headers.String() != "{trace:t9 seen-by:tag}" {
		t.Errorf("processor output: %v", r)
	}
}

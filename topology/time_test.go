package topology

import (
	"bytes"
	"errors"
	"strconv"
	"testing"
	"time"
)

// timeProbe is a Processor-API node that records the event time and the
// stream time it sees for each record.
type timeProbe struct{ seen *[][2]int64 }

func (p timeProbe) Process(ctx NodeContext, rec Record) error {
	*p.seen = append(*p.seen, [2]int64{rec.Timestamp.UnixMilli(), ctx.StreamTime().UnixMilli()})
	return ctx.Forward(rec)
}

func TestTimestampExtractorAndStreamTime(t *testing.T) {
	var seen [][2]int64
	b := NewBuilder("app")
	b.AddSource("src", "in")
	b.AddProcessor("probe", ProcessorFunc(timeProbe{&seen}.Process), "src")
	b.AddSink("out", "out", "probe")
	// The event time is the value, in milliseconds.
	b.SetTimestampExtractor("in", func(rec Record) (time.Time, error) {
		ms, err := strconv.ParseInt(string(rec.Value), 10, 64)
		return time.UnixMilli(ms), err
	})
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	proc := topo.Subtopologies()[0].NewProcessor("0_0", 0)
	ctx := &stampCtx{}
	for i, v := range []string{"100", "50", "300", "200", "300"} {
		err := proc.Process(ctx, Record{Topic: "in", Offset: int64(i), Value: []byte(v), Timestamp: time.UnixMilli(9999)})
		if err != nil {
			t.Fatal(err)
		}
	}
	want := [][2]int64{{100, 100}, {50, 100}, {300, 300}, {200, 300}, {300, 300}}
	if len(seen) != len(want) {
		t.Fatalf("seen %v, want %v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("record %d: (event time, stream time) = %v, want %v (all: %v)", i, seen[i], want[i], seen)
		}
	}
	// What the task sends carries the extracted time.
	if got := ctx.stamps; !equalInts(got, []int64{100, 50, 300, 200, 300}) {
		t.Fatalf("the context was told times %v", got)
	}

	// A failing extractor stops the record with ErrTimestamp, naming it.
	err = proc.Process(ctx, Record{Topic: "in", Offset: 7, Value: []byte("soon")})
	var pe *ProcessError
	if !errors.Is(err, ErrTimestamp) || !errors.As(err, &pe) || pe.Offset != 7 {
		t.Fatalf("bad timestamp: %v", err)
	}
}

func TestTimestampExtractorMistakes(t *testing.T) {
	for _, c := range []struct {
		topic string
		fn    TimestampExtractor
		want  string
	}{
		{"elsewhere", func(r Record) (time.Time, error) { return r.Timestamp, nil }, `SetTimestampExtractor("elsewhere"): no source reads that topic`},
		{"in", nil, `SetTimestampExtractor("in"): nil extractor`},
	} {
		b := NewBuilder("app")
		b.AddSource("src", "in")
		b.AddSink("out", "out", "src")
		b.SetTimestampExtractor(c.topic, c.fn)
		_, err := b.Build()
		if !errors.Is(err, ErrInvalid) || !bytes.Contains([]byte(err.Error()), []byte(c.want)) {
			t.Errorf("Build: %v; want it to say %q", err, c.want)
		}
	}
}

func TestValueTimestamp(t *testing.T) {
	type click struct{ At int64 }
	fn := ValueTimestamp(String, JSON[click]{}, func(_ string, c click, _ Record) time.Time { return time.UnixMilli(c.At) })
	ts, err := fn(Record{Key: []byte("u"), Value: []byte(`{"At": 42}`)})
	if err != nil || ts.UnixMilli() != 42 {
		t.Fatalf("got %v, %v", ts, err)
	}
	if _, err := fn(Record{Key: []byte("u"), Value: []byte(`{`)}); !errors.Is(err, ErrDecode) {
		t.Fatalf("bad value: %v", err)
	}
}

type stampCtx struct {
	stamps []int64
}

func (c *stampCtx) TaskID() string                       { return "0_0" }
func (c *stampCtx) Partition() int32                     { return 0 }
func (c *stampCtx) Store(string) Store                   { return nil }
func (c *stampCtx) Send(topic string, k, v []byte) error { return nil }
func (c *stampCtx) SetTimestamp(ts time.Time)            { c.stamps = append(c.stamps, ts.UnixMilli()) }

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

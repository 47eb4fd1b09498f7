package topology

import (
	"errors"
	"fmt"
	"time"
)

// A TimestampExtractor gives a record's event time. The default is the
// record's own timestamp (the producer's create time, or the broker's
// append time on a topic configured so). It runs before any node sees the
// record, and what it returns becomes Record.Timestamp for every node of
// the task, the task's stream time and the timestamp of everything the
// task sends while processing the record. An error stops the record like
// any processing error (the runtime's bad-record policy decides), wrapped
// in ErrTimestamp.
type TimestampExtractor func(rec Record) (time.Time, error)

// ErrTimestamp is wrapped by the error of a record whose TimestampExtractor
// failed.
var ErrTimestamp = errors.New("topology: cannot extract the record's timestamp")

// SetTimestampExtractor makes fn give the event time of the records of
// topic, which must be read by a source of the topology (Build checks).
// Setting it again replaces it.
func (b *Builder) SetTimestampExtractor(topic string, fn TimestampExtractor) {
	if fn == nil {
		b.errorf("SetTimestampExtractor(%q): nil extractor", topic)
		return
	}
	if b.extractors == nil {
		b.extractors = map[string]TimestampExtractor{}
	}
	b.extractors[topic] = fn
}

// ValueTimestamp returns a TimestampExtractor that decodes a record's key
// and value with the codecs and asks fn for the event time, for event
// times carried in the payload. A key or value that does not decode is an
// error wrapping ErrDecode.
func ValueTimestamp[K, V any](keys Codec[K], values Codec[V], fn func(k K, v V, rec Record) time.Time) TimestampExtractor {
	return func(rec Record) (time.Time, error) {
		k, err := keys.Decode(rec.Key)
		if err != nil {
			return time.Time{}, fmt.Errorf("%w: key: %w", ErrDecode, err)
		}
		v, err := values.Decode(rec.Value)
		if err != nil {
			return time.Time{}, fmt.Errorf("%w: value: %w", ErrDecode, err)
		}
		return fn(k, v, rec), nil
	}
}

// timestampSetter is implemented by a Context whose Send stamps records
// with the input record's time: the task tells it the event time of each
// record before the record's first node, so what the task sends carries
// the extracted time, not the input record's own.
type timestampSetter interface {
	SetTimestamp(time.Time)
}

// streamClock is a task's stream time: the largest event time of the
// records it has processed, never going back. It starts unset.
type streamClock struct {
	t   time.Time
	set bool
}

func (c *streamClock) observe(ts time.Time) {
	if !c.set || ts.After(c.t) {
		c.t, c.set = ts, true
	}
}

package main

import (
	"strconv"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
)

// Output timestamps.
//
// goka v1.1.16 gives a callback the input record's timestamp
// (goka.Context.Timestamp) but no way to set the timestamp of what it emits:
// ctx.Emit, ctx.Loopback and ctx.SetValue take only headers
// (goka.WithCtxEmitHeaders), and goka's producer builds every
// sarama.ProducerMessage without a Timestamp, so sarama stamps it with
// time.Now().
//
// The least intrusive way found: the callback passes the input timestamp
// along in a header, and a sarama ProducerInterceptor (sarama.Config's
// Producer.Interceptors, installed in goka's global config, so goka's own
// DefaultProducerBuilder keeps building the producer) moves it into
// ProducerMessage.Timestamp and drops the header before the record is sent.
// Records carry no trace of the header.

// timestampHeader carries the input timestamp, milliseconds since the epoch
// as decimal ASCII, from a callback to the producer.
const timestampHeader = "goka-peer-input-timestamp-ms"

// timestampHeaders is the emit header carrying t; nil for the zero time
// (then the producer stamps the record itself).
func timestampHeaders(t time.Time) goka.Headers {
	if t.IsZero() {
		return nil
	}
	return goka.Headers{timestampHeader: []byte(strconv.FormatInt(t.UnixMilli(), 10))}
}

type timestampInterceptor struct{}

// OnSend runs in sarama's dispatcher before partitioning and batching.
func (timestampInterceptor) OnSend(msg *sarama.ProducerMessage) {
	kept := msg.Headers[:0:0]
	for _, h := range msg.Headers {
		if string(h.Key) == timestampHeader {
			if ms, err := strconv.ParseInt(string(h.Value), 10, 64); err == nil {
				msg.Timestamp = time.UnixMilli(ms)
			}
			continue
		}
		kept = append(kept, h)
	}
	if len(kept) == 0 {
		kept = nil
	}
	msg.Headers = kept
}

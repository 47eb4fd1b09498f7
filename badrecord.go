package baton

import (
	"bytes"
	"errors"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/work"
	"github.com/baton-streams/baton/topology"
)

// BadRecordPolicy says what happens to an input record that cannot be
// decoded (an error wrapping topology.ErrDecode).
type BadRecordPolicy struct {
	skip       bool
	deadLetter string
}

var (
	// StopOnBadRecord stops the App with an error naming the record's
	// topic, partition and offset. The default: nothing is skipped
	// silently, and the record is not committed.
	StopOnBadRecord = BadRecordPolicy{}
	// SkipBadRecords logs the record's coordinates, counts it in
	// baton_bad_records_total and goes on.
	SkipBadRecords = BadRecordPolicy{skip: true}
)

// DeadLetter writes each bad record as it arrived (key, value, headers) to
// topic, with headers naming its source and the error, then goes on. The
// topic must exist or be creatable by the cluster.
func DeadLetter(topic string) BadRecordPolicy { return BadRecordPolicy{skip: true, deadLetter: topic} }

// WithBadRecords sets the policy for records that fail to decode. Default
// StopOnBadRecord.
func WithBadRecords(p BadRecordPolicy) Option { return func(c *config) { c.badRecords = p } }

// badRecord applies the policy to a record whose processing failed with
// err; it returns nil when the record was dealt with and processing goes
// on.
func (a *App) badRecord(t *work.Task, r *kgo.Record, err error) error {
	p := a.cfg.badRecords
	if !p.skip || !errors.Is(err, topology.ErrDecode) {
		return err
	}
	a.metrics.BadRecords.WithLabelValues(t.ID).Inc()
	a.log.Warn("bad record skipped", "task", t.ID, "topic", r.Topic, "partition", r.Partition, "offset", r.Offset,
		"dead_letter", p.deadLetter, "err", err)
	if p.deadLetter == "" {
		return nil
	}
	dl := &kgo.Record{Topic: p.deadLetter, Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value), Timestamp: r.Timestamp, Headers: append([]kgo.RecordHeader(nil), r.Headers...)}
	dl.Headers = append(dl.Headers,
		kgo.RecordHeader{Key: "baton.source.topic", Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: "baton.source.partition", Value: []byte(strconv.Itoa(int(r.Partition)))},
		kgo.RecordHeader{Key: "baton.source.offset", Value: []byte(strconv.FormatInt(r.Offset, 10))},
		kgo.RecordHeader{Key: "baton.error", Value: []byte(err.Error())})
	n, perr := a.partitionsOf(p.deadLetter)
	if perr != nil {
		return perr
	}
	dl.Partition = r.Partition % n
	t.Ctx.Produce(dl)
	return nil
}

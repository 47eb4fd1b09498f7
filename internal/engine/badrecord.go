package engine

import (
	"bytes"
	"errors"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/work"
	"github.com/baton-streams/baton/topology"
)

// BadRecords is the policy for records that fail to decode
// (baton.BadRecordPolicy): stop (the zero value), skip, or skip and write
// them to a dead-letter topic.
type BadRecords struct {
	Skip       bool
	DeadLetter string // "" for none
}

// badRecord applies the policy to a record whose processing failed with
// err; it returns nil when the record was dealt with and processing goes
// on.
func (a *App) badRecord(t *work.Task, r *kgo.Record, err error) error {
	p := a.cfg.BadRecords
	if !p.Skip || !errors.Is(err, topology.ErrDecode) {
		return err
	}
	a.metrics.BadRecords.WithLabelValues(t.ID).Inc()
	a.log.Warn("bad record skipped", "task", t.ID, "topic", r.Topic, "partition", r.Partition, "offset", r.Offset,
		"dead_letter", p.DeadLetter, "err", err)
	if p.DeadLetter == "" {
		return nil
	}
	dl := &kgo.Record{Topic: p.DeadLetter, Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value), Timestamp: r.Timestamp, Headers: append([]kgo.RecordHeader(nil), r.Headers...)}
	dl.Headers = append(dl.Headers,
		kgo.RecordHeader{Key: "baton.source.topic", Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: "baton.source.partition", Value: []byte(strconv.Itoa(int(r.Partition)))},
		kgo.RecordHeader{Key: "baton.source.offset", Value: []byte(strconv.FormatInt(r.Offset, 10))},
		kgo.RecordHeader{Key: "baton.error", Value: []byte(err.Error())})
	n, perr := a.partitionsOf(p.DeadLetter)
	if perr != nil {
		return perr
	}
	dl.Partition = r.Partition % n
	t.Ctx.Produce(dl)
	return nil
}

package engine

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/work"
	"github.com/baton-streams/baton/topology"
)

// BadRecords is an error policy for records (baton.ErrorPolicy): stop
// (the zero value), skip, or skip and write them to a dead-letter topic.
// The bad-record policy covers records that fail to decode; the
// processing-error policy the other errors of a record's processors.
type BadRecords struct {
	Skip       bool
	DeadLetter string // "" for none
}

// badRecord applies the bad-record policy to a record that failed to
// decode, and the processing-error policy (the one of the node that
// failed, else the application's) to one whose processing failed
// otherwise; it returns nil when the record was dealt with and processing
// goes on.
func (a *App) badRecord(t *work.Task, r *kgo.Record, err error) error {
	kind, p := "bad record", a.cfg.BadRecords
	node := ""
	if pe := (*topology.ProcessError)(nil); errors.As(err, &pe) {
		node = pe.Node
	}
	if !errors.Is(err, topology.ErrDecode) {
		kind, p = "processing error", a.cfg.ProcessingErrors
		if o, ok := a.cfg.ProcessorErrors[node]; ok && node != "" {
			p = o
		}
	}
	var pe *work.PanicError
	if errors.As(err, &pe) {
		a.log.Error("a record's processing panicked", "task", t.ID, "topic", r.Topic, "partition", r.Partition, "offset", r.Offset,
			"panic", fmt.Sprint(pe.Value), "stack", string(pe.Stack))
	}
	if !p.Skip {
		return err
	}
	if kind == "bad record" {
		a.metrics.BadRecords.WithLabelValues(t.ID).Inc()
	} else {
		a.metrics.ProcessingErrors.WithLabelValues(t.ID, node).Inc()
	}
	a.log.Warn(kind+" skipped", "task", t.ID, "node", node, "topic", r.Topic, "partition", r.Partition, "offset", r.Offset,
		"dead_letter", p.DeadLetter, "err", err)
	if p.DeadLetter == "" {
		return nil
	}
	dl := &kgo.Record{Topic: p.DeadLetter, Key: bytes.Clone(r.Key), Value: bytes.Clone(r.Value), Timestamp: r.Timestamp, Headers: append([]kgo.RecordHeader(nil), r.Headers...)}
	dl.Headers = append(dl.Headers,
		kgo.RecordHeader{Key: "baton.source.topic", Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: "baton.source.partition", Value: []byte(strconv.Itoa(int(r.Partition)))},
		kgo.RecordHeader{Key: "baton.source.offset", Value: []byte(strconv.FormatInt(r.Offset, 10))},
		kgo.RecordHeader{Key: "baton.error", Value: []byte(err.Error())},
		kgo.RecordHeader{Key: "baton.task", Value: []byte(t.ID)})
	if node != "" {
		dl.Headers = append(dl.Headers, kgo.RecordHeader{Key: "baton.processor", Value: []byte(node)})
	}
	n, perr := a.partitionsOf(p.DeadLetter)
	if perr != nil {
		return perr
	}
	dl.Partition = r.Partition % n
	t.Ctx.Produce(dl)
	return nil
}

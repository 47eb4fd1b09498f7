package baton

import "github.com/baton-streams/baton/internal/engine"

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
func WithBadRecords(p BadRecordPolicy) Option {
	return func(c *config) { c.BadRecords = engine.BadRecords{Skip: p.skip, DeadLetter: p.deadLetter} }
}

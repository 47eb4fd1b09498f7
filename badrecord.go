package baton

import (
	"fmt"
	"slices"
	"strings"

	"github.com/baton-streams/baton/internal/engine"
	"github.com/baton-streams/baton/topology"
)

// ErrorPolicy says what happens to an input record whose processing
// fails: stop (StopOnError), skip (SkipOnError) or skip and write it to a
// dead-letter topic (DeadLetter). Two policies use it: the bad-record
// policy (WithBadRecords), for records that fail to decode (an error
// wrapping topology.ErrDecode), and the processing-error policy
// (WithProcessingErrors, WithProcessorErrors), for any other error a
// record's processors return, and for a panic in a processor or in a
// function given to the DSL, which is recovered on its worker.
//
// A skipped record is skipped where it failed: what its processing did
// before (store writes, records sent by earlier nodes) stands and is
// committed with the rest, under either guarantee. A failure of the
// runtime's own during the record (a store that cannot be read or
// written, a topic whose partitions cannot be known) is never skipped:
// the instance stops.
type ErrorPolicy struct {
	skip       bool
	deadLetter string
}

// BadRecordPolicy is the ErrorPolicy of WithBadRecords.
type BadRecordPolicy = ErrorPolicy

var (
	// StopOnError stops the App with an error naming the record's
	// topic, partition and offset (and the node that failed, if known).
	// The default of both policies: nothing is skipped silently, and the
	// record is not committed.
	StopOnError = ErrorPolicy{}
	// SkipOnError logs the record's coordinates, counts it
	// (baton_bad_records_total or baton_processing_errors_total) and
	// goes on.
	SkipOnError = ErrorPolicy{skip: true}
	// StopOnBadRecord is StopOnError, under its older name.
	StopOnBadRecord = StopOnError
	// SkipBadRecords is SkipOnError, under its older name.
	SkipBadRecords = SkipOnError
)

// DeadLetter writes each failed record as it arrived (key, value,
// headers) to topic, with headers naming its source
// (baton.source.topic, baton.source.partition, baton.source.offset), its
// task (baton.task), the error (baton.error) and, for a processing error
// attributed to a Processor-API node, the node (baton.processor); then
// goes on. The topic must exist or be creatable by the cluster. Under
// exactly-once the dead letter is written in the transaction that
// commits the record.
func DeadLetter(topic string) ErrorPolicy { return ErrorPolicy{skip: true, deadLetter: topic} }

func (p ErrorPolicy) engine() engine.BadRecords {
	return engine.BadRecords{Skip: p.skip, DeadLetter: p.deadLetter}
}

// WithBadRecords sets the policy for records that fail to decode. Default
// StopOnError.
func WithBadRecords(p ErrorPolicy) Option {
	return func(c *config) { c.BadRecords = p.engine() }
}

// WithProcessingErrors sets the policy for records whose processing
// fails otherwise than by decoding: an error a processor returns, or a
// panic. Default StopOnError. WithProcessorErrors overrides it for one
// processor.
func WithProcessingErrors(p ErrorPolicy) Option {
	return func(c *config) { c.ProcessingErrors = p.engine() }
}

// WithProcessorErrors sets the processing-error policy of one
// Processor-API node (topology.Builder.AddProcessor), by name, over the
// application's (WithProcessingErrors). New fails if the topology has no
// such processor. A panic is not attributed to a node: the application's
// policy applies to it.
func WithProcessorErrors(node string, p ErrorPolicy) Option {
	return func(c *config) {
		if c.ProcessorErrors == nil {
			c.ProcessorErrors = map[string]engine.BadRecords{}
		}
		c.ProcessorErrors[node] = p.engine()
	}
}

// checkProcessorErrors checks that every node WithProcessorErrors names is
// a processor of top.
func checkProcessorErrors(c *config, top *topology.Topology) error {
	var all []string
	for _, s := range top.Subtopologies() {
		all = append(all, s.Processors...)
	}
	slices.Sort(all)
	for node := range c.ProcessorErrors {
		if !slices.Contains(all, node) {
			known := "it has none"
			if len(all) > 0 {
				known = "its processors are " + strings.Join(all, ", ")
			}
			return fmt.Errorf("%w: WithProcessorErrors: the topology has no processor %q (%s)", ErrConfig, node, known)
		}
	}
	return nil
}

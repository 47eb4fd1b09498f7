package topology

import "time"

// NodeContext is the Context a node of a Processor-API graph sees while it
// processes one record: the task's Context plus Forward. Store returns only
// the stores connected to the node (AddStore) and the topology's global
// stores (AddGlobalStore, FromGlobalTopic), which every processor may
// read; others are nil.
type NodeContext interface {
	Context
	// Forward passes rec to each of the node's children, in the order they
	// were added, and returns the first error. Sinks send it to their
	// topic.
	Forward(rec Record) error
	// StreamTime is the task's stream time: the largest event time
	// (Record.Timestamp, after the TimestampExtractor) of the records the
	// task has processed here, the one in process included. It never goes
	// back. A new owner of the task starts it afresh from its first
	// record, unless the task has timers: then it is kept in the timer
	// stores with the rest of the task's state, and a new owner goes on
	// from the old owner's (see "Time and timers" in the package docs).
	StreamTime() time.Time
	// Timers returns the node's timers (Builder.AddTimers); nil for a
	// node without.
	Timers() Timers
}

// Node is one processor node of one task. The runtime calls it from one
// goroutine; Record's ownership rules apply (copy what you keep).
type Node interface {
	Process(ctx NodeContext, rec Record) error
}

// Supplier makes a task's instance of a processor node. It is called once
// per task, from any goroutine, when the task's processor is made.
type Supplier interface {
	NewNode(taskID string, partition int32) Node
}

// ProcessorFunc is a stateless node: a function shared by every task. It is
// both a Node and a Supplier (returning itself), so it may be passed to
// AddProcessor directly. Keep per-task state in a store, or use
// SupplierFunc.
type ProcessorFunc func(ctx NodeContext, rec Record) error

// Process calls f.
func (f ProcessorFunc) Process(ctx NodeContext, rec Record) error { return f(ctx, rec) }

// NewNode returns f itself.
func (f ProcessorFunc) NewNode(string, int32) Node { return f }

// SupplierFunc makes a new Node per task, for nodes with per-task fields.
type SupplierFunc func(taskID string, partition int32) Node

// NewNode calls f.
func (f SupplierFunc) NewNode(taskID string, partition int32) Node { return f(taskID, partition) }

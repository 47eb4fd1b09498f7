package baton

import (
	"fmt"
	"time"

	"github.com/baton-streams/baton/internal/engine"
)

// TransactionalID is the transactional id under which instance
// instanceID of application appID writes its transactions under
// ExactlyOnce: what Kafka's transaction tools (kafka-transactions.sh
// describe, abort) and `baton evict` name it by.
func TransactionalID(appID, instanceID string) string {
	return engine.TransactionalID(appID, instanceID)
}

// Guarantee is what an App promises about records it processes when an
// instance dies.
type Guarantee int

const (
	// AtLeastOnce commits input offsets only after the changelog and
	// output writes they depend on are acknowledged: nothing is lost, and
	// after a crash the records since the last commit are processed again
	// (counts can be high). The default.
	AtLeastOnce Guarantee = iota
	// ExactlyOnce writes changelog and output records and commits input
	// offsets in one Kafka transaction per commit interval: after a crash
	// the unfinished transaction is aborted and its records are processed
	// again from the state of the last committed one. Changelogs are read
	// (restores, standbys, learners) and input is consumed read_committed.
	ExactlyOnce
)

// String returns the name ParseGuarantee accepts.
func (g Guarantee) String() string {
	switch g {
	case AtLeastOnce:
		return "at-least-once"
	case ExactlyOnce:
		return "exactly-once"
	}
	return fmt.Sprintf("Guarantee(%d)", int(g))
}

// ParseGuarantee parses "at-least-once" or "exactly-once".
func ParseGuarantee(s string) (Guarantee, error) {
	switch s {
	case "at-least-once":
		return AtLeastOnce, nil
	case "exactly-once":
		return ExactlyOnce, nil
	}
	return 0, fmt.Errorf("unknown guarantee %q (want at-least-once or exactly-once)", s)
}

// WithGuarantee sets the processing guarantee. Default AtLeastOnce.
func WithGuarantee(g Guarantee) Option {
	return func(c *config) {
		if g != AtLeastOnce && g != ExactlyOnce {
			c.OptErr = fmt.Errorf("%w: guarantee: unknown %v", ErrConfig, g)
		}
		c.ExactlyOnce = g == ExactlyOnce
	}
}

// WithTransactionTimeout sets, under ExactlyOnce, how long the cluster lets
// a transaction stay open before it aborts it. It bounds how long a
// crashed instance's unfinished transaction holds up readers of its
// changelogs and output. Default 10s; it must exceed the commit interval.
func WithTransactionTimeout(d time.Duration) Option {
	return func(c *config) { c.TxnTimeout = d }
}

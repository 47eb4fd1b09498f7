package baton

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

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
func WithGuarantee(g Guarantee) Option { return func(c *config) { c.guarantee = g } }

// WithTransactionTimeout sets, under ExactlyOnce, how long the cluster lets
// a transaction stay open before it aborts it. It bounds how long a
// crashed instance's unfinished transaction holds up readers of its
// changelogs and output. Default 10s; it must exceed the commit interval.
func WithTransactionTimeout(d time.Duration) Option {
	return func(c *config) { c.txnTimeout = d }
}

func (a *App) exactlyOnce() bool { return a.cfg.guarantee == ExactlyOnce }

// transactionalID is the instance's transactional id: unique per instance.
// Zombies (an instance the group expelled that still runs) are fenced by
// the group generation its offset commits carry (KIP-447).
func (a *App) transactionalID() string { return a.cfg.appID + "-" + a.cfg.instanceID }

// txnClientOpts are the group client's options under ExactlyOnce.
func (a *App) txnClientOpts() []kgo.Opt {
	// TxnOffsetCommit v6 names topics by id; baton sends it itself (see
	// commitTxnOffsets) and names topics by name, which v5 does. v5 is
	// also the lowest the client accepts for transaction version 2
	// (KIP-890 part 2, Kafka 4's default): with it the client uses Produce
	// v12+ without AddPartitionsToTxn and EndTxn v5, which bumps the
	// producer epoch at every transaction (commitTxnOffsets asks for the
	// current one). baton's own AddOffsetsToTxn is still accepted.
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(int16(kmsg.TxnOffsetCommit), 5)
	return []kgo.Opt{
		kgo.TransactionalID(a.transactionalID()),
		kgo.TransactionTimeout(a.cfg.txnTimeout),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.MaxVersions(versions),
	}
}

// restoreClientOpts are the changelog reader's options under either
// guarantee: only committed data, and the transaction markers too, so a
// checkpoint moves past the marker that ends a changelog. A changelog
// written under exactly-once and read by a group that runs at-least-once
// now (or the other way) still ends with a marker: a reader that did not
// see it would stay one record behind for good, and a restoring active
// would never run.
func (a *App) restoreClientOpts() []kgo.Opt {
	return []kgo.Opt{kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords()}
}

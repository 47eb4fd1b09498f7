package engine

import (
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

func (a *App) exactlyOnce() bool { return a.cfg.ExactlyOnce }

// transactionalID is the instance's transactional id: unique per instance.
// Zombies (an instance the group expelled that still runs) are fenced by
// the group generation its offset commits carry (KIP-447).
func (a *App) transactionalID() string { return TransactionalID(a.cfg.AppID, a.cfg.InstanceID) }

// TransactionalID is the transactional id of instance instanceID of
// application appID under exactly-once.
func TransactionalID(appID, instanceID string) string { return appID + "-" + instanceID }

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
		kgo.TransactionTimeout(a.cfg.TxnTimeout),
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

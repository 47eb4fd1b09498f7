// Package txncheck tells, for tests of exactly-once, what a transactional
// producer holds: the transaction coordinator's view of its transaction,
// and that transaction's records in the topics, read committed or not.
// A test uses it to show that a process it killed or froze had work in an
// open transaction, and that none of that work was ever committed.
package txncheck

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/counts"
	"github.com/baton-streams/baton/internal/tick"
)

// Describe asks the transaction coordinator about transactional id id,
// again until it answers (a coordinator may be loading) or 20 s pass.
func Describe(ctx context.Context, adm *kadm.Client, id string) (kadm.DescribedTransaction, error) {
	var d kadm.DescribedTransaction
	var last error
	ok := tick.Until(ctx, 20*time.Second, 50*time.Millisecond, func() bool {
		ds, err := adm.DescribeTransactions(ctx, id)
		if err == nil {
			d = ds[id]
			err = d.Err
		}
		last = err
		return err == nil
	})
	if !ok {
		return d, fmt.Errorf("describing transactional id %s: %w", id, last)
	}
	return d, nil
}

// HoldsRecords reports whether txn is open, has written to topic, and
// has not begun to commit: no group offsets are in it yet. Such a
// transaction cannot commit without sending the group its offsets. (kfake
// does not list the offsets' partition in a transaction; see
// CommitPending.)
func HoldsRecords(txn kadm.DescribedTransaction, topic string) bool {
	_, wrote := txn.Topics[topic]
	_, committing := txn.Topics["__consumer_offsets"]
	return txn.State == "Ongoing" && wrote && !committing
}

// CommitPending reports whether some transaction holds offsets of group
// not committed yet: a transactional commit is under way (Apache Kafka
// says so per partition, kfake for the whole group).
func CommitPending(ctx context.Context, adm *kadm.Client, group string) (bool, error) {
	resp, err := adm.FetchOffsets(kadm.RequireStable(ctx), group)
	if errors.Is(err, kerr.UnstableOffsetCommit) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("fetching the offsets of group %s: %w", group, err)
	}
	pending := false
	resp.Each(func(o kadm.OffsetResponse) {
		pending = pending || errors.Is(o.Err, kerr.UnstableOffsetCommit)
	})
	return pending, nil
}

// WaitEnded waits until transactional id id has no transaction in
// progress: the coordinator ended the last one (committed or aborted, its
// markers written) and began none. A dead producer's open transaction
// ends when the coordinator times it out.
func WaitEnded(ctx context.Context, adm *kadm.Client, id string, timeout time.Duration) (kadm.DescribedTransaction, error) {
	var d kadm.DescribedTransaction
	var last error
	ok := tick.Until(ctx, timeout, 100*time.Millisecond, func() bool {
		d, last = Describe(ctx, adm, id)
		switch {
		case last != nil:
			return false
		case d.State == "Empty", d.State == "CompleteCommit", d.State == "CompleteAbort", d.State == "Dead":
			return true
		}
		last = fmt.Errorf("transactional id %s: transaction %s", id, d.State)
		return false
	})
	if !ok {
		return d, fmt.Errorf("waiting %v for the transaction to end: %w", timeout, last)
	}
	return d, nil
}

// Records counts the records of transaction txn (its producer id and
// epoch) in topics: all of them (read uncommitted), and those a
// read_committed reader sees. Count in topics nothing deletes records
// from (not repartition topics, which are purged).
func Records(ctx context.Context, brokers []string, txn kadm.DescribedTransaction, topics ...string) (written, committed int, err error) {
	count := func(readCommitted bool) (int, error) {
		n := 0
		for _, topic := range topics {
			err := counts.Scan(ctx, brokers, topic, readCommitted, func(r *kgo.Record) {
				if r.ProducerID == txn.ProducerID && r.ProducerEpoch == txn.ProducerEpoch {
					n++
				}
			})
			if err != nil {
				return 0, err
			}
		}
		return n, nil
	}
	if written, err = count(false); err != nil {
		return 0, 0, err
	}
	if committed, err = count(true); err != nil {
		return 0, 0, err
	}
	return written, committed, nil
}

package commit

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestTxnErrRetries: errors after which the open transaction can still
// commit postpone it; others abort it.
func TestTxnErrRetries(t *testing.T) {
	for _, c := range []struct {
		err   error
		retry bool
	}{
		{kerr.IllegalGeneration, true},
		{kerr.RebalanceInProgress, true},
		{kerr.NotCoordinator, true},
		{kerr.ConcurrentTransactions, true},
		{kerr.UnknownMemberID, false},
		{kerr.ProducerFenced, false},
		{errors.New("connection reset"), false},
	} {
		if got := errors.Is(txnErr("committing", c.err), errTxnRetry); got != c.retry {
			t.Errorf("txnErr(%v) retries = %v, want %v", c.err, got, c.retry)
		}
	}
}

// TestAcksWaitForEveryEarlierEpoch: a commit's wait returns once no record
// of its epoch or of an earlier one is unacknowledged, and not before.
func TestAcksWaitForEveryEarlierEpoch(t *testing.T) {
	k := newAcks()
	a1, a2 := k.add(), k.add()
	e0 := k.cut()
	b1 := k.add()
	e1 := k.cut()
	if e0.id != 0 || e1.id != 1 {
		t.Fatalf("epochs %d and %d, want 0 and 1", e0.id, e1.id)
	}
	pending := func(e *epoch) bool {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		return k.wait(ctx, e) != nil
	}
	k.done(b1)
	if !pending(e1) {
		t.Fatal("epoch 1 complete while two records of epoch 0 are unacknowledged")
	}
	k.done(a1)
	if !pending(e0) {
		t.Fatal("epoch 0 complete with one record unacknowledged")
	}
	k.done(a2)
	if pending(e0) || pending(e1) {
		t.Fatal("epochs 0 and 1 not complete with every record acknowledged")
	}
	if e2 := k.cut(); pending(e2) {
		t.Fatal("an empty epoch is not complete")
	}
}

// TestFaultSkips: a planted fault is taken by the transaction with work
// after Skip others, and by no other.
func TestFaultSkips(t *testing.T) {
	c := &Transactional{}
	cause := errors.New("planted")
	c.Plant(Fault{Skip: 2, Abort: cause})
	var got []bool
	for range 5 {
		f := c.takeFault()
		got = append(got, f != nil)
		if f != nil && f.Abort != cause {
			t.Fatalf("took %+v, want the planted abort", f)
		}
	}
	if want := []bool{false, false, true, false, false}; !slices.Equal(got, want) {
		t.Errorf("transactions that took the fault: %v, want %v", got, want)
	}
}

// Package commit makes an instance's processed work durable, under
// either guarantee: at-least-once (AtLeastOnce: input offsets committed
// after the changelog and output writes they depend on are acknowledged)
// or exactly-once (Transactional: one Kafka transaction per commit). A
// committer does the Kafka I/O of commits on its own goroutine (Serve)
// and reports each outcome to the membership's loop, which decides what
// follows (the instance core) and writes the stores (Write).
//
// A committer belongs to one group membership and is made with it (Env).
// The loop calls every method but Produce and Processed, which workers
// call while processing; Serve runs on the committer's goroutine.
package commit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/instance"
	"github.com/baton-streams/baton/internal/metrics"
	"github.com/baton-streams/baton/internal/purge"
	"github.com/baton-streams/baton/internal/work"
)

// Committer makes processed work durable. Each committer owns its own
// bookkeeping and no task state. A commit runs on the committer's
// goroutine (Serve) and reports back on the loop's channel; Done, on the
// loop, turns that report into the core's CommitDone and the store
// writes the commit made durable. When a transaction aborted, the loop
// rolls its tasks back.
type Committer interface {
	// Open readies the committer before Serve (a transaction begins).
	Open() error
	// Serve carries out the commits begun, in order, and sends each
	// outcome on out, until ctx ends.
	Serve(ctx context.Context, out chan<- Result)
	// Produce sends a record the processing of a task wrote.
	Produce(r *kgo.Record, promise func(*kgo.Record, error))
	// Processed counts records processed into the open commit.
	Processed(n int)
	// Begin starts commit seq of the tasks' work (final: a revoke or the
	// end waits for it).
	Begin(seq int, tasks []*work.Task, final bool)
	// Exclusive reports whether processing must wait: a transaction is
	// committing (every record processed belongs to the open one), or
	// commits fall behind (processing may run one commit interval ahead
	// of what is durable, no more).
	Exclusive() bool
	// Done finishes a commit on the loop. It returns the store writes
	// the commit made durable, to write off the loop (the core hears of
	// the commit once they are written), or nil and the CommitDone to
	// step at once.
	Done(r Result) (*Write, instance.CommitDone)
	// Lost: the member's partitions were lost; nothing open may commit.
	// It returns the seq of a commit whose result the rebalance callback
	// must wait for (0: none): until it is done the member must not
	// rejoin, or an open transaction could commit under the new
	// generation work another member has redone.
	Lost() int
	// Abort gives up what is not committed, when Run fails.
	Abort()
}

// Env is what a committer needs of its membership.
type Env struct {
	Client  *kgo.Client     // the group member: producer and committer
	Ctx     context.Context // the membership's run context
	Log     *slog.Logger
	Metrics *metrics.Set
	Purger  *purge.Purger
	// Fail ends the membership: nothing after err may be committed.
	Fail func(err error)
	// Unconfirmed reports whether, at now, the group has not confirmed
	// the member for a session timeout (or its session failed since).
	Unconfirmed func(now time.Time) bool
	// Tasks lists the membership's tasks (loop only).
	Tasks func() []*work.Task
	// CommitInterval is how far processing may run ahead of the last
	// durable commit (at-least-once).
	CommitInterval time.Duration

	// Exactly-once: the producer's transactional id and the group's id,
	// how long an abort may take, Leave's channel (an instance told to
	// leave at once stops retrying an abort), and the member id the tasks
	// were assigned under (a transaction must not commit under another).
	TransactionalID, Group string
	AbortTimeout           time.Duration
	LeaveNow               <-chan struct{}
	TxnMember              *atomic.Value
	// Rewinding reports whether the tasks were rolled back and are not
	// rewound yet: a commit then has nothing to commit (loop only).
	Rewinding func() bool

	// OnCommitWork, when set (tests), is called on the committer's
	// goroutine as a commit with work starts.
	OnCommitWork func()
}

// active lists the tasks with a processor.
func (e *Env) active() []*work.Task {
	var out []*work.Task
	for _, t := range e.Tasks() {
		if t.Active {
			out = append(out, t)
		}
	}
	return out
}

// Result is a commit's outcome, from the committer's goroutine.
type Result struct {
	Seq   int
	Epoch uint64 // at-least-once: the epoch of acknowledgements waited for
	Err   error
	// Committed: the commit went through (a transaction's writes apply to
	// the stores). Aborted: a transaction was rolled back (the input
	// rewinds).
	Committed bool
	Aborted   bool
}

// ErrUnconfirmed ends a commit once the group has not confirmed this
// member for a session timeout (Env.Unconfirmed): the group may have
// expelled it and handed its tasks to other members, so the commit is
// moot, and waiting for it would only hold up what comes next (a revoke
// answered, a rejoin).
var ErrUnconfirmed = errors.New("baton: commit given up: the group has not confirmed this member for a session timeout")

// confirmEvery is how often a commit checks that the group still
// confirms its member.
const confirmEvery = 100 * time.Millisecond

// whileConfirmed returns a context for one step of a commit: it ends with
// parent, after limit, or once the group has not confirmed this member
// for a session timeout, with ErrUnconfirmed as its cause. A commit
// never waits longer than its member can stay in the group.
func (a *Env) whileConfirmed(parent context.Context, limit time.Duration) (context.Context, context.CancelFunc) {
	ctx, giveUp := context.WithCancelCause(parent)
	tctx, cancel := context.WithTimeout(ctx, limit)
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		tk := time.NewTicker(confirmEvery)
		defer tk.Stop()
		for now := time.Now(); ; {
			if a.Unconfirmed(now) {
				giveUp(ErrUnconfirmed)
				return
			}
			select {
			case <-tctx.Done():
				return
			case now = <-tk.C:
			}
		}
	}()
	return tctx, func() {
		cancel()
		giveUp(context.Canceled)
		<-watching
	}
}

// gaveUp returns err, saying so and counting it when the commit was given
// up because its member was unconfirmed (whileConfirmed).
func (a *Env) gaveUp(ctx context.Context, err error) error {
	if err == nil || !errors.Is(context.Cause(ctx), ErrUnconfirmed) || errors.Is(err, ErrUnconfirmed) {
		return err
	}
	a.Metrics.CommitsGivenUp.Inc()
	return fmt.Errorf("%w: %w", ErrUnconfirmed, err)
}

// FinalSeq is the sequence number of the final commit (never the core's).
const FinalSeq = -1

package engine

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/instance"
	"github.com/baton-streams/baton/internal/commit"
	"github.com/baton-streams/baton/internal/work"
)

// membership is everything that lives from joining the group to leaving
// it: the clients, the run context, the loop's channels, the tasks and
// their stores (being opened, open, being closed), the polled backlog,
// the workers, the committer and the goroutines started for one answer.
// Its loop (App.loop, on Run's goroutine) is its only writer once it
// runs; the goroutines it starts take what they need of it when they
// start and report to its channels. A fence or an unresolved abort ends
// it: Run waits for what it started, closes it, and begins a new one
// (App.rejoin); nothing in it is reset in place.
type membership struct {
	// Written by open before the loop starts, then read-only.
	group   *kgo.Client // group member, producer, committer
	restore *kgo.Client // changelog reader for standbys, learners, restores
	admin   *kadm.Client
	commit  commit.Committer // at-least-once or transactional
	workers []*work.Worker
	// runCtx is cancelled, with the cause, when the membership must end
	// (fail); every I/O call of the runtime derives from it.
	runCtx context.Context
	cancel context.CancelCauseFunc
	ch     loopChans
	// diskCP is the checkpoint of every store left on disk at start, per
	// task (read by open, handed to the core).
	diskCP map[string]map[string]int64

	// Written by the loop only.
	shell        *shell
	closed       bool // close ran, or open has not
	tasks        map[string]*work.Task
	openingTasks map[string]bool
	// reopen holds, per task, an open asked for while an earlier open of
	// the same task was still running: it starts once that one is back
	// and closed (two opens at once would contend for the store's lock).
	reopen  map[string]*work.Task
	closing map[string]chan struct{} // task -> closed when its stores' background close ends
	backlog map[string][]*kgo.Record // polled records of active tasks not running yet

	// The goroutines it started, each group waited for before it closes.
	closers        sync.WaitGroup // background store opens and closes
	pollers        sync.WaitGroup // the input and changelog pollers
	oneShots       sync.WaitGroup // goroutines for one answer (oneShot)
	workersRunning sync.WaitGroup // the worker goroutines
	committing     sync.WaitGroup // the committer's goroutine (close waits)
}

// newMembership returns a membership that has not joined yet: open makes
// its clients.
func newMembership(a *App) *membership {
	m := &membership{ch: newLoopChans(), closed: true, diskCP: map[string]map[string]int64{},
		tasks: map[string]*work.Task{}, openingTasks: map[string]bool{}, reopen: map[string]*work.Task{},
		closing: map[string]chan struct{}{}, backlog: map[string][]*kgo.Record{}}
	m.runCtx, m.cancel = context.WithCancelCause(context.Background())
	return m
}

// newCommitter makes the membership's committer once its group client
// exists (open).
func (a *App) newCommitter() commit.Committer {
	env := &commit.Env{
		Client: a.group, Ctx: a.runCtx, Log: a.log, Metrics: a.metrics, Purger: a.purger,
		Fail:        a.fail,
		Unconfirmed: func(now time.Time) bool { _, late := a.confirmation(now); return late },
		Tasks: func() []*work.Task {
			out := make([]*work.Task, 0, len(a.tasks))
			for _, t := range a.tasks {
				out = append(out, t)
			}
			return out
		},
		CommitInterval:  a.cfg.CommitInterval,
		TransactionalID: a.transactionalID(), Group: a.cfg.AppID,
		AbortTimeout: a.cfg.AbortTimeout, LeaveNow: a.leaveNow, TxnMember: &a.txnMember,
		Rewinding:    func() bool { return a.shell != nil && a.shell.core.Rewind() != instance.RewindNone },
		OnCommitWork: a.cfg.OnCommitWork,
	}
	if a.exactlyOnce() {
		return commit.NewTransactional(env)
	}
	return commit.NewAtLeastOnce(env)
}

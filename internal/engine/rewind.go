package engine

// Exactly-once's way back after an aborted transaction: the loop rolls
// the active tasks back to the last commit (rollBack); off the loop, their
// stores catch up with what their changelogs hold and their input rewinds
// (startRewind, package rewind); the instance core says what waits.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/instance"
	"github.com/baton-streams/baton/internal/rewind"
)

// rollBack forgets what active tasks did since the last commit, once
// its transaction aborted: their pending store writes and processed
// offsets, and records waiting for them; the loop then rewinds their
// input (startRewind). The stores first get what committed before, so
// that the rollback reads their checkpoints (rare: an abort).
func (s *shell) rollBack() {
	a := s.a
	s.awaitWrites()
	for _, t := range a.tasks {
		if !t.Active {
			continue
		}
		// Where the task was: what its rewind and catch-up must undo
		// or take over (the log of a rare path, for its diagnosis).
		var where []any
		for topic, eo := range t.Offsets {
			where = append(where, "processed_to_"+topic, eo.Offset)
		}
		for _, s := range t.Stores {
			s.ClearPending()
			if acked := s.Acked.Load(); acked > s.Checkpoint && !s.Source {
				s.InDoubt = max(s.InDoubt, acked)
			}
			where = append(where, "store_"+s.Name, fmt.Sprintf("checkpoint %d, acked %d, in doubt to %d", s.Checkpoint, s.Acked.Load(), s.InDoubt))
			s.Acked.Store(s.Checkpoint)
		}
		a.log.Info("rolled back", append([]any{"task", t.ID}, where...)...)
		clear(t.Offsets)
		delete(a.backlog, t.ID)
	}
	s.step(instance.RolledBack{}) // the core has the input rewound
}

// startRewind sets the input of the active tasks back to the last commit
// off the loop (rewind.Input); the result comes back on rewound. The rewind
// has a context of its own so that stopRewind can end it.
func (s *shell) startRewind() {
	a := s.a
	ctx, cancel := context.WithCancel(a.runCtx)
	done := make(chan struct{})
	rewound, tasks := a.ch.rewound, s.activeTasks()
	cfg := &rewind.Config{Group: a.group, Admin: a.admin, GroupID: a.cfg.AppID, Log: a.log, OnCatchUp: a.cfg.OnCatchUp,
		ReaderOpts: append(append([]kgo.Opt{kgo.SeedBrokers(a.cfg.Brokers...)}, a.cfg.KgoOpts...), a.restoreClientOpts()...)}
	s.stopRewinding = func() {
		cancel()
		<-done
	}
	go func() {
		defer close(done)
		defer cancel()
		rewound <- cfg.Input(ctx, tasks) // buffered: one rewind at a time
	}()
}

// stopRewind ends a rewind still running and waits for it, before the
// stores it writes close.
func (s *shell) stopRewind() {
	if s.stopRewinding != nil {
		s.stopRewinding()
		s.stopRewinding = nil
	}
}

// rewoundDone: the input is back at the last commit (or the rewind failed
// and is tried again after the next poll). Rebalances may go on.
func (s *shell) rewoundDone(err error) {
	s.stopRewinding = nil
	var why string
	if err != nil {
		s.a.log.Warn("rewinding input; trying again", "err", err)
		why = err.Error()
	}
	s.step(instance.Rewound{Err: why})
}

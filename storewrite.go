package baton

import (
	"context"
	"fmt"

	"github.com/baton-streams/baton/instance"
	"github.com/baton-streams/baton/internal/taskstore"
	"github.com/baton-streams/baton/internal/work"
	"github.com/baton-streams/baton/state"
)

// maxWritesBehind is how many commits' store writes may be under way
// before processing waits for them: what is processed but not yet in the
// stores stays in memory (the sealed writes) until written.
const maxWritesBehind = 2

// commitWrite is the store writes a finished commit made durable, written
// off the loop so that the loop never waits for the disk. Every store
// write off the loop (these and restored chunks, applyJob) runs after the
// one started before it, so a store gets its writes in order. Until the
// loop takes the job back (written), its writes stay in their stores'
// sealed lists, where processing reads them as before; closing a store
// waits for the writes started before (closeTask).
type commitWrite struct {
	// cd is the core's CommitDone, stepped once the writes are done.
	cd    instance.CommitDone
	parts []writePart // read only, by both sides
	err   error       // the writing goroutine's, until done is closed
	done  chan struct{}
	// settled: the loop took the written parts out of the stores'
	// sealed lists (settleWrite).
	settled bool
}

// writePart is one store's share of a commitWrite: sealed writes handed
// out in order, and the checkpoint the store has once they are written.
type writePart struct {
	t       *work.Task
	st      *taskstore.Store
	entries []taskstore.Sealed
	cp      int64
}

func newCommitWrite(seq int, err error) *commitWrite {
	w := &commitWrite{cd: instance.CommitDone{Seq: seq, Checkpoints: map[string]map[string]int64{}}, done: make(chan struct{})}
	if err != nil {
		w.cd.Err = err.Error()
	}
	return w
}

// take hands the sealed writes of t's store st that upTo accepts, oldest
// first and not handed to another job yet, to w.
func (w *commitWrite) take(t *work.Task, st *taskstore.Store, upTo func(taskstore.Sealed) bool) {
	p := writePart{t: t, st: st, cp: st.Checkpoint}
	for st.Writing < len(st.Sealed) && upTo(st.Sealed[st.Writing]) {
		e := st.Sealed[st.Writing]
		p.entries = append(p.entries, e)
		p.cp = max(p.cp, e.Checkpoint())
		st.Writing++
	}
	if len(p.entries) == 0 {
		return
	}
	w.parts = append(w.parts, p)
	if w.cd.Checkpoints[t.ID] == nil {
		w.cd.Checkpoints[t.ID] = map[string]int64{}
	}
	w.cd.Checkpoints[t.ID][st.Name] = p.cp
}

// run writes each store's part in one batch, oldest writes first, with its
// checkpoint, stopping at the first failure.
func (w *commitWrite) run() {
	defer close(w.done)
	var b state.Batch
	for _, p := range w.parts {
		if err := taskstore.WriteSealed(p.st.State, &b, p.entries, p.cp); err != nil {
			w.err = fmt.Errorf("baton: task %s store %s: applying at changelog offset %d: %w", p.t.ID, p.st.Name, p.cp, err)
			return
		}
	}
}

// chainWrite makes done's job the last store write job started off the
// loop (a commit's, commitWrite, or a restored chunk's, applyJob) and
// returns the done of the one before it, which the new job waits for.
func (s *shell) chainWrite(done <-chan struct{}) (prev <-chan struct{}) {
	prev, s.writeTail = s.writeTail, done
	return prev
}

// startWrite writes a commit's stores off the loop; written takes the
// job back.
func (s *shell) startWrite(w *commitWrite) {
	a := s.a
	prev := s.chainWrite(w.done)
	s.writing = append(s.writing, w)
	a.oneShot(func(_ context.Context, ch loopChans) {
		if prev != nil {
			<-prev
		}
		if a.cfg.onCommitWrite != nil {
			a.cfg.onCommitWrite()
		}
		w.run()
		select {
		case ch.written <- w:
		case <-ch.done:
		}
	})
}

// written takes a commit's written stores back and tells the core the
// commit is done.
func (s *shell) written(w *commitWrite) {
	s.settleWrite(w)
	if len(s.writing) > 0 && s.writing[0] == w {
		s.writing = s.writing[1:]
	}
	if w.err != nil {
		s.a.fail(w.err)
		return
	}
	if w.cd.Seq > 0 {
		s.step(w.cd)
	}
	// Processing may have waited for the writes.
	s.dispatch()
	s.pollIfCaughtUp()
}

// settleWrite takes a written job's writes out of the sealed lists of
// the stores still open for their tasks, and moves their checkpoints.
// Workers read those lists: the loop changes them only between turns.
func (s *shell) settleWrite(w *commitWrite) {
	if w.settled || w.err != nil {
		return
	}
	w.settled = true
	for _, p := range w.parts {
		if s.a.tasks[p.t.ID] != p.t || p.t.Stores[p.st.Name] != p.st {
			continue // closed since
		}
		n := len(p.entries)
		p.st.Sealed = p.st.Sealed[n:]
		p.st.Writing -= n
		p.st.Checkpoint = max(p.st.Checkpoint, p.cp)
	}
}

// awaitWrites waits for every commit's store writes under way and takes
// them in (the core hears of them when their messages arrive): before
// the rewind, which reads the stores' checkpoints and writes the stores.
func (s *shell) awaitWrites() {
	for _, w := range s.writing {
		<-w.done
		s.settleWrite(w)
	}
}

// held reports whether processing must wait: a transaction commits or
// commits fall behind (committer.exclusive), the input rewinds, or
// commits' store writes fall behind.
func (s *shell) held() bool {
	return s.a.commit.exclusive() || s.rewinding || len(s.writing) > maxWritesBehind
}

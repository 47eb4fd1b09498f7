package engine

import (
	"context"

	"github.com/baton-streams/baton/internal/commit"
	"github.com/baton-streams/baton/internal/taskstore"
	"github.com/baton-streams/baton/internal/work"
)

// maxWritesBehind is how many commits' store writes may be under way
// before processing waits for them: what is processed but not yet in the
// stores stays in memory (the sealed writes) until written.
const maxWritesBehind = 2

// chainWrite makes done's job the last store write job started off the
// loop (a commit's, commit.Write, or a restored chunk's, applyJob) and
// returns the done of the one before it, which the new job waits for.
func (s *shell) chainWrite(done <-chan struct{}) (prev <-chan struct{}) {
	prev, s.writeTail = s.writeTail, done
	return prev
}

// startWrite writes a commit's stores off the loop; written takes the
// job back.
func (s *shell) startWrite(w *commit.Write) {
	a := s.a
	prev := s.chainWrite(w.Done)
	s.writing = append(s.writing, w)
	a.oneShot(func(_ context.Context, ch loopChans) {
		if prev != nil {
			<-prev
		}
		if a.cfg.OnCommitWrite != nil {
			a.cfg.OnCommitWrite()
		}
		w.Run()
		select {
		case ch.written <- w:
		case <-ch.done:
		}
	})
}

// written takes a commit's written stores back and tells the core the
// commit is done.
func (s *shell) written(w *commit.Write) {
	s.settleWrite(w)
	if len(s.writing) > 0 && s.writing[0] == w {
		s.writing = s.writing[1:]
	}
	if w.Err != nil {
		s.a.fail(w.Err)
		return
	}
	if w.CD.Seq > 0 {
		s.step(w.CD)
	}
	// Processing may have waited for the writes.
	s.dispatch()
	s.pollIfCaughtUp()
}

// settleWrite takes a written job's writes out of the sealed lists of
// the stores still open for their tasks, and moves their checkpoints.
func (s *shell) settleWrite(w *commit.Write) {
	w.Settle(func(t *work.Task, st *taskstore.Store) bool {
		return s.a.tasks[t.ID] == t && t.Stores[st.Name] == st
	})
}

// awaitWrites waits for every commit's store writes under way and takes
// them in (the core hears of them when their messages arrive): before
// the rewind, which reads the stores' checkpoints and writes the stores.
func (s *shell) awaitWrites() {
	for _, w := range s.writing {
		<-w.Done
		s.settleWrite(w)
	}
}

// held reports whether processing must wait: a transaction commits or
// commits fall behind (commit.Committer.Exclusive), the input rewinds, or
// commits' store writes fall behind.
func (s *shell) held() bool {
	return s.a.commit.Exclusive() || s.rewinding() || len(s.writing) > maxWritesBehind
}

package commit

import (
	"fmt"

	"github.com/baton-streams/baton/instance"
	"github.com/baton-streams/baton/internal/taskstore"
	"github.com/baton-streams/baton/internal/work"
	"github.com/baton-streams/baton/state"
)

// Write is the store writes a finished commit made durable, written off
// the loop so that the loop never waits for the disk: the loop starts Run
// on a goroutine of its own and, once Done is closed, takes the job back
// (Settle). Every store write off the loop runs after the one started
// before it, so a store gets its writes in order. Until the loop settles
// the job, its writes stay in their stores' sealed lists, where
// processing reads them as before.
type Write struct {
	// CD is the core's CommitDone, stepped once the writes are done.
	CD instance.CommitDone
	// Err is the writing goroutine's, read once Done is closed.
	Err error
	// Done is closed when Run returns.
	Done chan struct{}

	parts []writePart // read only, by both sides
	// settled: the loop took the written parts out of the stores'
	// sealed lists (Settle).
	settled bool
}

// writePart is one store's share of a Write: sealed writes handed
// out in order, and the checkpoint the store has once they are written.
type writePart struct {
	t       *work.Task
	st      *taskstore.Store
	entries []taskstore.Sealed
	cp      int64
}

func newWrite(seq int, err error) *Write {
	w := &Write{CD: instance.CommitDone{Seq: seq, Checkpoints: map[string]map[string]int64{}}, Done: make(chan struct{})}
	if err != nil {
		w.CD.Err = err.Error()
	}
	return w
}

// take hands the sealed writes of t's store st that upTo accepts, oldest
// first and not handed to another job yet, to w.
func (w *Write) take(t *work.Task, st *taskstore.Store, upTo func(taskstore.Sealed) bool) {
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
	if w.CD.Checkpoints[t.ID] == nil {
		w.CD.Checkpoints[t.ID] = map[string]int64{}
	}
	w.CD.Checkpoints[t.ID][st.Name] = p.cp
}

// Run writes each store's part in one batch, oldest writes first, with its
// checkpoint, stopping at the first failure.
func (w *Write) Run() {
	defer close(w.Done)
	var b state.Batch
	for _, p := range w.parts {
		if err := taskstore.WriteSealed(p.st.State, &b, p.entries, p.cp); err != nil {
			w.Err = fmt.Errorf("baton: task %s store %s: applying at changelog offset %d: %w", p.t.ID, p.st.Name, p.cp, err)
			return
		}
	}
}

// Settle takes a written job's writes out of the sealed lists of the
// stores still open for their tasks (open says which), and moves their
// checkpoints, once. Workers read those lists: the loop settles only
// between turns.
func (w *Write) Settle(open func(*work.Task, *taskstore.Store) bool) {
	if w.settled || w.Err != nil {
		return
	}
	w.settled = true
	for _, p := range w.parts {
		if !open(p.t, p.st) {
			continue // closed since
		}
		n := len(p.entries)
		p.st.Sealed = p.st.Sealed[n:]
		p.st.Writing -= n
		p.st.Checkpoint = max(p.st.Checkpoint, p.cp)
	}
}

package engine

// The loop's side of restoring: standbys, learners and restoring actives
// read their changelogs through the restorer (internal/restore), and the
// loop hands each chunk to a write job off the loop, takes it back
// written, and reports the stores' progress to the core.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/instance"
	"github.com/baton-streams/baton/internal/govern"
	"github.com/baton-streams/baton/internal/restore"
	"github.com/baton-streams/baton/internal/taskstore"
	"github.com/baton-streams/baton/internal/topics"
	"github.com/baton-streams/baton/internal/work"
	"github.com/baton-streams/baton/lifecycle"
	"github.com/baton-streams/baton/state"
	"github.com/baton-streams/baton/topology"
)

func (s *shell) startRestore(t *work.Task, cps map[string]int64) {
	if t == nil || len(t.Stores) == 0 {
		return
	}
	for name, st := range t.Stores {
		s.sessions++
		st.Session = s.sessions
		st.Parked = false
		s.restorer.Start(topics.Partition{Topic: st.Changelog, Part: t.Part}, kgo.NewOffset().At(cps[name]), st.Session)
	}
	t.Reading = true
}

// limits takes the restore limits of stores whose changelog is an input
// topic from ends read (their group's committed offsets), and starts again
// the restores that stopped at the old limit.
func (s *shell) limits(e instance.Ends) {
	for k, end := range e.Ends {
		t := s.a.tasks[k.Task]
		if t == nil {
			continue
		}
		st := t.Stores[k.Store]
		if st == nil || !st.Source {
			continue
		}
		if st.SetLimit(end, t.Reading) {
			s.sessions++
			st.Session = s.sessions
			s.restorer.Start(topics.Partition{Topic: st.Changelog, Part: t.Part}, kgo.NewOffset().At(st.Checkpoint), st.Session)
		}
	}
}

func (s *shell) stopRestore(t *work.Task) {
	if t == nil || !t.Reading {
		return
	}
	for _, st := range t.Stores {
		s.restorer.Stop(topics.Partition{Topic: st.Changelog, Part: t.Part})
		st.Session = 0
	}
	t.Reading = false
}

// restored takes a chunk of changelog records for the stores of the tasks
// reading them. Records of a session that has since stopped are dropped;
// the rest are written off the loop, by one goroutine at a time (apply),
// and the loop takes no other chunk until that write is done (applied).
func (s *shell) restored(c restore.Chunk) {
	a := s.a
	job := &applyJob{done: make(chan struct{}), started: time.Now(), warm: true}
	var rebuilt []instance.Progress
	for _, p := range c {
		ref, ok := a.byChangelog[p.TP.Topic]
		if !ok {
			continue
		}
		id := topology.TaskID(ref.sub, p.TP.Part)
		t, ok := a.tasks[id]
		if !ok || !t.Reading {
			continue
		}
		st := t.Stores[ref.name]
		if st == nil || st.Session != p.Session {
			continue
		}
		if errors.Is(p.Err, kerr.OffsetOutOfRange) {
			if !s.rebuild(t, st, p.TP, p.Err) {
				return
			}
			rebuilt = append(rebuilt, instance.Progress{Task: id, Store: st.Name, Checkpoint: st.Checkpoint, End: -1})
			continue
		}
		recs, end := p.Recs, p.HWM
		if st.Source {
			recs, end = s.upToLimit(t, st, p)
		}
		job.parts = append(job.parts, applyPart{t: t, st: st, session: st.Session, from: st.Checkpoint, recs: recs, end: end})
		job.warm = job.warm && s.core.Role(id).Role != lifecycle.Active
	}
	for _, p := range rebuilt {
		s.step(p)
	}
	if len(job.parts) > 0 {
		s.applying = job
		prev := s.chainWrite(job.done)
		a.oneShot(func(_ context.Context, ch loopChans) {
			if prev != nil {
				<-prev
			}
			if a.cfg.OnRestoreWrite != nil {
				a.cfg.OnRestoreWrite()
			}
			job.run(ch)
		})
	}
}

// applyJob is the writes of one restored chunk, carried out off the loop.
// While it runs, its stores are written by it alone: the loop takes no
// other chunk, closes none of them and starts none of their tasks'
// processors before it is done (awaitApply).
type applyJob struct {
	parts []applyPart // read only, by both sides
	// next is each part's checkpoint after the write, and err the first
	// failure: the writing goroutine's until done is closed.
	next    []int64
	err     error
	done    chan struct{} // closed once every write is done
	settled bool          // the loop took the new checkpoints in (settle)
	// started is when the loop handed the job over; warm says every part
	// is a standby's or a learner's (govern paces those).
	started time.Time
	warm    bool
}

type applyPart struct {
	t       *work.Task
	st      *taskstore.Store
	session uint64
	from    int64 // the store's checkpoint when the chunk was taken
	recs    []*kgo.Record
	end     int64 // the end to report with the progress
}

// run writes every part, stopping at the first failure, and hands the job
// back to the loop that started it.
func (j *applyJob) run(ch loopChans) {
	defer close(j.done)
	b := restoreBatches.Get().(*state.Batch)
	defer restoreBatches.Put(b)
	j.next = make([]int64, len(j.parts))
	for i, p := range j.parts {
		j.next[i] = p.from
	}
	for i, p := range j.parts {
		next, err := taskstore.ApplyChangelog(p.st.State, b, p.from, p.recs)
		if err != nil {
			j.err = fmt.Errorf("baton: task %s store %s: restoring: %w", p.t.ID, p.st.Name, err)
			break
		}
		j.next[i] = next
	}
	ch.applied <- j // buffered: one job at a time
}

// restoreBatches keeps the batches restored chunks are built in, so that
// each chunk's write reuses the memory of the ones before it.
var restoreBatches = sync.Pool{New: func() any { return new(state.Batch) }}

// has reports whether the job writes a store of task id.
func (j *applyJob) has(id string) bool {
	for i := range j.parts {
		if j.parts[i].t.ID == id {
			return true
		}
	}
	return false
}

// awaitApply waits, when the chunk being written holds records of task
// id (or of any task, when id is ""), for the write to end, and takes its
// checkpoints in. The loop waits at most one chunk's write, and only
// before what must not overlap it: a processor that writes the same
// store, or the rewind.
func (s *shell) awaitApply(id string) {
	j := s.applying
	if j == nil || id != "" && !j.has(id) {
		return
	}
	select {
	case <-j.done:
	default:
		s.a.metrics.RestoreWriteWaits.Inc()
		<-j.done
	}
	s.settle(j)
}

// settle takes a written chunk's new checkpoints into its stores (only
// forward: a store whose task started processing since may have moved
// further) and counts what was restored.
func (s *shell) settle(j *applyJob) {
	if j.settled {
		return
	}
	j.settled = true
	a := s.a
	for i, p := range j.parts {
		n := p.st.Advance(j.next[i])
		if n <= 0 {
			continue
		}
		a.metrics.Restored.WithLabelValues(p.t.ID).Add(float64(n))
		a.restored.Add(n)
		if s.core.Role(p.t.ID).Role == lifecycle.Active {
			p.t.Replayed += n
			p.t.Restored.Add(n)
		}
	}
}

// applied takes a written chunk back: its checkpoints, and the progress of
// every store still reading the session the chunk was read for.
func (s *shell) applied(j *applyJob) {
	if s.applying == j {
		s.applying = nil
	}
	if j.err != nil {
		s.a.fail(j.err)
		return
	}
	s.settle(j)
	if j.warm {
		pol := s.a.cfg.RestorePolicy
		pol.Caught = s.a.cfg.AcceptableLag
		if d := pol.Pause(govern.Process, &s.catchup, time.Now(), time.Since(j.started), s.warmLags(j)); d > 0 {
			s.paced = time.After(d)
			s.a.metrics.RestoreYielded.Add(d.Seconds())
			s.a.yielded.Add(int64(d))
		}
	}
	var progress []instance.Progress
	for _, p := range j.parts {
		if t := s.a.tasks[p.t.ID]; t != p.t || !t.Reading || p.st.Session != p.session {
			continue
		}
		progress = append(progress, instance.Progress{Task: p.t.ID, Store: p.st.Name, Checkpoint: p.st.Checkpoint, End: p.end})
	}
	for _, p := range progress {
		s.step(p)
	}
}

// warmLags takes the lags a written chunk of warm copies left into
// s.warmLag and returns it, without the stores no longer restoring as
// warm copies.
func (s *shell) warmLags(j *applyJob) map[string]int64 {
	if s.warmLag == nil {
		s.warmLag = map[string]int64{}
	}
	for _, p := range j.parts {
		s.warmLag[p.t.ID+"/"+p.st.Name] = max(p.end-p.st.Checkpoint, 0)
	}
	for k := range s.warmLag {
		id, name, _ := strings.Cut(k, "/")
		t := s.a.tasks[id]
		if t == nil || !t.Reading || t.Stores[name] == nil || s.core.Role(id).Role == lifecycle.Active {
			delete(s.warmLag, k)
		}
	}
	return s.warmLag
}

// activeRestoring reports whether an active task here reads its
// changelogs: it waits for its restore, which must not be paced.
func (s *shell) activeRestoring() bool {
	for id, t := range s.a.tasks {
		if t.Reading && s.core.Role(id).Role == lifecycle.Active {
			return true
		}
	}
	return false
}

// upToLimit returns the records of p that a store whose changelog is an
// input topic may take and the end to report (taskstore.Store.Limited).
// Past the limit, it stops the store's restore; limits starts it again.
func (s *shell) upToLimit(t *work.Task, st *taskstore.Store, p restore.Part) ([]*kgo.Record, int64) {
	take, end, park := st.Limited(p.Recs)
	if park {
		s.park(t, st)
	}
	return take, end
}

func (s *shell) park(t *work.Task, st *taskstore.Store) {
	s.restorer.Stop(topics.Partition{Topic: st.Changelog, Part: t.Part})
	st.Session, st.Parked = 0, true
}

// rebuild wipes a store whose changelog no longer holds the records it
// was to read next (OffsetOutOfRange: retention or DeleteRecords passed
// its checkpoint while it restored) and reads the changelog again from
// its start. Going on from the start without the wipe would keep every
// value the lost records changed. It runs on the loop, which owns the
// store; it is rare. It returns false if the App failed.
func (s *shell) rebuild(t *work.Task, st *taskstore.Store, tp topics.Partition, cause error) bool {
	a := s.a
	a.log.Warn("changelog records the store lacks are gone; wiping it and restoring from the changelog's start",
		"task", t.ID, "store", st.Name, "checkpoint", st.Checkpoint, "err", cause)
	if err := st.State.Wipe(); err != nil {
		a.fail(fmt.Errorf("baton: task %s store %s: wiping after its changelog was truncated: %w", t.ID, st.Name, err))
		return false
	}
	st.Checkpoint = 0
	st.Acked.Store(0)
	s.sessions++
	st.Session = s.sessions
	s.restorer.Start(tp, kgo.NewOffset().AtStart(), st.Session)
	a.emit(Event{Kind: EventStoreRebuilt, Task: t.ID, Detail: st.Name})
	return true
}

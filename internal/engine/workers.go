package engine

import (
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/work"
	"github.com/baton-streams/baton/topology"
)

// startWorkers starts the membership's worker goroutines (package work).
func (a *App) startWorkers() {
	a.workers = make([]*work.Worker, a.cfg.Workers)
	for i := range a.workers {
		w := work.NewWorker(i, a.metrics.WorkerBusy.WithLabelValues(strconv.Itoa(i)))
		a.workers[i] = w
		a.workersRunning.Go(w.Run)
	}
}

// stopWorkers ends the workers and waits for them: a worker finishes the
// turn it is in (bounded by the turn's deadline) and takes no other.
func (a *App) stopWorkers() {
	for _, w := range a.workers {
		close(w.In)
	}
	a.workersRunning.Wait()
}

// The shell is the work.Host of its membership's tasks: their records
// go to its committer, and a failed produce fails the App.

func (s *shell) Produce(r *kgo.Record, promise func(*kgo.Record, error)) {
	s.a.produce(r, promise)
}

func (s *shell) Fail(err error) { s.a.fail(err) }

func (s *shell) PartitionsOf(topic string) (int32, error) { return s.a.partitionsOf(topic) }

func (s *shell) GlobalStore(name string) topology.Store { return s.a.globals.Store(name) }

func (s *shell) BadRecord(t *work.Task, r *kgo.Record, err error) error {
	return s.a.badRecord(t, r, err)
}

func (s *shell) Processed(t *work.Task, n int) {
	s.a.commit.Processed(n)
	s.a.metrics.Processed.WithLabelValues(t.ID).Add(float64(n))
}

func (s *shell) FirstRecord(t *work.Task, r *kgo.Record) {
	s.a.emit(Event{Kind: EventFirstRecord, Task: t.ID, Record: r.Timestamp})
	s.a.metrics.Handover.Observe(time.Since(t.AssignedAt).Seconds())
}

func (s *shell) LateRecord(t *work.Task, store string) {
	s.a.metrics.Late.WithLabelValues(t.ID, store).Inc()
}

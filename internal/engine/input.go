package engine

import (
	"cmp"
	"context"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/autoscale"
	"github.com/baton-streams/baton/internal/measure"
	"github.com/baton-streams/baton/internal/topics"
	"github.com/baton-streams/baton/internal/work"
)

// inputRead is one read of the offsets of every partition of the input
// topics, made off the loop.
type inputRead struct {
	at     time.Time
	ends   map[topics.Partition]int64
	starts map[topics.Partition]int64
	// committed is the group's committed offsets, read only when the
	// instance led the group as the read began; nil otherwise.
	committed map[topics.Partition]int64
	err       error
}

// inputState is what the loop keeps between reads of the input. Owned by
// the loop.
type inputState struct {
	reading bool // a read is under way
	reads   int  // reads taken
	rates   *measure.Rates[topics.Partition]
	busy    measure.Meter // the workers' records against their busy seconds
	restore measure.Meter // the records restored against the clock's seconds
	// rec exists while this instance leads; prevLag is the group's lag
	// at its previous observation.
	rec     *autoscale.Recommender
	prevLag int64
	hasPrev bool
	// positions are the active tasks' positions (task id, then topic) as
	// the read under way began: its end offsets are compared with them,
	// not with where the tasks are once the answer comes back (by then
	// they may have processed past the ends read, and a task behind all
	// the time would show no lag).
	positions map[string]map[string]int64
}

func newInputState() inputState {
	return inputState{rates: measure.NewRates[topics.Partition](measure.Window), busy: measure.Meter{Window: measure.Window},
		restore: measure.Meter{Window: measure.Window}}
}

// leads reports whether this instance computed the plan of the group's
// current generation.
func (a *App) leads() bool {
	_, gen := a.group.GroupMetadata()
	return gen > 0 && a.ledGen.Load() == gen
}

// readInput starts a read of the input partitions' offsets unless one is
// under way; the answer comes back to the loop as an inputRead.
func (s *shell) readInput() {
	if s.input.reading {
		return
	}
	s.input.reading = true
	s.input.positions = map[string]map[string]int64{}
	for _, t := range s.a.activeTasks() {
		at := map[string]int64{}
		for topic, o := range t.Offsets {
			at[topic] = o.Offset
		}
		s.input.positions[t.ID] = at
	}
	s.a.readInputAsync(s.a.leads())
}

// readInputAsync reads the start and end offsets of every partition of
// the input topics, and with committed the group's committed offsets, off
// the loop.
func (a *App) readInputAsync(committed bool) {
	sources := a.sourceTopics()
	a.oneShot(func(ctx context.Context, ch loopChans) {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		r := inputRead{ends: map[topics.Partition]int64{}, starts: map[topics.Partition]int64{}}
		collect := func(into map[topics.Partition]int64) func(kadm.ListedOffset) {
			return func(o kadm.ListedOffset) {
				if o.Err == nil {
					into[topics.Partition{Topic: o.Topic, Part: o.Partition}] = o.Offset
				}
			}
		}
		ends, err := a.admin.ListEndOffsets(ctx, sources...)
		if err == nil {
			ends.Each(collect(r.ends))
			var starts kadm.ListedOffsets
			starts, err = a.admin.ListStartOffsets(ctx, sources...)
			starts.Each(collect(r.starts))
		}
		if err == nil && committed {
			var resp kadm.OffsetResponses
			resp, err = a.admin.FetchOffsets(ctx, a.cfg.AppID)
			r.committed = map[topics.Partition]int64{}
			resp.Each(func(o kadm.OffsetResponse) {
				if o.Err == nil && o.At >= 0 {
					r.committed[topics.Partition{Topic: o.Topic, Part: o.Partition}] = o.At
				}
			})
		}
		r.at, r.err = time.Now(), err
		select {
		case ch.inputs <- r:
		case <-ch.done:
		}
	})
}

// inputRead takes a read of the input: it updates the input rates, the
// workers' rate, each active task's input lag and, on the leader, the
// recommendation; and publishes them for Status and the metrics.
func (s *shell) inputRead(r inputRead) {
	a := s.a
	s.input.reading = false
	if r.err != nil {
		if a.runCtx.Err() == nil {
			a.log.Debug("reading the input's offsets; input lag and rates unchanged", "err", r.err)
		}
		if !a.leads() {
			s.withdraw()
		}
		return
	}
	s.input.rates.Observe(r.at, r.ends)
	s.input.reads++

	var records, busy int64
	for _, w := range a.workers {
		records += w.Records.Load()
		busy += w.Busy.Load()
	}
	s.input.busy.Add(measure.Reading{At: r.at, Count: float64(records), Base: time.Duration(busy).Seconds()})
	workerRate := s.input.busy.Ratio()
	a.workerRate.Store(math.Float64bits(workerRate))
	a.metrics.WorkerRate.Set(workerRate)
	s.observeLoads(r.at)
	s.input.restore.Add(measure.Reading{At: r.at, Count: float64(a.restored.Load()), Base: float64(r.at.UnixNano()) / 1e9})
	a.restoreRate.Store(math.Float64bits(s.input.restore.Ratio()))

	// The loop owns the tasks' positions here: workers write them only
	// while dispatch waits for them.
	committed := a.group.CommittedOffsets()
	lags := map[string]InputLag{}
	a.metrics.InputLagRecords.Reset() // series of tasks gone from here disappear
	a.metrics.InputLagSeconds.Reset()
	a.metrics.InputRate.Reset()
	for _, t := range a.activeTasks() {
		ends, positions := map[string]int64{}, map[string]int64{}
		var rate float64
		for _, topic := range t.Sub.Sources {
			tp := topics.Partition{Topic: topic, Part: t.Part}
			end, ok := r.ends[tp]
			if !ok {
				continue
			}
			ends[topic] = end
			if at, ok := s.input.positions[t.ID][topic]; ok {
				positions[topic] = at
			} else {
				positions[topic] = position(t, tp, committed, r.starts[tp])
			}
			rate += s.input.rates.Rate(tp)
		}
		if len(ends) == 0 {
			continue
		}
		l := InputLag{Records: measure.InputLag(ends, positions), Rate: rate}
		l.Seconds = measure.SecondsBehind(l.Records, t.LastRecord, t.First, t.AssignedAt, r.at)
		lags[t.ID] = l
		a.metrics.InputLagRecords.WithLabelValues(t.ID).Set(float64(l.Records))
		a.metrics.InputLagSeconds.WithLabelValues(t.ID).Set(l.Seconds)
		a.metrics.InputRate.WithLabelValues(t.ID).Set(l.Rate)
	}
	a.inputs.Store(&lags)
	s.recommend(r, workerRate)
}

// position is the next offset task t processes in partition tp: after
// the last record it processed, else the group's committed offset, else
// the partition's start (where a task with nothing committed begins).
func position(t *work.Task, tp topics.Partition, committed map[string]map[int32]kgo.EpochOffset, start int64) int64 {
	if o, ok := t.Offsets[tp.Topic]; ok {
		return o.Offset
	}
	if o, ok := committed[tp.Topic][tp.Part]; ok && o.Offset >= 0 {
		return o.Offset
	}
	return start
}

// recommend, on the leader, observes the whole group and publishes the
// autoscale rule's recommendation; elsewhere it withdraws it. The leader
// alone knows the members; the input rate and lag it reads from the
// cluster for every input partition; the workers' rate is its own.
func (s *shell) recommend(r inputRead, workerRate float64) {
	a := s.a
	plan := a.lastPlan.Load()
	if r.committed == nil || plan == nil || !a.leads() {
		s.withdraw()
		return
	}
	if s.input.reads < 2 {
		return // the input rates need two reads: not measured yet
	}
	if s.input.rec == nil {
		rec, err := autoscale.New(a.cfg.Autoscale)
		if err != nil { // New validated the config; kept for safety
			a.log.Error("autoscale", "err", err)
			return
		}
		s.input.rec = rec
	}
	obs := observe(r, s.input.rates, plan, a.cfg.Workers, workerRate)
	obs.LagDraining = s.input.hasPrev && obs.Lag < s.input.prevLag
	s.input.prevLag, s.input.hasPrev = obs.Lag, true
	rec, err := s.input.rec.Recommend(obs)
	if err != nil {
		a.log.Warn("autoscale: observation rejected; the rule starts over", "err", err)
		s.input.rec, s.input.hasPrev = nil, false
		return
	}
	a.desired.Store(&AutoscaleStatus{DesiredInstances: rec.Instances, Needed: rec.Needed, Reason: rec.Reason, Time: obs.Now,
		Instances: obs.Instances, WorkersPerInstance: obs.WorkersPerInstance, InputRate: obs.InputRate, WorkerRate: obs.WorkerRate,
		Lag: obs.Lag, LagDraining: obs.LagDraining, Moves: obs.Moves})
	a.metrics.Desired.WithLabelValues().Set(float64(rec.Instances))
	a.metrics.GroupLag.WithLabelValues().Set(float64(obs.Lag))
	a.metrics.GroupRate.WithLabelValues().Set(obs.InputRate)
}

// withdraw forgets the rule's history and unpublishes the recommendation
// and the group's figures: this instance does not lead.
func (s *shell) withdraw() {
	a := s.a
	s.input.rec, s.input.hasPrev = nil, false
	a.desired.Store(nil)
	a.metrics.Desired.Reset()
	a.metrics.GroupLag.Reset()
	a.metrics.GroupRate.Reset()
}

// observe builds the autoscale observation of the group from a read of
// every input partition (with the group's committed offsets), the input
// rates, the leader's last plan and the workers' rate. LagDraining is
// the caller's.
func observe(r inputRead, rates *measure.Rates[topics.Partition], plan *PlanStatus, workers int, workerRate float64) autoscale.Observation {
	o := autoscale.Observation{Now: r.at, WorkersPerInstance: workers, WorkerRate: workerRate}
	// A draining member is on its way out: the group's size is what stays.
	// Counting it would make the rule's "hold" a request for one more
	// instance than will be left, and an autoscaler would replace it.
	for _, in := range plan.Instances {
		if !in.Leaving {
			o.Instances++
		}
	}
	o.Instances = max(1, o.Instances)
	// In order, so that equal reads give equal sums.
	parts := slices.SortedFunc(maps.Keys(r.ends), func(x, y topics.Partition) int {
		return cmp.Or(cmp.Compare(x.Topic, y.Topic), cmp.Compare(x.Part, y.Part))
	})
	for _, tp := range parts {
		end := r.ends[tp]
		o.InputRate += rates.Rate(tp)
		from, ok := r.committed[tp]
		if !ok {
			from = r.starts[tp]
		}
		o.Lag += max(0, end-from)
	}
	for _, in := range plan.Instances {
		o.Moves += len(in.Learner) + len(in.Revoked)
	}
	return o
}

// inputStatus is the published input lag of task id, if any.
func (a *App) inputStatus(id string) *InputLag {
	if m := a.inputs.Load(); m != nil {
		if l, ok := (*m)[id]; ok {
			return &l
		}
	}
	return nil
}

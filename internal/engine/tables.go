package engine

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/topics"
	"github.com/baton-streams/baton/internal/work"
	"github.com/baton-streams/baton/topology"
)

// A task that reads a table's topic (topology.TableFromTopic) along with
// other topics first brings the table up to date: from its activation
// until it has processed its table partitions up to their end offsets as
// read then, the records of its other topics wait. The end offset may be
// that of a transaction marker, or of a record compaction removed, which
// no record processed reaches: so a table partition is also taken as up
// to date once a fetch of it came back empty and the task has processed
// the records fetched before, or once no record of it has come for
// bootIdle since the ends were read or since its last record. (Fetch
// sessions leave an unchanged partition out of a response, so the empty
// fetch may never come; and a broker may cut a fetch short of a partition
// when the response reaches its size limit, so an empty fetch, or a table
// partition slower than bootIdle, can end the wait early.) Otherwise a stream
// record fetched before the table's records would join a table that does
// not have them yet: at the first start, every record of the stream would
// miss the whole table. After that, the task processes its topics in the
// order they are fetched.

// bootIdle is how long a table partition may go without a record before
// a task stops waiting for it.
const bootIdle = 2 * time.Second

// tableEnds is the answer to a read of a task's table ends.
type tableEnds struct {
	task string
	gen  uint64
	ends map[string]int64 // nil if the read failed
}

// tableTopics returns the topics of t's stores whose changelog is their
// source, if t also reads other topics (a table alone needs no waiting).
func tableTopics(t *work.Task) []string {
	var out []string
	for _, st := range t.Sub.Stores {
		if st.Source {
			out = append(out, st.Changelog)
		}
	}
	if len(out) == len(t.Sub.Sources) {
		return nil
	}
	return out
}

// startTableBoot begins t's bootstrap at its activation.
func (s *shell) startTableBoot(t *work.Task) {
	topics := tableTopics(t)
	if len(topics) == 0 {
		t.Boot = nil
		return
	}
	s.bootGen++
	t.Boot = &work.TableBoot{Gen: s.bootGen, Empty: map[string]bool{}}
	s.readTableEnds(t.ID, t.Part, topics, t.Boot.Gen, 0)
}

// readTableEnds reads, after wait, the ends of a task's table partitions,
// off the loop; the answer comes back as a tableEnds.
func (s *shell) readTableEnds(id string, part int32, topics []string, gen uint64, wait time.Duration) {
	a := s.a
	a.oneShot(func(ctx context.Context, ch loopChans) {
		select {
		case <-time.After(wait):
		case <-ch.done:
			return
		}
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		out := tableEnds{task: id, gen: gen}
		var listed kadm.ListedOffsets
		var err error
		if a.cfg.ExactlyOnce {
			listed, err = a.admin.ListCommittedOffsets(ctx, topics...)
		} else {
			listed, err = a.admin.ListEndOffsets(ctx, topics...)
		}
		if err == nil {
			out.ends = map[string]int64{}
			for _, topic := range topics {
				o, ok := listed.Lookup(topic, part)
				if !ok || o.Err != nil {
					out.ends = nil
					break
				}
				out.ends[topic] = o.Offset
			}
		}
		select {
		case ch.tableEnds <- out:
		case <-ch.done:
		}
	})
}

// tableEndsRead takes a read: a failed one is asked again after a pause.
func (s *shell) tableEndsRead(r tableEnds) {
	t := s.a.tasks[r.task]
	if t == nil || t.Boot == nil || t.Boot.Gen != r.gen {
		return
	}
	if r.ends == nil {
		s.readTableEnds(t.ID, t.Part, tableTopics(t), r.gen, 200*time.Millisecond)
		return
	}
	t.Boot.Ends, t.Boot.Last = r.ends, time.Now()
	s.bootDone(t)
	s.dispatch()
}

// bootDone ends t's bootstrap once its table partitions are up to date
// (work.TableBoot.Ready), and reports whether it has ended.
func (s *shell) bootDone(t *work.Task) bool {
	if t.Boot == nil {
		return true
	}
	committed := s.a.group.CommittedOffsets()
	pos := func(topic string) int64 {
		return position(t, topics.Partition{Topic: topic, Part: t.Part}, committed, 0)
	}
	waiting := func(topic string) bool {
		return slices.ContainsFunc(s.a.backlog[t.ID], func(r *kgo.Record) bool { return r.Topic == topic })
	}
	if !t.Boot.Ready(pos, waiting, time.Now(), bootIdle) {
		return false
	}
	t.Boot = nil
	return true
}

// fetchedEmpty notes, for a task waiting for its tables, a fetch of one
// of its table partitions that came back without records.
func (s *shell) fetchedEmpty(p kgo.FetchTopicPartition) {
	sub, ok := s.a.bySource[p.Topic]
	if !ok || p.Err != nil {
		return
	}
	if t := s.a.tasks[topology.TaskID(sub, p.Partition)]; t != nil && t.Boot != nil {
		t.Boot.Empty[p.Topic] = true
	}
}

// booting reports whether a task waits for its tables.
func (s *shell) booting() bool {
	for _, t := range s.a.tasks {
		if t.Boot != nil {
			return true
		}
	}
	return false
}

// split returns the records of t that may be processed now, and those
// that wait for its tables (in order).
func (s *shell) split(t *work.Task, recs []*kgo.Record) (run, wait []*kgo.Record) {
	if s.bootDone(t) {
		return recs, nil
	}
	return t.Boot.Split(recs, tableTopics(t), time.Now())
}

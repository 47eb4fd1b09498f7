package uncommitted

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/counts"
	"github.com/baton-streams/baton/internal/tick"
	"github.com/baton-streams/baton/topology"
)

// pollEvery is how often Poll reads the offsets.
const pollEvery = 200 * time.Millisecond

// Poller reads, for every task of a wordcount group, the group's committed
// offset on the task's input partition and that partition's end offset:
// the lines topic's partitions for subtopology 0, the repartition topic's
// for subtopology 1. It keeps the readings Poll and Record take as a
// history (what LostWork judges from). Safe for concurrent use.
type Poller struct {
	adm                       *kadm.Client
	group, lines, repartition string

	mu      sync.Mutex
	history []Reading // in time order
}

// NewPoller returns a poller that reads group's committed offsets and the
// end offsets of the lines and repartition topics through adm.
func NewPoller(adm *kadm.Client, group, lines, repartition string) *Poller {
	return &Poller{adm: adm, group: group, lines: lines, repartition: repartition}
}

// ReadOnce reads the offsets once. A repartition topic that does not
// exist yet is no error (no task of subtopology 1 ran: its tasks have no
// end offset in the reading); any other failure is, naming what could
// not be read.
func (p *Poller) ReadOnce(ctx context.Context) (Offsets, error) {
	rd := Offsets{Committed: map[string]int64{}, End: map[string]int64{}}
	committed, err := p.adm.FetchOffsets(ctx, p.group)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		return rd, fmt.Errorf("uncommitted: reading group %s's committed offsets: %w", p.group, err)
	}
	ends, err := p.adm.ListEndOffsets(ctx, p.lines, p.repartition)
	if err == nil {
		ends.Each(func(o kadm.ListedOffset) {
			if o.Err != nil && err == nil && (o.Topic != p.repartition || !errors.Is(o.Err, kerr.UnknownTopicOrPartition)) {
				err = o.Err
			}
		})
	}
	if err != nil {
		return rd, fmt.Errorf("uncommitted: reading the end offsets of %s and %s: %w", p.lines, p.repartition, err)
	}
	sub := map[string]int{p.lines: 0, p.repartition: 1}
	committed.Each(func(o kadm.OffsetResponse) {
		if s, ok := sub[o.Topic]; ok {
			rd.Committed[topology.TaskID(s, o.Partition)] = o.At
		}
	})
	ends.Each(func(o kadm.ListedOffset) {
		if s, ok := sub[o.Topic]; ok && o.Err == nil {
			rd.End[topology.TaskID(s, o.Partition)] = o.Offset
		}
	})
	return rd, nil
}

// Read reads the offsets, trying again every 200 ms for up to a minute
// (a cluster coming back may not answer at once) or until ctx ends; it
// returns the last failure if none succeeded.
func (p *Poller) Read(ctx context.Context) (Offsets, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		rd, err := p.ReadOnce(ctx)
		if err == nil || ctx.Err() != nil {
			return rd, err
		}
		select {
		case <-ctx.Done():
		case <-time.After(pollEvery):
		}
	}
}

// Record reads the offsets (as Read) and adds the reading to the history:
// a reading known to begin after everything seen so far.
func (p *Poller) Record(ctx context.Context) error {
	at := time.Now()
	rd, err := p.Read(ctx)
	if err != nil {
		return err
	}
	p.add(Reading{At: at, Offsets: rd})
	return nil
}

// Poll reads the offsets every 200 ms until ctx ends, into the history.
// A reading that fails (the cluster restarting) is skipped, and one takes
// at most 2 s.
func (p *Poller) Poll(ctx context.Context) {
	_ = tick.Every(ctx, pollEvery, func() error {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		at := time.Now()
		if rd, err := p.ReadOnce(rctx); err == nil {
			p.add(Reading{At: at, Offsets: rd})
		}
		return nil
	})
}

// add puts r into the history in time order (Poll and Record may finish
// out of the order they began in).
func (p *Poller) add(r Reading) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k, _ := slices.BinarySearchFunc(p.history, r.At, func(h Reading, at time.Time) int {
		if h.At.After(at) {
			return 1
		}
		return -1 // equal times keep the order they came in
	})
	p.history = slices.Insert(p.history, k, r)
}

// History returns the readings so far, in time order.
func (p *Poller) History() []Reading {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.history)
}

// ReadLines reads every line topic holds, from its start to its end now,
// and returns each partition's lines with their numbers of words
// (strings.Fields), in offset order: what DuplicateBound weighs a lost
// splitting task's range with. fn, when not nil, is called with every
// record as it is read (a caller that counts the words too reads the
// topic once).
func ReadLines(ctx context.Context, brokers []string, topic string, fn func(rec *kgo.Record, words []string)) (map[int32][]Line, error) {
	lines := map[int32][]Line{}
	err := counts.Scan(ctx, brokers, topic, false, func(rec *kgo.Record) {
		words := strings.Fields(string(rec.Value))
		lines[rec.Partition] = append(lines[rec.Partition], Line{Offset: rec.Offset, Words: int64(len(words))})
		if fn != nil {
			fn(rec, words)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("uncommitted: reading the lines of %s: %w", topic, err)
	}
	for _, ls := range lines {
		slices.SortFunc(ls, func(a, b Line) int { return cmp.Compare(a.Offset, b.Offset) })
	}
	return lines, nil
}

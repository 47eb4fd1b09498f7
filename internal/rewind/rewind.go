// Package rewind brings an exactly-once instance's active tasks back to
// their last commit after an aborted transaction: their stores catch up
// with what their changelogs hold committed beyond the stores'
// checkpoints (a transaction whose outcome was unknown may have
// committed), and their input goes back to the group's committed offsets.
//
// Input runs on a goroutine of its own (the membership's rewind) while
// the loop processes nothing and holds rebalance callbacks back, so the
// tasks' stores and offsets are its to write; it reads through a
// changelog reader of its own and the admin client.
package rewind

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/taskstore"
	"github.com/baton-streams/baton/internal/topics"
	"github.com/baton-streams/baton/internal/work"
)

// Config is what a rewind needs of its membership.
type Config struct {
	Group   *kgo.Client  // the group member, whose input offsets are set
	Admin   *kadm.Client // reads offsets
	GroupID string
	// ReaderOpts are the options of the changelog reader the catch-up
	// makes: the brokers, the user's options and read-committed.
	ReaderOpts []kgo.Opt
	Log        *slog.Logger
	// OnCatchUp, when set (tests), is called before each catch-up write.
	OnCatchUp func(context.Context)
}

// storeOfTask is a store of an active task, as the catch-ups after an
// aborted transaction find it by changelog partition.
type storeOfTask struct {
	t *work.Task
	s *taskstore.Store
}

// catchUpStores applies to the stores of active tasks what their
// changelogs hold, committed, beyond the stores' checkpoints. It runs
// while the loop waits for the rewind: no worker processes and rebalances
// are blocked, so the stores are its to write.
func (a *Config) catchUpStores(ctx context.Context, tasks []*work.Task) error {
	byPart := map[string]map[int32]storeOfTask{}
	var changelogs []string
	for _, t := range tasks {
		for _, s := range t.Stores {
			if s.Source {
				continue // it follows the input's commits: catchUpSources
			}
			if byPart[s.Changelog] == nil {
				byPart[s.Changelog] = map[int32]storeOfTask{}
				changelogs = append(changelogs, s.Changelog)
			}
			byPart[s.Changelog][t.Part] = storeOfTask{t, s}
		}
	}
	if len(changelogs) == 0 {
		return nil
	}
	// The rolled-back transaction's writes end before inDoubt. Its
	// outcome shows in the changelog once the last stable offset passes
	// them: on Apache Kafka the markers are written after EndTxn returns,
	// so until then a committed transaction is not readable yet.
	var ends kadm.ListedOffsets
	for {
		var err error
		ends, err = a.Admin.ListCommittedOffsets(ctx, changelogs...)
		if err != nil {
			return fmt.Errorf("baton: changelog ends to catch up: %w", err)
		}
		pending := ""
		for topic, parts := range byPart {
			for p, c := range parts {
				if o, ok := ends.Lookup(topic, p); c.s.InDoubt > 0 && (!ok || o.Err != nil || o.Offset <= c.s.InDoubt) {
					pending = fmt.Sprintf("%s[%d]", topic, p)
				}
			}
		}
		if pending == "" {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("baton: waiting for the outcome of the rolled-back transaction in %s: %w", pending, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	for _, parts := range byPart {
		for _, c := range parts {
			c.s.InDoubt = 0
		}
	}
	upTo := map[topics.Partition]int64{}
	for topic, parts := range byPart {
		for p := range parts {
			if o, ok := ends.Lookup(topic, p); ok && o.Err == nil {
				upTo[topics.Partition{Topic: topic, Part: p}] = o.Offset
			}
		}
	}
	return a.applyUpTo(ctx, tasks, upTo, "a committed transaction")
}

// catchUpSources brings the stores whose changelog is an input topic (a
// table's) up to the input's committed offsets, set: a transaction with
// an unknown outcome that did commit moved the input past what the
// stores hold.
func (a *Config) catchUpSources(ctx context.Context, tasks []*work.Task, set map[string]map[int32]kgo.EpochOffset) error {
	upTo := map[topics.Partition]int64{}
	for _, t := range tasks {
		for _, s := range t.Stores {
			if eo, ok := set[s.Changelog][t.Part]; ok && s.Source {
				upTo[topics.Partition{Topic: s.Changelog, Part: t.Part}] = eo.Offset
			}
		}
	}
	return a.applyUpTo(ctx, tasks, upTo, "the committed input")
}

// applyUpTo reads, for each store of tasks whose changelog partition is in
// upTo, the changelog from the store's checkpoint to that offset
// (excluded) and applies it. It runs while no worker processes.
func (a *Config) applyUpTo(ctx context.Context, tasks []*work.Task, upTo map[topics.Partition]int64, what string) error {
	byPart := map[string]map[int32]storeOfTask{}
	from := map[string]map[int32]kgo.Offset{}
	behind := map[string]map[int32]int64{}
	for _, t := range tasks {
		for _, s := range t.Stores {
			end, ok := upTo[topics.Partition{Topic: s.Changelog, Part: t.Part}]
			if !ok || end <= s.Checkpoint {
				continue
			}
			if from[s.Changelog] == nil {
				byPart[s.Changelog], from[s.Changelog], behind[s.Changelog] = map[int32]storeOfTask{}, map[int32]kgo.Offset{}, map[int32]int64{}
			}
			byPart[s.Changelog][t.Part] = storeOfTask{t, s}
			from[s.Changelog][t.Part] = kgo.NewOffset().At(s.Checkpoint)
			behind[s.Changelog][t.Part] = end
		}
	}
	if len(from) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.ConsumePartitions(from), kgo.FetchMaxWait(50 * time.Millisecond)}, a.ReaderOpts...)...)
	if err != nil {
		return fmt.Errorf("baton: changelog reader to catch up: %w", err)
	}
	defer cl.Close()
	left := 0
	for _, parts := range behind {
		left += len(parts)
	}
	for left > 0 {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("baton: catching stores up with their changelogs: %w", err)
		}
		var ferr error
		fetches.EachPartition(func(fp kgo.FetchTopicPartition) {
			c, ok := byPart[fp.Topic][fp.Partition]
			end, want := behind[fp.Topic][fp.Partition]
			if !ok || !want || len(fp.Records) == 0 || ferr != nil {
				return
			}
			from := c.s.Checkpoint
			recs := fp.Records
			if i := slices.IndexFunc(recs, func(r *kgo.Record) bool { return r.Offset >= end }); i >= 0 {
				recs = recs[:i]
			}
			data := 0 // the committed records among them; the rest are markers
			for _, r := range recs {
				if r.Offset >= from && !r.Attrs.IsControl() {
					data++
				}
			}
			if a.OnCatchUp != nil {
				a.OnCatchUp(ctx)
			}
			if _, err := c.s.ApplyChangelog(recs); err != nil {
				ferr = fmt.Errorf("baton: task %s store %s: catching up: %w", c.t.ID, c.s.Name, err)
				return
			}
			next := c.s.Checkpoint
			if len(recs) < len(fp.Records) {
				next = end // the records left are past it
			}
			a.Log.Info("store caught up with "+what, "task", c.t.ID, "store", c.s.Name, "from", from, "to", next, "records", data)
			if next >= end {
				delete(behind[fp.Topic], fp.Partition)
				left--
			}
		})
		if ferr != nil {
			return ferr
		}
	}
	return nil
}

// Input sets the input position of every active task back to its
// last committed offset (the start of the partition when it has none). It runs
// while the loop holds rebalances blocked after a poll, as SetOffsets
// requires, and processes nothing.
func (a *Config) Input(ctx context.Context, tasks []*work.Task) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	parts := map[string][]int32{}
	for _, t := range tasks {
		for _, src := range t.Sub.Sources {
			parts[src] = append(parts[src], t.Part)
		}
	}
	if len(parts) == 0 {
		return nil
	}
	// A transaction whose commit had an unknown outcome (the cluster went
	// away during EndTxn) may have committed after all. Its offsets are
	// then committed, and its changelog writes are in the changelogs but
	// not in the stores: bring the stores up to their changelogs, and read
	// offsets only once no transactional commit is pending.
	if err := a.catchUpStores(ctx, tasks); err != nil {
		return err
	}
	var topics []string
	for t := range parts {
		topics = append(topics, t)
	}
	starts, err := a.Admin.ListStartOffsets(ctx, topics...)
	if err != nil {
		return fmt.Errorf("baton: reading start offsets to rewind: %w", err)
	}
	set, err := Targets(ctx, a.Admin, a.GroupID, parts, starts)
	if err != nil {
		return err
	}
	if err := a.catchUpSources(ctx, tasks, set); err != nil {
		return err
	}
	a.Group.SetOffsets(set)
	var to []string
	for topic, ps := range set {
		for p, eo := range ps {
			to = append(to, fmt.Sprintf("%s[%d]@%d", topic, p, eo.Offset))
		}
	}
	slices.Sort(to)
	a.Log.Info("input rewound to the last commit", "partitions", len(to), "to", strings.Join(to, " "))
	return nil
}

// Targets reads group's stable committed offsets and decides with
// offsets where each input partition of parts goes. A partition whose
// committed offset cannot be read yet (its group coordinator answers
// UNSTABLE_OFFSET_COMMIT while a transaction holding offsets for it is
// still open or its markers are being written) is asked again every
// 100 ms until ctx ends: taking it for "no commit" would process the
// whole partition again into stores that hold its effects.
func Targets(ctx context.Context, adm *kadm.Client, group string, parts map[string][]int32, starts kadm.ListedOffsets) (map[string]map[int32]kgo.EpochOffset, error) {
	for {
		committed, err := adm.FetchOffsets(kadm.RequireStable(ctx), group)
		if err != nil {
			err = fmt.Errorf("baton: reading committed offsets to rewind: %w", err)
		} else {
			var set map[string]map[int32]kgo.EpochOffset
			if set, err = offsets(parts, committed, starts); err == nil {
				return set, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// offsets decides where each input partition of parts goes after an
// abort: its committed offset, or the start of the partition when the
// group has committed none for it. A partition whose committed offset
// or start could not be read is an error: the caller asks again.
func offsets(parts map[string][]int32, committed kadm.OffsetResponses, starts kadm.ListedOffsets) (map[string]map[int32]kgo.EpochOffset, error) {
	set := map[string]map[int32]kgo.EpochOffset{}
	for topic, ps := range parts {
		set[topic] = map[int32]kgo.EpochOffset{}
		for _, p := range ps {
			c, ok := committed.Lookup(topic, p)
			if ok && c.Err != nil {
				return nil, fmt.Errorf("baton: committed offset of %s[%d] to rewind to: %w", topic, p, c.Err)
			}
			if ok && c.At >= 0 {
				set[topic][p] = kgo.EpochOffset{Epoch: -1, Offset: c.At}
				continue
			}
			s, ok := starts.Lookup(topic, p)
			switch {
			case !ok:
				return nil, fmt.Errorf("baton: start offset of %s[%d] to rewind to: missing from the answer", topic, p)
			case s.Err != nil:
				return nil, fmt.Errorf("baton: start offset of %s[%d] to rewind to: %w", topic, p, s.Err)
			}
			set[topic][p] = kgo.EpochOffset{Epoch: -1, Offset: s.Offset}
		}
	}
	return set, nil
}

package baton

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/topology"
)

// traceWords logs how the words whose counts came out wrong lie in the
// changelog and the output: per partition holding them, every record of
// those words and every transaction marker from the first such record on
// (at most traceLines each), read uncommitted, each marked committed or
// not by a read_committed pass, with its producer and epoch; then the
// events of the tasks of that partition. A count that starts high shows
// there whether its first values were written in a transaction that
// aborted, and which instance held the task then: what tells a restore
// that took an aborted write from a rollback that kept one.
func (h *harness) traceWords(wrong map[string]int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(h.prod).ListEndOffsets(ctx, h.output)
	if err != nil {
		h.t.Logf("tracing the wrong words: %v", err)
		return
	}
	n := int32(len(ends[h.output]))
	byPart := map[int32]map[string]bool{}
	for w := range wrong {
		p := topology.Partition([]byte(w), n)
		if byPart[p] == nil {
			byPart[p] = map[string]bool{}
		}
		byPart[p][w] = true
	}
	for _, p := range slices.Sorted(maps.Keys(byPart)) {
		for _, topic := range []string{topology.ChangelogTopic(h.appID, "counts"), h.output} {
			lines, err := traceRecords(ctx, h.brokers, topic, p, 0, byPart[p])
			if err != nil {
				h.t.Logf("tracing %s[%d]: %v", topic, p, err)
				continue
			}
			h.t.Logf("%s[%d], the wrong words' first records and the markers among them:\n%s", topic, p, strings.Join(lines, "\n"))
		}
		suffix := fmt.Sprintf("_%d", p)
		var evs []string
		h.mu.Lock()
		for _, e := range h.events {
			if strings.HasSuffix(e.Task, suffix) && e.Kind != EventProgress {
				evs = append(evs, fmt.Sprintf("%s %s %s %s gen %d lag %d replayed %d %s", e.Time.Format("15:04:05.000"), e.Instance, e.Task, e.Kind, e.Generation, e.Lag, e.Replayed, e.Detail))
			}
		}
		h.mu.Unlock()
		h.t.Logf("events of the tasks of partition %d:\n%s", p, strings.Join(evs, "\n"))
	}
}

// traceLines bounds each partition's trace.
const traceLines = 60

// traceRecords reads topic[p] twice, uncommitted and committed, and
// describes the records of words and the markers from the first record
// of words on; with words nil, every record from offset from on.
func traceRecords(ctx context.Context, brokers []string, topic string, p int32, from int64, words map[string]bool) ([]string, error) {
	read := func(committed bool) ([]*kgo.Record, error) {
		opts := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.KeepControlRecords(),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().AtStart()}})}
		if committed {
			opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return nil, err
		}
		defer cl.Close()
		adm := kadm.NewClient(cl)
		var ends kadm.ListedOffsets
		if committed {
			ends, err = adm.ListCommittedOffsets(ctx, topic)
		} else {
			ends, err = adm.ListEndOffsets(ctx, topic)
		}
		if err != nil {
			return nil, err
		}
		end, _ := ends.Lookup(topic, p)
		var out []*kgo.Record
		for len(out) == 0 || out[len(out)-1].Offset+1 < end.Offset {
			if end.Offset == 0 {
				break
			}
			f := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				return out, fmt.Errorf("read to %d of %d: %w", len(out), end.Offset, ctx.Err())
			}
			f.EachRecord(func(r *kgo.Record) { out = append(out, r) })
		}
		return out, nil
	}
	all, err := read(false)
	if err != nil {
		return nil, err
	}
	done, err := read(true)
	if err != nil {
		return nil, err
	}
	committed := map[int64]bool{}
	for _, r := range done {
		committed[r.Offset] = true
	}
	var lines []string
	started := false
	for _, r := range all {
		if !started && (words != nil && !words[string(r.Key)] || r.Offset < from) {
			continue
		}
		started = true
		what := "aborted or open"
		if committed[r.Offset] {
			what = "committed"
		}
		switch {
		case r.Attrs.IsControl():
			marker := "ABORT"
			if len(r.Key) >= 4 && r.Key[3] == 1 {
				marker = "COMMIT"
			}
			lines = append(lines, fmt.Sprintf("  %d: producer %d epoch %d %s marker", r.Offset, r.ProducerID, r.ProducerEpoch, marker))
		case words == nil || words[string(r.Key)]:
			lines = append(lines, fmt.Sprintf("  %d: producer %d epoch %d %s=%s %s", r.Offset, r.ProducerID, r.ProducerEpoch, r.Key, r.Value, what))
		default:
			continue
		}
		if len(lines) == traceLines {
			lines = append(lines, "  ...")
			break
		}
	}
	return lines, nil
}

// logTail logs topic[p]'s records from offset from on (at most
// traceLines), read uncommitted, each with its producer and epoch and
// marked committed or not.
func (h *harness) logTail(topic string, p int32, from int64) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lines, err := traceRecords(ctx, h.brokers, topic, p, from, nil)
	if err != nil {
		h.t.Logf("reading the tail of %s[%d]: %v", topic, p, err)
	}
	h.t.Logf("%s[%d] from offset %d, uncommitted:\n%s", topic, p, from, strings.Join(lines, "\n"))
}

// Package counts reads a count topic (key = word, value = decimal count,
// as wordcount writes it) to its end, for the demo, the chaos run and
// tests that check results against their input, and checks a topic's
// whole history of counts against exactly-once (Exact).
package counts

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Read reads topic from its start to its last stable offset now, with
// read_committed isolation, and returns the last value per key. Records
// of aborted transactions are not seen; transaction markers are stepped
// over. It gives up after 30 s.
func Read(ctx context.Context, brokers []string, topic string, opts ...kgo.Opt) (map[string]int64, error) {
	out := map[string]int64{}
	err := Scan(ctx, brokers, topic, true, func(r *kgo.Record) {
		n, _ := strconv.ParseInt(string(r.Value), 10, 64)
		out[string(r.Key)] = n
	}, opts...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Scan calls fn for every data record of topic from its start to its end
// now: with committed, read_committed up to the last stable offset
// (transaction markers are stepped over, not passed to fn); otherwise
// everything up to the high watermark. It gives up after 30 s.
func Scan(ctx context.Context, brokers []string, topic string, committed bool, fn func(*kgo.Record), opts ...kgo.Opt) error {
	// Control records are kept (and stepped over below) either way: a
	// transaction's marker may be the last record before the end.
	base := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.KeepControlRecords()}
	if committed {
		base = append(base, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	if err != nil {
		return err
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
		return err
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for len(want) > 0 {
		f := cl.PollFetches(rctx)
		if rctx.Err() != nil {
			return fmt.Errorf("reading %s: %w", topic, rctx.Err())
		}
		f.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				fn(r)
			}
			if r.Offset+1 >= want[r.Partition] {
				delete(want, r.Partition)
			}
		})
	}
	return nil
}

// Sequences reads topic like Read but returns every value of every key,
// in the order the topic holds them (a key's records are all in one
// partition). A value that is not a decimal count is an error naming its
// partition and offset. The topic must not have been compacted: Exact
// judges the whole history.
func Sequences(ctx context.Context, brokers []string, topic string, opts ...kgo.Opt) (map[string][]int64, error) {
	out := map[string][]int64{}
	var bad error
	err := Scan(ctx, brokers, topic, true, func(r *kgo.Record) {
		n, err := strconv.ParseInt(string(r.Value), 10, 64)
		if err != nil && bad == nil {
			bad = fmt.Errorf("%s[%d] offset %d: key %q: value %q is not a count", topic, r.Partition, r.Offset, r.Key, r.Value)
		}
		out[string(r.Key)] = append(out[string(r.Key)], n)
	}, opts...)
	if err != nil {
		return nil, err
	}
	if bad != nil {
		return nil, bad
	}
	return out, nil
}

// Exact checks an exactly-once count history: every key of want must
// have the values 1, 2, ..., want[key] in this order, once each, and no
// other key may appear. A value written twice (a duplicate that a final
// count would hide once later values catch up), skipped, or out of order
// is reported. It returns one line per key that breaks this, in key
// order, at most max lines then a line with how many more; nil when every
// history is exact.
func Exact(seqs map[string][]int64, want map[string]int64, max int) []string {
	var bad []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if p := seqProblem(seqs[k], want[k]); p != "" {
			bad = append(bad, fmt.Sprintf("%s: %s", k, p))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(seqs)) {
		if _, ok := want[k]; !ok {
			bad = append(bad, fmt.Sprintf("%s: %d values (last %d), never produced", k, len(seqs[k]), seqs[k][len(seqs[k])-1]))
		}
	}
	if max > 0 && len(bad) > max {
		bad = append(bad[:max], fmt.Sprintf("... %d more", len(bad)-max))
	}
	return bad
}

// seqProblem describes how seq differs from 1..n, or returns "".
func seqProblem(seq []int64, n int64) string {
	for i, v := range seq {
		if want := int64(i) + 1; v != want {
			kind := "skipped to"
			if v < want {
				kind = "repeated"
			}
			return fmt.Sprintf("value %d of %d is %d, want %d (%s %d; last %d, want %d)", i+1, len(seq), v, want, kind, v, seq[len(seq)-1], n)
		}
	}
	if int64(len(seq)) != n {
		last := int64(0)
		if len(seq) > 0 {
			last = seq[len(seq)-1]
		}
		return fmt.Sprintf("%d values 1..%d, want 1..%d", len(seq), last, n)
	}
	return ""
}

// Package counts reads a count topic (key = word, value = decimal count,
// as wordcount writes it) to its end, for the demo, the chaos run and
// tests that check results against their input.
package counts

import (
	"context"
	"fmt"
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
	base := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
	if committed {
		base = append(base, kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
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

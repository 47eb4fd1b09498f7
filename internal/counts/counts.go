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
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords()}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	out := map[string]int64{}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for len(want) > 0 {
		f := cl.PollFetches(rctx)
		if rctx.Err() != nil {
			return nil, fmt.Errorf("reading %s: %w", topic, rctx.Err())
		}
		f.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				n, _ := strconv.ParseInt(string(r.Value), 10, 64)
				out[string(r.Key)] = n
			}
			if r.Offset+1 >= want[r.Partition] {
				delete(want, r.Partition)
			}
		})
	}
	return out, nil
}

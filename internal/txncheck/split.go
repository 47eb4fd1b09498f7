package txncheck

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Entry is one record of a partition as the log holds it: a transactional
// data record, or a control record (a transaction marker).
type Entry struct {
	Partition  string // "topic[p]"
	Offset     int64
	ProducerID int64
	Epoch      int16
	Control    bool
	Commit     bool // a control record's marker: COMMIT, else ABORT
	// CoordinatorEpoch is a control record's coordinator epoch: the
	// leader epoch of the __transaction_state partition whose
	// coordinator wrote the marker.
	CoordinatorEpoch int32
}

// Split is a transaction whose markers disagree: the partitions where its
// records were committed and those where they were aborted. A broker must
// never write both; a client cannot.
type Split struct {
	ProducerID int64
	Epoch      int16 // the epoch of the transaction's records
	Committed  []string
	Aborted    []string
}

func (s Split) String() string {
	return fmt.Sprintf("producer %d epoch %d: committed in %s, aborted in %s", s.ProducerID, s.Epoch,
		strings.Join(s.Committed, " "), strings.Join(s.Aborted, " "))
}

// Splits finds the transactions whose markers disagree across partitions.
// entries holds, per partition in offset order, the transactional records
// and markers. A transaction is a producer's records in a partition up to
// the producer's next marker there, named by the producer id and the epoch
// of its first record (with transactions v2 the marker carries the next
// epoch, so the marker's own epoch does not name it).
func Splits(entries []Entry) []Split {
	type txn struct {
		pid   int64
		epoch int16
	}
	open := map[string]map[int64]int16{} // partition → producer → epoch of its open records
	committed, aborted := map[txn]map[string]bool{}, map[txn]map[string]bool{}
	for _, e := range entries {
		parts := open[e.Partition]
		if parts == nil {
			parts = map[int64]int16{}
			open[e.Partition] = parts
		}
		if !e.Control {
			if _, ok := parts[e.ProducerID]; !ok {
				parts[e.ProducerID] = e.Epoch
			}
			continue
		}
		epoch, ok := parts[e.ProducerID]
		if !ok {
			continue // a marker for records this read did not see
		}
		delete(parts, e.ProducerID)
		into := aborted
		if e.Commit {
			into = committed
		}
		k := txn{e.ProducerID, epoch}
		if into[k] == nil {
			into[k] = map[string]bool{}
		}
		into[k][e.Partition] = true
	}
	var out []Split
	for k, c := range committed {
		a := aborted[k]
		if len(a) == 0 {
			continue
		}
		out = append(out, Split{ProducerID: k.pid, Epoch: k.epoch, Committed: sortedKeys(c), Aborted: sortedKeys(a)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].ProducerID != out[j].ProducerID {
			return out[i].ProducerID < out[j].ProducerID
		}
		return out[i].Epoch < out[j].Epoch
	})
	return out
}

func sortedKeys(m map[string]bool) []string { return slices.Sorted(maps.Keys(m)) }

// ReadSplits reads every record and marker of topics and of
// __consumer_offsets (where transactional offset commits live), read
// uncommitted from each partition's start to its current end, and returns
// the transactions whose markers disagree. If ctx ends first, it returns
// what the records read show, and an error saying the read was short.
func ReadSplits(ctx context.Context, brokers []string, topics ...string) ([]Split, error) {
	entries, err := ReadEntries(ctx, brokers, append(append([]string(nil), topics...), "__consumer_offsets")...)
	return Splits(entries), err
}

// ReadEntries reads the transactional records and markers of topics, read
// uncommitted from each partition's start to its current end, each
// partition's in offset order. If ctx ends first, it returns what it read
// and an error saying the read was short (a compacted partition may end
// past its last record).
func ReadEntries(ctx context.Context, brokers []string, topics ...string) ([]Entry, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, err
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topics...)
	cl.Close()
	if err != nil {
		return nil, fmt.Errorf("end offsets: %w", err)
	}
	var endErr error
	from := map[string]map[int32]kgo.Offset{}
	left := map[string]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
			return // not on this cluster (kfake keeps no __consumer_offsets topic)
		}
		if o.Err != nil {
			endErr = fmt.Errorf("end offset of %s[%d]: %w", o.Topic, o.Partition, o.Err)
			return
		}
		if o.Offset <= 0 {
			return
		}
		if from[o.Topic] == nil {
			from[o.Topic] = map[int32]kgo.Offset{}
		}
		from[o.Topic][o.Partition] = kgo.NewOffset().AtStart()
		left[fmt.Sprintf("%s[%d]", o.Topic, o.Partition)] = o.Offset
	})
	if endErr != nil {
		return nil, endErr
	}
	if len(left) == 0 {
		return nil, nil
	}
	rd, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumePartitions(from),
		kgo.KeepControlRecords(), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	byPart := map[string][]Entry{}
	var short error
	for len(left) > 0 {
		fs := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			short = fmt.Errorf("read short of the end of %d partitions: %w", len(left), err)
			break
		}
		fs.EachRecord(func(r *kgo.Record) {
			k := fmt.Sprintf("%s[%d]", r.Topic, r.Partition)
			if end, ok := left[k]; ok && r.Offset+1 >= end {
				delete(left, k)
			}
			if !r.Attrs.IsTransactional() {
				return
			}
			e := Entry{Partition: k, Offset: r.Offset, ProducerID: r.ProducerID, Epoch: r.ProducerEpoch, Control: r.Attrs.IsControl()}
			if e.Control {
				// A marker's key: version (int16), then type (int16): 0 abort, 1 commit.
				e.Commit = len(r.Key) >= 4 && binary.BigEndian.Uint16(r.Key[2:4]) == 1
				// Its value: version (int16), then the coordinator epoch (int32).
				if len(r.Value) >= 6 {
					e.CoordinatorEpoch = int32(binary.BigEndian.Uint32(r.Value[2:6]))
				}
			}
			byPart[k] = append(byPart[k], e)
		})
	}
	var all []Entry
	for _, k := range slices.Sorted(maps.Keys(byPart)) {
		all = append(all, byPart[k]...)
	}
	return all, short
}

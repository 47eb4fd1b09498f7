package baton

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/baton-streams/baton/internal/faultnet"
	"github.com/baton-streams/baton/internal/kafkatest"
)

// TestCommitWaitsForAcks: under at-least-once an instance commits its
// input offsets only once the repartition, changelog and output records
// their processing wrote are acknowledged. The embedded cluster refuses
// every record the instance writes (NOT_LEADER, which its client retries)
// while it goes on reading and processing; then the instance is cut off
// and another takes its tasks. Had it committed the offsets of input
// whose writes never landed, the new owner would start past that input
// and the counts would be low. No count may be low, and none higher
// than the dead instance's uncommitted work explains.
func TestCommitWaitsForAcks(t *testing.T) {
	if kafkatest.Real(t) {
		t.Skip("refuses produce requests through the embedded cluster's request hooks; runs on the embedded cluster only")
	}
	k := hookedCluster(t)
	var hold atomic.Bool
	var refused atomic.Int64
	// The test's own writes (to the input topic, named by name or by id
	// as the request's version does) go through.
	type topic struct {
		name string
		id   [16]byte
	}
	var input atomic.Pointer[topic]
	ours := func(name string, id [16]byte, in *topic) bool {
		return in != nil && (name == in.name || name == "" && id == in.id)
	}
	k.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		k.KeepControl()
		r := req.(*kmsg.ProduceRequest)
		if !hold.Load() || len(r.Topics) == 0 || ours(r.Topics[0].Topic, r.Topics[0].TopicID, input.Load()) {
			return nil, nil, false
		}
		refused.Add(1)
		return refuseProduce(r, kerr.NotLeaderForPartition.Code), nil, true
	})
	h := newHarnessOn(t, &kafkatest.Target{Brokers: k.ListenAddrs()}, 4)
	ids, err := kadm.NewClient(h.prod).ListTopics(context.Background(), h.input)
	if err == nil {
		err = ids.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	input.Store(&topic{h.input, [16]byte(ids[h.input].ID)})
	h.prefill(400)
	cut := &faultnet.Cutter{}
	a := h.start("a", WithCommitInterval(50*time.Millisecond), WithKafkaOptions(kgo.Dialer(cut.Dial)))
	h.eventually(60*time.Second, "a to run every task", func() bool { _, all := owners(a); return all })
	h.waitExact(60 * time.Second)

	hold.Store(true)
	splitBase := processedByPrefix(a, "0_")
	h.produce(200)
	h.eventually(30*time.Second, "a to split the new lines", func() bool { return processedByPrefix(a, "0_") >= splitBase+200 })
	// a now commits every 50 ms, and must not commit past the new lines:
	// give a committer that does not wait for acknowledgements time to
	// commit them (it would within a commit interval or two).
	committed := false
	deadline := time.Now().Add(2 * time.Second)
	for !committed && time.Now().Before(deadline) {
		committed = h.inputCommitted() >= int64(400+200)
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("a's writes refused %d times; input committed through the new lines: %v", refused.Load(), committed)
	if refused.Load() == 0 {
		t.Fatal("no write of a was refused: the test held nothing")
	}
	lost, _ := owners(a)
	cut.Cut()
	uncommitted := h.uncommitted(lost)
	hold.Store(false)
	b := h.start("b")
	h.eventually(60*time.Second, "b to own every task", func() bool { _, all := owners(b); return all })
	h.waitAtLeast(30 * time.Second)
	h.checkOverCount(uncommitted)
	a.app.Leave()
}

// hookedCluster starts a one-broker embedded cluster, closed when the
// test ends, for a test that steers its requests (kfake's ControlKey).
func hookedCluster(t *testing.T) *kfake.Cluster {
	t.Helper()
	k, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.AllowAutoTopicCreation(), kfake.DefaultNumPartitions(4),
		kfake.GroupMinSessionTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	return k
}

// refuseProduce answers every partition of a produce request with the
// error code (a retriable one makes the client try again).
func refuseProduce(r *kmsg.ProduceRequest, code int16) *kmsg.ProduceResponse {
	resp := r.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range r.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.ErrorCode = code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// processedByPrefix is the records r processed over its tasks whose ids
// start with prefix ("0_": the split tasks).
func processedByPrefix(r *running, prefix string) int64 {
	var n int64
	for _, ts := range r.app.Status().Tasks {
		if strings.HasPrefix(ts.ID, prefix) {
			n += ts.Processed
		}
	}
	return n
}

// inputCommitted is the sum over the input's partitions of the group's
// committed offsets.
func (h *harness) inputCommitted() int64 {
	h.t.Helper()
	committed, err := kadm.NewClient(h.prod).FetchOffsets(context.Background(), h.appID)
	if err != nil {
		h.t.Fatal(err)
	}
	var n int64
	committed.Each(func(o kadm.OffsetResponse) {
		if o.Topic == h.input {
			n += o.At
		}
	})
	return n
}

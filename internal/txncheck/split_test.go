package txncheck

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestSplits(t *testing.T) {
	data := func(part string, off int64, pid int64, epoch int16) Entry {
		return Entry{Partition: part, Offset: off, ProducerID: pid, Epoch: epoch}
	}
	marker := func(part string, off int64, pid int64, epoch int16, commit bool) Entry {
		return Entry{Partition: part, Offset: off, ProducerID: pid, Epoch: epoch, Control: true, Commit: commit}
	}
	// Producer 2's first transaction (epoch 0) wrote to r[0], r[1] and
	// the offsets partition o[3]: a restarted coordinator committed it in
	// r[0] and r[1], the new one aborted it in o[3] (markers of epoch 1,
	// as transactions v2 writes them). Its next transaction (epoch 1)
	// committed everywhere; producer 1's aborted everywhere.
	entries := []Entry{
		data("r[0]", 0, 2, 0), data("r[0]", 1, 2, 0), data("r[0]", 2, 1, 0),
		marker("r[0]", 3, 2, 1, true), marker("r[0]", 4, 1, 1, false),
		data("r[0]", 5, 2, 1), marker("r[0]", 6, 2, 2, true),
		data("r[1]", 0, 2, 0), marker("r[1]", 1, 2, 1, true), marker("r[1]", 2, 2, 1, false),
		data("o[3]", 4, 2, 0), marker("o[3]", 7, 2, 1, false),
		data("o[3]", 9, 2, 1), marker("o[3]", 11, 2, 2, true),
		marker("o[3]", 12, 5, 0, true), // a marker whose records were not read
	}
	got := Splits(entries)
	want := []Split{{ProducerID: 2, Epoch: 0, Committed: []string{"r[0]", "r[1]"}, Aborted: []string{"o[3]"}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Splits = %v, want %v", got, want)
	}
	if s := got[0].String(); s != "producer 2 epoch 0: committed in r[0] r[1], aborted in o[3]" {
		t.Errorf("String() = %q", s)
	}
	// Every transaction decided one way: no split.
	if got := Splits(entries[:7]); len(got) != 0 {
		t.Errorf("Splits of consistent transactions = %v, want none", got)
	}
}

// TestReadEntries reads a committed and an aborted transaction back from a
// cluster: their records, and markers that say which is which.
func TestReadEntries(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("txncheck"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	txn := func(commit kgo.TransactionEndTry, parts ...int32) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, p := range parts {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := cl.EndTransaction(ctx, commit); err != nil {
			t.Fatal(err)
		}
	}
	txn(kgo.TryCommit, 0, 1)
	txn(kgo.TryAbort, 0)
	entries, err := ReadEntries(ctx, c.ListenAddrs(), "t")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		switch {
		case !e.Control:
			got = append(got, e.Partition+" data")
		case e.Commit:
			got = append(got, e.Partition+" COMMIT")
		default:
			got = append(got, e.Partition+" ABORT")
		}
	}
	want := []string{"t[0] data", "t[0] COMMIT", "t[0] data", "t[0] ABORT", "t[1] data", "t[1] COMMIT"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("entries = %v, want %v", got, want)
	}
	if s := Splits(entries); len(s) != 0 {
		t.Errorf("Splits = %v, want none", s)
	}
	// ReadSplits also reads __consumer_offsets, which kfake does not
	// keep as a topic: that is no error.
	if s, err := ReadSplits(ctx, c.ListenAddrs(), "t"); err != nil || len(s) != 0 {
		t.Errorf("ReadSplits = %v, %v; want none, no error", s, err)
	}
}

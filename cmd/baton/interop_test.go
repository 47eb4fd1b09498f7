package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/counts"
	"github.com/baton-streams/baton/internal/kafkatest"
	"github.com/baton-streams/baton/topology"
)

// realKafka returns the shared Apache Kafka cluster, or skips: the tests
// run Kafka's own Java tools, which only exist beside a real cluster.
func realKafka(t *testing.T) *kafkatest.Target {
	t.Helper()
	if !kafkatest.Real(t) {
		t.Skip("runs Apache Kafka's console tools: run with BATON_KAFKA=real")
	}
	tg := kafkatest.ForTest(t)
	if tg.Kafka == nil {
		t.Skip("no Apache Kafka cluster")
	}
	return tg
}

// interopWords are words with non-ASCII letters, several bytes long in
// UTF-8, beside plain ones.
var interopWords = []string{"kafka", "baton", "straße", "naïve", "ĳssel", "日本語", "кошка", "λόγος", "🙂", "ℕ∑", "ａｂｃ", "x"}

// TestInteropConsoleConsumer: Kafka's own console consumer, reading with
// read_committed isolation, sees in the output of
// `baton run wordcount --guarantee exactly-once` the same final counts as
// baton's own reader.
func TestInteropConsoleConsumer(t *testing.T) {
	tg := realKafka(t)
	input, output, appID := tg.Name("lines"), tg.Name("counts"), tg.Name("wc")
	tg.CreateTopic(t, input, 4, false)
	client, err := kgo.NewClient(kgo.SeedBrokers(tg.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	want := map[string]int64{}
	var recs []*kgo.Record
	for i := range 600 {
		words := []string{interopWords[i%len(interopWords)], interopWords[(i*7)%len(interopWords)], "w" + strconv.Itoa(i%41)}
		for _, w := range words {
			want[w]++
		}
		recs = append(recs, &kgo.Record{Topic: input, Key: []byte(strconv.Itoa(i)), Value: []byte(strings.Join(words, " "))})
	}
	if err := client.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	run := startBaton(t, "run", "wordcount", "--brokers", tg.Bootstrap(), "--app-id", appID, "--input", input,
		"--output", output, "--state-dir", t.TempDir(), "--http", "127.0.0.1:0", "--session-timeout", "2s",
		"--guarantee", "exactly-once")
	run.waitLine(t, "http: listening on", 60*time.Second)
	var got map[string]int64
	waitUntil(t, 120*time.Second, "baton's reader to see every count", func() bool {
		got, err = counts.Read(context.Background(), tg.Brokers, output)
		return err == nil && fmt.Sprint(got) == fmt.Sprint(want)
	})
	(&e2e{brokers: tg.Bootstrap(), counts: output}).checkHistories(t, want)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	total := 0
	for _, n := range want {
		total += int(n)
	}
	out, err := tg.Kafka.Tool(ctx, nil, "org.apache.kafka.tools.consumer.ConsoleConsumer",
		"--bootstrap-server", tg.Bootstrap(), "--topic", output, "--from-beginning",
		"--isolation-level", "read_committed", "--property", "print.key=true", "--property", "key.separator=\t",
		"--max-messages", strconv.Itoa(total), "--timeout-ms", "20000")
	java := map[string]int64{}
	n := 0
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		k, v, ok := strings.Cut(l, "\t")
		if !ok {
			continue
		}
		c, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil {
			t.Fatalf("console consumer line %q: value is not a count", l)
		}
		java[k] = c
		n++
	}
	if fmt.Sprint(java) != fmt.Sprint(got) {
		t.Fatalf("the console consumer read %d records with counts\n%v\nbaton's reader:\n%v\n(tool error: %v)", n, java, got, err)
	}
	if n != total {
		t.Errorf("the console consumer read %d committed records, want one per occurrence: %d", n, total)
	}
	if code := run.stop(t, 60*time.Second); code != 0 {
		t.Errorf("SIGTERM: exit %d", code)
	}
}

// TestInteropProducerPartitioning: keyed records written by Kafka's own
// console producer (Java's default partitioner) land in the partitions
// baton's repartitioning chooses for the same keys (topology.Partition,
// which every Send to a repartition topic uses), for plain and non-ASCII
// keys and several partition counts.
func TestInteropProducerPartitioning(t *testing.T) {
	tg := realKafka(t)
	var keys []string
	for i := range 400 {
		keys = append(keys, "key-"+strconv.Itoa(i))
	}
	for i, w := range interopWords {
		keys = append(keys, w, w+strconv.Itoa(i), strings.Repeat(w, i+2))
	}
	var stdin strings.Builder
	for i, k := range keys {
		fmt.Fprintf(&stdin, "%s|%d\n", k, i)
	}
	for _, partitions := range []int32{4, 7, 12} {
		topic := tg.Name("keys-" + strconv.Itoa(int(partitions)))
		tg.CreateTopic(t, topic, partitions, false)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		_, err := tg.Kafka.Tool(ctx, []byte(stdin.String()), "org.apache.kafka.tools.ConsoleProducer",
			"--bootstrap-server", tg.Bootstrap(), "--topic", topic,
			"--property", "parse.key=true", "--property", "key.separator=|")
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		placed := map[string]int32{}
		if err := counts.Scan(context.Background(), tg.Brokers, topic, false, func(r *kgo.Record) {
			placed[string(r.Key)] = r.Partition
		}); err != nil {
			t.Fatal(err)
		}
		if len(placed) != len(keys) {
			t.Fatalf("%d partitions: read back %d distinct keys, wrote %d", partitions, len(placed), len(keys))
		}
		used := map[int32]bool{}
		for _, k := range keys {
			p, ok := placed[k]
			if !ok {
				t.Fatalf("key %q not read back as written (UTF-8 bytes %x)", k, k)
			}
			used[p] = true
			if b := topology.Partition([]byte(k), partitions); b != p {
				t.Errorf("%d partitions: key %q: Kafka's producer chose partition %d, baton %d", partitions, k, p, b)
			}
		}
		if len(used) != int(partitions) {
			t.Errorf("%d partitions: keys landed in only %d of them", partitions, len(used))
		}
	}
}

package baton_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/cluster"
	"github.com/baton-streams/baton/topology"
)

// Run the wordcount topology on the embedded cluster: produce two lines,
// wait for the counts, stop gracefully.
func Example() {
	c, err := cluster.Start("127.0.0.1:0", 1)
	if err != nil {
		panic(err)
	}
	defer c.Close()

	top, err := topology.WordCount("example", "lines", "counts")
	if err != nil {
		panic(err)
	}
	dir, _ := os.MkdirTemp("", "baton-example")
	defer os.RemoveAll(dir)
	app, err := baton.New(top,
		baton.WithBrokers(c.Addrs()...),
		baton.WithStateDir(dir),
		baton.WithCreateSinks(map[string]string{"cleanup.policy": "compact"}),
		baton.WithLogger(slog.New(slog.DiscardHandler)),
	)
	if err != nil {
		panic(err)
	}

	cl, _ := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...))
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(context.Background(), 2, 1, nil, "lines"); err != nil {
		panic(err)
	}
	cl.ProduceSync(context.Background(),
		&kgo.Record{Topic: "lines", Value: []byte("to be or not to be")},
		&kgo.Record{Topic: "lines", Value: []byte("that is the question")})

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()

	counts := readUntil(c.Addrs(), "counts", 10)
	stop() // drain and leave
	if err := <-done; err != nil {
		panic(err)
	}
	fmt.Println("to:", counts["to"], "be:", counts["be"], "question:", counts["question"])
	// Output: to: 2 be: 2 question: 1
}

// readUntil reads the counts topic until n records arrived.
func readUntil(brokers []string, topic string, n int) map[string]int {
	cl, _ := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	counts := map[string]int{}
	for seen := 0; seen < n && ctx.Err() == nil; {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			counts[string(r.Key)], _ = strconv.Atoi(string(r.Value))
			seen++
		})
	}
	return counts
}

// A topology whose "enrich" processor may fail on some records: those go
// to a dead-letter topic with the error and the processor's name in
// headers, while a failure of any other processor still stops the
// instance.
func ExampleWithProcessorErrors() {
	b := topology.NewBuilder("orders")
	b.AddSource("in", "orders")
	b.AddProcessor("enrich", topology.ProcessorFunc(func(ctx topology.NodeContext, rec topology.Record) error {
		if len(rec.Value) == 0 {
			return fmt.Errorf("order %q has no body", rec.Key)
		}
		return ctx.Forward(rec)
	}), "in")
	b.AddSink("out", "enriched", "enrich")
	top, err := b.Build()
	if err != nil {
		panic(err)
	}
	_, err = baton.New(top,
		baton.WithBrokers("127.0.0.1:9092"),
		baton.WithProcessorErrors("enrich", baton.DeadLetter("orders-failed")),
	)
	fmt.Println(err)
	_, err = baton.New(top, baton.WithBrokers("127.0.0.1:9092"), baton.WithProcessorErrors("enrch", baton.SkipOnError))
	fmt.Println(err)
	// Output:
	// <nil>
	// baton: invalid configuration: WithProcessorErrors: the topology has no processor "enrch" (its processors are enrich)
}

// Command kafka starts Apache Kafka on loopback for trying baton against a
// real cluster by hand, and for scripts:
//
//	go run ./internal/kafkatest/cmd/kafka [--nodes 3] [--topic NAME:PARTITIONS]... [--set key=value]...
//
// It fetches the jars on first use (Java 17 and Maven needed), creates the
// topics asked for (the brokers do not create topics on first use), prints
// one line "kafka ready: HOST:PORT,HOST:PORT,..." when clients can connect, and
// runs until SIGINT or SIGTERM, then stops the brokers and removes their
// data.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/kafkatest"
)

type settings map[string]string

func (s settings) String() string { return fmt.Sprint(map[string]string(s)) }
func (s settings) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want key=value, got %q", v)
	}
	s[k] = val
	return nil
}

type topics map[string]int32

func (t topics) String() string { return fmt.Sprint(map[string]int32(t)) }
func (t topics) Set(v string) error {
	name, n, ok := strings.Cut(v, ":")
	p, err := strconv.Atoi(n)
	if !ok || name == "" || err != nil || p < 1 {
		return fmt.Errorf("want NAME:PARTITIONS with PARTITIONS >= 1, got %q", v)
	}
	t[name] = int32(p)
	return nil
}

func main() {
	nodes := flag.Int("nodes", 1, "number of combined controller+broker nodes")
	set := settings{}
	flag.Var(set, "set", "a broker setting key=value (repeatable)")
	create := topics{}
	flag.Var(create, "topic", "a topic to create, NAME:PARTITIONS (repeatable)")
	flag.Parse()
	if *nodes < 1 {
		fmt.Fprintf(os.Stderr, "kafka: --nodes must be at least 1, got %d\n", *nodes)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := kafkatest.Start(ctx, kafkatest.Config{Nodes: *nodes, BrokerConfig: set,
		Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := createTopics(ctx, c.Addrs(), create); err != nil {
		c.Stop()
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("kafka ready: %s\n", strings.Join(c.Addrs(), ","))
	<-ctx.Done()
	c.Stop()
}

func createTopics(ctx context.Context, brokers []string, create topics) error {
	if len(create) == 0 {
		return nil
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for name, n := range create {
		resp, err := adm.CreateTopic(ctx, n, -1, nil, name)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			return fmt.Errorf("kafka: creating topic %s: %w", name, err)
		}
		fmt.Fprintf(os.Stderr, "kafka: created topic %s with %d partitions\n", name, n)
	}
	return nil
}

// Command kafka starts Apache Kafka on loopback for trying baton against a
// real cluster by hand, and for scripts:
//
//	go run ./internal/kafkatest/cmd/kafka [--nodes 3] [--set key=value]...
//
// It fetches the jars on first use (Java 17 and Maven needed), prints one
// line "kafka ready: HOST:PORT,HOST:PORT,..." when clients can connect, and
// runs until SIGINT or SIGTERM, then stops the brokers and removes their
// data.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

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

func main() {
	nodes := flag.Int("nodes", 1, "number of combined controller+broker nodes")
	set := settings{}
	flag.Var(set, "set", "a broker setting key=value (repeatable)")
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
	fmt.Printf("kafka ready: %s\n", strings.Join(c.Addrs(), ","))
	<-ctx.Done()
	c.Stop()
}

// Package cluster runs the embedded Kafka-compatible cluster (franz-go's
// kfake) that baton uses by default for its demo, its tests and the
// `baton cluster` command. Everything baton does against it works the same
// against a real Kafka cluster.
//
// The cluster lives in memory (unless a data directory is given) and dies
// with the process. Close it to free its ports.
package cluster

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Cluster is a running embedded cluster.
type Cluster struct {
	k *kfake.Cluster
}

// Start starts brokers listening on listen ("host:port"; port 0 picks free
// ports; with several brokers, a fixed port p gives p, p+1, ...). Topics are
// created on first use with 4 partitions; group session timeouts down to
// 500ms are allowed so that tests notice crashes quickly.
func Start(listen string, brokers int, extra ...kfake.Opt) (*Cluster, error) {
	if brokers < 1 {
		return nil, fmt.Errorf("cluster: --brokers must be >= 1, got %d", brokers)
	}
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("cluster: --listen %q: want host:port: %v", listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("cluster: --listen %q: bad port", listen)
	}
	ports := make([]int, brokers)
	for i := range ports {
		if port != 0 {
			ports[i] = port + i
		}
	}
	opts := append([]kfake.Opt{
		kfake.NumBrokers(brokers),
		kfake.Ports(ports...),
		kfake.ListenFn(func(network, addr string) (net.Listener, error) {
			_, p, _ := net.SplitHostPort(addr)
			return net.Listen(network, net.JoinHostPort(host, p))
		}),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(4),
		kfake.GroupMinSessionTimeout(500 * time.Millisecond),
	}, extra...)
	k, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("cluster: starting on %s: %w", listen, err)
	}
	return &Cluster{k: k}, nil
}

// Addrs returns the brokers' addresses.
func (c *Cluster) Addrs() []string { return c.k.ListenAddrs() }

// Close stops the cluster.
func (c *Cluster) Close() { c.k.Close() }

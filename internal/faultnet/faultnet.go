// Package faultnet makes network faults for tests and chaos runs, as
// dialers to give a Kafka client: Cutter cuts every connection at once,
// so that the client stops heartbeating as if its process had died,
// without stopping the process; Slow reads at a set rate, as over a slow
// link; Stall silences a link, so that requests go unanswered and the
// client learns of it only through its timeouts.
package faultnet

import (
	"context"
	"errors"
	"net"
	"sync"
)

// ErrCut is returned by Dial once the dialer has been cut.
var ErrCut = errors.New("faultnet: connection cut")

// Cutter dials real connections until Cut; then it closes them all and
// refuses new ones. Use its Dial as kgo.Dialer. Safe for concurrent use.
type Cutter struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

// Dial dials network/host unless the Cutter has been cut.
func (c *Cutter) Dial(ctx context.Context, network, host string) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return nil, ErrCut
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, host)
	if err == nil {
		c.conns = append(c.conns, conn)
	}
	return conn, err
}

// Cut closes every connection and refuses new ones.
func (c *Cutter) Cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = true
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = nil
}

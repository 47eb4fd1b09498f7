package faultnet

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Slow dials connections that read at most BytesPerSecond each, as over a
// slow link: a client that reads a large backlog through it takes seconds
// however fast the broker serves it. Idle time earns no credit, so a
// connection never reads faster than the limit in a burst. Use its Dial as
// kgo.Dialer. Lift ends the limit for every connection it dialed.
type Slow struct {
	BytesPerSecond int
	lifted         atomic.Bool
}

// Lift lets every connection of s, dialed before or after, read at full
// speed from now on.
func (s *Slow) Lift() { s.lifted.Store(true) }

// Dial dials network/host and slows the connection's reads.
func (s *Slow) Dial(ctx context.Context, network, host string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	return &slowConn{Conn: conn, s: s, rate: max(s.BytesPerSecond, 1)}, nil
}

type slowConn struct {
	net.Conn
	s    *Slow
	rate int
	mu   sync.Mutex
	next time.Time // when the bytes read so far are paid for
}

// Read reads at most a tenth of a second's worth of bytes, then waits
// until they are paid for.
func (c *slowConn) Read(p []byte) (int, error) {
	if c.s.lifted.Load() {
		return c.Conn.Read(p)
	}
	if chunk := max(c.rate/10, 1); len(p) > chunk {
		p = p[:chunk]
	}
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	now := time.Now()
	if c.next.Before(now) {
		c.next = now
	}
	c.next = c.next.Add(time.Duration(n) * time.Second / time.Duration(c.rate))
	wait := c.next.Sub(now)
	c.mu.Unlock()
	time.Sleep(wait)
	return n, err
}

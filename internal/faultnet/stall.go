package faultnet

import (
	"context"
	"net"
	"sync"
	"time"
)

// Stall dials real connections until Stall; then the link goes silent, as
// when a network drops every packet: what its connections write is lost,
// their reads wait with nothing to read, and new dials wait until their
// context ends. Unlike a cut, nothing fails at once: a Kafka client finds
// out only through its own timeouts. A stalled connection's Read and
// Write return once it is closed or its deadline passes. Use its Dial as
// kgo.Dialer. Safe for concurrent use.
type Stall struct {
	mu      sync.Mutex
	stalled chan struct{} // closed by Stall
	once    sync.Once
}

func (s *Stall) ch() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stalled == nil {
		s.stalled = make(chan struct{})
	}
	return s.stalled
}

// Stall silences every connection of s, dialed before or after.
func (s *Stall) Stall() { s.once.Do(func() { close(s.ch()) }) }

func (s *Stall) isStalled() bool {
	select {
	case <-s.ch():
		return true
	default:
		return false
	}
}

// Dial dials network/host; once stalled, it waits for ctx instead.
func (s *Stall) Dial(ctx context.Context, network, host string) (net.Conn, error) {
	if s.isStalled() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	return &stallConn{Conn: conn, s: s, closed: make(chan struct{})}, nil
}

type stallConn struct {
	net.Conn
	s         *Stall
	closeOnce sync.Once
	closed    chan struct{}
	mu        sync.Mutex
	readBy    time.Time // the read deadline, zero for none
}

// Read reads until the link stalls; then it waits for Close or the read
// deadline. A read already waiting on the socket when the link stalls
// returns what arrives before then.
func (c *stallConn) Read(p []byte) (int, error) {
	if !c.s.isStalled() {
		n, err := c.Conn.Read(p)
		if !c.s.isStalled() || n == 0 {
			return n, err
		}
	}
	c.mu.Lock()
	by := c.readBy
	c.mu.Unlock()
	var timeout <-chan time.Time
	if !by.IsZero() {
		t := time.NewTimer(time.Until(by))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-c.closed:
		return 0, net.ErrClosed
	case <-timeout:
		return 0, errTimeout{}
	}
}

// Write writes until the link stalls; then it drops what it is given.
func (c *stallConn) Write(p []byte) (int, error) {
	if c.s.isStalled() {
		select {
		case <-c.closed:
			return 0, net.ErrClosed
		default:
			return len(p), nil
		}
	}
	return c.Conn.Write(p)
}

func (c *stallConn) SetDeadline(t time.Time) error {
	c.setReadBy(t)
	return c.Conn.SetDeadline(t)
}

func (c *stallConn) SetReadDeadline(t time.Time) error {
	c.setReadBy(t)
	return c.Conn.SetReadDeadline(t)
}

func (c *stallConn) setReadBy(t time.Time) {
	c.mu.Lock()
	c.readBy = t
	c.mu.Unlock()
}

func (c *stallConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// errTimeout is a stalled read's deadline passing, a net.Error that says
// so as the socket's own would.
type errTimeout struct{}

func (errTimeout) Error() string   { return "faultnet: i/o timeout (link stalled)" }
func (errTimeout) Timeout() bool   { return true }
func (errTimeout) Temporary() bool { return true }

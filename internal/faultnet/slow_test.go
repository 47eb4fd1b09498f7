package faultnet

import (
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// TestSlowReadsAtTheRate: 30 KB through a 100 KB/s connection take at
// least 0.3 s less the first chunk's wait; a plain read of them takes
// next to nothing. The bound is a floor the limiter guarantees, not a
// measurement of the machine.
func TestSlowReadsAtTheRate(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const size, rate = 30_000, 100_000
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = conn.Write(make([]byte, size))
	}()
	s := &Slow{BytesPerSecond: rate}
	conn, err := s.Dial(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	n, err := io.Copy(io.Discard, conn)
	if err != nil || n != size {
		t.Fatalf("read %d bytes (%v), want %d", n, err, size)
	}
	if took, least := time.Since(start), time.Duration(size-rate/10)*time.Second/rate; took < least {
		t.Errorf("read %d bytes at %d B/s in %v, want at least %v", size, rate, took, least)
	}
}

// TestSlowLifted: once lifted, a connection's read is no longer cut to a
// tenth of a second's worth (10 bytes at 100 B/s): one read takes what
// the socket holds.
func TestSlowLifted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	written := make(chan struct{})
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = conn.Write(make([]byte, 1000))
		close(written)
		time.Sleep(time.Second)
	}()
	s := &Slow{BytesPerSecond: 100}
	conn, err := s.Dial(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	<-written
	s.Lift()
	buf := make([]byte, 1000)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if n <= 10 {
		t.Errorf("a lifted connection read %d bytes at once, want more than the 10 a 100 B/s limit allows", n)
	}
}

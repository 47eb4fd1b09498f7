package faultnet

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// TestStall: before the stall a connection echoes; after it, a write is
// accepted but never arrives, a read waits until its deadline and says it
// timed out, a read without a deadline returns once the connection is
// closed, and a new dial waits for its context.
func TestStall(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 10)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				buf := make([]byte, 100)
				for {
					n, err := conn.Read(buf)
					if err != nil {
						return
					}
					got <- append([]byte(nil), buf[:n]...)
					_, _ = conn.Write(buf[:n])
				}
			}()
		}
	}()
	s := &Stall{}
	conn, err := s.Dial(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	buf := make([]byte, 5)
	if _, err := conn.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("echo before the stall: %q, %v", buf, err)
	}
	<-got
	s.Stall()
	if n, err := conn.Write([]byte("lost!")); n != 5 || err != nil {
		t.Fatalf("write after the stall: %d, %v; want it accepted", n, err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	var ne net.Error
	if _, err := conn.Read(buf); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read after the stall: %v; want a timeout", err)
	}
	select {
	case b := <-got:
		t.Fatalf("the server got %q after the stall", b)
	case <-time.After(100 * time.Millisecond):
	}
	_ = conn.SetReadDeadline(time.Time{})
	read := make(chan error, 1)
	go func() { _, err := conn.Read(buf); read <- err }()
	select {
	case err := <-read:
		t.Fatalf("a read without a deadline returned while stalled: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	conn.Close()
	if err := <-read; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read after close: %v; want net.ErrClosed", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := s.Dial(ctx, "tcp", ln.Addr().String()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dial after the stall: %v; want it to wait for its context", err)
	}
}

package tick

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestEveryStopsOnError(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	err := Every(context.Background(), time.Millisecond, func() error {
		n++
		if n == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 3 {
		t.Fatalf("Every = %v after %d calls, want stop after 3", err, n)
	}
}

func TestEveryStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err := Every(ctx, time.Millisecond, func() error {
		n++
		if n == 2 {
			cancel()
		}
		return nil
	})
	if err != nil || n < 2 {
		t.Fatalf("Every = %v after %d calls, want nil after at least 2", err, n)
	}
}

func TestUntil(t *testing.T) {
	n := 0
	if !Until(context.Background(), time.Second, time.Millisecond, func() bool { n++; return n == 3 }) || n != 3 {
		t.Fatalf("Until: cond held at the third check, got n=%d", n)
	}
	if Until(context.Background(), 5*time.Millisecond, time.Millisecond, func() bool { return false }) {
		t.Fatal("Until: true for a condition that never holds")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Until(ctx, time.Hour, time.Millisecond, func() bool { return false }) {
		t.Fatal("Until: true after ctx ended")
	}
}

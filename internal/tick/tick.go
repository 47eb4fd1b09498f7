// Package tick runs a function on a fixed interval until its context ends:
// the producers, samplers and watchers of the demo, the benches, the chaos
// run, the live page and the tests.
package tick

import (
	"context"
	"time"
)

// Every calls fn every d, the first time d after the start, until ctx ends
// (it returns nil) or fn returns an error (it returns that error).
func Every(ctx context.Context, d time.Duration, fn func() error) error {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := fn(); err != nil {
				return err
			}
		}
	}
}

// Until checks cond at once and then every interval, and reports whether
// it held before timeout passed (or ctx ended).
func Until(ctx context.Context, timeout, interval time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if !time.Now().Before(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(min(interval, time.Until(deadline))):
		}
	}
	return true
}

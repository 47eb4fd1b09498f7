package baton

import (
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Every goroutine an App's Run starts must end by the time Run returns
// (shortly after: a goroutine may be on its way out). The tests run Run
// through goRun, which labels the goroutine calling it (runtime/pprof
// labels, inherited by every goroutine started from it, and so by every
// goroutine Run and the clients it makes start); once Run has returned,
// a goroutine still carrying the label is a leak and fails the test,
// with its stack.

// leakLabel is the pprof label key naming the run a goroutine belongs to.
const leakLabel = "baton-run"

var runSeq atomic.Int64

// goRun runs app.Run(ctx) on a goroutine of its own and returns the
// channel its error arrives on (buffered). When the test ends, if Run has
// returned, no goroutine it started may be left.
func goRun(t testing.TB, ctx context.Context, app *App) chan error {
	t.Helper()
	label := fmt.Sprintf("run-%d", runSeq.Add(1))
	done := make(chan error, 1)
	returned := make(chan struct{})
	go func() {
		err := runLabeled(ctx, label, app)
		close(returned)
		done <- err
	}()
	t.Cleanup(func() {
		select {
		case <-returned:
			checkRunLeaks(t, app.InstanceID(), label)
		default: // still running: the test's own stop reports that
		}
	})
	return done
}

// runLabeled runs app.Run(ctx) with its goroutines labeled label.
func runLabeled(ctx context.Context, label string, app *App) error {
	var err error
	pprof.Do(ctx, pprof.Labels(leakLabel, label), func(ctx context.Context) { err = app.Run(ctx) })
	return err
}

// runChecked is app.Run(ctx) on the calling goroutine, with the leak
// check once it returns.
func runChecked(t testing.TB, ctx context.Context, app *App) error {
	t.Helper()
	label := fmt.Sprintf("run-%d", runSeq.Add(1))
	err := runLabeled(ctx, label, app)
	checkRunLeaks(t, app.InstanceID(), label)
	return err
}

// leakIgnored are goroutines a client leaves behind that are not baton's:
// franz-go's fetch manager once outlived its client's Close in a run with
// cut connections, waiting for in-flight fetches to report back.
var leakIgnored = []string{"github.com/twmb/franz-go/pkg/kgo.(*fetchManager).manageFetchConcurrency"}

// checkRunLeaks fails t if goroutines labeled label are still running
// five seconds after the Run they belong to returned.
func checkRunLeaks(t testing.TB, instance, label string) {
	t.Helper()
	var left []string
	for deadline := time.Now().Add(5 * time.Second); ; {
		left = labeledGoroutines(label)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("instance %s: %d goroutine stacks still running 5 s after Run returned:\n%s", instance, len(left), strings.Join(left, "\n\n"))
}

// labeledGoroutines returns the stacks (pprof's goroutine profile, debug
// 1: one entry per distinct stack) of the goroutines carrying label.
func labeledGoroutines(label string) []string {
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		return []string{"reading the goroutine profile: " + err.Error()}
	}
	want := fmt.Sprintf("%q:%q", leakLabel, label)
	var out []string
	for _, entry := range strings.Split(buf.String(), "\n\n") {
		if !strings.Contains(entry, "# labels: ") || !strings.Contains(entry, want) {
			continue
		}
		ignored := false
		for _, fn := range leakIgnored {
			ignored = ignored || strings.Contains(entry, fn+"+")
		}
		if !ignored {
			out = append(out, entry)
		}
	}
	return out
}

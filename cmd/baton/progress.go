package main

import (
	"context"
	"io"
	"os"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/internal/tick"
)

// progress shows, on a terminal, one bar per task that is restoring on
// this instance (a learner, a standby catching up, an active task before
// it processes): records restored out of what it lacked when first seen.
// Log lines print above the bars through Writer.
type progress struct {
	p    *mpb.Progress
	bars map[string]*taskBar
}

type taskBar struct {
	bar   *mpb.Bar
	total int64
}

// stderrIsTerminal reports whether progress bars make sense on stderr.
func stderrIsTerminal() bool { return term.IsTerminal(int(os.Stderr.Fd())) }

func newProgress(out io.Writer) *progress {
	return &progress{p: mpb.New(mpb.WithOutput(out), mpb.WithWidth(40), mpb.WithRefreshRate(200*time.Millisecond)),
		bars: map[string]*taskBar{}}
}

// Writer prints above the bars.
func (pg *progress) Writer() io.Writer { return pg.p }

// update reflects one status snapshot in the bars.
func (pg *progress) update(st baton.Status) {
	seen := map[string]bool{}
	for _, t := range st.Tasks {
		if t.Lag <= 0 {
			continue
		}
		key := t.ID + " " + t.Role
		seen[key] = true
		tb, ok := pg.bars[key]
		if !ok {
			tb = &taskBar{total: t.Lag}
			tb.bar = pg.p.AddBar(t.Lag,
				mpb.PrependDecorators(decor.Name(st.Instance+" "+key, decor.WCSyncSpaceR)),
				mpb.AppendDecorators(decor.CountersNoUnit("%d / %d"), decor.Percentage(decor.WCSyncSpace)))
			pg.bars[key] = tb
		}
		if t.Lag > tb.total { // the changelog grew faster than the restore
			tb.total = t.Lag
			tb.bar.SetTotal(tb.total, false)
		}
		tb.bar.SetCurrent(tb.total - t.Lag)
	}
	for key, tb := range pg.bars {
		if !seen[key] { // caught up, or no longer here
			tb.bar.SetTotal(-1, true)
			delete(pg.bars, key)
		}
	}
}

// watch updates the bars from status every 250ms until ctx ends.
func (pg *progress) watch(ctx context.Context, status func() baton.Status) {
	_ = tick.Every(ctx, 250*time.Millisecond, func() error { pg.update(status()); return nil })
}

// stop completes the bars and ends the display.
func (pg *progress) stop() {
	for key, tb := range pg.bars {
		tb.bar.Abort(false)
		delete(pg.bars, key)
	}
	pg.p.Wait() // renders the bars' last state, then ends
}

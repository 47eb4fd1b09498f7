// Package restore reads the changelogs that standbys, learners and
// restoring actives follow, on a goroutine of its own (Restorer.Run), and
// hands their records to the runtime's loop in chunks. It owns the
// restore client's partitions; the loop owns the stores the records go to.
package restore

import (
	"context"
	"errors"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/topics"
)

// Restorer reads the changelogs that standbys, learners and restoring
// actives follow. It alone adds and removes the restore client's
// partitions, as the loop asks (start, stop), and it takes whole fetches
// from the client, so the client fetches the next while the loop applies
// this one. It hands the records to the loop in chunks of at most max
// records, each partition's records tagged with the session of the start
// that read them: a chunk read before a stop and a new start of the same
// partition carries the old session, and the loop drops it.
type Restorer struct {
	cl  *kgo.Client
	out chan<- Chunk
	max int

	mu     sync.Mutex // guards cmds and cancel, never across I/O
	cmds   []restoreCmd
	cancel context.CancelFunc // ends the poll in progress, if any
	wake   chan struct{}      // capacity 1: commands are queued

	// The restorer goroutine's own.
	sessions map[topics.Partition]uint64 // partitions read, with their session
	buf      []Part                      // records taken from the client, not yet handed over
}

type restoreCmd struct {
	tp      topics.Partition
	start   bool
	at      kgo.Offset // start: where to read from
	session uint64     // start: the session its records carry
}

// Part is records of one changelog partition, in offset order, read in
// Session.
type Part struct {
	TP      topics.Partition
	Session uint64
	Recs    []*kgo.Record
	HWM     int64 // the partition's end when fetched; -1 if the fetch failed
	Err     error
}

// Chunk is what the Restorer hands over at once: at most its max records
// (or one part's, when a part is cut).
type Chunk []Part

func New(cl *kgo.Client, out chan<- Chunk, max int) *Restorer {
	return &Restorer{cl: cl, out: out, max: max, wake: make(chan struct{}, 1), sessions: map[topics.Partition]uint64{}}
}

// Start asks the restorer to read tp from at (again, if it reads tp
// already), its records tagged with session. It does not wait.
func (r *Restorer) Start(tp topics.Partition, at kgo.Offset, session uint64) {
	r.post(restoreCmd{tp: tp, start: true, at: at, session: session})
}

// Stop asks the restorer to stop reading tp. It does not wait; records
// of tp already handed over or in flight still carry their session.
func (r *Restorer) Stop(tp topics.Partition) {
	r.post(restoreCmd{tp: tp})
}

func (r *Restorer) post(c restoreCmd) {
	r.mu.Lock()
	r.cmds = append(r.cmds, c)
	cancel := r.cancel
	r.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Run is the restorer's goroutine; it returns when ctx is done or done is
// closed.
func (r *Restorer) Run(ctx context.Context, done <-chan struct{}) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-done:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		r.takeCmds()
		if len(r.buf) == 0 {
			if len(r.sessions) == 0 {
				select {
				case <-ctx.Done():
					return
				case <-r.wake:
				}
				continue
			}
			r.poll(ctx)
			if ctx.Err() != nil {
				return
			}
			continue
		}
		chunk, rest := r.chunk()
		select {
		case <-ctx.Done(): // done closed too
			return
		case <-r.wake:
			// Commands first: they may drop some of the chunk.
		case r.out <- chunk:
			r.buf = rest
		}
	}
}

// takeCmds carries out the queued commands and drops buffered records
// of every partition they name.
func (r *Restorer) takeCmds() {
	r.mu.Lock()
	cmds := r.cmds
	r.cmds = nil
	r.mu.Unlock()
	if len(cmds) == 0 {
		return
	}
	named := map[topics.Partition]bool{}
	for _, c := range cmds {
		named[c.tp] = true
		if _, reading := r.sessions[c.tp]; reading {
			r.cl.RemoveConsumePartitions(map[string][]int32{c.tp.Topic: {c.tp.Part}})
			delete(r.sessions, c.tp)
		}
		if c.start {
			r.cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{c.tp.Topic: {c.tp.Part: c.at}})
			r.sessions[c.tp] = c.session
		}
	}
	kept := r.buf[:0]
	for _, p := range r.buf {
		if !named[p.TP] {
			kept = append(kept, p)
		}
	}
	clear(r.buf[len(kept):])
	r.buf = kept
}

// poll takes what the client has fetched, waiting for it if need be, until
// a command arrives.
func (r *Restorer) poll(ctx context.Context) {
	pctx, cancel := context.WithCancel(ctx)
	r.mu.Lock()
	if len(r.cmds) > 0 {
		r.mu.Unlock()
		cancel()
		return
	}
	r.cancel = cancel
	r.mu.Unlock()
	f := r.cl.PollFetches(pctx)
	r.mu.Lock()
	r.cancel = nil
	r.mu.Unlock()
	cancel()
	f.EachPartition(func(p kgo.FetchTopicPartition) {
		tp := topics.Partition{Topic: p.Topic, Part: p.Partition}
		session, reading := r.sessions[tp]
		if !reading {
			return
		}
		if p.Err != nil && len(p.Records) == 0 && (errors.Is(p.Err, context.Canceled) || errors.Is(p.Err, context.DeadlineExceeded)) {
			return
		}
		rp := Part{TP: tp, Session: session, Recs: p.Records, HWM: p.HighWatermark, Err: p.Err}
		if p.Err != nil {
			rp.HWM = -1
		}
		r.buf = append(r.buf, rp)
	})
}

// chunk splits off the first max records of the buffer (at least one part).
func (r *Restorer) chunk() (Chunk, []Part) {
	var out Chunk
	n := 0
	for i, p := range r.buf {
		if n >= r.max && len(out) > 0 {
			return out, r.buf[i:]
		}
		if take := r.max - n; len(p.Recs) > take && take > 0 {
			head := p
			head.Recs = p.Recs[:take]
			tail := append([]Part{{TP: p.TP, Session: p.Session, Recs: p.Recs[take:], HWM: p.HWM}}, r.buf[i+1:]...)
			return append(out, head), tail
		}
		out = append(out, p)
		n += len(p.Recs)
	}
	return out, nil
}

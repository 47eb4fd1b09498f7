package baton

import (
	"context"
	"errors"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// restorer reads the changelogs that standbys, learners and restoring
// actives follow. It alone adds and removes the restore client's
// partitions, as the loop asks (start, stop), and it takes whole fetches
// from the client, so the client fetches the next while the loop applies
// this one. It hands the records to the loop in chunks of at most max
// records, each partition's records tagged with the session of the start
// that read them: a chunk read before a stop and a new start of the same
// partition carries the old session, and the loop drops it.
type restorer struct {
	cl  *kgo.Client
	out chan<- restoreChunk
	max int

	mu     sync.Mutex // guards cmds and cancel, never across I/O
	cmds   []restoreCmd
	cancel context.CancelFunc // ends the poll in progress, if any
	wake   chan struct{}      // capacity 1: commands are queued

	// The restorer goroutine's own.
	sessions map[topicPart]uint64 // partitions read, with their session
	buf      []restorePart        // records taken from the client, not yet handed over
}

type topicPart struct {
	topic string
	part  int32
}

type restoreCmd struct {
	tp      topicPart
	start   bool
	at      kgo.Offset // start: where to read from
	session uint64     // start: the session its records carry
}

// restorePart is records of one changelog partition, in offset order.
type restorePart struct {
	tp      topicPart
	session uint64
	recs    []*kgo.Record
	hwm     int64 // the partition's end when fetched; -1 if the fetch failed
	err     error
}

type restoreChunk []restorePart

func newRestorer(cl *kgo.Client, out chan<- restoreChunk, max int) *restorer {
	return &restorer{cl: cl, out: out, max: max, wake: make(chan struct{}, 1), sessions: map[topicPart]uint64{}}
}

// start asks the restorer to read tp from at (again, if it reads tp
// already), its records tagged with session. It does not wait.
func (r *restorer) start(tp topicPart, at kgo.Offset, session uint64) {
	r.post(restoreCmd{tp: tp, start: true, at: at, session: session})
}

// stop asks the restorer to stop reading tp. It does not wait; records
// of tp already handed over or in flight still carry their session.
func (r *restorer) stop(tp topicPart) {
	r.post(restoreCmd{tp: tp})
}

func (r *restorer) post(c restoreCmd) {
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

// run is the restorer's goroutine; it returns when ctx is done or done is
// closed.
func (r *restorer) run(ctx context.Context, done <-chan struct{}) {
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
func (r *restorer) takeCmds() {
	r.mu.Lock()
	cmds := r.cmds
	r.cmds = nil
	r.mu.Unlock()
	if len(cmds) == 0 {
		return
	}
	named := map[topicPart]bool{}
	for _, c := range cmds {
		named[c.tp] = true
		if _, reading := r.sessions[c.tp]; reading {
			r.cl.RemoveConsumePartitions(map[string][]int32{c.tp.topic: {c.tp.part}})
			delete(r.sessions, c.tp)
		}
		if c.start {
			r.cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{c.tp.topic: {c.tp.part: c.at}})
			r.sessions[c.tp] = c.session
		}
	}
	kept := r.buf[:0]
	for _, p := range r.buf {
		if !named[p.tp] {
			kept = append(kept, p)
		}
	}
	clear(r.buf[len(kept):])
	r.buf = kept
}

// poll takes what the client has fetched, waiting for it if need be, until
// a command arrives.
func (r *restorer) poll(ctx context.Context) {
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
		tp := topicPart{p.Topic, p.Partition}
		session, reading := r.sessions[tp]
		if !reading {
			return
		}
		if p.Err != nil && len(p.Records) == 0 && (errors.Is(p.Err, context.Canceled) || errors.Is(p.Err, context.DeadlineExceeded)) {
			return
		}
		rp := restorePart{tp: tp, session: session, recs: p.Records, hwm: p.HighWatermark, err: p.Err}
		if p.Err != nil {
			rp.hwm = -1
		}
		r.buf = append(r.buf, rp)
	})
}

// chunk splits off the first max records of the buffer (at least one part).
func (r *restorer) chunk() (restoreChunk, []restorePart) {
	var out restoreChunk
	n := 0
	for i, p := range r.buf {
		if n >= r.max && len(out) > 0 {
			return out, r.buf[i:]
		}
		if take := r.max - n; len(p.recs) > take && take > 0 {
			head := p
			head.recs = p.recs[:take]
			tail := append([]restorePart{{tp: p.tp, session: p.session, recs: p.recs[take:], hwm: p.hwm}}, r.buf[i+1:]...)
			return append(out, head), tail
		}
		out = append(out, p)
		n += len(p.recs)
	}
	return out, nil
}

package query

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Peer is another instance of the application as the group shows it.
type Peer struct {
	Instance string
	// Endpoint is host:port of its HTTP server; empty: it cannot be
	// asked.
	Endpoint string
	// Tasks are the tasks it runs in any role, as of the group's last
	// round.
	Tasks []string
}

// Source is what a Router reads on this instance.
type Source interface {
	// Instance is this instance's id.
	Instance() string
	// Reads says whether store can serve reads of a kind ("key", "range"
	// or "window"): nil, or an error wrapping ErrBadRequest that says
	// why (a store's keys are laid out for one kind of read). A store it
	// does not know is left to TaskOf and Tasks.
	Reads(store, kind string) error
	// TaskOf returns the task whose store holds key (ErrNoStore for a
	// store queries cannot read).
	TaskOf(store string, key []byte) (string, error)
	// Read reads key from this instance's copy of task, if it has one
	// that is open. It is called from any goroutine.
	Read(task, store string, key []byte) (Copy, bool, error)
	// Tasks returns the tasks of store (ErrNoStore as TaskOf).
	Tasks(store string) ([]string, error)
	// ReadRange reads the first limit keys in [from, to) of this
	// instance's copy of task into the Copy's Entries (Truncated when
	// there were more), as Read.
	ReadRange(task, store string, from, to []byte, limit int) (Copy, bool, error)
	// ReadWindows reads the first limit windows of key starting in
	// [from, to) of this instance's copy of task's windowed store, as
	// ReadRange.
	ReadWindows(task, store string, key []byte, from, to time.Time, limit int) (Copy, bool, error)
	// Peers returns the group's instances (this one too: the Router
	// skips it).
	Peers(ctx context.Context) ([]Peer, error)
}

// peerTTL is how long a read of the group serves before it is read
// again.
const peerTTL = time.Second

// retry is how long a read waits before looking again for a copy that
// meets its bounds.
const retry = 25 * time.Millisecond

// Observer is told of reads: Asked for each read asked of this instance
// (kind "key", "range" or "window"; outcome "answered", "unavailable",
// "no_store", "bad_query" or "error"), Served for each one its own copy
// answered, with the copy's role. It must not block.
type Observer interface {
	Asked(kind, outcome string, took time.Duration)
	Served(role string)
}

// Router answers reads wherever the task lives. Create it with
// NewRouter; it is safe for concurrent use.
type Router struct {
	src    Source
	client *http.Client
	obs    Observer

	mu struct {
		sync.Mutex
		peers  []Peer
		readAt time.Time
		// endpoints keeps the last endpoint seen of each instance: while
		// the group rebalances its members' metadata is hidden.
		endpoints map[string]string
		// route is, per task, the endpoint that last answered a read of
		// it as the active.
		route map[string]string
	}
}

// NewRouter returns a Router reading src, asking other instances with
// client (nil: a client of its own) and telling obs (nil: nobody).
func NewRouter(src Source, client *http.Client, obs Observer) *Router {
	if client == nil {
		client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8, IdleConnTimeout: 30 * time.Second}}
	}
	r := &Router{src: src, client: client, obs: obs}
	r.mu.endpoints = map[string]string{}
	r.mu.route = map[string]string{}
	return r
}

// op is one kind of read, of one task: of this instance's copy, and of
// another instance's (asked to read its own copy, at once).
type op struct {
	local  func() (Copy, bool, error)
	remote func(ctx context.Context, endpoint string, b Bounds) (Answer, error)
}

// Get reads key from store through a copy that meets b: this instance's
// own, or, unless here, another instance's (asked over HTTP, Ask). It
// looks again until the bounds' timeout while no copy meets them, for
// example while the task is handed over; then it returns an error
// wrapping ErrUnavailable. here makes it read this instance only, and at
// once: what one instance asks another.
func (r *Router) Get(ctx context.Context, store string, key []byte, b Bounds, here bool) (a Answer, err error) {
	start := time.Now()
	defer func() { r.asked("key", here, start, err) }()
	if err := b.check(); err != nil {
		return Answer{}, err
	}
	if err := r.src.Reads(store, "key"); err != nil {
		return Answer{}, err
	}
	b = b.withDefaults()
	task, err := r.taskOf(ctx, store, key, b, here)
	if err != nil {
		return Answer{}, err
	}
	return r.serve(ctx, start, store, task, b, here, op{
		local: func() (Copy, bool, error) { return r.src.Read(task, store, key) },
		remote: func(ctx context.Context, endpoint string, b Bounds) (Answer, error) {
			return Ask(ctx, r.client, endpoint, store, key, b, true)
		},
	})
}

// asked tells the observer of a read asked of this instance (not of one
// another instance forwarded: here).
func (r *Router) asked(kind string, here bool, start time.Time, err error) {
	if r.obs == nil || here {
		return
	}
	outcome := "answered"
	switch {
	case errors.Is(err, ErrNoStore):
		outcome = "no_store"
	case errors.Is(err, ErrBadRequest):
		outcome = "bad_query"
	case errors.Is(err, ErrUnavailable):
		outcome = "unavailable"
	case err != nil:
		outcome = "error"
	}
	r.obs.Asked(kind, outcome, time.Since(start))
}

// taskOf maps key to its task.
func (r *Router) taskOf(ctx context.Context, store string, key []byte, b Bounds, here bool) (task string, err error) {
	err = whenKnown(ctx, b, here, func() (err error) {
		task, err = r.src.TaskOf(store, key)
		return err
	})
	return task, err
}

// whenKnown calls f until it returns something other than ErrUnavailable
// or the bounds' timeout passes: an instance that has not joined yet does
// not know its topics' partitions, and a read waits for them as for a
// copy.
func whenKnown(ctx context.Context, b Bounds, here bool, f func() error) error {
	start := time.Now()
	err := f()
	for errors.Is(err, ErrUnavailable) && !here && time.Since(start)+retry <= b.Timeout {
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(retry):
		}
		err = f()
	}
	return err
}

// serve runs o on task until a copy that meets b answers, or the timeout
// counted from start passes.
func (r *Router) serve(ctx context.Context, start time.Time, store, task string, b Bounds, here bool, o op) (Answer, error) {
	b.MinOffset = max(b.MinOffset, b.MinOffsets[task])
	miss := &UnavailableError{Store: store, Task: task, Bounds: b, Lowest: -1, Offset: -1}
	for {
		if a, ok := r.attempt(ctx, task, b, here, o, miss); ok {
			return a, nil
		}
		miss.Waited = time.Since(start)
		if here || miss.Waited+retry > b.Timeout {
			return Answer{}, miss
		}
		select {
		case <-ctx.Done():
			return Answer{}, errors.Join(miss, ctx.Err())
		case <-time.After(retry):
		}
	}
}

// attempt looks once: this instance's copy, then the instance that
// answered last as the active, then every instance the group shows with
// the task, then every other. It notes in miss what it saw.
func (r *Router) attempt(ctx context.Context, task string, b Bounds, here bool, o op, miss *UnavailableError) (Answer, bool) {
	seen := func(c Copy) {
		if miss.Lowest < 0 || c.Lag < miss.Lowest {
			miss.Lowest = c.Lag
		}
		miss.Offset = max(miss.Offset, c.Offset)
	}
	c, ok, err := o.local()
	if err == nil && ok {
		seen(c)
		if Serves(c, b) {
			if r.obs != nil {
				r.obs.Served(c.Role)
			}
			return c.Answer, true
		}
	}
	if here {
		return Answer{}, false
	}
	peers := r.peers(ctx)
	asked := map[string]bool{}
	r.mu.Lock()
	last := r.mu.route[task]
	r.mu.Unlock()
	var first, rest []string
	for _, p := range peers {
		switch {
		case p.Endpoint == "" || p.Endpoint == last:
		case slices.Contains(p.Tasks, task):
			first = append(first, p.Endpoint)
		default:
			rest = append(rest, p.Endpoint)
		}
	}
	var rounds [][]string
	if last != "" {
		rounds = append(rounds, []string{last})
	}
	rounds = append(rounds, first, rest)
	for _, endpoints := range rounds {
		var todo []string
		for _, e := range endpoints {
			if !asked[e] {
				asked[e] = true
				todo = append(todo, e)
			}
		}
		if a, ok := r.ask(ctx, todo, task, b, o, seen); ok {
			r.mu.Lock()
			if a.Role == RoleActive {
				r.mu.route[task] = a.endpoint
			} else if r.mu.route[task] == a.endpoint {
				delete(r.mu.route, task)
			}
			r.mu.Unlock()
			return a.Answer, true
		}
	}
	return Answer{}, false
}

type remote struct {
	Answer
	endpoint string
}

// ask asks every endpoint at once to read its own copy, and returns the
// best answer that meets b.
func (r *Router) ask(ctx context.Context, endpoints []string, task string, b Bounds, o op, seen func(Copy)) (remote, bool) {
	if len(endpoints) == 0 {
		return remote{}, false
	}
	type reply struct {
		a   Answer
		err error
		e   string
	}
	replies := make(chan reply, len(endpoints))
	for _, e := range endpoints {
		go func() {
			// Asked for any lag, so that the reply says how far behind
			// the copy is; the bounds are checked here.
			a, err := o.remote(ctx, e, Bounds{MaxLag: maxLag, Limit: b.Limit})
			replies <- reply{a, err, e}
		}()
	}
	var best remote
	found := false
	for range endpoints {
		rp := <-replies
		if rp.err != nil || rp.a.Task != task {
			continue
		}
		c := Copy{Answer: rp.a}
		seen(c)
		// A restoring active reports its lag; it serves a bounded read
		// within it, and an unbounded one never.
		c.Restoring = rp.a.Role == RoleActive && rp.a.Lag > 0
		if Serves(c, b) && (!found || better(rp.a, best.Answer)) {
			best, found = remote{rp.a, rp.e}, true
		}
	}
	return best, found
}

// maxLag is the bound a Router sends another instance: any copy.
const maxLag = int64(1) << 62

// peers returns the group's other instances, read at most every peerTTL.
func (r *Router) peers(ctx context.Context) []Peer {
	r.mu.Lock()
	fresh := time.Since(r.mu.readAt) < peerTTL
	peers := r.mu.peers
	r.mu.Unlock()
	if fresh {
		return peers
	}
	read, err := r.src.Peers(ctx)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.readAt = time.Now()
	if err != nil {
		return r.mu.peers
	}
	self := r.src.Instance()
	out := make([]Peer, 0, len(read))
	for _, p := range read {
		if p.Instance == self {
			continue
		}
		if p.Endpoint != "" {
			r.mu.endpoints[p.Instance] = p.Endpoint
		} else {
			p.Endpoint = r.mu.endpoints[p.Instance]
		}
		out = append(out, p)
	}
	r.mu.peers = out
	return out
}

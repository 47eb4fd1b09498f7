package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/baton-streams/baton/internal/query"
	"github.com/baton-streams/baton/lifecycle"
	"github.com/baton-streams/baton/member"
	"github.com/baton-streams/baton/state"
	"github.com/baton-streams/baton/topology"
)

// readCopy is this instance's copy of a task as queries read it: its role
// and lag as the loop last published them, and its open stores.
type readCopy struct {
	role      lifecycle.Role
	restoring bool
	lag       int64
	stores    map[string]state.Store
}

// publishReadable replaces what queries read (App.readable) with the
// tasks of the published snapshot whose stores are open. A store closed
// since reads ErrClosed, which a query takes for no copy here.
func (a *App) publishReadable(tasks []taskView) {
	m := make(map[string]readCopy, len(tasks))
	for _, v := range tasks {
		t, ok := a.tasks[v.id]
		if !ok || len(t.Stores) == 0 {
			continue
		}
		c := readCopy{role: v.role, restoring: v.restoring, lag: v.lag, stores: make(map[string]state.Store, len(t.Stores))}
		for name, st := range t.Stores {
			c.stores[name] = st.State
		}
		m[v.id] = c
	}
	a.readable.Store(&m)
}

// QueryObserver counts reads in the App's metrics.
func (a *App) QueryObserver() query.Observer { return queryObserver{a} }

type queryObserver struct{ a *App }

func (o queryObserver) Asked(kind, outcome string, took time.Duration) {
	o.a.metrics.Queries.WithLabelValues(kind, outcome).Inc()
	o.a.metrics.QuerySeconds.Observe(took.Seconds())
}

func (o queryObserver) Served(role string) { o.a.metrics.QueryServed.WithLabelValues(role).Inc() }

// QuerySource is what a query.Router reads on this instance.
func (a *App) QuerySource() query.Source { return querySource{a} }

type querySource struct{ a *App }

func (q querySource) Instance() string { return q.a.cfg.InstanceID }

// storeTasks returns the subtopology of store and its partition count.
func (q querySource) storeTasks(store string) (sub int, parts int32, err error) {
	a := q.a
	for _, g := range a.top.GlobalStores() {
		if g.Name == store {
			return 0, 0, fmt.Errorf("%w: %q is a global store; queries read the stores of tasks", query.ErrNoStore, store)
		}
	}
	for _, s := range a.top.Subtopologies() {
		if !slices.ContainsFunc(s.Stores, func(st topology.StoreSpec) bool { return st.Name == store }) {
			continue
		}
		a.partsMu.Lock()
		n := a.topicParts[s.Sources[0]]
		a.partsMu.Unlock()
		if n <= 0 {
			return 0, 0, fmt.Errorf("%w: store %s: instance %s does not know the partitions of %s yet (it has not joined)", query.ErrUnavailable, store, a.cfg.InstanceID, s.Sources[0])
		}
		return s.ID, n, nil
	}
	return 0, 0, fmt.Errorf("%w: %q (the application's stores: %v)", query.ErrNoStore, store, a.StoreNames())
}

// Reads says whether store's keys are laid out for reads of kind: keys
// and ranges of a key-value store, windows of a window store.
func (q querySource) Reads(store, kind string) error {
	var spec topology.StoreSpec
	for _, s := range q.a.top.Subtopologies() {
		if i := slices.IndexFunc(s.Stores, func(st topology.StoreSpec) bool { return st.Name == store }); i >= 0 {
			spec = s.Stores[i]
		}
	}
	if spec.Name == "" {
		return nil // storeTasks names it
	}
	want := topology.KeyValueStore
	if kind == "window" {
		want = topology.WindowStore
	}
	if spec.Kind == want {
		return nil
	}
	why := "read its keys and ranges of keys instead"
	switch spec.Kind {
	case topology.WindowStore:
		why = "read its windows instead (window-from, window-to; App.Windows)"
	case topology.SessionStore:
		why = "its sessions cannot be read from outside"
	case topology.InternalStore:
		why = "it holds an operator's own state, not the application's data"
	}
	return fmt.Errorf("%w: store %q is a %s store, which a %s read cannot read: %s", query.ErrBadRequest, store, spec.Kind, kind, why)
}

// TaskOf maps key to its task as the topology's partitioner places it:
// the partition of key among the partitions of the store's subtopology's
// sources.
func (q querySource) TaskOf(store string, key []byte) (string, error) {
	sub, n, err := q.storeTasks(store)
	if err != nil {
		return "", err
	}
	return topology.TaskID(sub, topology.Partition(key, n)), nil
}

// Tasks returns every task of store's subtopology.
func (q querySource) Tasks(store string) ([]string, error) {
	sub, n, err := q.storeTasks(store)
	if err != nil {
		return nil, err
	}
	out := make([]string, n)
	for p := range n {
		out[p] = topology.TaskID(sub, p)
	}
	return out, nil
}

// StoreNames returns the names of the stores queries read: every store
// of the topology's tasks, sorted.
func (a *App) StoreNames() []string {
	var names []string
	for _, s := range a.top.Subtopologies() {
		for _, st := range s.Stores {
			names = append(names, st.Name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// copyOf returns this instance's open copy of task's store, if it may
// answer reads.
func (q querySource) copyOf(task, store string) (readCopy, state.Store, bool) {
	a := q.a
	if _, unconfirmed := a.confirmation(time.Now()); unconfirmed {
		// The group has not confirmed this member for a session timeout:
		// others may run its tasks by now, and how far behind its copies
		// are is not known. It serves nothing until confirmed again.
		return readCopy{}, nil, false
	}
	m := a.readable.Load()
	if m == nil {
		return readCopy{}, nil, false
	}
	c, ok := (*m)[task]
	if !ok {
		return readCopy{}, nil, false
	}
	st, ok := c.stores[store]
	return c, st, ok
}

// answer is what copy c says of itself, reading store of task at checkpoint ckpt.
func (q querySource) answer(c readCopy, task, store string, ckpt int64) query.Copy {
	return query.Copy{Restoring: c.restoring, Answer: query.Answer{Store: store, Task: task, Instance: q.a.cfg.InstanceID,
		Role: c.role.String(), Lag: c.lag, Offset: ckpt}}
}

// Read reads key from this instance's copy of task.
func (q querySource) Read(task, store string, key []byte) (query.Copy, bool, error) {
	c, st, ok := q.copyOf(task, store)
	if !ok {
		return query.Copy{}, false, nil
	}
	v, found, ckpt, err := st.Read(key)
	if errors.Is(err, state.ErrClosed) {
		return query.Copy{}, false, nil // closed since published: not here any more
	}
	if err != nil {
		return query.Copy{}, false, err
	}
	out := q.answer(c, task, store, ckpt)
	out.Key, out.Found, out.Value = key, found, v
	return out, true, nil
}

// errEnough stops a store read that has what it needs.
var errEnough = errors.New("enough")

// ReadWindows reads the first limit windows of key starting in
// [from, to) of this instance's copy of task's windowed store. The
// store sorts windows by start, then key: the read goes over every key's
// windows in that time and keeps key's.
func (q querySource) ReadWindows(task, store string, key []byte, from, to time.Time, limit int) (query.Copy, bool, error) {
	return q.readEntries(task, store, limit, func(st state.Store, keep func(query.Entry) error) (int64, error) {
		return st.ReadRange(topology.WindowStoreKey(from, nil), topology.WindowStoreKey(to, nil), 0, func(k, v []byte) error {
			start, rk, ok := topology.ParseWindowStoreKey(k)
			if !ok || !bytes.Equal(rk, key) {
				return nil
			}
			return keep(query.Entry{Key: key, Value: v, WindowStart: start})
		})
	})
}

// ReadRange reads the first limit keys in [from, to) of this instance's
// copy of task.
func (q querySource) ReadRange(task, store string, from, to []byte, limit int) (query.Copy, bool, error) {
	return q.readEntries(task, store, limit, func(st state.Store, keep func(query.Entry) error) (int64, error) {
		return st.ReadRange(from, to, 0, func(k, v []byte) error { return keep(query.Entry{Key: k, Value: v}) })
	})
}

// readEntries runs read on this instance's copy of task's store, keeping
// the first limit entries it gives (one more tells a truncated read).
func (q querySource) readEntries(task, store string, limit int, read func(state.Store, func(query.Entry) error) (int64, error)) (query.Copy, bool, error) {
	c, st, ok := q.copyOf(task, store)
	if !ok {
		return query.Copy{}, false, nil
	}
	var entries []query.Entry
	ckpt, err := read(st, func(e query.Entry) error {
		e.Task = task
		entries = append(entries, e)
		if len(entries) > limit {
			return errEnough
		}
		return nil
	})
	if errors.Is(err, state.ErrClosed) {
		return query.Copy{}, false, nil // closed since published: not here any more
	}
	if err != nil && !errors.Is(err, errEnough) {
		return query.Copy{}, false, err
	}
	out := q.answer(c, task, store, ckpt)
	if len(entries) > limit {
		entries, out.Truncated = entries[:limit], true
	}
	out.Entries = entries
	return out, true, nil
}

// errRebalancing: the group's members' metadata is hidden while it
// rebalances; the Router keeps what it read before.
var errRebalancing = errors.New("the group is rebalancing")

// Peers reads the group's members from the cluster.
func (q querySource) Peers(ctx context.Context) ([]query.Peer, error) {
	a := q.a
	adm := a.adminClient.Load()
	if adm == nil {
		return nil, errors.New("not running")
	}
	g, err := member.ReadGroup(ctx, adm, a.cfg.AppID)
	if err != nil {
		return nil, err
	}
	var out []query.Peer
	for _, m := range g.Members {
		if m.Pending {
			return nil, errRebalancing
		}
		active, standby, learner := m.Roles()
		out = append(out, query.Peer{Instance: m.Subscription.InstanceID, Endpoint: m.Subscription.Endpoint,
			Tasks: slices.Concat(active, standby, learner)})
	}
	return out, nil
}

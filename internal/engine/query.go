package engine

import (
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

// QuerySource is what a query.Router reads on this instance.
func (a *App) QuerySource() query.Source { return querySource{a} }

type querySource struct{ a *App }

func (q querySource) Instance() string { return q.a.cfg.InstanceID }

// TaskOf maps key to its task as the topology's partitioner places it:
// the partition of key among the partitions of the store's subtopology's
// sources.
func (q querySource) TaskOf(store string, key []byte) (string, error) {
	a := q.a
	for _, g := range a.top.GlobalStores() {
		if g.Name == store {
			return "", fmt.Errorf("%w: %q is a global store; queries read the stores of tasks", query.ErrNoStore, store)
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
			return "", fmt.Errorf("%w: store %s: instance %s does not know the partitions of %s yet (it has not joined)", query.ErrUnavailable, store, a.cfg.InstanceID, s.Sources[0])
		}
		return topology.TaskID(s.ID, topology.Partition(key, n)), nil
	}
	return "", fmt.Errorf("%w: %q (the application's stores: %v)", query.ErrNoStore, store, a.StoreNames())
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

// Read reads key from this instance's copy of task.
func (q querySource) Read(task, store string, key []byte) (query.Copy, bool, error) {
	a := q.a
	if _, unconfirmed := a.confirmation(time.Now()); unconfirmed {
		// The group has not confirmed this member for a session timeout:
		// others may run its tasks by now, and how far behind its copies
		// are is not known. It serves nothing until confirmed again.
		return query.Copy{}, false, nil
	}
	m := a.readable.Load()
	if m == nil {
		return query.Copy{}, false, nil
	}
	c, ok := (*m)[task]
	if !ok {
		return query.Copy{}, false, nil
	}
	st, ok := c.stores[store]
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
	return query.Copy{Restoring: c.restoring, Answer: query.Answer{Store: store, Key: key, Found: found, Value: v,
		Task: task, Instance: a.cfg.InstanceID, Role: c.role.String(), Lag: c.lag, Offset: ckpt}}, true, nil
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

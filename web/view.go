package web

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/lifecycle"
	"github.com/baton-streams/baton/topology"
)

// View is what GET /group returns: the whole group as this instance sees
// it. Every list is sorted, so equal inputs give equal JSON.
type View struct {
	AppID    string `json:"app_id"`
	Self     string `json:"self"`
	Observed string `json:"observed"` // RFC 3339, when the view was built
	// Generation is the highest generation any reachable instance reports.
	Generation int32 `json:"generation"`
	// Leader is the instance whose /status says it leads, or "".
	Leader string `json:"leader"`
	// GroupState is the coordinator's state of the group, or "" when the
	// group could not be described (GroupError says why).
	GroupState string            `json:"group_state"`
	GroupError string            `json:"group_error,omitempty"`
	Instances  []InstanceView    `json:"instances"`
	Plan       *baton.PlanStatus `json:"plan"`
	// Input is the group's input lag and rate (see GroupInput).
	Input GroupInput `json:"input"`
	// Autoscale is the leader's recommendation for the group's size (its
	// Status.Autoscale), or nil when the leader is unknown or has none.
	Autoscale *baton.AutoscaleStatus `json:"autoscale"`
	plans     []baton.PlanStatus     // the leader's recent plans, for the timeline
	Timeline  []Rebalance            `json:"timeline"`
	// Stores are the application's stores that GET /query reads; the
	// page has a query box for each.
	Stores []string `json:"stores"`
}

// GroupInput is the group's input lag and rate, over the active tasks of
// the instances read from their live /status.
type GroupInput struct {
	// Records is the tasks' input lag in records, summed.
	Records int64 `json:"records"`
	// Seconds is the largest of the tasks' input lag in seconds.
	Seconds float64 `json:"seconds"`
	// Rate is the records per second arriving on the tasks' input, summed.
	Rate float64 `json:"rate"`
	// Partial says some active tasks are not counted: their instance was
	// shown from its subscription, or had not read its input yet.
	Partial bool `json:"partial"`
}

// InstanceView is one instance: its tasks and where they were read.
type InstanceView struct {
	ID       string `json:"id"`
	Endpoint string `json:"endpoint"`
	Rack     string `json:"rack,omitempty"`
	Workers  int    `json:"workers"`
	// WorkerRate is the instance's Status.WorkerRate: records one of its
	// workers processes per second of busy time; 0 when not measured or
	// not read.
	WorkerRate float64 `json:"worker_rate"`
	// Restore is the instance's Status.Restore: what its restores read
	// and how long its warm copies' restores gave way to busy active
	// tasks; nil when not read from its live status.
	Restore *baton.RestoreStatus `json:"restore,omitempty"`
	Leaving bool                 `json:"leaving"`
	// Unconfirmed is the instance's Status.Unconfirmed: the group has not
	// confirmed it lately, and its active tasks may run elsewhere already.
	Unconfirmed bool `json:"unconfirmed,omitempty"`
	Leader      bool `json:"leader"`
	Self        bool `json:"self"`
	// Member says the coordinator lists the instance in the group; an
	// instance that is not (yet) a member is shown from its own status.
	Member bool `json:"member"`
	// Source is "status" when the tasks come from the instance's live
	// /status, "subscription" when it was unreachable and they come from
	// its last join (lags as of then).
	Source string     `json:"source"`
	Error  string     `json:"error,omitempty"`
	Tasks  []TaskView `json:"tasks"`
}

// TaskView is one task on one instance. Its role is the role's name in
// JSON ("active", "standby", "learner").
type TaskView struct {
	ID        string         `json:"id"`
	Role      lifecycle.Role `json:"role"`
	Lag       int64          `json:"lag"`
	Processed int64          `json:"processed"`
	// Progress is, for a learner, standby or restoring active task, the
	// share of the largest lag seen for it that has been restored (0..1);
	// 1 for a task that is caught up.
	Progress float64 `json:"progress"`
	// Input is an active task's input lag and rate from its instance's
	// live /status; nil otherwise.
	Input *baton.InputLag `json:"input,omitempty"`
	// Load is the task's load from its instance's live /status (the
	// share of a worker's time its processing takes); 0 when unknown.
	Load float64 `json:"load,omitempty"`
}

// peer is what asking one instance for its /status gave.
type peer struct {
	status *baton.Status
	err    string
}

// merge builds the view from this instance's status, the described group
// (nil when it could not be read), the peers' statuses by instance id and
// the changelogs' end offsets by partition (the largest over the app's
// changelogs: how many records restoring that partition's task reads at
// most). It is pure: peaks (the largest lag seen per instance/task) is the
// caller's memory, updated in place.
func merge(self baton.Status, endpoint string, g *Group, groupErr error, peers map[string]peer, changelogEnds map[int32]int64, peaks map[string]int64, now time.Time) View {
	v := View{AppID: self.AppID, Self: self.Instance, Observed: now.UTC().Format(time.RFC3339Nano)}
	if g != nil {
		v.GroupState = g.State
	}
	if groupErr != nil {
		v.GroupError = groupErr.Error()
	}
	byID := map[string]*InstanceView{}
	add := func(iv InstanceView) *InstanceView {
		if old, ok := byID[iv.ID]; ok {
			return old
		}
		p := &iv
		byID[iv.ID] = p
		return p
	}
	statuses := map[string]*baton.Status{self.Instance: &self}
	for id, p := range peers {
		if p.status != nil {
			statuses[id] = p.status
		}
	}
	selfView := add(InstanceView{ID: self.Instance, Endpoint: endpoint, Self: true, Source: "status"})
	if g != nil {
		for _, m := range g.Members {
			s := m.Subscription
			iv := add(InstanceView{ID: s.InstanceID, Endpoint: s.Endpoint, Source: "subscription"})
			iv.Member = true
			iv.Rack, iv.Leaving = s.Rack, s.Leaving
			if iv.Endpoint == "" {
				iv.Endpoint = s.Endpoint
			}
			if iv.Workers == 0 {
				iv.Workers = int(s.Capacity)
			}
			if m.Err != nil && iv.Error == "" {
				iv.Error = "subscription: " + m.Err.Error()
			}
			if iv.Self {
				continue
			}
			st, ok := statuses[s.InstanceID]
			switch {
			case ok:
				iv.Source = "status"
				iv.Tasks = tasksOf(st, iv)
				iv.WorkerRate, iv.Unconfirmed, iv.Restore = st.WorkerRate, st.Unconfirmed, &st.Restore
			default:
				iv.Tasks = tasksOfSubscription(m)
				if p, asked := peers[s.InstanceID]; asked && p.err != "" {
					iv.Error = p.err
				} else if s.Endpoint == "" {
					iv.Error = "no endpoint in its subscription (started without an HTTP address)"
				}
			}
		}
	}
	selfView.Tasks = tasksOf(&self, selfView)
	selfView.Workers, selfView.Leaving, selfView.WorkerRate = self.Workers, self.Leaving, self.WorkerRate
	selfView.Unconfirmed, selfView.Restore = self.Unconfirmed, &self.Restore

	// Leader and plan: the instance whose live status says it leads. The
	// highest generation wins if two say so (the old leader's status can
	// lag a round behind).
	var leader *baton.Status
	for _, id := range slices.Sorted(maps.Keys(statuses)) {
		st := statuses[id]
		v.Generation = max(v.Generation, st.Generation)
		if st.Leader && (leader == nil || st.Generation > leader.Generation) {
			leader = st
		}
	}
	if leader != nil {
		v.Leader = leader.Instance
		v.Plan = leader.Plan
		v.plans = leader.Plans
		v.Autoscale = leader.Autoscale
		if iv, ok := byID[leader.Instance]; ok {
			iv.Leader = true
		}
	}

	for _, id := range slices.Sorted(maps.Keys(byID)) {
		iv := byID[id]
		seen := map[string]bool{}
		for i := range iv.Tasks {
			t := &iv.Tasks[i]
			key := iv.ID + "/" + t.ID
			seen[key] = true
			if t.Lag > peaks[key] {
				peaks[key] = t.Lag
			}
			// Progress is against the whole changelog when its size is
			// known, else against the largest lag seen (a learner first
			// seen half-way then starts at 0%).
			total := peaks[key]
			if _, p, err := topology.ParseTaskID(t.ID); err == nil {
				total = max(total, changelogEnds[p])
			}
			t.Progress = 1
			if total > 0 {
				t.Progress = float64(total-t.Lag) / float64(total)
			}
		}
		// Forget peaks of tasks the instance no longer has, and of tasks
		// that caught up, so that the next learner starts a new bar.
		for key := range peaks {
			if strings.HasPrefix(key, iv.ID+"/") && !seen[key] {
				delete(peaks, key)
			}
		}
		for i := range iv.Tasks {
			if iv.Tasks[i].Lag == 0 {
				delete(peaks, iv.ID+"/"+iv.Tasks[i].ID)
			}
		}
		if iv.Tasks == nil {
			iv.Tasks = []TaskView{}
		}
		v.Input.add(iv)
		v.Instances = append(v.Instances, *iv)
	}
	// Peaks of instances that are gone.
	for key := range peaks {
		id, _, _ := strings.Cut(key, "/")
		if _, ok := byID[id]; !ok {
			delete(peaks, key)
		}
	}
	return v
}

// add counts the instance's active tasks into the group's input.
func (g *GroupInput) add(iv *InstanceView) {
	for _, t := range iv.Tasks {
		if t.Role != lifecycle.Active {
			continue
		}
		if t.Input == nil {
			g.Partial = true
			continue
		}
		g.Records += t.Input.Records
		g.Seconds = max(g.Seconds, t.Input.Seconds)
		g.Rate += t.Input.Rate
	}
}

// tasksOf shows a member from its live status. A task whose role this
// build does not know (a newer peer's) is shown with no role, and the
// instance's error says so.
func tasksOf(st *baton.Status, iv *InstanceView) []TaskView {
	out := make([]TaskView, 0, len(st.Tasks))
	for _, t := range st.Tasks {
		role, err := lifecycle.ParseRole(t.Role)
		if err != nil && iv.Error == "" {
			iv.Error = fmt.Sprintf("status: task %s: %v", t.ID, err)
		}
		out = append(out, TaskView{ID: t.ID, Role: role, Lag: t.Lag, Processed: t.Processed, Input: t.Input, Load: t.Load})
	}
	sortTasks(out)
	return out
}

// tasksOfSubscription shows a member from the group's record: roles from
// its last assignment, lags from its last join, nothing processed known.
func tasksOfSubscription(m Member) []TaskView {
	s := m.Subscription
	active, standby, learner := m.Roles()
	var out []TaskView
	for _, l := range []struct {
		role lifecycle.Role
		ids  []string
	}{{lifecycle.Active, active}, {lifecycle.Standby, standby}, {lifecycle.Learner, learner}} {
		for _, id := range l.ids {
			out = append(out, TaskView{ID: id, Role: l.role, Lag: s.Lags[id]})
		}
	}
	sortTasks(out)
	return out
}

func sortTasks(ts []TaskView) {
	sort.Slice(ts, func(i, j int) bool { return ts[i].ID < ts[j].ID })
}

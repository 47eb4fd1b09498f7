package web

import (
	"sort"
	"strings"
	"time"

	"github.com/baton-streams/baton"
)

// Rebalance is one plan the group's leader made, as the timeline keeps it.
type Rebalance struct {
	Generation int32  `json:"generation"`
	Time       string `json:"time"` // RFC 3339: when this instance first saw the plan
	Leader     string `json:"leader"`
	// Revoked lists "task from instance" moves started by this plan.
	Revoked []Move `json:"revoked"`
	// Learners lists the learners the plan keeps or places.
	Learners []Move `json:"learners"`
	// Orphans lists tasks given an owner because they had none.
	Orphans  []Move   `json:"orphans"`
	Reasons  []string `json:"reasons"`
	Followup bool     `json:"followup"`
}

// Move is a task and the instance a decision is about.
type Move struct {
	Task     string `json:"task"`
	Instance string `json:"instance"`
}

// timeline keeps the last plans seen, oldest first, at most limit of them.
// It is not safe for concurrent use; the Handler guards it.
type timeline struct {
	limit   int
	entries []Rebalance
}

// observe records plan if it is newer than every plan seen so far, and
// reports whether it did. A plan of a lower generation (a deposed leader's
// status read late, or a new group after a restart of the cluster) is only
// recorded when the timeline is empty or the generation went back by more
// than one: then the group was recreated and the old entries are dropped.
func (tl *timeline) observe(plan *baton.PlanStatus, leader string, now time.Time) bool {
	if plan == nil {
		return false
	}
	if n := len(tl.entries); n > 0 {
		last := tl.entries[n-1].Generation
		switch {
		case plan.Generation == last:
			return false
		case plan.Generation < last && last-plan.Generation <= 1:
			return false
		case plan.Generation < last:
			tl.entries = nil
		}
	}
	r := Rebalance{Generation: plan.Generation, Time: now.UTC().Format(time.RFC3339Nano), Leader: leader,
		Revoked: []Move{}, Learners: []Move{}, Orphans: []Move{}, Reasons: append([]string{}, plan.Reasons...), Followup: plan.Followup}
	for _, in := range plan.Instances {
		for _, id := range in.Revoked {
			r.Revoked = append(r.Revoked, Move{Task: id, Instance: in.ID})
		}
		for _, id := range in.Learner {
			r.Learners = append(r.Learners, Move{Task: id, Instance: in.ID})
		}
	}
	// Reasons read "<kind> <task> on <instance>: <why>" (baton.App.Led).
	for _, reason := range plan.Reasons {
		head, _, _ := strings.Cut(reason, ":")
		f := strings.Fields(head)
		if len(f) == 4 && f[0] == "orphan" && f[2] == "on" {
			r.Orphans = append(r.Orphans, Move{Task: f[1], Instance: f[3]})
		}
	}
	for _, ms := range [][]Move{r.Revoked, r.Learners, r.Orphans} {
		sort.Slice(ms, func(i, j int) bool {
			if ms[i].Task != ms[j].Task {
				return ms[i].Task < ms[j].Task
			}
			return ms[i].Instance < ms[j].Instance
		})
	}
	tl.entries = append(tl.entries, r)
	if over := len(tl.entries) - tl.limit; over > 0 {
		tl.entries = append([]Rebalance(nil), tl.entries[over:]...)
	}
	return true
}

// list returns a copy of the entries, newest first.
func (tl *timeline) list() []Rebalance {
	out := make([]Rebalance, len(tl.entries))
	for i, r := range tl.entries {
		out[len(out)-1-i] = r
	}
	return out
}

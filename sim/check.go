package sim

import (
	"fmt"
	"slices"
	"sort"

	"github.com/baton-streams/baton/assign"
	"github.com/baton-streams/baton/lifecycle"
)

// CheckPlan verifies the guarantees of docs/assign.md that a single round
// can show (items 1 to 9; 10 to 12 need many rounds and are judged by the
// run as a whole). It returns one line per violation, in a stable order.
func CheckPlan(s assign.State, p assign.Plan, checks Checks) []string {
	var out []string
	bad := func(item int, format string, args ...any) {
		out = append(out, fmt.Sprintf("guarantee %d: %s", item, fmt.Sprintf(format, args...)))
	}
	tasks := map[assign.TaskID]assign.Task{}
	for _, t := range s.Tasks {
		tasks[t.ID] = t
	}
	in := map[string]*assign.Instance{}
	for i := range s.Instances {
		in[s.Instances[i].ID] = &s.Instances[i]
	}
	acc := s.Config.AcceptableLag
	oldActive := map[assign.TaskID]string{}
	for _, x := range s.Instances {
		for _, t := range x.Active {
			oldActive[t] = x.ID
		}
	}
	newActive := map[assign.TaskID][]string{}
	revoked := map[assign.TaskID]string{}
	learners := 0
	anyTaker := false
	for _, x := range s.Instances {
		if !x.Leaving {
			anyTaker = true
		}
	}
	for _, ip := range p.Instances {
		x, ok := in[ip.ID]
		if !ok {
			bad(1, "plan names instance %q that is not in the state", ip.ID)
			continue
		}
		roles := map[assign.TaskID]lifecycle.Role{}
		for _, l := range []struct {
			role lifecycle.Role
			ids  []assign.TaskID
		}{{lifecycle.Active, ip.Active}, {lifecycle.Standby, ip.Standby}, {lifecycle.Learner, ip.Learner}} {
			for _, t := range l.ids {
				if prev, dup := roles[t]; dup && checks&CheckOneRole != 0 {
					bad(2, "%s holds %s as %s and %s", ip.ID, t, prev, l.role)
				}
				roles[t] = l.role
				if l.role != lifecycle.Active && !tasks[t].Stateful && checks&CheckStateless != 0 {
					bad(6, "stateless %s is a %s on %s", t, l.role, ip.ID)
				}
			}
		}
		for _, t := range ip.Active {
			newActive[t] = append(newActive[t], ip.ID)
		}
		learners += len(ip.Learner)
		for _, t := range ip.Revoked {
			revoked[t] = ip.ID
			if !slices.Contains(x.Active, t) && checks&CheckCooperative != 0 {
				bad(3, "%s revokes %s that it does not own", ip.ID, t)
			}
		}
		if checks&CheckCooperative != 0 {
			for _, t := range x.Active {
				if !slices.Contains(ip.Active, t) && !slices.Contains(ip.Revoked, t) {
					bad(3, "%s loses %s without revoking it", ip.ID, t)
				}
			}
		}
		if x.Leaving && checks&CheckLeaving != 0 {
			for _, l := range []struct {
				role      lifecycle.Role
				old, news []assign.TaskID
			}{{lifecycle.Active, x.Active, ip.Active}, {lifecycle.Standby, x.Standby, ip.Standby}, {lifecycle.Learner, x.Learner, ip.Learner}} {
				for _, t := range l.news {
					if !slices.Contains(l.old, t) {
						bad(9, "leaving %s is given %s as a new %s", ip.ID, t, l.role)
					}
				}
			}
		}
	}
	ids := make([]assign.TaskID, 0, len(tasks))
	for id := range tasks {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if len(revoked) > 0 && !p.Followup && checks&CheckCooperative != 0 {
		bad(3, "tasks were revoked but followup is false")
	}
	for _, t := range ids {
		owners := newActive[t]
		sort.Strings(owners)
		if len(owners) > 1 {
			bad(1, "%s is active on %v", t, owners)
		}
		if checks&CheckOneOwner != 0 && len(owners) == 0 && anyTaker {
			if _, rv := revoked[t]; !rv {
				bad(1, "%s is left unassigned though it is not being revoked", t)
			}
		}
		old, wasActive := oldActive[t]
		if len(owners) == 1 && wasActive && owners[0] != old && checks&CheckCooperative != 0 {
			bad(3, "%s moves from %s to %s in one round", t, old, owners[0])
		}
		task := tasks[t]
		// Item 4: a stateful task is revoked from a live owner only when
		// a caught-up copy waits elsewhere (a ready learner, a caught-up
		// standby, or caught-up state left on disk).
		if by, rv := revoked[t]; rv && task.Stateful && checks&CheckWarmHandover != 0 {
			warm := false
			for _, x := range s.Instances {
				if x.ID == by || x.Leaving {
					continue
				}
				lag, has := x.Lag[t]
				if has && lag <= acc {
					warm = true
				}
			}
			if !warm {
				bad(4, "%s is revoked from %s with no caught-up copy elsewhere", t, by)
			}
		}
		// Item 5: an orphan goes to the warmest copy.
		if !wasActive && len(owners) == 1 && checks&CheckOrphans != 0 {
			to := in[owners[0]]
			if to != nil && to.Leaving && anyTaker {
				bad(5, "orphan %s goes to leaving %s", t, to.ID)
			}
			if task.Stateful && to != nil {
				best, have := int64(-1), false
				for _, x := range s.Instances {
					if lag, ok := x.Lag[t]; ok && !x.Leaving && (!have || lag < best) {
						best, have = lag, true
					}
				}
				if have {
					lag, ok := to.Lag[t]
					if !ok || lag > best+acc {
						bad(5, "orphan %s goes to %s (lag %s) though a copy with lag %d exists", t, to.ID, lagText(lag, ok), best)
					} else if !slices.Contains(to.Learner, t) {
						for _, x := range s.Instances {
							if l, ok := x.Lag[t]; ok && !x.Leaving && l <= best+acc && slices.Contains(x.Learner, t) {
								bad(5, "orphan %s goes to %s though learner %s is as warm", t, to.ID, x.ID)
								break
							}
						}
					}
				}
			}
		}
	}
	if checks&CheckLearners != 0 {
		if learners > s.Config.MaxLearners {
			bad(7, "%d learners, more than max_learners %d", learners, s.Config.MaxLearners)
		}
		oldLearners := 0
		for _, x := range s.Instances {
			oldLearners += len(x.Learner)
		}
		for _, x := range s.Instances {
			ip, _ := p.Instance(x.ID)
			for _, t := range x.Learner {
				if slices.Contains(ip.Learner, t) || slices.Contains(ip.Active, t) {
					continue
				}
				ready := x.Lag[t] <= acc
				_, live := oldActive[t]
				_, rv := revoked[t]
				if !ready && live && !rv && oldLearners <= s.Config.MaxLearners {
					bad(7, "learner %s on %s (lag %d) was dropped before it was ready", t, x.ID, x.Lag[t])
				}
			}
		}
	}
	if checks&CheckStandbys != 0 {
		count := map[assign.TaskID]int{}
		for _, ip := range p.Instances {
			for _, t := range ip.Standby {
				count[t]++
			}
		}
		for _, t := range ids {
			if count[t] > s.Config.Standbys {
				bad(8, "%s has %d standbys, more than %d", t, count[t], s.Config.Standbys)
			}
		}
	}
	return out
}

func lagText(lag int64, ok bool) string {
	if !ok {
		return "none"
	}
	return fmt.Sprint(lag)
}

package assign

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
)

// world is a toy group for tests: instances that follow plans, with lag
// that learners and standbys work off over several rounds. It is the
// smallest model in which the assignor's promises over time can be
// checked; the sim package has the full one.
type world struct {
	cfg   Config
	tasks []Task
	insts map[string]*member
	disk  map[string]map[TaskID]int64 // state left by crashed instances
	rng   *rand.Rand
	size  map[TaskID]int64 // records a restore from zero must read
	// restore gives the lag a learner or standby has after one round,
	// from its lag before; drift is how far state nobody replicates falls
	// behind in a round.
	restore func(lag, size int64) int64
	drift   func() int64
}

type member struct {
	Instance
}

func newWorld(cfg Config, tasks []Task, seed uint64) *world {
	w := &world{cfg: cfg, tasks: tasks, insts: map[string]*member{}, disk: map[string]map[TaskID]int64{},
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), size: map[TaskID]int64{}}
	for _, t := range tasks {
		w.size[t.ID] = 1000 + w.rng.Int64N(20000)
	}
	w.restore = func(l, size int64) int64 { return max(0, l-(l/4+w.rng.Int64N(size/3+1))) }
	w.drift = func() int64 { return w.rng.Int64N(50) }
	return w
}

func (w *world) join(id string, capacity int, rack string) {
	m := &member{Instance{ID: id, Capacity: capacity, Rack: rack, Lag: map[TaskID]int64{}}}
	if old, ok := w.disk[id]; ok { // comes back with the state it left
		for t, l := range old {
			m.Lag[t] = l
		}
		delete(w.disk, id)
	}
	w.insts[id] = m
}

func (w *world) crash(id string) {
	m := w.insts[id]
	w.disk[id] = m.Lag
	delete(w.insts, id)
}

func (w *world) ids() []string {
	ids := make([]string, 0, len(w.insts))
	for id := range w.insts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// state is what the leader would see now.
func (w *world) state() State {
	s := State{Config: w.cfg, Tasks: slices.Clone(w.tasks)}
	for _, id := range w.ids() {
		m := w.insts[id]
		in := m.Instance
		in.Active = slices.Clone(m.Active)
		in.Standby = slices.Clone(m.Standby)
		in.Learner = slices.Clone(m.Learner)
		in.Lag = make(map[TaskID]int64, len(m.Lag))
		stateful := map[TaskID]bool{}
		for _, t := range w.tasks {
			stateful[t.ID] = t.Stateful
		}
		for t, l := range m.Lag {
			if stateful[t] {
				in.Lag[t] = l
			}
		}
		s.Instances = append(s.Instances, in)
	}
	return s
}

// apply makes every instance do what the plan says, then lets one round of
// time pass: learners and standbys restore part of what they lack, state
// nobody replicates falls behind, leaving instances with nothing active go.
func (w *world) apply(p Plan) {
	for _, ip := range p.Instances {
		m := w.insts[ip.ID]
		if m == nil {
			continue
		}
		for _, t := range ip.Revoked {
			m.Lag[t] = 0 // the revoke flushed the changelog
		}
		for _, t := range ip.Active {
			m.Lag[t] = 0 // an active is current once running
		}
		for _, t := range append(slices.Clone(ip.Learner), ip.Standby...) {
			l, ok := m.Lag[t]
			if !ok {
				l = w.size[t]
			}
			m.Lag[t] = w.restore(l, w.size[t])
		}
		held := map[TaskID]bool{}
		for _, t := range append(append(slices.Clone(ip.Active), ip.Learner...), ip.Standby...) {
			held[t] = true
		}
		for t := range m.Lag {
			if !held[t] {
				m.Lag[t] += w.drift() // input keeps flowing
			}
		}
		m.Active, m.Standby, m.Learner = slices.Clone(ip.Active), slices.Clone(ip.Standby), slices.Clone(ip.Learner)
		if m.Leaving && len(m.Active) == 0 {
			delete(w.insts, m.ID) // drained: it may go, and takes its disk with it
		}
	}
}

// settled reports whether plan p leaves the world as it is: same roles,
// nothing revoked, no learners, no follow-up.
func settled(s State, p Plan) bool {
	if p.Followup || len(p.Instances) != len(s.Instances) {
		return false
	}
	for k, ip := range p.Instances {
		in := s.Instances[k]
		if len(ip.Learner) > 0 || len(ip.Revoked) > 0 || !sameSet(ip.Active, in.Active) || !sameSet(ip.Standby, in.Standby) || len(in.Learner) > 0 {
			return false
		}
	}
	return true
}

func sameSet(a, b []TaskID) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// checkBalanced verifies the stable plan's promises (docs/assign.md: item
// 10, and the standby count and rack rule of item 8).
func checkBalanced(s State, p Plan) error {
	g, err := build(s, new(scratch))
	if err != nil {
		return err
	}
	byID := map[TaskID]Task{}
	for _, t := range s.Tasks {
		byID[t.ID] = t
	}
	for _, stateful := range []bool{true, false} {
		b := newBucket(g, stateful)
		for k, ip := range p.Instances {
			if g.leaving[k] {
				continue
			}
			count, load := 0, 0.0
			for _, id := range ip.Active {
				if byID[id].Stateful == stateful {
					count++
					load += byID[id].Load
				}
			}
			share := 0.0
			if b.totalCap > 0 {
				share = b.share[k] / b.totalCap
			}
			if b.uniform && (count < b.floor[k] || count > b.ceil[k]) {
				return fmt.Errorf("instance %s carries %d %s tasks, share %.2f (floor %d, ceiling %d)", ip.ID, count, b.kind(), share, b.floor[k], b.ceil[k])
			}
			if !b.uniform && load > share+b.maxW+1e-6 {
				return fmt.Errorf("instance %s carries load %.2f of %s, share %.2f, largest task %.2f", ip.ID, load, b.kind(), share, b.maxW)
			}
		}
	}
	standbys := map[TaskID][]string{}
	activeOn := map[TaskID]string{}
	for _, ip := range p.Instances {
		for _, id := range ip.Standby {
			standbys[id] = append(standbys[id], ip.ID)
		}
		for _, id := range ip.Active {
			activeOn[id] = ip.ID
		}
	}
	rack := map[string]string{}
	for _, in := range s.Instances {
		rack[in.ID] = in.Rack
	}
	for _, t := range s.Tasks {
		if !t.Stateful || g.live == 0 {
			continue
		}
		want := min(s.Config.Standbys, g.live-1)
		if len(standbys[t.ID]) != want {
			return fmt.Errorf("task %s has %d standbys in the stable plan, want %d", t.ID, len(standbys[t.ID]), want)
		}
		if want == 0 {
			continue
		}
		other, ok := false, false
		for _, in := range s.Instances {
			if !in.Leaving && in.ID != activeOn[t.ID] && in.Rack != rack[activeOn[t.ID]] {
				other = true
			}
		}
		for _, i := range standbys[t.ID] {
			ok = ok || rack[i] != rack[activeOn[t.ID]]
		}
		if other && !ok {
			return fmt.Errorf("task %s has no standby off its active's rack %q though one is possible", t.ID, rack[activeOn[t.ID]])
		}
	}
	return nil
}

// table renders a plan for golden traces.
func table(p Plan) string {
	var sb strings.Builder
	for _, ip := range p.Instances {
		fmt.Fprintf(&sb, "  %-4s active=%s", ip.ID, list(ip.Active))
		if len(ip.Standby) > 0 {
			fmt.Fprintf(&sb, " standby=%s", list(ip.Standby))
		}
		if len(ip.Learner) > 0 {
			fmt.Fprintf(&sb, " learner=%s", list(ip.Learner))
		}
		if len(ip.Revoked) > 0 {
			fmt.Fprintf(&sb, " revoked=%s", list(ip.Revoked))
		}
		sb.WriteString("\n")
	}
	fmt.Fprintf(&sb, "  followup=%v\n", p.Followup)
	return sb.String()
}

func list(ids []TaskID) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = string(id)
	}
	return "[" + strings.Join(s, ",") + "]"
}

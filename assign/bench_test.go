package assign

import (
	"fmt"
	"testing"
)

// scaleOutState is a balanced group of instances running tasks (two
// subtopologies: stateless 0_p and stateful 1_p, one standby each), right
// after 10% new instances joined with no state.
func scaleOutState(tasks, instances int) State {
	s := State{Config: Config{Standbys: 1, MaxLearners: 2, AcceptableLag: 10000}}
	old := instances - instances/11 // old + 10% of old = instances
	for i := range instances {
		s.Instances = append(s.Instances, Instance{ID: fmt.Sprintf("i%05d", i), Capacity: 1, Lag: map[TaskID]int64{}})
	}
	for k := range tasks {
		id := TaskID(fmt.Sprintf("%d_%d", k%2, k/2))
		stateful := k%2 == 1
		s.Tasks = append(s.Tasks, Task{ID: id, Stateful: stateful, Load: 1})
		a := &s.Instances[(k/2)%old]
		a.Active = append(a.Active, id)
		if stateful {
			a.Lag[id] = 0
			sb := &s.Instances[(k/2+1)%old]
			sb.Standby = append(sb.Standby, id)
			sb.Lag[id] = 50
		}
	}
	return s
}

// BenchmarkAssign times one plan right after a 10% scale-out, for every
// policy side by side: go test ./assign -run XXX -bench Assign -benchtime 5x
func BenchmarkAssign(b *testing.B) {
	for _, size := range []struct{ tasks, instances int }{
		{1000, 100}, {10000, 100}, {10000, 1000}, {100000, 100}, {100000, 1000},
	} {
		s := scaleOutState(size.tasks, size.instances)
		for _, p := range Policies {
			b.Run(fmt.Sprintf("tasks=%d/instances=%d/%s", size.tasks, size.instances, p), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := Assign(s, p); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

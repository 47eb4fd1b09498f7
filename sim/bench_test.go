package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/baton-streams/baton/assign"
)

// scaleScenario is the scale goal's shape at 1/scale of its size.
func scaleScenario(instances, tasks, learners int) string {
	return fmt.Sprintf(`name %d -> %d instances, %d tasks
config max_learners=%d acceptable_lag=10000
tasks stateful=%d stateless=%d state=1e5..4e6 rate=10
instances %d restore=1e5 racks=3
at 1m join %d restore=1e5
`, instances, instances+instances/10, tasks, learners, tasks*4/5, tasks/5, instances, instances/10)
}

// BenchmarkScaleOut runs the scale-out scenario at a tenth of the scale
// goal under every policy; `go test -bench ScaleOut/full` runs the goal.
func BenchmarkScaleOut(b *testing.B) {
	for _, size := range []struct {
		name                       string
		instances, tasks, learners int
	}{{"tenth", 100, 10000, 100}, {"full", 1000, 100000, 1000}} {
		sc, err := ParseString(size.name, scaleScenario(size.instances, size.tasks, size.learners))
		if err != nil {
			b.Fatal(err)
		}
		for _, name := range PolicyNames {
			pol, _ := ParsePolicy(name)
			// Time the assignor apart from the simulator around it.
			var inAssign time.Duration
			inner := pol.Assign
			pol.Assign = func(s assign.State) (assign.Plan, bool, error) {
				start := time.Now()
				p, probe, err := inner(s)
				inAssign += time.Since(start)
				return p, probe, err
			}
			b.Run(size.name+"/"+name, func(b *testing.B) {
				inAssign = 0
				for range b.N {
					r, err := Run(sc, pol, Options{})
					if err != nil {
						b.Fatal(err)
					}
					b.ReportMetric(r.TimeToBalance.Seconds(), "sim-s-to-balance")
					b.ReportMetric(r.UnavailableTaskSeconds, "unavail-task-s")
					b.ReportMetric(float64(r.Moves), "moves")
					b.ReportMetric(float64(r.Rebalances), "rebalances")
					b.ReportMetric(inAssign.Seconds()/float64(b.N), "assign-s/op")
				}
			})
		}
	}
}

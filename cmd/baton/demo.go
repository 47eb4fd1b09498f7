package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/baton-streams/baton/assign"
	"github.com/spf13/cobra"
)

var demoCmd = &cobra.Command{
	Use:   "demo",
	Short: "Show a group scaling out and losing its leader, round by round",
	Args:  cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		return runAssignorDemo(os.Stdout)
	},
}

func init() { rootCmd.AddCommand(demoCmd) }

// runAssignorDemo plays the seed's first two scenarios through the
// assignor: S4 joins a group of three and warms a learner; then S1 crashes
// before the learner is ready.
func runAssignorDemo(w io.Writer) error {
	state := assign.State{
		Config: assign.Config{Standbys: 0, MaxLearners: 2, AcceptableLag: 100},
		Tasks:  []assign.Task{{ID: "T1", Stateful: true, Load: 1}, {ID: "T2", Stateful: true, Load: 1}, {ID: "T3", Stateful: true, Load: 1}, {ID: "T4", Stateful: true, Load: 1}, {ID: "T5", Stateful: true, Load: 1}},
		Instances: []assign.Instance{
			{ID: "S1", Capacity: 1, Active: []assign.TaskID{"T1", "T2"}, Lag: map[assign.TaskID]int64{"T1": 0, "T2": 0}},
			{ID: "S2", Capacity: 1, Active: []assign.TaskID{"T3", "T4"}, Lag: map[assign.TaskID]int64{"T3": 0, "T4": 0}},
			{ID: "S3", Capacity: 1, Active: []assign.TaskID{"T5"}, Lag: map[assign.TaskID]int64{"T5": 0}},
			{ID: "S4", Capacity: 1, Lag: map[assign.TaskID]int64{}},
		},
	}
	round := func(title string) (assign.Plan, error) {
		fmt.Fprintf(w, "\n== %s\n", title)
		plan, err := assign.Assign(state, assign.Smooth)
		if err != nil {
			return plan, err
		}
		for _, r := range plan.Reasons {
			fmt.Fprintf(w, "  %s %s on %s: %s\n", r.Kind, r.Task, r.Instance, r.Why)
		}
		for _, ip := range plan.Instances {
			fmt.Fprintf(w, "  %-3s active=%-10s learner=%-6s revoked=%s\n", ip.ID, join(ip.Active), join(ip.Learner), join(ip.Revoked))
		}
		// Everyone does what the plan says.
		for k := range state.Instances {
			in := &state.Instances[k]
			ip, _ := plan.Instance(in.ID)
			in.Active, in.Standby, in.Learner = ip.Active, ip.Standby, ip.Learner
			for _, t := range ip.Active {
				in.Lag[t] = 0
			}
		}
		return plan, nil
	}
	fmt.Fprintln(w, "baton demo: the assignor on the seed's scenarios (S1..S4 are instances, T1..T5 stateful tasks)")
	if _, err := round("S4 joins: actives stay put, S4 warms a learner for a task of the busiest instance"); err != nil {
		return err
	}
	state.Instances[3].Lag["T1"] = 8000
	fmt.Fprintln(w, "\n  S4 has restored part of T1 (lag 8000, acceptable 100) when S1, the leader, crashes.")
	state.Instances = state.Instances[1:]
	if _, err := round("S1 crashed: its tasks are orphans; T1 goes to its only warm copy, T2 to the lightest instance"); err != nil {
		return err
	}
	plan, err := round("Next round: nothing moves, the group is balanced 2/2/1")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\nfollow-up needed: %v. Run `baton assign --explain < state.json` on your own group state.\n", plan.Followup)
	return nil
}

func join(ids []assign.TaskID) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = string(id)
	}
	return "[" + strings.Join(s, ",") + "]"
}

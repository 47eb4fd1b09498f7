package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/baton-streams/baton/assign"
	"github.com/spf13/cobra"
)

var assignCmd = &cobra.Command{
	Use:   "assign [--policy smooth|cooperative|eager] [--explain] < state.json > plan.json",
	Short: "Compute the plan the group leader would make for a group state",
	Long: `Reads one group state as JSON on stdin and writes the plan as JSON on stdout.

Bad input exits 2 with one line on stderr naming the offending field.
With --explain, writes instead one line per decision (learner placed, task
revoked, orphan assigned, learner dropped, standby placed) saying why,
followed by the plan as a table.`,
	Args: cobra.NoArgs,
	RunE: runAssign,
}

func init() {
	assignCmd.Flags().String("policy", string(assign.Smooth), "assignment policy: smooth, cooperative or eager")
	assignCmd.Flags().Bool("explain", false, "print why each decision was made instead of JSON")
	rootCmd.AddCommand(assignCmd)
}

func runAssign(cmd *cobra.Command, _ []string) error {
	name, _ := cmd.Flags().GetString("policy")
	explain, _ := cmd.Flags().GetBool("explain")
	policy, err := assign.ParsePolicy(name)
	if err != nil {
		return usageErr(fmt.Errorf("--policy: %w", err))
	}
	state, err := assign.Decode(os.Stdin)
	if err != nil {
		return usageErr(err)
	}
	plan, err := assign.Assign(state, policy)
	if err != nil {
		return usageErr(err)
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	if explain {
		writeExplanation(out, plan)
		return nil
	}
	data, err := json.MarshalIndent(plan, "", "  ")
	if err != nil {
		return err
	}
	out.Write(data)
	out.WriteString("\n")
	return nil
}

func writeExplanation(w *bufio.Writer, plan assign.Plan) {
	if len(plan.Reasons) == 0 {
		fmt.Fprintln(w, "no decisions: every task stays where it is")
	}
	for _, r := range plan.Reasons {
		fmt.Fprintln(w, r.String())
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-12s %-30s %-20s %-20s %s\n", "instance", "active", "standby", "learner", "revoked")
	for _, ip := range plan.Instances {
		fmt.Fprintf(w, "%-12s %-30s %-20s %-20s %s\n", ip.ID, ids(ip.Active), ids(ip.Standby), ids(ip.Learner), ids(ip.Revoked))
	}
	fmt.Fprintf(w, "followup: %v\n", plan.Followup)
}

func ids(list []assign.TaskID) string {
	if len(list) == 0 {
		return "-"
	}
	s := make([]string, len(list))
	for i, id := range list {
		s[i] = string(id)
	}
	return strings.Join(s, ",")
}

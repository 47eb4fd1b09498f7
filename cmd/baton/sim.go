package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/baton-streams/baton/sim"
)

var simFlags struct {
	policy   string
	compare  bool
	plot     string
	quiet    bool
	detail   bool
	chaos    bool
	seed     uint64
	runs     int
	keepFail string
	scaler   string
}

var simCmd = &cobra.Command{
	Use:   "sim SCENARIO | sim --chaos [--seed N] [--runs K]",
	Short: "Simulate a group scaling under an assignment policy, in virtual time",
	Long: `sim runs a scenario file (see docs/sim.md) in a deterministic discrete-event
simulation driven by the real assignor, and prints a timeline, a summary and
the verdict on the scenario's expectations. --compare runs every policy and
prints the summaries side by side. --plot writes an SVG of unavailable tasks
and tasks off balance over time (with load: instances and lag).

A scenario with load and autoscale lines runs once per autoscaler, side by
side: --autoscaler picks baton, lag-threshold (or lag), both or none
(default: every autoscale line of the file).

--chaos generates random scenarios from --seed, checks the assignor's
guarantees at every rebalance and convergence at the end, and prints the
seed of every failure.

Exit status: 0 all expectations held, 1 an expectation or a chaos check
failed, 2 bad input.`,
	Args: cobra.MaximumNArgs(1),
	RunE: runSim,
}

func init() {
	f := simCmd.Flags()
	f.StringVar(&simFlags.policy, "policy", "smooth", "policy: "+strings.Join(sim.PolicyNames, ", "))
	f.BoolVar(&simFlags.compare, "compare", false, "run every policy and compare them side by side")
	f.StringVar(&simFlags.plot, "plot", "", "write an SVG plot of unavailability and balance over time to this file")
	f.BoolVar(&simFlags.quiet, "quiet", false, "leave out the timeline")
	f.BoolVar(&simFlags.detail, "detail", true, "timeline: one line per task decision (else one per event and rebalance)")
	f.BoolVar(&simFlags.chaos, "chaos", false, "run random scenarios and check the guarantees")
	f.Uint64Var(&simFlags.seed, "seed", 1, "chaos: the first seed")
	f.IntVar(&simFlags.runs, "runs", 100, "chaos: how many scenarios, seeds seed, seed+1, ...")
	f.StringVar(&simFlags.keepFail, "save-failures", "", "chaos: write each failing scenario to this directory")
	f.StringVar(&simFlags.scaler, "autoscaler", "", "with load: baton, lag-threshold (or lag), both or none; default every autoscale line of the scenario")
	rootCmd.AddCommand(simCmd)
}

func runSim(cmd *cobra.Command, args []string) error {
	out := cmd.OutOrStdout()
	if simFlags.chaos {
		if len(args) != 0 {
			return usageErr(errors.New("sim: --chaos takes no scenario file"))
		}
		if simFlags.runs < 1 {
			return usageErr(errors.New("sim: --runs must be >= 1"))
		}
		return runChaos(out)
	}
	if len(args) != 1 {
		return usageErr(errors.New("sim: want a scenario file (or --chaos)"))
	}
	policies := []string{simFlags.policy}
	if simFlags.compare {
		policies = sim.PolicyNames
	}
	var pols []sim.Policy
	for _, name := range policies {
		p, err := sim.ParsePolicy(name)
		if err != nil {
			return usageErr(err)
		}
		pols = append(pols, p)
	}
	f, err := os.Open(args[0])
	if err != nil {
		return usageErr(fmt.Errorf("sim: %w", err))
	}
	sc, err := sim.Parse(args[0], f)
	f.Close()
	if err != nil {
		return usageErr(err)
	}
	scalers, err := simScalers(sc, simFlags.scaler)
	if err != nil {
		return usageErr(err)
	}
	var results []*sim.Result
	failed := false
	for _, p := range pols {
		for _, a := range scalers {
			r, err := sim.Run(sc, p, sim.Options{Detail: simFlags.detail, Reasons: true, Autoscaler: a})
			if err != nil {
				return err
			}
			results = append(results, r)
			if !simFlags.quiet && !simFlags.compare {
				fmt.Fprintf(out, "timeline (%s, policy %s", sc.Name, p.Name)
				if a != "" {
					fmt.Fprintf(out, ", autoscaler %s", a)
				}
				fmt.Fprintln(out, ")")
				if err := r.WriteTimeline(out); err != nil {
					return err
				}
				fmt.Fprintln(out)
			}
		}
	}
	fmt.Fprintf(out, "summary: %s\n", sc.Name)
	if err := sim.WriteComparison(out, results); err != nil {
		return err
	}
	fmt.Fprintln(out)
	for _, r := range results {
		if !sim.WriteExpects(out, r.Policy, sim.CheckExpects(sc, r)) {
			failed = true
		}
	}
	if simFlags.plot != "" {
		pf, err := os.Create(simFlags.plot)
		if err != nil {
			return fmt.Errorf("sim: plot: %w", err)
		}
		err = sim.WritePlot(pf, sc.Name, results)
		if cerr := pf.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("sim: plot: %w", err)
		}
		fmt.Fprintf(out, "plot written to %s\n", simFlags.plot)
	}
	if failed {
		return &exitError{code: 1, err: errors.New("sim: some expectations failed")}
	}
	return nil
}

// simScalers returns the autoscalers to run the scenario with; "" stands
// for none.
func simScalers(sc *sim.Scenario, flag string) ([]string, error) {
	have := sc.AutoscalerKinds()
	var want []string
	switch flag {
	case "":
		if len(have) == 0 {
			return []string{""}, nil
		}
		return have, nil
	case "none":
		return []string{""}, nil
	case "both":
		want = []string{sim.AutoscaleBaton, sim.AutoscaleLag}
	case sim.AutoscaleBaton:
		want = []string{sim.AutoscaleBaton}
	case sim.AutoscaleLag, "lag":
		want = []string{sim.AutoscaleLag}
	default:
		return nil, fmt.Errorf("sim: --autoscaler %q: want baton, lag-threshold, both or none", flag)
	}
	for _, w := range want {
		if !slices.Contains(have, w) {
			return nil, fmt.Errorf("sim: --autoscaler %s: %s has no `autoscale %s` line", flag, sc.Name, w)
		}
	}
	return want, nil
}

func runChaos(out io.Writer) error {
	pol, err := sim.ParsePolicy(simFlags.policy)
	if err != nil {
		return usageErr(err)
	}
	var failures []uint64
	for i := 0; i < simFlags.runs; i++ {
		seed := simFlags.seed + uint64(i)
		f := sim.Chaos(seed, pol)
		if f == nil {
			continue
		}
		failures = append(failures, seed)
		fmt.Fprintf(out, "FAIL seed %d (replay: baton sim --chaos --policy %s --seed %d --runs 1)\n", seed, pol.Name, seed)
		for _, line := range f.Problems {
			fmt.Fprintf(out, "    %s\n", line)
		}
		if simFlags.keepFail != "" {
			name := fmt.Sprintf("%s/chaos-%d.txt", strings.TrimRight(simFlags.keepFail, "/"), seed)
			if err := os.WriteFile(name, []byte(f.Text), 0o644); err != nil {
				return fmt.Errorf("sim: %w", err)
			}
			fmt.Fprintf(out, "    scenario written to %s\n", name)
		}
	}
	fmt.Fprintf(out, "chaos: %d runs from seed %d, policy %s: %d failed\n", simFlags.runs, simFlags.seed, pol.Name, len(failures))
	if len(failures) > 0 {
		return &exitError{code: 1, err: fmt.Errorf("sim: chaos failures at seeds %v", failures)}
	}
	return nil
}

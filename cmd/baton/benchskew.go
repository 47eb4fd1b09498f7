package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-streams/baton/bench"
)

func init() { benchCmd.AddCommand(benchSkewCmd()) }

func benchSkewCmd() *cobra.Command {
	var (
		smoke    bool
		variants string
		out      string
		verbose  bool
		brokers  []string
		cfg      bench.SkewConfig
	)
	cmd := &cobra.Command{
		Use:   "skew",
		Short: "One hot partition and a costly processor: balance on measured loads against balance on task counts",
		Long: `skew runs the same group twice, each on a fresh embedded cluster (or, with
--brokers, on that cluster under names unique to the run): --instances
instances of one worker run a wordcount whose line splitting takes --cost
per line (a sleep: it holds the worker as a call to a slow service would),
over --partitions input partitions of --rate lines/s each, partition 0 at
--hot times that rate. In the variant "loads" the instances measure and
report their tasks' loads (baton's default) and ask for a rebalance when
they change (--interval, baton run's --load-rebalance-interval); in
"counts" they report none (--load-step 0), so the leader balances task
counts.

For each variant it measures two windows of --window: one --warm after the
group first balanced (before any load is reported), and one two intervals
later (after the rebalances the loads ask for). In each: every instance's
busy share of its worker (baton_worker_busy_seconds_total), the busiest
over the mean, and the end-to-end latency (input timestamp to the output's
arrival at a consumer) of the hot partition's words and of the others'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			base := bench.DefaultSkewConfig()
			if smoke {
				base = bench.SmokeSkewConfig()
			}
			base.Variants = nil
			for _, v := range strings.Split(variants, ",") {
				v = strings.TrimSpace(v)
				if !slices.Contains(bench.SkewVariants, v) {
					return usageErr(fmt.Errorf("bench skew: --variants: unknown variant %q (want %s)", v, strings.Join(bench.SkewVariants, ", ")))
				}
				base.Variants = append(base.Variants, v)
			}
			f := cmd.Flags()
			if f.Changed("partitions") {
				base.Partitions = cfg.Partitions
			}
			if f.Changed("instances") {
				base.Instances = cfg.Instances
			}
			if f.Changed("rate") {
				base.Rate = cfg.Rate
			}
			if f.Changed("hot") {
				base.Hot = cfg.Hot
			}
			if f.Changed("cost") {
				base.Cost = cfg.Cost
			}
			if f.Changed("interval") {
				base.Interval = cfg.Interval
			}
			if f.Changed("warm") {
				base.Warm = cfg.Warm
			}
			if f.Changed("window") {
				base.Window = cfg.Window
			}
			if base.Partitions < 2 || base.Instances < 2 || base.Rate < 1 || !(base.Hot >= 1) || base.Cost <= 0 ||
				base.Interval < time.Second || base.Warm <= 0 || base.Window <= 0 || base.Warm+base.Window >= base.Interval {
				return usageErr(fmt.Errorf("bench skew: want --partitions >= 2, --instances >= 2, --rate >= 1, --hot >= 1, --cost > 0, --interval >= 1s, --warm and --window > 0 with --warm + --window < --interval"))
			}
			if verbose {
				base.Log = cmd.ErrOrStderr()
			}
			base.Brokers = brokers
			res, err := bench.RunSkew(benchContext(cmd), base)
			w := cmd.OutOrStdout()
			if res != nil {
				if perr := bench.PrintSkew(w, res); perr != nil && err == nil {
					err = perr
				}
				if out != "" {
					path, werr := bench.WriteJSON(out, "skew.json", res)
					if werr != nil {
						return werr
					}
					fmt.Fprintf(w, "wrote %s\n", path)
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	d := bench.DefaultSkewConfig()
	f.BoolVar(&smoke, "smoke", false, "a short run: 6 partitions, a 35s interval, windows of 10s")
	f.StringVar(&variants, "variants", strings.Join(bench.SkewVariants, ","), "variants to run, comma-separated: loads, counts")
	f.StringVar(&out, "out", "", "directory for skew.json")
	f.BoolVarP(&verbose, "verbose", "v", false, "log each step on stderr")
	f.StringSliceVar(&brokers, "brokers", nil, "run on this cluster instead of an embedded one")
	f.Int32Var(&cfg.Partitions, "partitions", d.Partitions, "input partitions (2 tasks each)")
	f.IntVar(&cfg.Instances, "instances", d.Instances, "instances, one worker each")
	f.IntVar(&cfg.Rate, "rate", d.Rate, "lines/s of each input partition")
	f.Float64Var(&cfg.Hot, "hot", d.Hot, "partition 0's rate, times --rate")
	f.DurationVar(&cfg.Cost, "cost", d.Cost, "time the line splitting takes per line")
	f.DurationVar(&cfg.Interval, "interval", d.Interval, "the instances' load rebalance interval")
	f.DurationVar(&cfg.Warm, "warm", d.Warm, "time from the group's first balance to the window before")
	f.DurationVar(&cfg.Window, "window", d.Window, "length of each window")
	return cmd
}

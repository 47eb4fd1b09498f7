package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/assign"
	"github.com/baton-streams/baton/bench"
)

var benchCmd = &cobra.Command{
	Use:   "bench",
	Short: "Measure scaling, restore, throughput and heartbeat costs on an embedded cluster",
	Long: `bench runs baton against an embedded Kafka-compatible cluster and prints
figures side by side with a baseline measured in the same run. Every
subcommand takes --smoke for a tiny run (seconds) and --out DIR for the raw
figures as JSON (and, for scale, an SVG picture).`,
	Args: cobra.NoArgs,
}

// The profiles of the whole run: cpuProfile is where --cpuprofile writes
// (profiling is the open file), allocProfile and blockProfile where
// --allocprofile and --blockprofile write at the end.
var (
	cpuProfile   string
	profiling    *os.File
	allocProfile string
	blockProfile string
)

// blockRate is the block profile's sampling: one blocking event per this
// many nanoseconds spent blocked, on average.
const blockRate = 10_000

func init() {
	rootCmd.AddCommand(benchCmd)
	pf := benchCmd.PersistentFlags()
	pf.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (cluster and instances share the process) to this file")
	pf.StringVar(&allocProfile, "allocprofile", "", "write an allocation profile of the whole run (pprof allocs: every allocation since the start, sampled) to this file")
	pf.StringVar(&blockProfile, "blockprofile", "", "write a block profile of the whole run (where goroutines waited: channels, locks, selects) to this file")
	benchCmd.PersistentPreRunE = func(*cobra.Command, []string) error {
		for name, path := range map[string]string{"allocprofile": allocProfile, "blockprofile": blockProfile} {
			if path == "" {
				continue
			}
			// Fail before the run, not after it.
			f, err := os.Create(path)
			if err != nil {
				return fmt.Errorf("--%s: %w", name, err)
			}
			f.Close()
		}
		if blockProfile != "" {
			runtime.SetBlockProfileRate(blockRate)
		}
		if cpuProfile == "" {
			return nil
		}
		f, err := os.Create(cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		profiling = f
		return nil
	}
	benchCmd.PersistentPostRunE = func(*cobra.Command, []string) error {
		var errs []error
		if allocProfile != "" {
			errs = append(errs, writeProfile("allocprofile", "allocs", allocProfile))
		}
		if blockProfile != "" {
			errs = append(errs, writeProfile("blockprofile", "block", blockProfile))
		}
		if profiling != nil {
			pprof.StopCPUProfile()
			errs = append(errs, profiling.Close())
		}
		return errors.Join(errs...)
	}
	benchCmd.AddCommand(benchScaleCmd(), benchRestoreCmd(), benchThroughputCmd(), benchHeartbeatCmd())
}

// writeProfile writes the runtime profile name (allocs, block) to path,
// as --flag asked.
func writeProfile(flag, name, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--%s: %w", flag, err)
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("--%s: %w", flag, err)
	}
	return f.Close()
}

func benchContext(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

func benchScaleCmd() *cobra.Command {
	var (
		smoke    bool
		policies string
		out      string
		cfg      bench.ScaleConfig
		verbose  bool
		brokers  []string
		simDir   string
	)
	cmd := &cobra.Command{
		Use:   "scale",
		Short: "Scale out, drain, crash: the same script under each policy, side by side",
		Long: `scale runs one script per policy, each on a fresh embedded cluster (or,
with --brokers, on that cluster under names unique to the run): two
wordcount instances with prefilled state (--keys distinct words) process a
steady input (--rate lines/s); a third joins (out), drains (in), another joins
and crashes (its connections cut), and three instances with one standby per
task lose one. For every event it measures the pause of unmoved tasks against
their normal gap, the handover gap of moved tasks, the records restored on
the critical path, the time to balance and the throughput dip.

Beside those, it prints the simulator's prediction of each event (time to
balance, unavailable task-seconds, most tasks unavailable at once, records
restored on the critical path, rebalance rounds) and the ratio predicted /
measured. The prediction runs package sim in-process on a scenario of the
group as it was before the event, with the restore rate and JoinGroup and
SyncGroup times measured in the run; --sim-scenarios DIR writes those
scenarios, one file per policy and event, for ` + "`baton sim`" + `.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			base := bench.DefaultScaleConfig()
			if smoke {
				base = bench.SmokeScaleConfig()
			}
			ps, err := parsePolicies(policies)
			if err != nil {
				return usageErr(err)
			}
			base.Policies = ps
			f := cmd.Flags()
			if f.Changed("keys") {
				base.Keys = cfg.Keys
			}
			if f.Changed("rate") {
				base.Rate = cfg.Rate
			}
			if f.Changed("partitions") {
				base.Partitions = cfg.Partitions
			}
			if f.Changed("steady") {
				base.Steady = cfg.Steady
			}
			if base.Keys < 1 || base.Rate < 1 || base.Partitions < 3 || base.Steady < 500*time.Millisecond {
				return usageErr(fmt.Errorf("bench scale: want --keys >= 1, --rate >= 1, --partitions >= 3, --steady >= 500ms"))
			}
			if verbose {
				base.Log = cmd.ErrOrStderr()
			}
			base.Brokers = brokers
			if simDir != "" {
				if err := os.MkdirAll(simDir, 0o755); err != nil {
					return usageErr(fmt.Errorf("bench scale: --sim-scenarios %q: cannot create the directory: %w", simDir, err))
				}
				base.SimScenarios = simDir
			}
			res, err := bench.RunScale(benchContext(cmd), base)
			w := cmd.OutOrStdout()
			if res != nil {
				if perr := bench.PrintScale(w, res); perr != nil {
					return perr
				}
				if out != "" {
					if werr := writeScale(w, out, res); werr != nil {
						return werr
					}
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.BoolVar(&smoke, "smoke", false, "tiny run: 3000 keys, short phases (seconds per policy)")
	f.StringVar(&policies, "policy", "smooth,cooperative,eager", "policies to compare, comma-separated")
	f.IntVar(&cfg.Keys, "keys", 0, "distinct words prefilled: the state to move (default 1000000)")
	f.IntVar(&cfg.Rate, "rate", 0, "input lines per second during the script (default 1000)")
	f.Int32Var(&cfg.Partitions, "partitions", 0, "input partitions (default 6)")
	f.DurationVar(&cfg.Steady, "steady", 0, "steady period before each event: the baseline (default 5s)")
	f.StringVar(&out, "out", "", "directory for scale.json and scale.svg")
	f.BoolVarP(&verbose, "verbose", "v", false, "narrate the script on stderr")
	f.StringSliceVar(&brokers, "brokers", nil, "run on this cluster (host:port,...) instead of a fresh embedded one per policy")
	f.StringVar(&simDir, "sim-scenarios", "", "directory (created if missing) for each event's scenario for baton sim, POLICY-EVENT.txt")
	return cmd
}

func writeScale(w io.Writer, dir string, res *bench.ScaleResult) error {
	path, err := bench.WriteJSON(dir, "scale.json", res)
	if err != nil {
		return err
	}
	svg := filepath.Join(dir, "scale.svg")
	if err := bench.PlotScale(res, svg); err != nil {
		return err
	}
	fmt.Fprintf(w, "wrote %s and %s\n", path, svg)
	return nil
}

func parsePolicies(s string) ([]assign.Policy, error) {
	var out []assign.Policy
	for _, name := range strings.Split(s, ",") {
		p, err := assign.ParsePolicy(strings.TrimSpace(name))
		if err != nil {
			return nil, fmt.Errorf("bench: --policy: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}

func benchRestoreCmd() *cobra.Command {
	var (
		smoke   bool
		keys    int
		out     string
		verbose bool
		profile string
		brokers []string
	)
	cmd := &cobra.Command{
		Use:   "restore",
		Short: "Records/s a cold task restores into Pebble against a plain read of the same changelog",
		Long: `restore fills a wordcount changelog through an App (--keys records), then
times a cold instance restoring every task from it into Pebble, and a plain
kgo consumer reading the same changelog from the same cluster. The ratio of
the two rates is the restore's efficiency (goal: at least 0.8).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := bench.DefaultRestoreConfig()
			if smoke {
				cfg = bench.SmokeRestoreConfig()
			}
			if cmd.Flags().Changed("keys") {
				if keys < 1 {
					return usageErr(fmt.Errorf("bench restore: --keys must be >= 1, got %d", keys))
				}
				cfg.Keys = keys
			}
			if verbose {
				cfg.Log = cmd.ErrOrStderr()
			}
			cfg.Brokers = brokers
			if profile != "" {
				if cpuProfile != "" {
					return usageErr(errors.New("bench restore: --restore-profile and --cpuprofile both profile the CPU; give one"))
				}
				pf, err := os.Create(profile)
				if err != nil {
					return fmt.Errorf("--restore-profile: %w", err)
				}
				defer pf.Close()
				cfg.Profile = pf
			}
			res, err := bench.RunRestore(benchContext(cmd), cfg)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "changelog records      %d\n", res.Changelog)
			fmt.Fprintf(w, "cold restore (Pebble)  %d records in %v: %.0f records/s\n", res.Restored, res.RestoreTime.Round(time.Millisecond), res.RestoreRate)
			fmt.Fprintf(w, "plain read             %d records in %v: %.0f records/s\n", res.Changelog, res.RawTime.Round(time.Millisecond), res.RawRate)
			fmt.Fprintf(w, "ratio                  %.2f (goal >= 0.8)\n", res.Ratio)
			fmt.Fprintf(w, "restore CPU            %v (%.2f cores)\n", res.RestoreCPU.Round(time.Millisecond), res.RestoreCPU.Seconds()/res.RestoreTime.Seconds())
			if res.PeakRSS > 0 {
				fmt.Fprintf(w, "peak RSS               %d MiB during the restore, %d MiB at its start (the whole process%s)\n", res.PeakRSS>>20, res.StartRSS>>20, map[bool]string{true: "", false: ", the embedded cluster's log included"}[len(brokers) > 0])
			}
			return writeJSON(w, out, "restore.json", res)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&smoke, "smoke", false, "tiny run (20000 records)")
	f.IntVar(&keys, "keys", 0, "changelog records to restore (default 1000000)")
	f.StringVar(&out, "out", "", "directory for restore.json")
	f.StringSliceVar(&brokers, "brokers", nil, "run on this cluster (host:port,...) instead of an embedded one")
	f.StringVar(&profile, "restore-profile", "", "write a CPU profile of the cold restore alone (not the fill) to this file")
	f.BoolVarP(&verbose, "verbose", "v", false, "narrate on stderr")
	return cmd
}

func benchThroughputCmd() *cobra.Command {
	var (
		smoke      bool
		lines      int
		keys       int
		workers    []int
		out        string
		verbose    bool
		guarantees []string
	)
	cmd := &cobra.Command{
		Use:   "throughput",
		Short: "Wordcount records/s on one instance against a plain consumer, by number of workers",
		Long: `throughput produces --lines lines of three words (two common ones and one of
--keys distinct words, in turn), counts them with a plain kgo consumer (split
and count in a map, nothing durable), then with one wordcount instance per
guarantee and worker count, each as a fresh application reading the same
input. It prints lines/s and the ratio to the plain consumer.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := bench.DefaultThroughputConfig()
			if smoke {
				cfg = bench.SmokeThroughputConfig()
			}
			f := cmd.Flags()
			if f.Changed("lines") {
				cfg.Lines = lines
			}
			if f.Changed("keys") {
				cfg.Keys = keys
			}
			if f.Changed("workers") {
				cfg.Workers = workers
			}
			if f.Changed("guarantee") {
				cfg.Guarantees = guarantees
			}
			for _, g := range cfg.Guarantees {
				if _, err := baton.ParseGuarantee(g); err != nil {
					return usageErr(fmt.Errorf("bench throughput: --guarantee: %w", err))
				}
			}
			if cfg.Lines < 1 || cfg.Keys < 1 || len(cfg.Workers) == 0 || slices.Min(cfg.Workers) < 1 {
				return usageErr(fmt.Errorf("bench throughput: want --lines >= 1, --keys >= 1 and --workers >= 1"))
			}
			if verbose {
				cfg.Log = cmd.ErrOrStderr()
			}
			res, err := bench.RunThroughput(benchContext(cmd), cfg)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "reader\tguarantee\tworkers\tlines/s\trecords/s (lines+words)\tvs plain\tcounts verified\tRSS start/peak MiB\t")
			fmt.Fprintf(tw, "plain kgo consumer\t-\t1\t%.0f\t-\t1.00\t%v\t-\t\n", res.Plain.LinesPS, res.Plain.Verified)
			for _, r := range res.Baton {
				fmt.Fprintf(tw, "baton wordcount\t%s\t%d\t%.0f\t%.0f\t%.2f\t%v\t%d/%d\t\n", r.Guarantee, r.Workers, r.LinesPS, r.RecsPS, r.VsPlain, r.Verified, r.StartRSS>>20, r.PeakRSS>>20)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			return writeJSON(w, out, "throughput.json", res)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&smoke, "smoke", false, "tiny run (5000 lines, 1 and 2 workers)")
	f.IntVar(&lines, "lines", 0, "input lines (default 300000)")
	f.IntVar(&keys, "keys", 0, "distinct words the third word of each line takes in turn (default 50000)")
	f.IntSliceVar(&workers, "workers", nil, "worker counts to run (default 1,2,4)")
	f.StringSliceVar(&guarantees, "guarantee", nil, "guarantees to run (default at-least-once,exactly-once)")
	f.StringVar(&out, "out", "", "directory for throughput.json")
	f.BoolVarP(&verbose, "verbose", "v", false, "narrate on stderr")
	return cmd
}

func benchHeartbeatCmd() *cobra.Command {
	var (
		smoke     bool
		intervals []time.Duration
		out       string
		verbose   bool
	)
	cmd := &cobra.Command{
		Use:   "heartbeat",
		Short: "Handover gap and coordinator requests/s at several heartbeat intervals",
		Long: `heartbeat scales a wordcount group out from 2 to 3 instances once per
--intervals value (baton.WithHeartbeatInterval), each as a fresh application
on one embedded cluster, and reports the requests per second each instance
sends the group coordinator in steady state (counted with a kgo hook) and
the handover gaps of the scale-out.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := bench.DefaultHeartbeatConfig()
			if smoke {
				cfg = bench.SmokeHeartbeatConfig()
			}
			if cmd.Flags().Changed("intervals") {
				cfg.Intervals = intervals
			}
			if len(cfg.Intervals) == 0 || slices.Min(cfg.Intervals) < 10*time.Millisecond {
				return usageErr(fmt.Errorf("bench heartbeat: want --intervals >= 10ms"))
			}
			if verbose {
				cfg.Log = cmd.ErrOrStderr()
			}
			res, err := bench.RunHeartbeat(benchContext(cmd), cfg)
			if res == nil {
				return err
			}
			w := cmd.OutOrStdout()
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "heartbeat\theartbeats/s\tcoordinator requests/s\ttime to balance\tmoved\thandover max\tmedian\t")
			for _, r := range res.Runs {
				fmt.Fprintf(tw, "%v\t%.1f\t%.1f\t%.1fs\t%d\t%v\t%v\t\n", r.Interval, r.HeartbeatsPS, r.CoordinatorPS,
					r.Out.TimeToBalance.Seconds(), r.Out.Moved, r.Out.HandoverMax.Round(time.Millisecond), r.Out.HandoverMedian.Round(time.Millisecond))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			fmt.Fprintln(w, "(requests per second per instance in steady state; handovers of the 2->3 scale-out)")
			if werr := writeJSON(w, out, "heartbeat.json", res); werr != nil {
				return werr
			}
			return err
		},
	}
	f := cmd.Flags()
	f.BoolVar(&smoke, "smoke", false, "tiny run (100ms and 500ms)")
	f.DurationSliceVar(&intervals, "intervals", nil, "heartbeat intervals (default 50ms,200ms,1s,3s)")
	f.StringVar(&out, "out", "", "directory for heartbeat.json")
	f.BoolVarP(&verbose, "verbose", "v", false, "narrate on stderr")
	return cmd
}

func writeJSON(w io.Writer, dir, name string, v any) error {
	if dir == "" {
		return nil
	}
	path, err := bench.WriteJSON(dir, name, v)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "wrote %s\n", path)
	return nil
}

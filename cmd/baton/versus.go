package main

import (
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/baton-streams/baton/bench"
	"github.com/baton-streams/baton/bench/versus"
)

func init() {
	benchCmd.AddCommand(benchVersusCmd())
}

func benchVersusCmd() *cobra.Command {
	var (
		short      bool
		engines    string
		baseline   string
		events     string
		brokers    string
		brokerSets []string
		out        string
		simDir     string
		predictDir string
		verbose    bool
		c          versus.Config
	)
	cmd := &cobra.Command{
		Use:   "versus",
		Short: "The same wordcount on baton, Kafka Streams and goka against one Apache Kafka cluster, measured from outside",
		Long: `versus runs the wordcount on several engines, each as processes that keep
the contract of compare/README.md, against one Apache Kafka cluster (started
here with --nodes, or --brokers), and measures each the same way from
outside: the output topic's arrivals (end-to-end latency = arrival - record
timestamp, gaps per output partition) and the engines' status lines (who
runs which task, lines processed).

Per configuration and event, on fresh topics and app id: --keys distinct
words are prefilled, the instances process them, input flows at --rate
lines/s, and after a steady window the event happens: scale-out (2 -> 3),
scale-in (3 -> 2, SIGTERM), kill-standby1 / kill-standby0 (SIGKILL of one of
3 instances with 1 or 0 standbys). The run goes on until the group is
balanced (at most --balance-cap), then input stops and the final counts
are checked against the input. Then 2 instances process a --backlog from
a cold start. Peers are built by compare/<peer>/build.sh. docs/versus.md
explains every figure.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if predictDir != "" {
				var other []string
				cmd.Flags().Visit(func(fl *pflag.Flag) {
					if fl.Name != "predict-from" && fl.Name != "sim-scenarios" {
						other = append(other, "--"+fl.Name)
					}
				})
				if len(other) > 0 {
					return usageErr(fmt.Errorf("--predict-from reads a saved run and runs nothing: %s do not apply", strings.Join(other, ", ")))
				}
				return predictFrom(cmd.OutOrStdout(), predictDir, simDir)
			}
			cfg := versus.DefaultConfig()
			if short {
				cfg = versus.ShortConfig()
			}
			f := cmd.Flags()
			confs, err := versus.ParseConfigurations(engines)
			if err != nil {
				return usageErr(fmt.Errorf("--engines: %w", err))
			}
			cfg.Configurations = confs
			if baseline != "" {
				cfg.Configurations = append([]versus.Configuration{versus.Baseline(baseline)}, confs...)
			}
			if f.Changed("events") {
				if cfg.Events, err = versus.ParseEvents(events); err != nil {
					return usageErr(fmt.Errorf("--events: %w", err))
				}
			}
			if brokers != "" {
				cfg.Brokers = strings.Split(brokers, ",")
			}
			for _, kv := range brokerSets {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return usageErr(fmt.Errorf("--broker-set %q: want key=value", kv))
				}
				if cfg.BrokerConfig == nil {
					cfg.BrokerConfig = map[string]string{}
				}
				cfg.BrokerConfig[k] = v
			}
			override := func(name string, dst, src any) {
				if !f.Changed(name) {
					return
				}
				switch d := dst.(type) {
				case *int:
					*d = *src.(*int)
				case *int32:
					*d = *src.(*int32)
				case *int64:
					*d = *src.(*int64)
				case *time.Duration:
					*d = *src.(*time.Duration)
				case *string:
					*d = *src.(*string)
				}
			}
			override("nodes", &cfg.Nodes, &c.Nodes)
			override("partitions", &cfg.Partitions, &c.Partitions)
			override("keys", &cfg.Keys, &c.Keys)
			override("words-per-line", &cfg.WordsPerLine, &c.WordsPerLine)
			override("rate", &cfg.Rate, &c.Rate)
			override("steady", &cfg.Steady, &c.Steady)
			override("after", &cfg.After, &c.After)
			override("balance-cap", &cfg.BalanceCap, &c.BalanceCap)
			override("backlog", &cfg.Backlog, &c.Backlog)
			override("guarantee", &cfg.Guarantee, &c.Guarantee)
			override("queries", &cfg.Queries, &c.Queries)
			override("query-max-lag", &cfg.QueryMaxLag, &c.QueryMaxLag)
			override("query-rate", &cfg.QueryRate, &c.QueryRate)
			override("compare", &cfg.CompareDir, &c.CompareDir)
			cfg.SimScenarios = simDir
			if err := cfg.Validate(); err != nil {
				return usageErr(err)
			}
			if verbose {
				cfg.Log = cmd.ErrOrStderr()
			}
			ctx, stop := signal.NotifyContext(benchContext(cmd), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			res, err := versus.Execute(ctx, cfg)
			w := cmd.OutOrStdout()
			if res != nil {
				if perr := versus.Print(w, res); perr != nil {
					return perr
				}
				if out != "" {
					if werr := writeVersus(w, out, res); werr != nil {
						return werr
					}
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.BoolVar(&short, "short", false, "short run: 1 node, 2000 keys, 200 lines/s, 5s steady, 15s after, scale-out only, 20000-line backlog")
	f.StringVar(&engines, "engines", "baton-smooth,baton-cooperative,baton-eager", "engine configurations, comma-separated: "+strings.Join(configurationNames(), ", "))
	f.StringVar(&baseline, "baseline", "", "another baton binary, run first as configuration baton-baseline: the build a change is measured against, in the same run")
	f.StringVar(&events, "events", strings.Join(versus.Events, ","), "events, comma-separated, or none for the backlog alone (--short: scale-out)")
	f.StringVar(&brokers, "brokers", "", "use this cluster, HOST:PORT[,HOST:PORT], instead of starting one")
	f.StringArrayVar(&brokerSets, "broker-set", nil, "a broker setting key=value for the cluster started here (repeatable)")
	f.IntVar(&c.Nodes, "nodes", 3, "Apache Kafka nodes to start (--short: 1)")
	f.Int32Var(&c.Partitions, "partitions", 6, "input partitions")
	f.IntVar(&c.Keys, "keys", 1_000_000, "distinct words prefilled: the state to move (--short: 2000)")
	f.IntVar(&c.WordsPerLine, "words-per-line", 10, "words per input line")
	f.IntVar(&c.Rate, "rate", 1000, "input lines per second around the event (--short: 200)")
	f.DurationVar(&c.Steady, "steady", 30*time.Second, "steady window before each event (--short: 5s)")
	f.DurationVar(&c.After, "after", 60*time.Second, "window after each event (--short: 15s)")
	f.DurationVar(&c.BalanceCap, "balance-cap", 15*time.Minute, "longest wait after an event for the group to run balanced (--short: 1m)")
	f.IntVar(&c.Backlog, "backlog", 2_000_000, "lines of the cold-start backlog for the throughput figure; 0: skip (--short: 20000)")
	f.StringVar(&c.Guarantee, "guarantee", "at-least-once", "processing guarantee of every engine: at-least-once or exactly-once")
	f.IntVar(&c.Queries, "queries", 3, "clients reading counts through the instances' GET /query from the steady window on, for engines that serve it (baton, kstreams); 0: none (--short: 2)")
	f.Int64Var(&c.QueryMaxLag, "query-max-lag", 10000, "each read's lag bound in records; -1: the active only")
	f.IntVar(&c.QueryRate, "query-rate", 50, "reads per second of each query client, at most")
	f.StringVar(&c.CompareDir, "compare", "compare", "folder of the peers (compare/<peer>/build.sh)")
	f.StringVar(&out, "out", "", "directory for versus.json, the recordings and a plot per event")
	f.StringVar(&simDir, "sim-scenarios", "", "directory for each run's `baton sim` scenario (the group at the event, the model's parameters from the run)")
	f.StringVar(&predictDir, "predict-from", "", "read a run's --out directory back, run the simulator on each run and print the tables; runs nothing")
	f.BoolVarP(&verbose, "verbose", "v", false, "narrate the runs on stderr")
	return cmd
}

func configurationNames() []string {
	var n []string
	for _, c := range versus.Configurations() {
		n = append(n, c.Name)
	}
	return n
}

// writeVersus writes versus.json (the figures), one recording per run and
// a latency plot per event.
func writeVersus(w io.Writer, dir string, res *versus.Result) error {
	path, err := bench.WriteJSON(dir, "versus.json", res)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "wrote %s\n", path)
	for _, r := range res.Runs {
		if r.Recording == nil {
			continue
		}
		p, err := bench.WriteJSON(dir, versus.RecordingFile(r), r.Recording)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "wrote %s\n", p)
	}
	plots, err := versus.PlotEvents(res, dir)
	if err != nil {
		return err
	}
	for _, p := range plots {
		fmt.Fprintf(w, "wrote %s\n", p)
	}
	return nil
}

// predictFrom prints the tables of the run saved in dir, with the
// simulator's predictions computed from its recordings.
func predictFrom(w io.Writer, dir, simDir string) error {
	res, err := versus.Load(dir)
	if err != nil {
		return usageErr(fmt.Errorf("--predict-from: %w", err))
	}
	if err := versus.Predict(res, simDir); err != nil {
		return err
	}
	return versus.Print(w, res)
}

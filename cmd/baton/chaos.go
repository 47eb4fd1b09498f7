package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/chaos"
)

var chaosCmd = &cobra.Command{
	Use:   "chaos [--duration 10m] [--seed N] [--guarantee exactly-once] [--json FILE] [--brokers HOST:PORT,...]",
	Short: "Run wordcount under random joins, drains, crashes and cluster restarts and check the counts",
	Long: `chaos starts an embedded cluster (persisted to a temporary data directory) and
wordcount instances, keeps input flowing, and every few seconds joins, drains
or crashes an instance (a crash cuts its connections, as SIGKILL would),
sometimes crashing the leader while a learner warms or a newcomer as a task is
handed over to it, sometimes restarting the whole cluster from its data
directory. Then it checks every word's count against the input: nothing
may be lost, neither counts nor input the cluster acknowledged; under
at-least-once a word may be counted high only if one of the tasks that
count it ran on an instance lost (crashed, failed, cut off by a restart)
in the interval between two events it was lost in; under exactly-once
every word's committed counts must be exactly 1, 2, ..., n. Exit 1 if
that does not hold.

With --brokers it runs on that cluster instead (Apache Kafka, say), under
topic names and an application id that start with chaos-<seed>-<time>-, and
restarts no broker. The suite's run on Apache Kafka that also kills brokers
is: BATON_KAFKA=real BATON_CHAOS_DURATION=10m go test ./chaos -run TestChaosShort -timeout 40m`,
	Args: cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		d, _ := cmd.Flags().GetDuration("duration")
		every, _ := cmd.Flags().GetDuration("every")
		seed, _ := cmd.Flags().GetUint64("seed")
		out, _ := cmd.Flags().GetString("json")
		g, _ := cmd.Flags().GetString("guarantee")
		noRestart, _ := cmd.Flags().GetBool("no-restart")
		brokers, _ := cmd.Flags().GetString("brokers")
		if d <= 0 || every <= 0 {
			return usageErr(fmt.Errorf("--duration and --every must be > 0"))
		}
		guarantee, err := baton.ParseGuarantee(g)
		if err != nil {
			return usageErr(fmt.Errorf("--guarantee: %w", err))
		}
		cfg := chaos.Config{Duration: d, Every: every, Seed: seed, Out: os.Stdout, Guarantee: guarantee, NoRestart: noRestart}
		if brokers != "" {
			cfg.External = &chaos.External{Brokers: strings.Split(brokers, ","),
				Prefix: fmt.Sprintf("chaos-%d-%d-", seed, time.Now().Unix())}
		}
		res, err := chaos.Run(cmd.Context(), cfg)
		if err != nil {
			return err
		}
		fmt.Println(res)
		if out != "" {
			data, _ := json.MarshalIndent(res, "", "  ")
			if err := os.WriteFile(out, data, 0o644); err != nil {
				return err
			}
		}
		if !res.OK() {
			return fmt.Errorf("chaos: %s broken: lost %d, input lost %d, duplicated %d occurrences (unexcused: %v; low words %v)",
				res.Guarantee, res.Lost, res.InputLost, res.Duplicated, res.Unexcused(), res.LowWords)
		}
		return nil
	},
}

func init() {
	chaosCmd.Flags().Duration("duration", time.Minute, "how long events happen")
	chaosCmd.Flags().Duration("every", 3*time.Second, "time between events")
	chaosCmd.Flags().Uint64("seed", 1, "seed of the random events")
	chaosCmd.Flags().String("json", "", "write the figures as JSON to this file")
	chaosCmd.Flags().String("guarantee", "at-least-once", "the instances' guarantee: at-least-once or exactly-once")
	chaosCmd.Flags().Bool("no-restart", false, "never restart the cluster")
	chaosCmd.Flags().String("brokers", "", "run on this cluster (comma-separated bootstrap addresses) instead of an embedded one")
	rootCmd.AddCommand(chaosCmd)
}

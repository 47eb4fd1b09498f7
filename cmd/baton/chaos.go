package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-streams/baton/chaos"
)

var chaosCmd = &cobra.Command{
	Use:   "chaos [--duration 10m] [--seed N] [--json FILE]",
	Short: "Run wordcount under random joins, drains and crashes and check no count is lost",
	Long: `chaos starts an embedded cluster and wordcount instances, keeps input flowing,
and every few seconds joins, drains or crashes an instance (a crash cuts its
connections, as SIGKILL would), sometimes crashing the leader while a learner
warms. Then it checks every word's count against the input: nothing may be
lost, and duplicates (at-least-once) are only allowed after a crash.
Exit 1 if that does not hold.`,
	Args: cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		d, _ := cmd.Flags().GetDuration("duration")
		every, _ := cmd.Flags().GetDuration("every")
		seed, _ := cmd.Flags().GetUint64("seed")
		out, _ := cmd.Flags().GetString("json")
		if d <= 0 || every <= 0 {
			return usageErr(fmt.Errorf("--duration and --every must be > 0"))
		}
		res, err := chaos.Run(cmd.Context(), chaos.Config{Duration: d, Every: every, Seed: seed, Out: os.Stdout})
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
			return fmt.Errorf("chaos: at-least-once broken: lost %d occurrences (words %v)", res.Lost, res.LowWords)
		}
		return nil
	},
}

func init() {
	chaosCmd.Flags().Duration("duration", time.Minute, "how long events happen")
	chaosCmd.Flags().Duration("every", 3*time.Second, "time between events")
	chaosCmd.Flags().Uint64("seed", 1, "seed of the random events")
	chaosCmd.Flags().String("json", "", "write the figures as JSON to this file")
	rootCmd.AddCommand(chaosCmd)
}

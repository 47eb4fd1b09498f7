package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-streams/baton/topology"
)

var pageviewsCmd = &cobra.Command{
	Use:   "pageviews --brokers HOST:PORT --app-id ID --input TOPIC --users TOPIC --output TOPIC --state-dir DIR [--window 1m] [--grace 1m]",
	Short: "Count page views per user region per time window: a stream-table join, then a windowed count",
	Long: `Each record of --input is a page view: key = user id, value = the page.
--users is a compacted topic of the users' regions (key = user id, value =
region), read as a table; it must have as many partitions as --input, and is
read, never written. Each view is joined with its user's region (a user not
in the table counts under the region "unknown"), repartitioned by region and
counted in tumbling windows of --window by event time, the view record's
timestamp. For every view the region's new count in that window is written
to --output: key = the region's bytes then the window's start in Unix
milliseconds as 8 bytes big-endian (Kafka Streams' time-windowed key), value
= the count as decimal text. A view whose window ended --grace or more
before the latest view time its window task has seen is late: dropped and
counted in baton_late_records_total.

Every other flag, SIGTERM and SIGINT (drain), --instance-id and --on-stop,
--status-every and --http work as for "baton run wordcount".`,
	Args: cobra.NoArgs,
	RunE: runPageviews,
}

func init() {
	addAppFlags(pageviewsCmd, "input topic of page views, key = user id (required)", "output topic of views per region per window; created when missing (required)")
	f := pageviewsCmd.Flags()
	f.String("users", "", "compacted topic of users' regions, key = user id, value = region; as many partitions as --input (required)")
	f.Duration("window", time.Minute, "size of the tumbling windows, a whole number of milliseconds")
	f.Duration("grace", time.Minute, "how long after a window ends, in event time, a view may still be counted in it")
	_ = pageviewsCmd.MarkFlagRequired("users")
	runCmd.AddCommand(pageviewsCmd)
}

func runPageviews(cmd *cobra.Command, _ []string) error {
	f := cmd.Flags()
	window, _ := f.GetDuration("window")
	grace, _ := f.GetDuration("grace")
	return runApp(cmd, func(str func(string) string) (*topology.Topology, error) {
		users := str("users")
		switch {
		case strings.TrimSpace(users) == "":
			return nil, fmt.Errorf("--users: must not be empty")
		case users == str("input"):
			return nil, fmt.Errorf("--users: must differ from --input (%s)", users)
		case users == str("output"):
			return nil, fmt.Errorf("--users: must differ from --output (%s)", users)
		case window <= 0 || window%time.Millisecond != 0:
			return nil, fmt.Errorf("--window: must be a positive whole number of milliseconds, got %v", window)
		case grace < 0 || grace%time.Millisecond != 0:
			return nil, fmt.Errorf("--grace: must be a whole number of milliseconds >= 0, got %v", grace)
		}
		return topology.PageViews(str("app-id"), str("input"), users, str("output"), window, grace)
	})
}

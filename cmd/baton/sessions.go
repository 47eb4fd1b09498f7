package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-streams/baton/topology"
)

var sessionsCmd = &cobra.Command{
	Use:   "sessions --brokers HOST:PORT --app-id ID --input TOPIC --output TOPIC --state-dir DIR [--gap 30m] [--grace 1m]",
	Short: "Sessions per user from clicks, each written once when it closes: session windows and final results",
	Long: `Each record of --input is a click: its value is text whose first field
(fields are separated by white space) is the user's id, the rest (a page,
say) not used; the key is not used either, but keying clicks by user keeps
each user's clicks in order. A click whose value has no field (empty, or
white space only) is dropped. The click's event time is its record's
timestamp.

Clicks are repartitioned by user and counted per session: a user's clicks
at most --gap apart are one session. A session is written once, when it
closes: when a click of its task (users are spread over the tasks by their
ids) comes more than --gap plus --grace after the session's last click.
Until then it waits in a store of its own, which moves with the task. On
--output each session is one record:

  key   = <user>@<start>
  value = <start> <end> <clicks>

start and end are the times of its first and last clicks in Unix
milliseconds, clicks the number of its clicks, all decimal text; the record's
timestamp is the time of the click that closed it. A click may come out of
order: it joins the sessions it would have if it had come in order, as long
as it is at most --grace behind the latest click time its task has seen or
within an open session or --gap after one. Any other click is late: dropped
and counted in baton_late_records_total.

Every other flag, SIGTERM and SIGINT (drain), --instance-id and --on-stop,
--status-every and --http work as for "baton run wordcount".`,
	Args: cobra.NoArgs,
	RunE: runSessions,
}

func init() {
	addAppFlags(sessionsCmd, "input topic of clicks, value = the user id, then anything (required)", "output topic of closed sessions; created when missing (required)")
	f := sessionsCmd.Flags()
	f.Duration("gap", 30*time.Minute, "inactivity gap: a user's clicks at most this far apart, in event time, are one session; a whole number of milliseconds")
	f.Duration("grace", time.Minute, "how far behind the latest click time of its task a click may come and still start or extend a session")
	runCmd.AddCommand(sessionsCmd)
}

func runSessions(cmd *cobra.Command, _ []string) error {
	f := cmd.Flags()
	gap, _ := f.GetDuration("gap")
	grace, _ := f.GetDuration("grace")
	return runApp(cmd, func(str func(string) string) (*topology.Topology, error) {
		switch {
		case gap <= 0 || gap%time.Millisecond != 0:
			return nil, fmt.Errorf("--gap: must be a positive whole number of milliseconds, got %v", gap)
		case grace < 0 || grace%time.Millisecond != 0:
			return nil, fmt.Errorf("--grace: must be a whole number of milliseconds >= 0, got %v", grace)
		case str("input") == str("output"):
			return nil, fmt.Errorf("--output: must differ from --input (%s)", str("input"))
		}
		return topology.Sessions(str("app-id"), str("input"), str("output"), gap, grace)
	})
}

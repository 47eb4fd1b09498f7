package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton/internal/query"
	"github.com/baton-streams/baton/web"
)

var queryCmd = &cobra.Command{
	Use:   "query (--brokers HOST:PORT --app-id ID | --endpoint HOST:PORT) --store NAME (--key KEY | --from A --to B)",
	Short: "Read one key of a running application's store, wherever its task runs",
	Long: `Reads the value of KEY in the store NAME of a running application, through
the HTTP endpoint of one of its instances (GET /query/STORE/KEY, see
docs/queries.md): the instance maps the key to its task and answers from its
own copy or asks the instance that holds one. With --brokers and --app-id the
instances are found in the consumer group (they must run with --http); with
--endpoint the read goes to that instance.

By default only the task's active copy answers, once it has restored;
--max-lag N lets a learner or standby at most N records behind answer too,
and --min-offset O asks for an answer that reflects the task's changelog at
least up to O (pass the offset of an earlier answer). While no copy meets the
bounds, for example during a handover, the read waits up to --timeout.

It prints the value, the copy that served it (instance, role, lag) and the
changelog offset the answer reflects; --json prints the instance's answer as
is.

Without --key it reads a range: the keys from --from (included) to --to
(excluded) of every task of the store, either end open when not given, the
first --limit in key order. With --key and --window-from or --window-to
(milliseconds since the epoch or RFC 3339) it reads the windows of KEY in a
windowed store whose start is in that range. Exit status: 0 when answered (found or not), 1 when no copy met the
bounds in time or no instance could be asked, 2 on bad flags.`,
	Args: cobra.NoArgs,
	RunE: runQuery,
}

func init() {
	f := queryCmd.Flags()
	f.String("brokers", "", "Kafka brokers, HOST:PORT[,HOST:PORT], to find the instances")
	f.String("app-id", "", "application id: the consumer group")
	f.String("endpoint", "", "ask this instance (HOST:PORT of its --http) instead of finding one")
	f.String("store", "", "the store's name, such as counts (required)")
	f.String("key", "", "the key, in its text form (for wordcount, the word) (required)")
	f.Int64("max-lag", -1, "let a copy at most this many records behind answer (default: the active only)")
	f.Int64("min-offset", 0, "the answer must reflect the changelog at least up to this offset")
	f.Duration("timeout", query.DefaultTimeout, "how long to wait for a copy that meets the bounds")
	f.Bool("json", false, "print the answer as the instance's JSON")
	f.String("from", "", "range read: the first key (default: the first in the store)")
	f.String("to", "", "range read: the key after the last (default: past the last in the store)")
	f.String("window-from", "", "window read: the earliest window start, ms since the epoch or RFC 3339")
	f.String("window-to", "", "window read: the window start after the last, ms since the epoch or RFC 3339")
	f.Int("limit", query.DefaultLimit, "range and window reads: at most this many entries")
	rootCmd.AddCommand(queryCmd)
}

func runQuery(cmd *cobra.Command, _ []string) error {
	f := cmd.Flags()
	brokers, _ := f.GetString("brokers")
	appID, _ := f.GetString("app-id")
	endpoint, _ := f.GetString("endpoint")
	store, _ := f.GetString("store")
	key, _ := f.GetString("key")
	maxLag, _ := f.GetInt64("max-lag")
	minOffset, _ := f.GetInt64("min-offset")
	timeout, _ := f.GetDuration("timeout")
	asJSON, _ := f.GetBool("json")
	switch {
	case store == "":
		return usageErr(errors.New("--store: required"))
	case !f.Changed("key") && (f.Changed("window-from") || f.Changed("window-to")):
		return usageErr(errors.New("--window-from and --window-to: a window read needs --key"))
	case !f.Changed("key") && !f.Changed("from") && !f.Changed("to"):
		return usageErr(errors.New("--key, or --from and --to for a range: required"))
	case f.Changed("key") && (f.Changed("from") || f.Changed("to")):
		return usageErr(errors.New("--from and --to: a range read has no --key"))
	case endpoint == "" && (strings.TrimSpace(brokers) == "" || appID == ""):
		return usageErr(errors.New("--brokers and --app-id, or --endpoint: required to find an instance"))
	case endpoint != "" && brokers != "":
		return usageErr(errors.New("--endpoint and --brokers: give one"))
	case f.Changed("max-lag") && maxLag < 0:
		return usageErr(fmt.Errorf("--max-lag: must be >= 0, got %d", maxLag))
	case minOffset < 0:
		return usageErr(fmt.Errorf("--min-offset: must be >= 0, got %d", minOffset))
	case timeout <= 0 || timeout > query.MaxTimeout:
		return usageErr(fmt.Errorf("--timeout: must be > 0 and at most %v, got %v", query.MaxTimeout, timeout))
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), timeout+10*time.Second)
	defer cancel()
	endpoints := []string{endpoint}
	if endpoint == "" {
		var err error
		if endpoints, err = groupEndpoints(ctx, brokers, appID, timeout); err != nil {
			return err
		}
	}
	limit, _ := f.GetInt("limit")
	if limit < 1 || limit > query.MaxLimit {
		return usageErr(fmt.Errorf("--limit: must be from 1 to %d, got %d", query.MaxLimit, limit))
	}
	b := query.Bounds{MaxLag: maxLag, MinOffset: minOffset, Timeout: timeout, Limit: limit}
	var read func(endpoint string) (any, error)
	switch {
	case !f.Changed("key"):
		var from, to []byte
		if f.Changed("from") {
			v, _ := f.GetString("from")
			from = []byte(v)
		}
		if f.Changed("to") {
			v, _ := f.GetString("to")
			to = []byte(v)
		}
		read = func(e string) (any, error) {
			return query.AskRange(ctx, http.DefaultClient, e, store, from, to, "", b, false)
		}
	case f.Changed("window-from") || f.Changed("window-to"):
		wf, _ := f.GetString("window-from")
		wt, _ := f.GetString("window-to")
		from, to, err := query.ParseWindow(wf, wt)
		if err != nil {
			return usageErr(err)
		}
		read = func(e string) (any, error) {
			return query.AskWindows(ctx, http.DefaultClient, e, store, []byte(key), from, to, b, false)
		}
	default:
		read = func(e string) (any, error) {
			return query.Ask(ctx, http.DefaultClient, e, store, []byte(key), b, false)
		}
	}
	var a any
	var err error
	for _, e := range endpoints {
		a, err = read(e)
		var se *query.StatusError
		if err == nil || errors.As(err, &se) {
			break // answered, or refused by an instance that could ask the others
		}
	}
	if err != nil {
		var se *query.StatusError
		if errors.As(err, &se) && se.Code == http.StatusBadRequest {
			return usageErr(err)
		}
		return err
	}
	w := cmd.OutOrStdout()
	switch a := a.(type) {
	case query.Answer:
		printAnswer(w, a, asJSON)
	case query.RangeAnswer:
		printRange(w, a, f.Changed("key"), asJSON)
	}
	return nil
}

// groupEndpoints returns the HTTP endpoints of the group's members,
// asking again while the group rebalances (it hides them then).
func groupEndpoints(ctx context.Context, brokers, appID string, timeout time.Duration) ([]string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		return nil, usageErr(fmt.Errorf("--brokers: %w", err))
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(timeout)
	for {
		g, err := web.ReadGroup(ctx, adm, appID)
		if errors.Is(err, kerr.GroupIDNotFound) {
			g, err = web.Group{State: "Dead"}, nil
		}
		if err != nil {
			return nil, err
		}
		var out []string
		pending := false
		for _, m := range g.Members {
			pending = pending || m.Pending
			if m.Subscription.Endpoint != "" {
				out = append(out, m.Subscription.Endpoint)
			}
		}
		switch {
		case len(out) > 0:
			return out, nil
		case len(g.Members) == 0:
			return nil, fmt.Errorf("group %s has no members (%s): is the application running, with this --app-id?", appID, g.State)
		case !pending || time.Now().After(deadline):
			return nil, fmt.Errorf("no member of group %s names an HTTP endpoint: start the instances with --http", appID)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// printRange prints a range read's entries, one a line, then the copy
// that answered for each task.
func printRange(w io.Writer, ra query.RangeAnswer, windows, asJSON bool) {
	if asJSON {
		_ = json.NewEncoder(w).Encode(ra)
		return
	}
	for _, e := range ra.Entries {
		if windows {
			fmt.Fprintf(w, "%s[%s] window %s = %s\n", ra.Store, strconv.Quote(string(e.Key)), e.WindowStart.UTC().Format(time.RFC3339Nano), e.Value)
			continue
		}
		fmt.Fprintf(w, "%s[%s] = %s  (task %s)\n", ra.Store, strconv.Quote(string(e.Key)), e.Value, e.Task)
	}
	if ra.Truncated {
		fmt.Fprintf(w, "  (more entries in the range: raise --limit)\n")
	}
	for _, a := range ra.Tasks {
		fmt.Fprintf(w, "  task %s served by %s (%s, lag %d), changelog offset %d\n", a.Task, a.Instance, a.Role, a.Lag, a.Offset)
	}
}

func printAnswer(w io.Writer, a query.Answer, asJSON bool) {
	if asJSON {
		_ = json.NewEncoder(w).Encode(a)
		return
	}
	if a.Found {
		fmt.Fprintf(w, "%s[%s] = %s\n", a.Store, strconv.Quote(string(a.Key)), a.Value)
	} else {
		fmt.Fprintf(w, "%s[%s]: not found\n", a.Store, strconv.Quote(string(a.Key)))
	}
	fmt.Fprintf(w, "  served by %s (%s, lag %d), task %s, changelog offset %d\n", a.Instance, a.Role, a.Lag, a.Task, a.Offset)
}

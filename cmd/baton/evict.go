package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/web"
)

var evictCmd = &cobra.Command{
	Use:   "evict --brokers HOST:PORT --app-id ID --instance-id ID",
	Short: "Remove a dead static member from its group now, instead of after its session timeout",
	Long: `Removes the static member (an instance started with --instance-id) from the
consumer group named by the app id, so that the group rebalances at once and
its tasks move to the other instances: for an instance that is gone and will
not come back (its machine lost, a scale-in by kill), whose tasks would
otherwise wait for its session timeout. A supervisor that restarts the process
under the same --instance-id needs no evict: the restarted member takes its
place in the group without a rebalance.

Before removing it, evict asks the member's /status at the endpoint in its
subscription. An instance that answers is running, and evict refuses unless
--force is given (for one that runs but is stuck). So does an instance that
cannot be checked: no endpoint (started without --http), or an answer that
is neither a refused connection nor another instance's. Removing a running member
is safe, if disruptive: the group no longer accepts its commits (its member
id is gone), so under exactly-once none of its open transactions can commit
and under at-least-once its offsets cannot move; it learns so at its next
heartbeat, gives up its tasks and joins again as a new member.

Under exactly-once, evict then fences the instance's transactional producer
(<app-id>-<instance-id>): the transaction a killed instance left open is
aborted at once instead of after its transaction timeout, so the instances
that take its tasks over can read its changelogs to their end (they restore
read_committed) without waiting. A running instance removed with --force
loses its tasks, its open transaction is aborted, and it joins the group
again as a new member, from the last commit.`,
	Args: cobra.NoArgs,
	RunE: runEvict,
}

func init() {
	f := evictCmd.Flags()
	f.String("brokers", "", "Kafka brokers, HOST:PORT[,HOST:PORT] (required)")
	f.String("app-id", "", "application id: the consumer group (required)")
	f.String("instance-id", "", "the static member's instance id (its --instance-id) (required)")
	f.String("reason", "", "why, recorded by the group coordinator with the removal")
	f.Bool("force", false, "remove the member even though its /status answers (a running but stuck instance)")
	f.Duration("timeout", 10*time.Second, "how long to wait for the brokers")
	rootCmd.AddCommand(evictCmd)
}

func runEvict(cmd *cobra.Command, _ []string) error {
	f := cmd.Flags()
	brokers, _ := f.GetString("brokers")
	appID, _ := f.GetString("app-id")
	id, _ := f.GetString("instance-id")
	reason, _ := f.GetString("reason")
	force, _ := f.GetBool("force")
	timeout, _ := f.GetDuration("timeout")
	for _, name := range []string{"brokers", "app-id", "instance-id"} {
		if v, _ := f.GetString(name); strings.TrimSpace(v) == "" {
			return usageErr(fmt.Errorf("--%s: required", name))
		}
	}
	if timeout <= 0 {
		return usageErr(fmt.Errorf("--timeout: must be > 0, got %v", timeout))
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		return usageErr(fmt.Errorf("--brokers: %w", err))
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
	defer cancel()
	adm := kadm.NewClient(cl)
	endpoint, err := staticMember(ctx, adm, appID, id)
	if err != nil {
		return err
	}
	if !force {
		if endpoint == "" {
			return fmt.Errorf("cannot tell whether instance %s runs: the group names no HTTP endpoint for it (started without --http, or its subscription is unreadable); pass --force to remove it anyway", id)
		}
		switch running, err := answers(ctx, endpoint, id); {
		case running:
			return fmt.Errorf("instance %s answers at http://%s/status: it is running; stop it, or pass --force to remove it anyway", id, endpoint)
		case !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, errOtherInstance):
			return fmt.Errorf("cannot tell whether instance %s runs: http://%s/status: %v; pass --force to remove it anyway", id, endpoint, err)
		default:
			fmt.Fprintf(cmd.ErrOrStderr(), "baton: instance %s does not answer at http://%s/status (%v): removing it\n", id, endpoint, err)
		}
	}
	why := "baton evict"
	if reason != "" {
		why += ": " + reason
	}
	resp, err := adm.LeaveGroup(ctx, kadm.LeaveGroup(appID).InstanceIDs(id).Reason(why))
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("removing instance %s from group %s: %w", id, appID, err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "removed instance %s from group %s: the group rebalances now and its tasks move\n", id, appID)
	txnID := baton.TransactionalID(appID, id)
	fenced, err := fenceProducer(ctx, adm, strings.Split(brokers, ","), txnID)
	if err != nil {
		return fmt.Errorf("fencing instance %s's transactions: %w", id, err)
	}
	if fenced != "" {
		fmt.Fprintf(cmd.OutOrStdout(), "fenced its transactional producer %s: %s\n", txnID, fenced)
	}
	return nil
}

// fenceProducer fences the transactional producer txnID (an instance's
// under exactly-once, baton.TransactionalID) when the cluster knows it:
// a new producer session with its id bumps its epoch, which aborts the
// transaction it left open. Until then that transaction holds up every
// read_committed reader of its partitions, the other instances' restores
// of its changelogs included, for up to the transaction timeout and the
// brokers' next check. It returns what it did, "" when the cluster does
// not know the id (the group runs at-least-once).
func fenceProducer(ctx context.Context, adm *kadm.Client, brokers []string, txnID string) (string, error) {
	described, err := adm.DescribeTransactions(ctx, txnID)
	if err != nil {
		return "", fmt.Errorf("describing %s: %w", txnID, err)
	}
	d, ok := described[txnID]
	if !ok || errors.Is(d.Err, kerr.TransactionalIDNotFound) {
		return "", nil
	}
	if d.Err != nil {
		return "", fmt.Errorf("describing %s: %w", txnID, d.Err)
	}
	before := d.State
	fence, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID(txnID))
	if err != nil {
		return "", err
	}
	defer fence.Close()
	if _, _, err := fence.ProducerID(ctx); err != nil {
		return "", fmt.Errorf("starting a producer session as %s: %w", txnID, err)
	}
	if before == "Ongoing" {
		return "its open transaction is aborted", nil
	}
	return "it had no open transaction (" + before + ")", nil
}

// staticMember finds the member of group appID whose group instance id is
// id, and returns the endpoint its subscription names ("" if none). While
// the group rebalances the coordinator shows no subscriptions: it asks
// again until it sees the member's, or ctx ends.
func staticMember(ctx context.Context, adm *kadm.Client, appID, id string) (string, error) {
	for {
		endpoint, pending, err := describeMember(ctx, adm, appID, id)
		if err != nil || !pending {
			return endpoint, err
		}
		select {
		case <-ctx.Done():
			return "", nil
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// describeMember is one try of staticMember; pending says the member's
// subscription could not be read yet (the group rebalances).
func describeMember(ctx context.Context, adm *kadm.Client, appID, id string) (endpoint string, pending bool, err error) {
	described, err := adm.DescribeGroups(ctx, appID)
	if err == nil {
		err = described.Error()
	}
	if err != nil {
		return "", false, fmt.Errorf("describing group %s: %w", appID, err)
	}
	d := described[appID]
	var memberID string
	var static []string
	for _, m := range d.Members {
		if m.InstanceID == nil {
			continue
		}
		static = append(static, *m.InstanceID)
		if *m.InstanceID == id {
			memberID = m.MemberID
		}
	}
	if memberID == "" {
		slices.Sort(static)
		known := "it has no static members"
		if len(static) > 0 {
			known = "its static members are " + strings.Join(static, ", ")
		}
		return "", false, fmt.Errorf("group %s (%s) has no member with instance id %s: %s (an instance is a static member when started with --instance-id)", appID, d.State, id, known)
	}
	g, err := web.ReadGroup(ctx, adm, appID)
	if err != nil {
		return "", true, nil // asked again: the endpoint is for the liveness check
	}
	for _, m := range g.Members {
		if m.MemberID == memberID {
			return m.Subscription.Endpoint, m.Pending, nil
		}
	}
	return "", true, nil
}

// errOtherInstance: another instance serves /status at the endpoint.
var errOtherInstance = errors.New("another instance serves there now")

// answers reports whether the instance id serves its /status at endpoint.
func answers(ctx context.Context, endpoint, id string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+endpoint+"/status", nil)
	if err != nil {
		return false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	var st baton.Status
	if resp.StatusCode != http.StatusOK {
		return false, fmt.Errorf("HTTP %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return false, err
	}
	if st.Instance != id {
		return false, fmt.Errorf("%w (%s)", errOtherInstance, st.Instance)
	}
	return true, nil
}

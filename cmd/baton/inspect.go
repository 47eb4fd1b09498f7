package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/assign"
	"github.com/baton-streams/baton/member"
	"github.com/baton-streams/baton/topology"
	"github.com/baton-streams/baton/web"
)

var inspectCmd = &cobra.Command{
	Use:   "inspect --brokers HOST:PORT --app-id ID",
	Short: "Show a running group's assignment and what the next plan would move, without joining it",
	Long: `Reads the group from the cluster without joining it: describes the consumer
group named by the app id, decodes baton's subscription in each member's
metadata, and reads the end offsets of the changelogs (<app-id>-<store>-changelog).
Prints one line per instance, role and task with the task's lag, then the
group's input lag and the leader's recommended number of instances, then the
plan the assignor would make from these subscriptions now, with its reasons.

The input lag in records is read from the cluster: over every partition of the
input topics, the end offset minus the group's committed offset (minus the
partition's start when nothing is committed). The live figures (seconds behind,
input rate) and the recommendation come from each member's /status at the
endpoint in its subscription; a member without one, or that does not answer
within a second, is left out and named (see docs/autoscaling.md).

Roles are each member's last assignment (what it runs now); lags are the ones
it reported at its last join, so a learner's lag is older than its role (the
instance's /status shows it live). An instance whose /status says the group
has not confirmed it for a session timeout is marked "(unconfirmed)", and its
active tasks show the role "unconfirmed": the group may already have given
them to another instance. The next plan is computed from the
subscriptions the members would send if the group rebalanced now: their
current roles with those lags.

The task list is not in the subscriptions: it is every task some member
reports, completed to partitions 0..N-1 of every subtopology seen when all the
group's source topics have N partitions (the usual co-partitioned case). When
they differ, only the reported tasks are planned and a note says so. A
subtopology is stateful when some member reports a lag, standby or learner for
one of its tasks. The group-wide settings below are not in the subscriptions
either: pass the ones the group runs with.`,
	Args: cobra.NoArgs,
	RunE: runInspect,
}

func init() {
	f := inspectCmd.Flags()
	f.String("brokers", "", "Kafka brokers, HOST:PORT[,HOST:PORT] (required)")
	f.String("app-id", "", "application id: the consumer group (required)")
	f.String("policy", string(assign.Smooth), "assignment policy the group runs: smooth, cooperative or eager")
	f.Int("standbys", assign.DefaultStandbys, "standby replicas per stateful task the group runs with")
	f.Int("max-learners", assign.DefaultMaxLearners, "most learner tasks in the group at once")
	f.Int64("acceptable-lag", assign.DefaultAcceptableLag, "records within which a copy of state counts as caught up")
	f.Duration("timeout", 10*time.Second, "how long to wait for the brokers")
	rootCmd.AddCommand(inspectCmd)
}

func runInspect(cmd *cobra.Command, _ []string) error {
	f := cmd.Flags()
	brokers, _ := f.GetString("brokers")
	appID, _ := f.GetString("app-id")
	policyName, _ := f.GetString("policy")
	standbys, _ := f.GetInt("standbys")
	maxLearners, _ := f.GetInt("max-learners")
	lag, _ := f.GetInt64("acceptable-lag")
	timeout, _ := f.GetDuration("timeout")
	for name, v := range map[string]string{"brokers": brokers, "app-id": appID} {
		if strings.TrimSpace(v) == "" {
			return usageErr(fmt.Errorf("--%s: required", name))
		}
	}
	policy, err := assign.ParsePolicy(policyName)
	if err != nil {
		return usageErr(fmt.Errorf("--policy: %w", err))
	}
	cfg := assign.Config{Standbys: standbys, MaxLearners: maxLearners, AcceptableLag: lag}
	switch {
	case standbys < 0:
		return usageErr(fmt.Errorf("--standbys: must be >= 0, got %d", standbys))
	case maxLearners < 1:
		return usageErr(fmt.Errorf("--max-learners: must be >= 1, got %d", maxLearners))
	case lag < 0:
		return usageErr(fmt.Errorf("--acceptable-lag: must be >= 0, got %d", lag))
	case timeout <= 0:
		return usageErr(fmt.Errorf("--timeout: must be > 0, got %v", timeout))
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		return usageErr(fmt.Errorf("--brokers: %w", err))
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
	defer cancel()
	snap, err := readInspection(ctx, kadm.NewClient(cl), appID)
	if err != nil {
		return fmt.Errorf("brokers %s: %w", brokers, err)
	}
	return snap.print(cmd.OutOrStdout(), cfg, policy)
}

// inspection is what inspect read from the cluster.
type inspection struct {
	appID string
	group web.Group
	// partitions of each source topic the members subscribe to.
	partitions map[string]int32
	// changelogEnds: changelog topic -> partition -> end offset.
	changelogEnds map[string]map[int32]int64
	// inputLag is the group's uncommitted input over inputParts
	// partitions, unless inputErr says why it is unknown.
	inputLag   int64
	inputParts int
	inputErr   error
	// statuses are the members' /status by instance id; unread says why
	// a member's is missing.
	statuses map[string]*baton.Status
	unread   map[string]string
}

func readInspection(ctx context.Context, adm *kadm.Client, appID string) (inspection, error) {
	in := inspection{appID: appID, partitions: map[string]int32{}, changelogEnds: map[string]map[int32]int64{},
		statuses: map[string]*baton.Status{}, unread: map[string]string{}}
	g, err := web.ReadGroup(ctx, adm, appID)
	if err != nil {
		return in, err
	}
	in.group = g
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return in, fmt.Errorf("listing topics: %w", err)
	}
	var changelogs []string
	for _, name := range topics.Names() {
		if web.IsChangelog(appID, name) {
			changelogs = append(changelogs, name)
		}
	}
	for _, m := range g.Members {
		for _, t := range m.Topics {
			if d, ok := topics[t]; ok && d.Err == nil {
				in.partitions[t] = int32(len(d.Partitions))
			}
		}
	}
	if len(changelogs) > 0 {
		ends, err := adm.ListEndOffsets(ctx, changelogs...)
		if err != nil {
			return in, fmt.Errorf("listing changelog end offsets: %w", err)
		}
		ends.Each(func(o kadm.ListedOffset) {
			if o.Err != nil {
				return
			}
			if in.changelogEnds[o.Topic] == nil {
				in.changelogEnds[o.Topic] = map[int32]int64{}
			}
			in.changelogEnds[o.Topic][o.Partition] = o.Offset
		})
	}
	in.inputLag, in.inputParts, in.inputErr = readInputLag(ctx, adm, appID, slices.Sorted(maps.Keys(in.partitions)))
	in.readStatuses(ctx)
	return in, nil
}

// readInputLag sums, over every partition of topics, the end offset minus
// the group's committed offset, or minus the partition's start when the
// group committed nothing there.
func readInputLag(ctx context.Context, adm *kadm.Client, group string, topics []string) (int64, int, error) {
	if len(topics) == 0 {
		return 0, 0, nil
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return 0, 0, fmt.Errorf("listing input end offsets: %w", err)
	}
	starts, err := adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return 0, 0, fmt.Errorf("listing input start offsets: %w", err)
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return 0, 0, fmt.Errorf("fetching the group's committed offsets: %w", err)
	}
	var lag int64
	parts := 0
	var perr error
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			perr = fmt.Errorf("%s[%d]: end offset: %w", o.Topic, o.Partition, o.Err)
			return
		}
		from := int64(0)
		if s, ok := starts.Lookup(o.Topic, o.Partition); ok && s.Err == nil {
			from = s.Offset
		}
		if c, ok := committed.Lookup(o.Topic, o.Partition); ok && c.Err == nil && c.At >= 0 {
			from = c.At
		}
		lag += max(0, o.Offset-from)
		parts++
	})
	return lag, parts, perr
}

// readStatuses reads each member's /status at the endpoint in its
// subscription, a second at most each.
func (in *inspection) readStatuses(ctx context.Context) {
	cl := &http.Client{Timeout: time.Second}
	for _, m := range in.group.Members {
		s := m.Subscription
		if _, done := in.statuses[s.InstanceID]; done {
			continue
		}
		if s.Endpoint == "" {
			in.unread[s.InstanceID] = "no endpoint in its subscription"
			continue
		}
		st, err := web.ReadStatus(ctx, cl, s.Endpoint)
		switch {
		case err != nil:
			in.unread[s.InstanceID] = err.Error()
		case st.Instance != s.InstanceID:
			in.unread[s.InstanceID] = fmt.Sprintf("%s answers as instance %q", s.Endpoint, st.Instance)
		default:
			in.statuses[s.InstanceID] = st
			delete(in.unread, s.InstanceID)
		}
	}
}

// printInput writes the group's input lag and the leader's
// recommendation.
func (in inspection) printInput(w io.Writer) {
	switch {
	case in.inputErr != nil:
		fmt.Fprintf(w, "\ninput lag: unknown: %v\n", in.inputErr)
	default:
		fmt.Fprintf(w, "\ninput lag: %d records not committed on %d input partitions\n", in.inputLag, in.inputParts)
	}
	var records int64
	var seconds, rate float64
	var leader *baton.Status
	for _, id := range slices.Sorted(maps.Keys(in.statuses)) {
		st := in.statuses[id]
		for _, t := range st.Tasks {
			if t.Input != nil {
				records += t.Input.Records
				seconds = max(seconds, t.Input.Seconds)
				rate += t.Input.Rate
			}
		}
		if st.Leader && (leader == nil || st.Generation > leader.Generation) {
			leader = st
		}
	}
	members := len(in.statuses) + len(in.unread)
	if len(in.statuses) > 0 {
		fmt.Fprintf(w, "live, from the /status of %d of %d instances: %d records behind, at most %.1f s, %.0f records/s arriving\n",
			len(in.statuses), members, records, seconds, rate)
	}
	for _, id := range slices.Sorted(maps.Keys(in.unread)) {
		fmt.Fprintf(w, "  %s: /status not read: %s\n", id, in.unread[id])
	}
	for _, id := range slices.Sorted(maps.Keys(in.statuses)) {
		if st := in.statuses[id]; st.Unconfirmed {
			fmt.Fprintf(w, "  %s: unconfirmed: the group has not confirmed it since %s; its active tasks may already run on another instance\n",
				id, st.ConfirmedAt.UTC().Format(time.RFC3339))
		}
	}
	switch {
	case leader == nil:
		fmt.Fprintln(w, "desired instances: unknown (the leader's /status was not read)")
	case leader.Autoscale == nil:
		fmt.Fprintf(w, "desired instances: not published yet by leader %s\n", leader.Instance)
	default:
		fmt.Fprintf(w, "desired instances: %d (leader %s, %d running): %s\n", leader.Autoscale.DesiredInstances, leader.Instance,
			leader.Autoscale.Instances, leader.Autoscale.Reason)
	}
}

// tasks derives the group's task list (see the command's help) and says
// how, in a note for the reader when the list may be incomplete.
func (in inspection) tasks() ([]assign.Task, string) {
	stateful := map[int]bool{}
	ids := map[string]bool{}
	for _, id := range in.group.TaskIDs() {
		ids[id] = true
	}
	for _, m := range in.group.Members {
		s := m.Subscription
		for _, list := range [][]string{s.Standby, s.Learner, slices.Collect(maps.Keys(s.Lags))} {
			for _, id := range list {
				if sub, _, err := topology.ParseTaskID(id); err == nil {
					stateful[sub] = true
				}
			}
		}
	}
	counts := map[int32]bool{}
	var n int32
	for _, p := range in.partitions {
		counts[p] = true
		n = p
	}
	note := ""
	if len(counts) == 1 {
		for _, sub := range in.group.Subtopologies() {
			for p := range n {
				ids[topology.TaskID(sub, p)] = true
			}
		}
	} else if len(counts) > 1 {
		note = "note: the source topics differ in partition count; only the tasks members report are planned"
	}
	var out []assign.Task
	for id := range ids {
		sub, _, perr := topology.ParseTaskID(id)
		ok := perr == nil
		if !ok {
			continue
		}
		out = append(out, assign.Task{ID: assign.TaskID(id), Stateful: stateful[sub], Load: 1})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, note
}

// state is the assignor's input as the group's leader would build it now,
// by the same rules (member.Instances).
func (in inspection) state(cfg assign.Config) (assign.State, map[string]string, string) {
	tasks, note := in.tasks()
	st := assign.State{Config: cfg, Tasks: tasks}
	known, stateful := map[string]bool{}, map[string]bool{}
	for _, t := range tasks {
		known[string(t.ID)] = true
		stateful[string(t.ID)] = t.Stateful
	}
	names := map[string]string{}
	var claims []member.Claim
	for _, m := range in.group.Members {
		key := m.Subscription.InstanceID + "#" + m.MemberID
		names[key] = m.Subscription.InstanceID
		active, standby, learner := m.Roles()
		claims = append(claims, member.Claim{Key: key, Generation: m.Generation, Sub: m.Subscription, Active: active, Standby: standby, Learner: learner})
	}
	st.Instances = member.Instances(claims, known, stateful)
	member.SetLoads(st.Tasks, claims, st.Instances)
	return st, names, note
}

func (in inspection) print(w io.Writer, cfg assign.Config, policy assign.Policy) error {
	g := in.group
	fmt.Fprintf(w, "group %s: %s, %d members, protocol %q\n", in.appID, g.State, len(g.Members), g.Protocol)
	if len(g.Members) == 0 {
		fmt.Fprintln(w, "no members: nothing runs and nothing would be planned")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INSTANCE\tENDPOINT\tROLE\tTASK\tLAG\tCHANGELOG END")
	for _, m := range g.Members {
		s := m.Subscription
		inst := s.InstanceID
		if s.Leaving {
			inst += " (leaving)"
		}
		endpoint := s.Endpoint
		if endpoint == "" {
			endpoint = "-"
		}
		// An instance that says the group has not confirmed it lately
		// may have lost its tasks already: its active ones are not
		// shown as active.
		unconfirmed := false
		if st := in.statuses[s.InstanceID]; st != nil && st.Unconfirmed {
			unconfirmed = true
			inst += " (unconfirmed)"
		}
		rows := 0
		active, standby, learner := m.Roles()
		for _, role := range []struct {
			name string
			ids  []string
		}{{"active", active}, {"learner", learner}, {"standby", standby}} {
			ids := slices.Clone(role.ids)
			sort.Strings(ids)
			for _, id := range ids {
				lagText, end := "-", "-"
				if l, ok := s.Lags[id]; ok {
					lagText = fmt.Sprint(l)
				}
				if e, ok := in.changelogEnd(id); ok && (lagText != "-" || role.name != "active") {
					end = fmt.Sprint(e)
				}
				name := role.name
				if unconfirmed && name == "active" {
					name = "unconfirmed"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", inst, endpoint, name, id, lagText, end)
				rows++
			}
		}
		if rows == 0 {
			fmt.Fprintf(tw, "%s\t%s\t-\t-\t-\t-\n", inst, endpoint)
		}
		if m.Err != nil {
			fmt.Fprintf(tw, "%s\t\tnote\t%v\t\t\n", inst, m.Err)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	in.printInput(w)
	st, names, note := in.state(cfg)
	if note != "" {
		fmt.Fprintln(w, note)
	}
	plan, err := assign.Assign(st, policy)
	if err != nil {
		return fmt.Errorf("planning from the group's subscriptions: %w", err)
	}
	fmt.Fprintf(w, "\nnext plan (%s, standbys %d, max learners %d, acceptable lag %d):\n", policy, cfg.Standbys, cfg.MaxLearners, cfg.AcceptableLag)
	moved := false
	for _, ip := range plan.Instances {
		now, _ := instanceByID(st, ip.ID)
		add := func(label string, want, have []assign.TaskID) {
			var diff []string
			for _, id := range want {
				if !slices.Contains(have, id) {
					diff = append(diff, string(id))
				}
			}
			if len(diff) > 0 {
				moved = true
				fmt.Fprintf(w, "  %s: %s %s\n", names[ip.ID], label, strings.Join(diff, " "))
			}
		}
		add("revoke", ip.Revoked, nil)
		add("new learner", ip.Learner, now.Learner)
		add("new standby", ip.Standby, now.Standby)
		add("new active", ip.Active, now.Active)
	}
	if !moved {
		fmt.Fprintln(w, "  nothing moves: the group is where the assignor wants it")
	}
	if plan.Followup {
		fmt.Fprintln(w, "  a follow-up round follows (revoked tasks are assigned in it)")
	}
	if len(plan.Reasons) > 0 {
		fmt.Fprintln(w, "why:")
		short := make([]string, 0, 2*len(names))
		for _, k := range slices.Sorted(maps.Keys(names)) {
			short = append(short, k, names[k])
		}
		r := strings.NewReplacer(short...)
		for _, reason := range plan.Reasons {
			fmt.Fprintf(w, "  %s %s on %s: %s\n", reason.Kind, reason.Task, names[reason.Instance], r.Replace(reason.Why))
		}
	}
	return nil
}

// changelogEnd is the largest end offset of the app's changelogs at the
// task's partition: how many records a cold restore of it reads at most.
func (in inspection) changelogEnd(task string) (int64, bool) {
	_, p, perr := topology.ParseTaskID(task)
	ok := perr == nil
	if !ok {
		return 0, false
	}
	best, found := int64(0), false
	for _, ends := range in.changelogEnds {
		if e, ok := ends[p]; ok {
			best, found = max(best, e), true
		}
	}
	return best, found
}

func instanceByID(s assign.State, id string) (assign.Instance, error) {
	for _, in := range s.Instances {
		if in.ID == id {
			return in, nil
		}
	}
	return assign.Instance{}, errors.New("no such instance")
}

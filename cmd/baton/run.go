package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/baton-streams/baton"
	"github.com/baton-streams/baton/assign"
	"github.com/baton-streams/baton/autoscale"
	"github.com/baton-streams/baton/topology"
	"github.com/baton-streams/baton/web"
)

var runCmd = &cobra.Command{
	Use:   "run APP",
	Short: "Run one instance of a baton application (one process = one instance)",
}

var wordcountCmd = &cobra.Command{
	Use:   "wordcount --brokers HOST:PORT --app-id ID --input TOPIC --output TOPIC --state-dir DIR",
	Short: "Count words of text lines, exactly, with state that moves without stopping the world",
	Long: `Each input record's value is a line of text; its words (strings.Fields) are
repartitioned by word and counted in a state store. For every occurrence the
word's new count is written to the output topic (key = word, value = count as
decimal text). SIGTERM or SIGINT drains the instance: its tasks move to warm
copies first, then it leaves. A second signal leaves at once.

With --instance-id the instance is a static member of the group (Kafka's
group.instance.id). --on-stop restart then makes SIGTERM commit, close the
stores and exit without leaving the group: restarted with the same
--instance-id and --state-dir within --session-timeout, the instance gets
its tasks back and nothing moves.

With --status-every DURATION it prints, at that period, one JSON line on
stdout as every engine of "baton bench versus" does (compare/README.md):
{"engine":"baton","instance":NAME,"time_ms":...,"state":"RUNNING",
"active":[...],"standby":[...],"warmup":[...],"processed":N}. NAME is
--instance (a label only; default the instance id); active, standby and
warmup list the tasks with role active, standby and learner; processed
counts the input lines the instance's 0_* tasks processed since it
started; state is STARTING, RUNNING (in a group generation) or LEAVING.`,
	Args: cobra.NoArgs,
	RunE: runWordcount,
}

func init() {
	addAppFlags(wordcountCmd, "input topic of text lines (required)", "output topic of word counts; created when missing (required)")
	runCmd.AddCommand(wordcountCmd)
	rootCmd.AddCommand(runCmd)
}

// addAppFlags gives cmd, a `baton run` application, the flags every
// application has; input and output describe its --input and --output.
func addAppFlags(cmd *cobra.Command, input, output string) {
	f := cmd.Flags()
	f.String("brokers", "", "Kafka brokers, HOST:PORT[,HOST:PORT] (required)")
	f.String("app-id", "", "application id: the consumer group and internal topic prefix (required)")
	f.String("input", "", input)
	f.String("output", "", output)
	f.String("state-dir", "", "directory for local state; created when missing, locked while running (required)")
	f.Int("workers", 1, "worker goroutines: the instance's capacity")
	f.Int("standbys", 0, "standby replicas per stateful task")
	f.Int("max-learners", assign.DefaultMaxLearners, "most learner tasks in the group at once")
	f.Int64("acceptable-lag", assign.DefaultAcceptableLag, "records within which a copy of state counts as caught up")
	f.Float64("restore-share", baton.DefaultRestoreShare, "share of the time standbys' and learners' restores may take while active tasks of the process have records: above 0, at most 1 (1: they never wait)")
	f.Float64("load-step", baton.DefaultLoadStep, "step of the task loads the instance reports to the group, in shares of a worker: at most 1; a report changes only for a full step; 0 reports no loads (docs/assign.md)")
	f.Duration("load-rebalance-interval", baton.DefaultLoadRebalanceInterval, "least time after its last join before the instance asks for a rebalance because its task loads changed: at least 1s (docs/assign.md)")
	f.String("policy", string(assign.Smooth), "assignment policy: smooth, cooperative or eager; the same on every instance of the group")
	f.String("rack", "", "the instance's rack; standbys prefer other racks")
	f.String("http", "", "serve /status, /metrics and / on this address (e.g. 127.0.0.1:0)")
	f.String("guarantee", "at-least-once", "processing guarantee: at-least-once or exactly-once (Kafka transactions)")
	f.Duration("transaction-timeout", 10*time.Second, "with --guarantee exactly-once: how long the cluster keeps a dead instance's open transaction (holding up its changelogs and output) before aborting it")
	f.String("instance-id", "", "instance id, also the static group member id (group.instance.id); default: host-pid-random, not static")
	f.Duration("status-every", 0, "print a JSON status line on stdout at this period (0: never); see above")
	f.String("instance", "", "the instance's name in status lines only, not a group member id (default: the instance id)")
	f.String("on-stop", "drain", "what SIGTERM does: drain (tasks move to warm copies, then leave) or restart (commit and exit still a member; needs --instance-id)")
	f.Int("replication-factor", 0, "replication factor of the topics baton creates (changelogs, repartition topics, output) (default min(3, brokers in the cluster))")
	f.Int("min-insync-replicas", 0, "min.insync.replicas of the topics baton creates (default min(2, replication factor - 1), at least 1)")
	f.Duration("repartition-purge-interval", baton.DefaultPurgeInterval, "how often, at most, committed records of repartition topics are deleted (0: after every commit)")
	f.Int64("block-cache-mib", baton.DefaultBlockCache>>20, "MiB of the block cache the instance's stores share (docs/memory.md)")
	f.Duration("heartbeat", 200*time.Millisecond, "group heartbeat interval")
	f.Duration("session-timeout", 6*time.Second, "group session timeout")
	f.Duration("drain-timeout", 60*time.Second, "longest a graceful stop waits for tasks to move")
	def := autoscale.DefaultConfig()
	f.Int("autoscale-min-instances", def.MinInstances, "fewest instances the leader's recommendation (baton_desired_instances) asks for; the same on every instance")
	f.Int("autoscale-max-instances", def.MaxInstances, "most instances the leader's recommendation asks for")
	f.Float64("autoscale-headroom", def.Headroom, "spare capacity the recommendation keeps above the rate to sustain, a fraction from 0 to 1")
	f.String("on-bad-record", "stop", "an input record that fails to decode: stop, skip, or dead-letter:TOPIC")
	f.String("on-processing-error", "stop", "an input record whose processing fails (a processor's error or panic): stop, skip, or dead-letter:TOPIC")
	f.String("sasl-mechanism", "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (password from $BATON_SASL_PASSWORD)")
	f.String("sasl-user", "", "SASL user")
	f.Bool("tls", false, "connect to the brokers over TLS")
	f.String("tls-ca", "", "PEM file of the CA that signed the brokers' certificates (default: system roots; implies --tls)")
	f.String("tls-cert", "", "PEM client certificate for mutual TLS (implies --tls)")
	f.String("tls-key", "", "PEM key of the client certificate")
	f.String("tls-server-name", "", "server name to verify in the brokers' certificates")
	for _, name := range []string{"brokers", "app-id", "input", "output", "state-dir"} {
		_ = cmd.MarkFlagRequired(name)
	}
}

func runWordcount(cmd *cobra.Command, _ []string) error {
	return runApp(cmd, func(str func(string) string) (*topology.Topology, error) {
		return topology.WordCount(str("app-id"), str("input"), str("output"))
	})
}

// runApp runs one instance of the application build returns, with the
// flags of addAppFlags. build reads string flags with str; an error from
// it, naming the flag at fault, is reported as bad input (exit 2).
func runApp(cmd *cobra.Command, build func(str func(string) string) (*topology.Topology, error)) error {
	f := cmd.Flags()
	str := func(n string) string {
		if n == "tls" {
			b, _ := f.GetBool(n)
			return strconv.FormatBool(b)
		}
		v, _ := f.GetString(n)
		return v
	}
	num := func(n string) int { v, _ := f.GetInt(n); return v }
	dur := func(n string) time.Duration { v, _ := f.GetDuration(n); return v }
	lag, _ := f.GetInt64("acceptable-lag")
	for _, n := range []string{"brokers", "app-id", "input", "output", "state-dir"} {
		if strings.TrimSpace(str(n)) == "" {
			return usageErr(fmt.Errorf("--%s: must not be empty", n))
		}
	}
	guarantee, err := baton.ParseGuarantee(str("guarantee"))
	if err != nil {
		return usageErr(fmt.Errorf("--guarantee: %w", err))
	}
	policy, err := assign.ParsePolicy(str("policy"))
	if err != nil {
		return usageErr(fmt.Errorf("--policy: %w", err))
	}
	for _, n := range []string{"workers", "max-learners"} {
		if num(n) < 1 {
			return usageErr(fmt.Errorf("--%s: must be >= 1, got %d", n, num(n)))
		}
	}
	if num("standbys") < 0 {
		return usageErr(fmt.Errorf("--standbys: must be >= 0, got %d", num("standbys")))
	}
	if lag < 0 {
		return usageErr(fmt.Errorf("--acceptable-lag: must be >= 0, got %d", lag))
	}
	share, _ := f.GetFloat64("restore-share")
	if !(share > 0 && share <= 1) {
		return usageErr(fmt.Errorf("--restore-share: want more than 0 and at most 1, got %v", share))
	}
	loadStep, _ := f.GetFloat64("load-step")
	if !(loadStep >= 0 && loadStep <= 1) {
		return usageErr(fmt.Errorf("--load-step: want at least 0 and at most 1, got %v", loadStep))
	}
	if d := dur("load-rebalance-interval"); d < time.Second {
		return usageErr(fmt.Errorf("--load-rebalance-interval: want at least 1s, got %v", d))
	}
	var topicOpts []baton.Option
	for _, n := range []string{"replication-factor", "min-insync-replicas"} {
		if f.Changed(n) && num(n) < 1 {
			return usageErr(fmt.Errorf("--%s: must be >= 1, got %d", n, num(n)))
		}
	}
	if f.Changed("replication-factor") {
		topicOpts = append(topicOpts, baton.WithReplicationFactor(num("replication-factor")))
	}
	if f.Changed("min-insync-replicas") {
		if f.Changed("replication-factor") && num("min-insync-replicas") > num("replication-factor") {
			return usageErr(fmt.Errorf("--min-insync-replicas: must not exceed --replication-factor (%d), got %d", num("replication-factor"), num("min-insync-replicas")))
		}
		topicOpts = append(topicOpts, baton.WithMinInSyncReplicas(num("min-insync-replicas")))
	}
	if d := dur("status-every"); d < 0 {
		return usageErr(fmt.Errorf("--status-every: must be >= 0, got %v", d))
	}
	cacheMiB, _ := f.GetInt64("block-cache-mib")
	if cacheMiB < 0 || cacheMiB > 1<<20 {
		return usageErr(fmt.Errorf("--block-cache-mib: want 0 to %d, got %d", 1<<20, cacheMiB))
	}
	if d := dur("repartition-purge-interval"); d < 0 {
		return usageErr(fmt.Errorf("--repartition-purge-interval: must be >= 0, got %v", d))
	}
	top, err := build(str)
	if err != nil {
		return usageErr(err)
	}
	// On a terminal, restores show as progress bars and log lines print
	// above them; otherwise plain structured logs.
	var pg *progress
	var logOut io.Writer = os.Stderr
	if stderrIsTerminal() {
		pg = newProgress(os.Stderr)
		logOut = pg.Writer()
	}
	logger := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelInfo}))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	opts := []baton.Option{
		baton.WithBrokers(strings.Split(str("brokers"), ",")...), baton.WithAppID(str("app-id")),
		baton.WithStateDir(str("state-dir")), baton.WithWorkers(num("workers")), baton.WithStandbys(num("standbys")),
		baton.WithMaxLearners(num("max-learners")), baton.WithAcceptableLag(lag), baton.WithPolicy(policy),
		baton.WithRack(str("rack")), baton.WithHeartbeatInterval(dur("heartbeat")), baton.WithSessionTimeout(dur("session-timeout")),
		baton.WithDrainTimeout(dur("drain-timeout")), baton.WithLogger(logger), baton.WithMetrics(reg),
		baton.WithCreateSinks(map[string]string{"cleanup.policy": "compact"}), baton.WithGuarantee(guarantee),
		baton.WithTransactionTimeout(dur("transaction-timeout")), baton.WithRepartitionPurgeInterval(dur("repartition-purge-interval")),
		baton.WithBlockCache(cacheMiB << 20), baton.WithRestoreShare(share), baton.WithLoadStep(loadStep),
		baton.WithLoadRebalanceInterval(dur("load-rebalance-interval")),
	}
	opts = append(opts, topicOpts...)
	headroom, _ := f.GetFloat64("autoscale-headroom")
	scale, err := autoscaleConfig(num("autoscale-min-instances"), num("autoscale-max-instances"), headroom)
	if err != nil {
		return usageErr(err)
	}
	opts = append(opts, baton.WithAutoscale(scale))
	if id := str("instance-id"); id != "" {
		opts = append(opts, baton.WithInstanceID(id))
	}
	onStop, err := baton.ParseStopMode(str("on-stop"))
	if err != nil {
		return usageErr(fmt.Errorf("--on-stop: %w", err))
	}
	if onStop == baton.StopForRestart && str("instance-id") == "" {
		return usageErr(errors.New("--on-stop restart: requires --instance-id (the restarted process must be the same group member)"))
	}
	opts = append(opts, baton.WithStopMode(onStop))
	bad, err := parseErrorPolicy("--on-bad-record", str("on-bad-record"))
	if err != nil {
		return usageErr(err)
	}
	failed, err := parseErrorPolicy("--on-processing-error", str("on-processing-error"))
	if err != nil {
		return usageErr(err)
	}
	opts = append(opts, baton.WithBadRecords(bad), baton.WithProcessingErrors(failed))
	sec, err := securityOptions(str)
	if err != nil {
		return usageErr(err)
	}
	opts = append(opts, sec...)
	var ln net.Listener
	if addr := str("http"); addr != "" {
		ln, err = net.Listen("tcp", addr)
		if err != nil {
			return usageErr(fmt.Errorf("--http %s: %w", addr, err))
		}
		opts = append(opts, baton.WithEndpoint(ln.Addr().String()))
	}
	var restoring *restoreClock
	if dur("status-every") > 0 {
		restoring = newRestoreClock()
		opts = append(opts, baton.WithListener(restoring.listen))
	}
	app, err := baton.New(top, opts...)
	if err != nil {
		return usageErr(err)
	}
	if ln != nil {
		handler, stopHandler, err := statusHandler(app, reg, strings.Split(str("brokers"), ","), ln.Addr().String())
		if err != nil {
			return err
		}
		defer stopHandler()
		srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(ln)
		defer srv.Close()
		fmt.Printf("http: listening on %s\n", ln.Addr())
	}
	if pg != nil {
		pctx, stopBars := context.WithCancel(context.Background())
		go pg.watch(pctx, app.Status)
		defer func() { stopBars(); pg.stop() }()
	}
	if every := dur("status-every"); every > 0 {
		name := str("instance")
		if name == "" {
			name = app.InstanceID()
		}
		sctx, stopStatus := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			printStatus(sctx, os.Stdout, every, name, app.Status, restoring)
		}()
		defer func() { stopStatus(); <-done }()
	}
	ctx, cancel := context.WithCancel(context.Background())
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sig
		if onStop == baton.StopForRestart {
			logger.Info("signal: stopping for a restart (staying in the group)")
			cancel()
			return
		}
		logger.Info("signal: draining (send again to leave at once)")
		cancel()
		<-sig
		logger.Info("second signal: leaving now")
		app.Leave()
	}()
	return app.Run(ctx)
}

// securityOptions turns the SASL and TLS flags into options. The SASL
// password comes from the environment so that it is not in the process
// list, and it is never printed.
func securityOptions(str func(string) string) ([]baton.Option, error) {
	var opts []baton.Option
	if mech := str("sasl-mechanism"); mech != "" {
		pass, ok := os.LookupEnv("BATON_SASL_PASSWORD")
		if !ok {
			return nil, errors.New("--sasl-mechanism: set the password in $BATON_SASL_PASSWORD")
		}
		if str("sasl-user") == "" {
			return nil, errors.New("--sasl-user: required with --sasl-mechanism")
		}
		opts = append(opts, baton.WithSASL(mech, str("sasl-user"), pass))
	}
	useTLS := str("tls") == "true" || str("tls-ca") != "" || str("tls-cert") != ""
	if useTLS {
		cfg, err := baton.TLSFiles(str("tls-ca"), str("tls-cert"), str("tls-key"), str("tls-server-name"))
		if err != nil {
			return nil, err
		}
		opts = append(opts, baton.WithTLS(cfg))
	}
	return opts, nil
}

// statusHandler serves /status, /metrics, the group page (/) and the JSON
// it polls (/group), reading the group from the brokers without joining
// it (package web). stop ends the handler's sampling and closes its client.
func statusHandler(app *baton.App, reg *prometheus.Registry, brokers []string, endpoint string) (h http.Handler, stop func(), err error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, nil, usageErr(fmt.Errorf("--brokers: %w", err))
	}
	wh := web.New(app, web.WithMetrics(reg), web.WithAdmin(kadm.NewClient(cl)), web.WithEndpoint(endpoint))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = wh.Run(ctx)
	}()
	return wh, func() {
		cancel()
		<-done
		cl.Close()
	}, nil
}

// autoscaleConfig is the autoscale rule the --autoscale-* flags set, or
// an error naming the flag that is out of range.
func autoscaleConfig(minInstances, maxInstances int, headroom float64) (autoscale.Config, error) {
	cfg := autoscale.DefaultConfig()
	cfg.MinInstances, cfg.MaxInstances, cfg.Headroom = minInstances, maxInstances, headroom
	err := cfg.Validate()
	var fe *autoscale.FieldError
	if errors.As(err, &fe) {
		flag := map[string]string{"MinInstances": "autoscale-min-instances", "MaxInstances": "autoscale-max-instances", "Headroom": "autoscale-headroom"}[fe.Field]
		return cfg, fmt.Errorf("--%s: %s", flag, fe.Msg)
	}
	return cfg, err
}

// parseErrorPolicy reads an error policy flag: stop, skip or
// dead-letter:TOPIC.
func parseErrorPolicy(flag, v string) (baton.ErrorPolicy, error) {
	switch {
	case v == "stop":
		return baton.StopOnError, nil
	case v == "skip":
		return baton.SkipOnError, nil
	case strings.HasPrefix(v, "dead-letter:") && len(v) > len("dead-letter:"):
		return baton.DeadLetter(strings.TrimPrefix(v, "dead-letter:")), nil
	}
	return baton.ErrorPolicy{}, fmt.Errorf("%s %q: want stop, skip or dead-letter:TOPIC", flag, v)
}

// Package metrics defines an instance's Prometheus metrics
// (docs/metrics.md). A Set is made once per App and written from the
// runtime's goroutines (the loop, the workers, the committers); the
// Prometheus types are safe for that.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Set is the App's metrics. With no registerer they are still kept,
// unregistered, so code never checks.
type Set struct {
	Processed *prometheus.CounterVec
	Late      *prometheus.CounterVec
	Restored  *prometheus.CounterVec
	// RestoreYielded is the time warm copies' restores waited for busy
	// active tasks (internal/govern).
	RestoreYielded prometheus.Counter
	// RestoreWriteWaits counts the loop's waits for a restored chunk's
	// write to end (before what must not overlap it).
	RestoreWriteWaits prometheus.Counter
	Lag               *prometheus.GaugeVec
	Rebalances        prometheus.Counter
	MemberRestarts    prometheus.Counter
	Replayed          prometheus.Counter
	CommitSeconds     prometheus.Histogram
	Handover          prometheus.Histogram
	BadRecords        *prometheus.CounterVec
	ProcessingErrors  *prometheus.CounterVec
	Learners          prometheus.Gauge
	Generation        prometheus.Gauge
	Rebalance         prometheus.Histogram
	LoopTurn          prometheus.Histogram
	Transactions      *prometheus.CounterVec
	CommitsGivenUp    prometheus.Counter

	// Input lag and rates, per active task, and what the workers sustain
	// (docs/autoscaling.md).
	InputLagRecords *prometheus.GaugeVec
	InputLagSeconds *prometheus.GaugeVec
	InputRate       *prometheus.GaugeVec
	WorkerBusy      *prometheus.CounterVec
	WorkerRate      prometheus.Gauge
	// TaskLoad is each active task's measured load (internal/load).
	TaskLoad *prometheus.GaugeVec
	// The leader's group-wide figures and recommendation: vectors without
	// labels, so that they can be absent on the other instances.
	Desired   *prometheus.GaugeVec
	GroupLag  *prometheus.GaugeVec
	GroupRate *prometheus.GaugeVec

	// Queries are the reads asked of this instance (App.Get, Range,
	// Windows, GET /query), by kind and outcome, QuerySeconds how long
	// they took, and QueryServed the reads this instance's own copies
	// answered (its own, and those other instances forwarded), by role.
	Queries      *prometheus.CounterVec
	QuerySeconds prometheus.Histogram
	QueryServed  *prometheus.CounterVec
}

// New returns the metrics of instance of appID, registered with r (nil:
// not registered).
func New(r prometheus.Registerer, appID, instance string) *Set {
	labels := prometheus.Labels{"app_id": appID, "instance": instance}
	m := &Set{
		Processed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_records_processed_total",
			Help: "Input records processed, by task.", ConstLabels: labels}, []string{"task"}),
		Restored: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_records_restored_total",
			Help: "Changelog records restored into local state, by task.", ConstLabels: labels}, []string{"task"}),
		RestoreYielded: prometheus.NewCounter(prometheus.CounterOpts{Name: "baton_restore_yielded_seconds_total",
			Help: "Time the restores of standbys and learners waited for busy active tasks.", ConstLabels: labels}),
		RestoreWriteWaits: prometheus.NewCounter(prometheus.CounterOpts{Name: "baton_restore_write_waits_total",
			Help: "Times the control loop waited for a restored chunk's write to end: before processing a task whose store the chunk writes, or a rewind.", ConstLabels: labels}),
		Lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "baton_task_lag_records",
			Help: "Records the task's local state is behind its changelog, by task and role.", ConstLabels: labels}, []string{"task", "role"}),
		Rebalances: prometheus.NewCounter(prometheus.CounterOpts{Name: "baton_rebalances_total",
			Help: "Rebalance rounds this instance took part in.", ConstLabels: labels}),
		MemberRestarts: prometheus.NewCounter(prometheus.CounterOpts{Name: "baton_member_restarts_total",
			Help: "Times the instance closed its tasks and joined again with new clients (its transactional producer was fenced, or an abort did not complete within 30 s).", ConstLabels: labels}),
		Replayed: prometheus.NewCounter(prometheus.CounterOpts{Name: "baton_records_replayed_on_handover_total",
			Help: "Records restored after a task became active here (on the critical path).", ConstLabels: labels}),
		CommitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "baton_commit_seconds",
			Help: "Time to flush produced records, apply state and commit offsets.", ConstLabels: labels,
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		Handover: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "baton_task_restore_seconds",
			Help: "Time from a task's assignment here to its first processing.", ConstLabels: labels,
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		Learners: prometheus.NewGauge(prometheus.GaugeOpts{Name: "baton_learners",
			Help: "Learner tasks warming on this instance.", ConstLabels: labels}),
		Generation: prometheus.NewGauge(prometheus.GaugeOpts{Name: "baton_group_generation",
			Help: "The consumer group generation of the last rebalance this instance took part in.", ConstLabels: labels}),
		Rebalance: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "baton_rebalance_seconds",
			Help: "Time from this instance's join to its assignment, per rebalance round.", ConstLabels: labels,
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		LoopTurn: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "baton_loop_turn_seconds",
			Help: "Time the control loop spent on one thing it woke for (a poll, a callback, a commit's end, a tick); while it works, rebalance callbacks and every task wait.", ConstLabels: labels,
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)}),
		Late: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_late_records_total",
			Help: "Records a windowed aggregation dropped because every window they fall into had closed (past its grace period), by task and store.", ConstLabels: labels}, []string{"task", "store"}),
		BadRecords: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_bad_records_total",
			Help: "Input records that failed to decode and were skipped or dead-lettered, by task.", ConstLabels: labels}, []string{"task"}),
		ProcessingErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_processing_errors_total",
			Help: "Input records whose processing failed (an error or a panic of a processor) and that were skipped or dead-lettered, by task and the processor node that failed (\"\" when unknown).", ConstLabels: labels}, []string{"task", "processor"}),
		Transactions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_transactions_total",
			Help: "Transactions ended under exactly-once, by result (committed, aborted).", ConstLabels: labels}, []string{"result"}),
		CommitsGivenUp: prometheus.NewCounter(prometheus.CounterOpts{Name: "baton_commits_given_up_total",
			Help: "Commits given up because the group had not confirmed this member for a session timeout: the group may have handed its tasks on, so the commit was moot.", ConstLabels: labels}),
		InputLagRecords: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "baton_input_lag_records",
			Help: "Records of input not yet processed by the active task: end offset minus position, summed over its input partitions.", ConstLabels: labels}, []string{"task"}),
		InputLagSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "baton_input_lag_seconds",
			Help: "Seconds the active task is behind its input: now minus the timestamp of the last record it processed, while it has input lag; 0 when caught up.", ConstLabels: labels}, []string{"task"}),
		InputRate: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "baton_input_records_per_second",
			Help: "Records per second arriving on the active task's input partitions, from their end offsets over the last 30s.", ConstLabels: labels}, []string{"task"}),
		WorkerBusy: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_worker_busy_seconds_total",
			Help: "Time each worker spent processing records.", ConstLabels: labels}, []string{"worker"}),
		WorkerRate: prometheus.NewGauge(prometheus.GaugeOpts{Name: "baton_worker_records_per_busy_second",
			Help: "Records one worker of this instance processes per second of busy time over the last 30s: what a fully busy worker sustains. 0 until measured.", ConstLabels: labels}),
		TaskLoad: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "baton_task_load",
			Help: "Share of one worker's time the active task's processing took, smoothed over minutes (0.25 is a quarter of a worker); listed once measured for 30s. The instance reports it to the group, in steps (WithLoadStep).", ConstLabels: labels}, []string{"task"}),
		Desired: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "baton_desired_instances",
			Help: "Instances the group should run, as the group's leader recommends (package autoscale). Only the leader has this series.", ConstLabels: labels}, nil),
		GroupLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "baton_group_input_lag_records",
			Help: "Records of input the group has not committed, over all input partitions: end offset minus committed offset. Only the leader has this series.", ConstLabels: labels}, nil),
		GroupRate: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "baton_group_input_records_per_second",
			Help: "Records per second arriving on all the group's input partitions over the last 30s. Only the leader has this series.", ConstLabels: labels}, nil),
		Queries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_queries_total",
			Help: "Reads of a store asked of this instance (App.Get, Range, Windows, GET /query), by kind (key, range, window) and outcome (answered, unavailable, no_store, bad_query, error).", ConstLabels: labels}, []string{"kind", "outcome"}),
		QuerySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "baton_query_seconds",
			Help: "How long the reads asked of this instance took to answer or fail, waits for a copy included.", ConstLabels: labels,
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		QueryServed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_query_reads_served_total",
			Help: "Reads this instance's own copies answered, for itself or for another instance, by role (active, learner, standby).", ConstLabels: labels}, []string{"role"}),
	}
	if r != nil {
		for _, c := range []prometheus.Collector{m.Queries, m.QuerySeconds, m.QueryServed, m.Processed, m.Late, m.Restored, m.RestoreYielded, m.RestoreWriteWaits, m.Lag, m.Rebalances, m.Replayed, m.CommitSeconds, m.Handover, m.BadRecords, m.ProcessingErrors, m.Learners, m.Generation, m.Rebalance, m.LoopTurn, m.Transactions, m.CommitsGivenUp, m.MemberRestarts,
			m.InputLagRecords, m.InputLagSeconds, m.InputRate, m.WorkerBusy, m.WorkerRate, m.TaskLoad, m.Desired, m.GroupLag, m.GroupRate} {
			_ = r.Register(c)
		}
	}
	return m
}

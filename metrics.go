package baton

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the App's Prometheus metrics (docs/metrics.md). With no
// registerer they are still kept, unregistered, so code never checks.
type metrics struct {
	processed      *prometheus.CounterVec
	late           *prometheus.CounterVec
	restored       *prometheus.CounterVec
	lag            *prometheus.GaugeVec
	rebalances     prometheus.Counter
	memberRestarts prometheus.Counter
	replayed       prometheus.Counter
	commitSeconds  prometheus.Histogram
	handover       prometheus.Histogram
	badRecords     *prometheus.CounterVec
	learners       prometheus.Gauge
	generation     prometheus.Gauge
	rebalance      prometheus.Histogram
	loopTurn       prometheus.Histogram
	transactions   *prometheus.CounterVec
	commitsGivenUp prometheus.Counter

	// Input lag and rates, per active task, and what the workers sustain
	// (docs/autoscaling.md).
	inputLagRecords *prometheus.GaugeVec
	inputLagSeconds *prometheus.GaugeVec
	inputRate       *prometheus.GaugeVec
	workerBusy      *prometheus.CounterVec
	workerRate      prometheus.Gauge
	// The leader's group-wide figures and recommendation: vectors without
	// labels, so that they can be absent on the other instances.
	desired   *prometheus.GaugeVec
	groupLag  *prometheus.GaugeVec
	groupRate *prometheus.GaugeVec
}

func newMetrics(r prometheus.Registerer, appID, instance string) *metrics {
	labels := prometheus.Labels{"app_id": appID, "instance": instance}
	m := &metrics{
		processed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_records_processed_total",
			Help: "Input records processed, by task.", ConstLabels: labels}, []string{"task"}),
		restored: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_records_restored_total",
			Help: "Changelog records restored into local state, by task.", ConstLabels: labels}, []string{"task"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "baton_task_lag_records",
			Help: "Records the task's local state is behind its changelog, by task and role.", ConstLabels: labels}, []string{"task", "role"}),
		rebalances: prometheus.NewCounter(prometheus.CounterOpts{Name: "baton_rebalances_total",
			Help: "Rebalance rounds this instance took part in.", ConstLabels: labels}),
		memberRestarts: prometheus.NewCounter(prometheus.CounterOpts{Name: "baton_member_restarts_total",
			Help: "Times the instance closed its tasks and joined again with new clients (its transactional producer was fenced, or an abort did not complete within 30 s).", ConstLabels: labels}),
		replayed: prometheus.NewCounter(prometheus.CounterOpts{Name: "baton_records_replayed_on_handover_total",
			Help: "Records restored after a task became active here (on the critical path).", ConstLabels: labels}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "baton_commit_seconds",
			Help: "Time to flush produced records, apply state and commit offsets.", ConstLabels: labels,
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		handover: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "baton_task_restore_seconds",
			Help: "Time from a task's assignment here to its first processing.", ConstLabels: labels,
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		learners: prometheus.NewGauge(prometheus.GaugeOpts{Name: "baton_learners",
			Help: "Learner tasks warming on this instance.", ConstLabels: labels}),
		generation: prometheus.NewGauge(prometheus.GaugeOpts{Name: "baton_group_generation",
			Help: "The consumer group generation of the last rebalance this instance took part in.", ConstLabels: labels}),
		rebalance: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "baton_rebalance_seconds",
			Help: "Time from this instance's join to its assignment, per rebalance round.", ConstLabels: labels,
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		loopTurn: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "baton_loop_turn_seconds",
			Help: "Time the control loop spent on one thing it woke for (a poll, a callback, a commit's end, a tick); while it works, rebalance callbacks and every task wait.", ConstLabels: labels,
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)}),
		late: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_late_records_total",
			Help: "Records a windowed aggregation dropped because every window they fall into had closed (past its grace period), by task and store.", ConstLabels: labels}, []string{"task", "store"}),
		badRecords: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_bad_records_total",
			Help: "Input records that failed to decode and were skipped or dead-lettered, by task.", ConstLabels: labels}, []string{"task"}),
		transactions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_transactions_total",
			Help: "Transactions ended under exactly-once, by result (committed, aborted).", ConstLabels: labels}, []string{"result"}),
		commitsGivenUp: prometheus.NewCounter(prometheus.CounterOpts{Name: "baton_commits_given_up_total",
			Help: "Commits given up because the group had not confirmed this member for a session timeout: the group may have handed its tasks on, so the commit was moot.", ConstLabels: labels}),
		inputLagRecords: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "baton_input_lag_records",
			Help: "Records of input not yet processed by the active task: end offset minus position, summed over its input partitions.", ConstLabels: labels}, []string{"task"}),
		inputLagSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "baton_input_lag_seconds",
			Help: "Seconds the active task is behind its input: now minus the timestamp of the last record it processed, while it has input lag; 0 when caught up.", ConstLabels: labels}, []string{"task"}),
		inputRate: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "baton_input_records_per_second",
			Help: "Records per second arriving on the active task's input partitions, from their end offsets over the last 30s.", ConstLabels: labels}, []string{"task"}),
		workerBusy: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_worker_busy_seconds_total",
			Help: "Time each worker spent processing records.", ConstLabels: labels}, []string{"worker"}),
		workerRate: prometheus.NewGauge(prometheus.GaugeOpts{Name: "baton_worker_records_per_busy_second",
			Help: "Records one worker of this instance processes per second of busy time over the last 30s: what a fully busy worker sustains. 0 until measured.", ConstLabels: labels}),
		desired: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "baton_desired_instances",
			Help: "Instances the group should run, as the group's leader recommends (package autoscale). Only the leader has this series.", ConstLabels: labels}, nil),
		groupLag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "baton_group_input_lag_records",
			Help: "Records of input the group has not committed, over all input partitions: end offset minus committed offset. Only the leader has this series.", ConstLabels: labels}, nil),
		groupRate: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "baton_group_input_records_per_second",
			Help: "Records per second arriving on all the group's input partitions over the last 30s. Only the leader has this series.", ConstLabels: labels}, nil),
	}
	if r != nil {
		for _, c := range []prometheus.Collector{m.processed, m.late, m.restored, m.lag, m.rebalances, m.replayed, m.commitSeconds, m.handover, m.badRecords, m.learners, m.generation, m.rebalance, m.loopTurn, m.transactions, m.commitsGivenUp, m.memberRestarts,
			m.inputLagRecords, m.inputLagSeconds, m.inputRate, m.workerBusy, m.workerRate, m.desired, m.groupLag, m.groupRate} {
			_ = r.Register(c)
		}
	}
	return m
}

package baton

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the App's Prometheus metrics (docs/metrics.md). With no
// registerer they are still kept, unregistered, so code never checks.
type metrics struct {
	processed      *prometheus.CounterVec
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
	transactions   *prometheus.CounterVec
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
			Help: "Times the instance closed its tasks and joined again with new clients (its transactional producer was fenced).", ConstLabels: labels}),
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
		badRecords: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_bad_records_total",
			Help: "Input records that failed to decode and were skipped or dead-lettered, by task.", ConstLabels: labels}, []string{"task"}),
		transactions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "baton_transactions_total",
			Help: "Transactions ended under exactly-once, by result (committed, aborted).", ConstLabels: labels}, []string{"result"}),
	}
	if r != nil {
		for _, c := range []prometheus.Collector{m.processed, m.restored, m.lag, m.rebalances, m.replayed, m.commitSeconds, m.handover, m.badRecords, m.learners, m.generation, m.rebalance, m.transactions, m.memberRestarts} {
			_ = r.Register(c)
		}
	}
	return m
}

package coordinatord

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/strataio/strata/coordinatord/internal/txn"
)

// txnMetrics are the spec's transaction metrics (gauges from a snapshot at
// each scrape) and the coordinator's own counters.
type txnMetrics struct {
	r *Role

	recoveryReady, byState, expired, oldest *prometheus.Desc
}

func (m *txnMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.recoveryReady, m.byState, m.expired, m.oldest} {
		ch <- d
	}
}

func (m *txnMetrics) Collect(ch chan<- prometheus.Metric) {
	st := m.r.txnStatsNow()
	ch <- prometheus.MustNewConstMetric(m.recoveryReady, prometheus.GaugeValue, b2f(st.ready))
	for _, s := range []txn.State{txn.Open, txn.PrepareCommit, txn.PrepareAbort, txn.Committed, txn.Aborted} {
		ch <- prometheus.MustNewConstMetric(m.byState, prometheus.GaugeValue, float64(st.byState[string(s)]), string(s))
	}
	ch <- prometheus.MustNewConstMetric(m.expired, prometheus.GaugeValue, float64(st.expired))
	ch <- prometheus.MustNewConstMetric(m.oldest, prometheus.GaugeValue, st.oldestActive)
}

func registerTxnMetrics(reg prometheus.Registerer, r *Role, m *metrics) error {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("strata_"+name, help, labels, nil)
	}
	tm := &txnMetrics{r: r,
		recoveryReady: d("transaction_recovery_ready", "1 once every owned transaction shard finished recovery (prepared work included) before serving"),
		byState:       d("transactions", "transactional_ids this coordinator owns, by state of their current or last transaction", "state"),
		expired:       d("transactions_expired", "expired transactional_ids kept as epoch tombstones"),
		oldest:        d("transaction_oldest_active_seconds", "age of the oldest open or committing transaction (0 when none)"),
	}
	m.txnRecoveries = prometheus.NewCounter(prometheus.CounterOpts{Name: "strata_transaction_shard_recoveries_total",
		Help: "transaction shards taken over and recovered"})
	m.txnTimeouts = prometheus.NewCounter(prometheus.CounterOpts{Name: "strata_transaction_timeouts_total",
		Help: "open transactions aborted by transaction_timeout_ms"})
	m.txnWriteDuration = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "strata_transaction_state_write_duration_seconds",
		Help: "durable __transaction_state write latency", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)})
	m.txnCompletion = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "strata_transaction_completion_duration_seconds",
		Help: "markers on every participant plus the durable outcome, by outcome", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)},
		[]string{"state"})
	// Both outcomes exist from the start, so the family is always exposed.
	m.txnCompletion.WithLabelValues(string(txn.Committed))
	m.txnCompletion.WithLabelValues(string(txn.Aborted))
	for _, c := range []prometheus.Collector{tm, m.txnRecoveries, m.txnTimeouts, m.txnWriteDuration, m.txnCompletion} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

package rpc

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strataio/strata/libs/errcode"
)

// Metrics records internal RPC outcomes on a process registry.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewMetrics registers strata_rpc_server_requests_total{method,code} and
// strata_rpc_server_duration_seconds{method} on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "strata_rpc_server_requests_total",
			Help: "Internal gRPC requests handled, by method and result code (ok or the Strata error code).",
		}, []string{"method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "strata_rpc_server_duration_seconds",
			Help:    "Internal gRPC handling latency (streams: lifetime).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"method"}),
	}
	reg.MustRegister(m.requests, m.duration)
	return m
}

func (m *Metrics) observe(method string, err error, d time.Duration) {
	if m == nil {
		return
	}
	code := "ok"
	if err != nil {
		code = errcode.From(err).Code
	}
	short := shortMethod(method)
	m.requests.WithLabelValues(short, code).Inc()
	m.duration.WithLabelValues(short).Observe(d.Seconds())
}

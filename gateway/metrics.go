package gateway

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strataio/strata/gateway/internal/route"
)

// metrics are the gateway's part of the spec section 6 catalogue (svc_ is
// strata_). Label values are bounded: command names come from the wire
// registry, codes from the error catalogue, reasons from the codec.
type metrics struct {
	connsTotal     prometheus.Counter
	connsActive    prometheus.Gauge
	connsRefused   prometheus.Counter
	commands       *prometheus.CounterVec
	duration       *prometheus.HistogramVec
	errors         *prometheus.CounterVec
	acks           *prometheus.CounterVec
	replRetries    *prometheus.CounterVec
	protoFailures  *prometheus.CounterVec
	decompRejected *prometheus.CounterVec
	streamsActive  prometheus.Gauge
	publishRecords *prometheus.CounterVec
	publishBytes   *prometheus.CounterVec
	consumeRecords *prometheus.CounterVec
	consumeBytes   *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, g *Role) (*metrics, error) {
	m := &metrics{
		connsTotal:   prometheus.NewCounter(prometheus.CounterOpts{Name: "strata_broker_client_connections_total", Help: "Accepted client TCP connections."}),
		connsActive:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "strata_broker_client_connections_active", Help: "Client connections now handled."}),
		connsRefused: prometheus.NewCounter(prometheus.CounterOpts{Name: "strata_broker_client_connections_refused_total", Help: "Client connections refused at the connection limit."}),
		commands:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_broker_commands_total", Help: "Completed command dispatches."}, []string{"command", "result"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "strata_broker_command_duration_seconds", Help: "Command dispatch latency; for streams it ends at acceptance.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"command"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_broker_command_errors_total", Help: "Wire errors by command and code."}, []string{"command", "code"}),
		acks:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_broker_publish_acknowledgements_total", Help: "Publishes by normalised ack mode and result."}, []string{"ack_mode", "result"}),
		replRetries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_broker_replication_retries_total",
			Help: "Publishes retried inside the gateway (leader moves, elections) by topic, ack mode and error class."}, []string{"topic", "ack_mode", "error_class"}),
		protoFailures:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_wire_protocol_failures_total", Help: "Rejected frames by reason."}, []string{"reason"}),
		decompRejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_wire_decompression_rejections_total", Help: "Rejected compressed payloads by reason."}, []string{"reason"}),
		streamsActive:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "strata_streams_active", Help: "Registered streaming consumers."}),
		publishRecords: topicCounter("strata_broker_publish_records_total", "Records accepted from clients for publishing, by topic."),
		publishBytes:   topicCounter("strata_broker_publish_bytes_total", "Record bytes accepted from clients for publishing, by topic."),
		consumeRecords: topicCounter("strata_broker_consume_records_total", "Records delivered to clients by CONSUME and STREAM, by topic."),
		consumeBytes:   topicCounter("strata_broker_consume_bytes_total", "Record bytes delivered to clients by CONSUME and STREAM, by topic."),
	}
	cs := []prometheus.Collector{m.connsTotal, m.connsActive, m.connsRefused, m.commands, m.duration, m.errors, m.acks, m.replRetries,
		m.protoFailures, m.decompRejected, m.streamsActive, m.publishRecords, m.publishBytes, m.consumeRecords, m.consumeBytes,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "strata_broker_topics", Help: "Topics in the gateway's metadata view."}, func() float64 {
			n, _ := g.topicCounts()
			return float64(n)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "strata_broker_partitions", Help: "Partitions in the gateway's metadata view."}, func() float64 {
			_, p := g.topicCounts()
			return float64(p)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "strata_broker_ready", Help: "Readiness of this process, 1 or 0."}, func() float64 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if _, ok := g.env.Process.Health.Evaluate(ctx); ok {
				return 1
			}
			return 0
		}),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// topicCounts counts the application topics and partitions in the view.
func (g *Role) topicCounts() (topics, partitions int) {
	for _, t := range g.meta.Cache().View().Topics() {
		if route.Visible(t) {
			topics++
			partitions += len(t.GetPartitions())
		}
	}
	return
}

// topicCounter is a counter by topic: bounded by the topics that exist.
func topicCounter(name, help string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"topic"})
}

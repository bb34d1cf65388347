// Package records holds the gateway's data path commands: PUBLISH (to the
// partition leader over the shared produce stream), CONSUME and STREAM
// (fetches from the leader, starting at the group's committed offset).
// Batches stay batches: a CBV2 payload is parsed once in place and its
// records section forwarded as is; a fetch's record set becomes the reply
// batch by one concatenation.
package records

import (
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strataio/strata/gateway/internal/command"
	"github.com/strataio/strata/gateway/internal/route"
	"github.com/strataio/strata/libs/placement"
	"github.com/strataio/strata/libs/wire"
)

// Config is what the data path commands take from the gateway's
// configuration.
type Config struct {
	// RequestTimeout bounds one fetch of a STREAM, and how long a STREAM
	// may keep failing with retryable errors before it closes (timeout).
	RequestTimeout time.Duration
	// StreamInterval is the STREAM push period (a long poll that long).
	StreamInterval time.Duration
	// StreamKeepalive is the silence after which a STREAM gets an empty
	// keepalive frame.
	StreamKeepalive time.Duration
}

// Metrics are the gateway's data path counters (registered by the gateway).
type Metrics struct {
	// Acks counts publishes by ack_mode (0, 1, all) and result (ok, error,
	// rejected).
	Acks *prometheus.CounterVec
	// ReplicationRetries counts publishes retried inside the gateway by
	// topic, ack_mode and the error class that made it retry (a leader move,
	// an election, a partition server that had not learned the topic yet):
	// the spec's replication_retries_total.
	ReplicationRetries *prometheus.CounterVec
	// Records and bytes in and out, by topic (bounded by the topic count).
	PublishRecords *prometheus.CounterVec
	PublishBytes   *prometheus.CounterVec
	ConsumeRecords *prometheus.CounterVec
	ConsumeBytes   *prometheus.CounterVec
}

// Handlers are the data path commands over a Router.
type Handlers struct {
	r   route.Router
	cfg Config
	m   Metrics
	log *slog.Logger

	rrMu sync.Mutex
	rr   map[string]*placement.RoundRobin // per-topic counters of unkeyed records
}

// New returns the data path commands routed through r.
func New(r route.Router, cfg Config, m Metrics, log *slog.Logger) *Handlers {
	return &Handlers{r: r, cfg: cfg, m: m, log: log, rr: map[string]*placement.RoundRobin{}}
}

// Register implements command.Family. PUBLISH checks its request text
// itself: an acks=0 publish is not answered even when that check fails.
func (h *Handlers) Register(t *command.Table) {
	t.HandleRaw(wire.CmdPublish, h.publish)
	t.Handle(wire.CmdConsume, h.consume)
	t.Handle(wire.CmdStream, h.stream)
}

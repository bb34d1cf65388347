package partitiond

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strataio/strata/libs/errcode"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"

	"github.com/strataio/strata/partitiond/internal/partition"
)

// metrics are partitiond's series on the process registry: the storage
// gauges of internal/partition's Collector (spec 6 storage and partition
// metrics, compaction runs) plus the producer sequence counters, which only
// the partition leader can observe.
type metrics struct {
	seqGap *prometheus.CounterVec
	seqDup *prometheus.CounterVec
	// Event sourcing (streams.go).
	streamAppends *prometheus.CounterVec
	snapshotSaves *prometheus.CounterVec
	streamProofs  *prometheus.CounterVec
}

// storageCollector delegates to the storage node's Collector while the node
// is open; it is registered at New, before Start opens the storage.
type storageCollector struct{ r *Role }

func (c storageCollector) Describe(ch chan<- *prometheus.Desc) {
	partition.NewCollector(nil).Describe(ch)
}

func (c storageCollector) Collect(ch chan<- prometheus.Metric) {
	if st := c.r.store.Load(); st != nil {
		partition.NewCollector(st).Collect(ch)
	}
}

func newMetrics(reg prometheus.Registerer, r *Role) (*metrics, error) {
	m := &metrics{
		seqGap: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_broker_seqnum_gap_total",
			Help: "Producer sequence gaps rejected by the partition leader."}, []string{"topic", "partition"}),
		seqDup: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_broker_seqnum_duplicate_total",
			Help: "Duplicate producer sequences answered with their original offsets."}, []string{"topic", "partition"}),
		streamAppends: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_stream_appends_total",
			Help: "APPEND_STREAM requests on this partition leader by result (ok, duplicate, version_conflict, error)."}, []string{"result"}),
		snapshotSaves: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_stream_snapshot_saves_total",
			Help: "SAVE_SNAPSHOT requests on this partition leader by result (ok, replicate_failed)."}, []string{"result"}),
		streamProofs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_stream_proofs_total",
			Help: "Aggregate replay proofs (AGGREGATE_REPLAY_PROOF, AGGREGATE_EVENT_RANGE_READ) on this partition leader by result (proven or the aggregate_proof_* code)."}, []string{"result"}),
	}
	if err := reg.Register(storageCollector{r}); err != nil {
		return nil, err
	}
	var err error
	if m.seqGap, err = registerCounterVec(reg, m.seqGap); err != nil {
		return nil, err
	}
	if m.seqDup, err = registerCounterVec(reg, m.seqDup); err != nil {
		return nil, err
	}
	if m.streamAppends, err = registerCounterVec(reg, m.streamAppends); err != nil {
		return nil, err
	}
	if m.snapshotSaves, err = registerCounterVec(reg, m.snapshotSaves); err != nil {
		return nil, err
	}
	if m.streamProofs, err = registerCounterVec(reg, m.streamProofs); err != nil {
		return nil, err
	}
	return m, nil
}

// registerCounterVec registers c, or reuses an identical vector another
// part of the process registered first (the registry is per process).
func registerCounterVec(reg prometheus.Registerer, c *prometheus.CounterVec) (*prometheus.CounterVec, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				return existing, nil
			}
		}
		return nil, err
	}
	return c, nil
}

func (m *metrics) observeAppend(req *partitionv1.AppendRequest, pa *partition.PendingAppend, err error) {
	switch {
	case err == nil && pa.Result.Duplicate:
		m.seqDup.WithLabelValues(req.GetTopic(), itoa(req.GetPartition())).Inc()
	case errcode.CodeOf(err) == errcode.OutOfOrderSequence.Name():
		m.seqGap.WithLabelValues(req.GetTopic(), itoa(req.GetPartition())).Inc() // no producer id: unbounded
	}
}

package coordinatord

import (
	"context"
	"maps"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/strataio/strata/coordinatord/internal/group"
)

// metrics holds coordinatord's instruments. Group gauges come from a
// snapshot at each scrape (spec 6), so departed groups have no series:
// the groups this node owns get coordinator_up 1 and the lifecycle gauges,
// the groups the other live coordinatords report (directory.go) get
// coordinator_up 0 alone.
type metrics struct {
	r *Role

	commits             prometheus.Counter
	expired             prometheus.Counter
	observationFailures *prometheus.CounterVec
	writeDuration       prometheus.Histogram
	replayDuration      prometheus.Histogram

	// Transactions (txnmetrics.go).
	txnRecoveries, txnTimeouts prometheus.Counter
	txnWriteDuration           prometheus.Histogram
	txnCompletion              *prometheus.HistogramVec

	recoveryReady, restoredGroups, restoredOffsets, replayed, orphans, corrupt *prometheus.Desc
	members, state, coordUp, lastActivity, lastRebalance, generation, assigned *prometheus.Desc
	committed, lag, outOfRange, ownedPartitions                                *prometheus.Desc
}

func newMetrics(reg prometheus.Registerer, r *Role) (*metrics, error) {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("strata_"+name, help, labels, nil)
	}
	m := &metrics{r: r,
		commits: prometheus.NewCounter(prometheus.CounterOpts{Name: "strata_consumer_group_commits_total",
			Help: "committed offset entries accepted (COMMIT_OFFSET and BATCH_COMMIT entries)"}),
		expired: prometheus.NewCounter(prometheus.CounterOpts{Name: "strata_consumer_group_expired_members_total",
			Help: "members removed after the session timeout"}),
		observationFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_consumer_group_observation_failures_total",
			Help: "per-coordinator group observation failures by reason (coordinator_lookup, group_lookup, topic_lookup)"},
			[]string{"topic", "group", "reason"}),
		writeDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "strata_consumer_metadata_write_duration_seconds",
			Help: "durable __consumer_offsets write latency", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)}),
		replayDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "strata_consumer_metadata_replay_duration_seconds",
			Help: "takeover (fence and replay) duration of one offsets partition", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),

		recoveryReady:   d("consumer_metadata_recovery_ready", "1 only after durable replay finished without error", "phase"),
		restoredGroups:  d("consumer_metadata_restored_groups", "groups rebuilt by replay since start"),
		restoredOffsets: d("consumer_metadata_restored_offsets", "committed (group,topic,partition) keys restored since start"),
		replayed:        d("consumer_metadata_replayed_records", "internal log records scanned by replay since start"),
		orphans:         d("consumer_metadata_orphan_records", "records fenced or superseded by lifecycle state"),
		corrupt:         d("consumer_metadata_corrupt_records", "malformed or inconsistent records that stopped recovery"),
		ownedPartitions: d("consumer_metadata_owned_partitions", "__consumer_offsets partitions this coordinator owns, by state", "state"),

		members:       d("consumer_group_members", "member count (authoritative coordinator only)", "topic", "group"),
		state:         d("consumer_group_state", "one-hot group state", "topic", "group", "state"),
		coordUp:       d("consumer_group_coordinator_up", "1 on the coordinator that owns the group, 0 on every other live coordinator", "topic", "group"),
		lastActivity:  d("consumer_group_last_activity_timestamp_seconds", "latest accepted heartbeat or lifecycle activity (0 unknown)", "topic", "group"),
		lastRebalance: d("consumer_group_last_rebalance_timestamp_seconds", "latest completed rebalance (0 none since recovery)", "topic", "group"),
		generation:    d("consumer_group_generation", "current generation", "group", "topic"),
		assigned:      d("consumer_group_assigned_partitions", "assignments held by active members", "group", "topic"),
		committed:     d("consumer_group_committed_offset", "durable committed next offset", "group", "topic", "partition"),
		lag:           d("consumer_group_lag", "max(LSO - committed next offset, 0) (LSO = HWM without open transactions)", "group", "topic", "partition"),
		outOfRange:    d("consumer_group_offset_out_of_range", "1 when the commit lies below log start or above the HWM", "group", "topic", "partition"),
	}
	// observationFailures is collected by m, after the peer fan-out that
	// may increment it, so a scrape shows the failures it observed.
	for _, c := range []prometheus.Collector{m.commits, m.expired, m.writeDuration, m.replayDuration, m} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	if err := registerTxnMetrics(reg, r, m); err != nil {
		return nil, err
	}
	return m, nil
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.recoveryReady, m.restoredGroups, m.restoredOffsets, m.replayed, m.orphans, m.corrupt,
		m.ownedPartitions, m.members, m.state, m.coordUp, m.lastActivity, m.lastRebalance, m.generation, m.assigned,
		m.committed, m.lag, m.outOfRange} {
		ch <- d
	}
	m.observationFailures.Describe(ch)
}

func secs(ms int64) float64 { return float64(ms) / 1000 }

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Collect implements prometheus.Collector from a point-in-time snapshot.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	r := m.r
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	remote := r.dir.remoteGroups()
	metaReady := r.meta.Cache().View().Ready()
	r.mu.Lock()
	stats := r.stats
	hwm := maps.Clone(r.hwm)
	r.mu.Unlock()
	shards := r.readyShards()
	counts := map[string]int{"loading": 0, "ready": 0, "corrupt": 0, "fenced": 0}
	allReady := metaReady && r.checkReady(context.Background()) == nil
	owned := map[string]bool{}
	for _, s := range shards {
		s.mu.Lock()
		switch s.state {
		case shardLoading:
			counts["loading"]++
		case shardReady:
			counts["ready"]++
		case shardCorrupt:
			counts["corrupt"]++
		default:
			counts["fenced"]++
		}
		s.mu.Unlock()
		entries, ready := s.snapshot()
		if !ready {
			continue
		}
		for _, e := range entries {
			e.mu.Lock()
			if e.g != nil {
				owned[e.g.Name] = true
				m.collectGroup(gauge, e.g, hwm)
			}
			e.mu.Unlock()
		}
	}
	// A group both owned here and reported by a peer (overlapping views
	// during a handover) keeps this node's 1: the sum above 1 is the signal.
	for k := range remote {
		if !owned[k.group] {
			gauge(m.coordUp, 0, k.topic, k.group)
		}
	}
	m.observationFailures.Collect(ch)
	gauge(m.recoveryReady, b2f(metaReady), "metadata")
	gauge(m.recoveryReady, b2f(allReady), "replay")
	gauge(m.restoredGroups, float64(stats.groups))
	gauge(m.restoredOffsets, float64(stats.offsets))
	// Cumulative since start, so a counter (spec name kept, no _total).
	ch <- prometheus.MustNewConstMetric(m.replayed, prometheus.CounterValue, float64(stats.records))
	gauge(m.orphans, float64(stats.orphans))
	gauge(m.corrupt, float64(stats.corrupt))
	for _, st := range slices.Sorted(maps.Keys(counts)) {
		gauge(m.ownedPartitions, float64(counts[st]), st)
	}
}

func (m *metrics) collectGroup(gauge func(*prometheus.Desc, float64, ...string), g *group.Group, hwm map[group.TP]partOffsets) {
	state := "empty"
	if len(g.Members) > 0 {
		state = "stable"
	}
	perTopic := map[string]int{}
	for _, mb := range g.Members {
		for _, tp := range mb.Assigned {
			perTopic[tp.Topic]++
		}
	}
	for _, t := range topicsOf(g) {
		gauge(m.members, float64(len(g.Members)), t, g.Name)
		gauge(m.state, b2f(state == "stable"), t, g.Name, "stable")
		gauge(m.state, b2f(state == "empty"), t, g.Name, "empty")
		gauge(m.coordUp, 1, t, g.Name)
		gauge(m.lastActivity, secs(unixMs(g.LastActivity)), t, g.Name)
		gauge(m.lastRebalance, secs(unixMs(g.LastRebalance)), t, g.Name)
		gauge(m.generation, float64(g.Generation), g.Name, t)
		gauge(m.assigned, float64(perTopic[t]), g.Name, t)
	}
	// Exact-topic groups count a partition without a stored offset as
	// committed at 0; wildcard groups expose only partitions with offsets.
	exact := g.Selector.Pattern == ""
	for _, tp := range g.Partitions {
		off, ok := g.Offsets[tp]
		if !ok && !exact {
			continue
		}
		p := strconv.FormatInt(int64(tp.Partition), 10)
		if ok {
			gauge(m.committed, float64(off), g.Name, tp.Topic, p)
		}
		if h, known := hwm[tp]; known {
			lag := uint64(0)
			if h.lso > off {
				lag = h.lso - off
			}
			gauge(m.lag, float64(lag), g.Name, tp.Topic, p)
			gauge(m.outOfRange, b2f(ok && (off < h.start || off > h.hwm)), g.Name, tp.Topic, p)
		}
	}
}

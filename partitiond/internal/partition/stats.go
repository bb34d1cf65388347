package partition

import (
	"sort"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// PartitionStats are one partition's gauges.
type PartitionStats struct {
	Topic          string
	Partition      int32
	LogStartOffset uint64
	LogEndOffset   uint64
	HighWatermark  uint64
	Segments       int
	// Bytes counts segment plus index bytes.
	Bytes int64
	// PendingWrites counts records written but not yet durable.
	PendingWrites uint64
	Producers     int
	Fenced        bool
}

// CompactionCount is one series of the compaction run counter.
type CompactionCount struct {
	Result, Reason string
	Count          uint64
}

// NodeStats is the storage part of the spec's metrics catalogue as plain
// values (section 6: storage gauges, segment cache, compaction runs).
type NodeStats struct {
	// Handlers counts open partition logs.
	Handlers int
	Segments int
	Bytes    int64
	// PendingWrites counts records written and not yet covered by an
	// fdatasync (queued for disk).
	PendingWrites uint64
	// ActiveReaders counts segment readers in use right now.
	ActiveReaders int64
	// StatFailures counts partitions whose storage could not be inspected
	// (they failed to open); their series are absent.
	StatFailures        int
	SegmentCacheEntries int
	SegmentCacheHits    uint64
	SegmentCacheMisses  uint64
	SegmentCacheEvicts  uint64
	// Fsyncs counts successful segment fdatasyncs; StorageFailures counts
	// partitions that fenced themselves after an I/O or fsync failure.
	Fsyncs          uint64
	SyncRounds      uint64
	StorageFailures uint64
	// DroppedWritten and DroppedRead are the page-cache bytes the logs gave
	// back after writing and after reading them (segment_cache_window).
	DroppedWritten uint64
	DroppedRead    uint64
	Compactions    []CompactionCount
	Partitions     []PartitionStats
}

// Stats returns a point-in-time snapshot (series of deleted partitions
// disappear with them).
func (n *Node) Stats() NodeStats {
	var st NodeStats
	n.mu.RLock()
	parts := make([]*Partition, 0, len(n.parts))
	for _, p := range n.parts {
		parts = append(parts, p)
	}
	st.StatFailures = len(n.failed)
	n.mu.RUnlock()
	for _, p := range parts {
		if p.gone.Load() != goneNot {
			continue
		}
		ps := PartitionStats{Topic: p.topic, Partition: p.id, LogStartOffset: p.log.StartOffset(),
			LogEndOffset: p.log.EndOffset(), HighWatermark: p.highWatermark(), Fenced: p.log.Fenced() != nil}
		for _, s := range p.log.Segments() {
			ps.Segments++
			ps.Bytes += s.Size + s.IndexBytes
		}
		if d := p.log.DurableEnd(); ps.LogEndOffset > d {
			ps.PendingWrites = ps.LogEndOffset - d
		}
		p.mu.Lock()
		ps.Producers = p.producers.Len()
		p.mu.Unlock()
		st.Handlers++
		st.Segments += ps.Segments
		st.Bytes += ps.Bytes
		st.PendingWrites += ps.PendingWrites
		st.Fsyncs += p.log.Syncs()
		st.Partitions = append(st.Partitions, ps)
	}
	sort.Slice(st.Partitions, func(i, j int) bool {
		a, b := st.Partitions[i], st.Partitions[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	cs := n.cache.Stats()
	st.SegmentCacheEntries, st.SegmentCacheHits, st.SegmentCacheMisses, st.SegmentCacheEvicts = cs.Entries, cs.Hits, cs.Misses, cs.Evictions
	st.ActiveReaders = cs.ActiveReaders
	st.SyncRounds = n.syncer.Rounds()
	st.StorageFailures = n.storageFailures.Load()
	st.DroppedWritten, st.DroppedRead = n.dropped[0].Load(), n.dropped[1].Load()
	n.compactMu.Lock()
	for k, v := range n.compactRuns {
		st.Compactions = append(st.Compactions, CompactionCount{Result: k[0], Reason: k[1], Count: v})
	}
	n.compactMu.Unlock()
	sort.Slice(st.Compactions, func(i, j int) bool {
		a, b := st.Compactions[i], st.Compactions[j]
		return a.Result < b.Result || a.Result == b.Result && a.Reason < b.Reason
	})
	return st
}

// Collector exposes NodeStats as the spec's metrics (prefix strata_).
type Collector struct {
	n *Node
}

// NewCollector returns a prometheus.Collector over n's stats, computed at
// each scrape.
func NewCollector(n *Node) *Collector { return &Collector{n: n} }

var (
	descStart   = prometheus.NewDesc("strata_partition_log_start_offset", "Earliest retained offset.", []string{"topic", "partition"}, nil)
	descEnd     = prometheus.NewDesc("strata_partition_log_end_offset", "Next allocated offset.", []string{"topic", "partition"}, nil)
	descHWM     = prometheus.NewDesc("strata_partition_high_watermark", "Next offset visible to committed readers.", []string{"topic", "partition"}, nil)
	descHandl   = prometheus.NewDesc("strata_storage_handlers", "Open partition storage handlers.", nil, nil)
	descSegs    = prometheus.NewDesc("strata_storage_segments", "Segment files of open handlers.", nil, nil)
	descBytes   = prometheus.NewDesc("strata_storage_bytes", "Segment plus index bytes of open handlers.", nil, nil)
	descPending = prometheus.NewDesc("strata_storage_pending_writes", "Records written and not yet durable.", nil, nil)
	descReaders = prometheus.NewDesc("strata_storage_active_readers", "Segment readers in use.", nil, nil)
	descStatF   = prometheus.NewDesc("strata_storage_stat_failures", "Partitions whose storage could not be inspected.", nil, nil)
	descCEnt    = prometheus.NewDesc("strata_storage_segment_cache_entries", "Open segment readers cached (pread descriptors).", nil, nil)
	descCHit    = prometheus.NewDesc("strata_storage_segment_cache_hits", "Segment reader cache hits.", nil, nil)
	descCMiss   = prometheus.NewDesc("strata_storage_segment_cache_misses", "Segment reader cache misses.", nil, nil)
	descCEvict  = prometheus.NewDesc("strata_storage_segment_cache_evictions", "Segment reader cache evictions.", nil, nil)
	descDropped = prometheus.NewDesc("strata_storage_page_cache_dropped_bytes_total",
		"Bytes of segment files whose page-cache pages the partition logs gave back to the kernel (segment_cache_window); reason write: after they were written and synced, read: after a read of them.",
		[]string{"reason"}, nil)
	descCompact = prometheus.NewDesc("strata_broker_log_compaction_runs_total", "Completed, skipped or failed compaction passes.", []string{"result", "reason"}, nil)
)

// newFsyncHistogram is a node's fsync latency histogram: 100 µs to about
// 3 s, doubling.
func newFsyncHistogram() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: "strata_storage_fsync_duration_seconds",
		Help:    "Duration of the partition logs' fdatasyncs that made appends durable (one per log per group-commit round).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)})
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	newFsyncHistogram().Describe(ch)
	for _, d := range []*prometheus.Desc{descStart, descEnd, descHWM, descHandl, descSegs, descBytes, descPending,
		descReaders, descStatF, descCEnt, descCHit, descCMiss, descCEvict, descDropped, descCompact} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	st := c.n.Stats()
	g := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	for _, p := range st.Partitions {
		ps := strconv.Itoa(int(p.Partition))
		g(descStart, float64(p.LogStartOffset), p.Topic, ps)
		g(descEnd, float64(p.LogEndOffset), p.Topic, ps)
		g(descHWM, float64(p.HighWatermark), p.Topic, ps)
	}
	g(descHandl, float64(st.Handlers))
	g(descSegs, float64(st.Segments))
	g(descBytes, float64(st.Bytes))
	g(descPending, float64(st.PendingWrites))
	g(descReaders, float64(st.ActiveReaders))
	g(descStatF, float64(st.StatFailures))
	g(descCEnt, float64(st.SegmentCacheEntries))
	// The node-wide cache's totals only rise: counters, under the spec's
	// names (which carry no _total).
	count := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	count(descCHit, st.SegmentCacheHits)
	count(descCMiss, st.SegmentCacheMisses)
	count(descCEvict, st.SegmentCacheEvicts)
	ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(st.DroppedWritten), "write")
	ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(st.DroppedRead), "read")
	for _, cc := range st.Compactions {
		ch <- prometheus.MustNewConstMetric(descCompact, prometheus.CounterValue, float64(cc.Count), cc.Result, cc.Reason)
	}
	c.n.fsync.Collect(ch)
}

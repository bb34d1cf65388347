package partitiond

import (
	"time"

	"github.com/strataio/strata/libs/config"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/partitiond/internal/partition"
)

// Config holds partitiond's role settings. Zero durations and sizes are
// rejected by New only where a zero has no sensible meaning; topic-level
// settings of 0 fall back to the broker defaults here (spec 2.1).
type Config struct {
	// MetadAddrs are the metad RPC addresses to start from; the binary fills
	// them from the process's metad_addrs when empty.
	MetadAddrs []string `yaml:"metad_addrs" help:"metad internal gRPC addresses (default: the process metad_addrs)"`

	SegmentBytes int64         `yaml:"segment_bytes" min:"4096" help:"segment roll size in bytes"`
	SegmentAge   time.Duration `yaml:"segment_roll" min:"1ns" help:"roll the active segment after this age so time retention applies"`
	// SegmentPreallocate: see seglog.Config.Preallocate (docs/partitiond.md,
	// "Segment files").
	SegmentPreallocate int64 `yaml:"segment_preallocate" min:"0" help:"extend the active segment file this many bytes ahead of its data (fallocate), so appends do not change the file size; 0 = off"`
	// SegmentCacheWindow: see seglog.Config.CacheWindow (docs/partitiond.md,
	// "Page cache").
	SegmentCacheWindow int64 `yaml:"segment_cache_window" min:"0" help:"bytes of each partition log's tail kept in the OS page cache; older synced bytes are dropped after they are written or read (posix_fadvise); 0 = leave it to the kernel"`
	// RetentionCheckInterval is the period of the maintenance pass
	// (retention, compaction, producer-state expiry, checkpoints).
	RetentionCheckInterval time.Duration `yaml:"retention_check_interval" min:"1ns" help:"period of the retention/compaction maintenance pass"`

	// Broker-level topic defaults (a topic's 0 means these).
	DefaultCleanupPolicy  string        `yaml:"default_cleanup_policy" help:"cleanup policy of topics that name none: delete, compact or delete,compact"`
	DefaultRetention      time.Duration `yaml:"default_retention" help:"retention of topics with retention_hours 0 (negative: unlimited)"`
	DefaultRetentionBytes int64         `yaml:"default_retention_bytes" help:"retention bytes of topics with retention_bytes 0 (negative: unlimited)"`
	DeleteRetention       time.Duration `yaml:"delete_retention" help:"how long compaction keeps the latest tombstone of a key"`
	ProducerStateTTL      time.Duration `yaml:"producer_state_ttl" help:"producer_state_ttl_ms: idle producer state expiry (spec 4.6 rule 5)"`
	// MinInSyncReplicas is the broker min_insync_replicas for topics without
	// an override; acks all/-1 are refused when the effective value exceeds
	// the current ISR, and the HWM stands still meanwhile.
	MinInSyncReplicas int `yaml:"min_insync_replicas" min:"1" help:"broker default min_insync_replicas"`

	MaxBatchBytes int `yaml:"max_batch_bytes" min:"1" help:"largest record set one append may carry"`
	// Fetch limits: defaults when a request leaves a bound 0, and caps.
	FetchMaxBytes        int           `yaml:"fetch_max_bytes" min:"1" help:"fetch byte bound when a request gives none"`
	FetchMaxBytesLimit   int           `yaml:"fetch_max_bytes_limit" help:"largest fetch byte bound a request may ask for"`
	FetchMaxRecords      int           `yaml:"fetch_max_records" min:"1" help:"fetch record bound when a request gives none"`
	FetchMaxRecordsLimit int           `yaml:"fetch_max_records_limit" help:"largest fetch record bound a request may ask for"`
	FetchMaxWait         time.Duration `yaml:"fetch_max_wait" min:"0" help:"longest long-poll wait a fetch may ask for"`

	// MaxInFlightPerStream bounds the Produce requests of one stream whose
	// acknowledgement is outstanding; the stream stops reading beyond it
	// (gRPC flow control then pushes back on the gateway).
	MaxInFlightPerStream int `yaml:"max_in_flight_per_stream" min:"1" help:"outstanding Produce requests per stream"`

	HwmCheckpointInterval time.Duration `yaml:"hwm_checkpoint_interval" min:"1ns" help:"period of committed-HWM checkpoints to metad"`
	// ReplicaLagTimeMax: a follower that has not been caught up with its
	// leader for this long leaves the ISR (Kafka's replica.lag.time.max.ms).
	ReplicaLagTimeMax time.Duration `yaml:"replica_lag_time_max" min:"1ns" help:"a follower not caught up for this long leaves the ISR"`
	// ReplicaFetchMaxWait bounds a follower's long poll on its leader.
	ReplicaFetchMaxWait time.Duration `yaml:"replica_fetch_max_wait" min:"1ns" help:"longest wait of a follower's fetch when the leader has nothing new"`
	// ReconcileRetry is the delay before a failed assignment step (create,
	// truncate, delete, cleanup report) is tried again.
	ReconcileRetry time.Duration `yaml:"reconcile_retry" min:"1ns" help:"retry delay of failed assignment reconciliation steps"`
	// ViewCatchUp bounds how long a request for a topic this node's metad
	// view does not list (yet) waits for the view before answering
	// topic_not_found: callers route by their own view, which may be a few
	// milliseconds ahead (a topic created a moment ago). 0 answers at once.
	ViewCatchUp time.Duration `yaml:"view_catch_up" min:"0" help:"longest wait for the metadata view to list a requested topic before topic_not_found"`

	SyncParallel    int  `yaml:"sync_parallel" help:"concurrent fdatasyncs of one group commit"`
	ReaderCacheSize int  `yaml:"reader_cache_size" help:"open segment readers kept by the node"`
	VerifyOnOpen    bool `yaml:"verify_on_open" help:"check the CRC of every stored batch at startup, not only the unchecked tail"`

	// storageHook lets tests adjust the storage configuration (fault
	// injection through NodeConfig.FS).
	storageHook func(*partition.NodeConfig)
}

// DefaultConfig returns partitiond's defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:           256 << 20,
		SegmentAge:             24 * time.Hour,
		SegmentPreallocate:     8 << 20,
		SegmentCacheWindow:     64 << 20,
		RetentionCheckInterval: 30 * time.Second,
		DefaultCleanupPolicy:   partition.PolicyDelete,
		DefaultRetention:       168 * time.Hour,
		DefaultRetentionBytes:  -1,
		DeleteRetention:        24 * time.Hour,
		ProducerStateTTL:       30 * time.Minute,
		MinInSyncReplicas:      1,
		MaxBatchBytes:          64 << 20,
		FetchMaxBytes:          1 << 20,
		FetchMaxBytesLimit:     64 << 20,
		FetchMaxRecords:        8192,
		FetchMaxRecordsLimit:   100_000,
		FetchMaxWait:           30 * time.Second,
		MaxInFlightPerStream:   1024,
		HwmCheckpointInterval:  2 * time.Second,
		ReplicaLagTimeMax:      10 * time.Second,
		ReplicaFetchMaxWait:    500 * time.Millisecond,
		ReconcileRetry:         time.Second,
		ViewCatchUp:            500 * time.Millisecond,
		SyncParallel:           8,
		ReaderCacheSize:        256,
	}
}

func (c *Config) validate() error {
	bad := func(param, why string) error {
		return errcode.InvalidParameter.New("partitiond."+param+" "+why, "param", "partitiond."+param)
	}
	if err := config.Check("partitiond", c); err != nil {
		return err
	}
	switch {
	case c.FetchMaxBytesLimit < c.FetchMaxBytes:
		return bad("fetch_max_bytes", "must be at most fetch_max_bytes_limit")
	case c.FetchMaxRecordsLimit < c.FetchMaxRecords:
		return bad("fetch_max_records", "must be at most fetch_max_records_limit")
	}
	switch c.DefaultCleanupPolicy {
	case partition.PolicyDelete, partition.PolicyCompact, partition.PolicyDeleteCompact:
	default:
		return bad("default_cleanup_policy", "must be delete, compact or delete,compact")
	}
	if len(c.MetadAddrs) == 0 {
		return errcode.MissingParameter.New("partitiond config: metad_addrs is empty", "param", "metad_addrs")
	}
	return nil
}

func (c *Config) defaults() partition.Defaults {
	return partition.Defaults{
		CleanupPolicy:      c.DefaultCleanupPolicy,
		Retention:          c.DefaultRetention,
		RetentionBytes:     c.DefaultRetentionBytes,
		DeleteRetention:    c.DeleteRetention,
		SegmentBytes:       c.SegmentBytes,
		SegmentAge:         c.SegmentAge,
		SegmentPreallocate: c.SegmentPreallocate,
		SegmentCacheWindow: c.SegmentCacheWindow,
		ProducerStateTTL:   c.ProducerStateTTL,
		MaxBatchBytes:      c.MaxBatchBytes,
		FetchMaxBytes:      c.FetchMaxBytes,
		FetchMaxRecords:    c.FetchMaxRecords,
	}
}

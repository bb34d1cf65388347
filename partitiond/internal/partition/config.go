package partition

import (
	"log/slog"
	"strconv"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/partitiond/internal/clock"
	"github.com/strataio/strata/partitiond/internal/producer"
	"github.com/strataio/strata/partitiond/internal/seglog"
	"github.com/strataio/strata/partitiond/internal/statestore"
)

// Cleanup policies (spec 2.1).
const (
	PolicyDelete        = "delete"
	PolicyCompact       = "compact"
	PolicyDeleteCompact = "delete,compact"
)

// Defaults are the broker-level settings a topic falls back to.
type Defaults struct {
	// CleanupPolicy applies to topics whose cleanup_policy is empty.
	CleanupPolicy string
	// Retention applies to topics with retention_hours 0; negative means
	// unlimited.
	Retention time.Duration
	// RetentionBytes applies to topics with retention_bytes 0; negative
	// means unlimited.
	RetentionBytes int64
	// DeleteRetention is how long the latest tombstone of a key survives
	// compaction.
	DeleteRetention time.Duration
	SegmentBytes    int64
	SegmentAge      time.Duration
	IndexInterval   int
	// SegmentPreallocate is seglog.Config.Preallocate (0: off).
	SegmentPreallocate int64
	// SegmentCacheWindow is seglog.Config.CacheWindow (0: the kernel
	// keeps pages as it sees fit).
	SegmentCacheWindow int64
	// ProducerStateTTL is producer_state_ttl_ms (spec 4.6 rule 5).
	ProducerStateTTL time.Duration
	// MaxBatchBytes bounds one appended record set.
	MaxBatchBytes int
	// FetchMaxBytes and FetchMaxRecords apply when a fetch leaves them 0
	// (8192 records is the spec's CONSUME batch default).
	FetchMaxBytes   int
	FetchMaxRecords int
	// CheckpointBytes: maintenance checkpoints a partition's active segment
	// index once this many bytes were appended since the last checkpoint,
	// bounding the rescan after a crash.
	CheckpointBytes int64
}

func (d *Defaults) fill() {
	if d.CleanupPolicy == "" {
		d.CleanupPolicy = PolicyDelete
	}
	if d.Retention == 0 {
		d.Retention = 168 * time.Hour
	}
	if d.RetentionBytes == 0 {
		d.RetentionBytes = -1
	}
	if d.DeleteRetention == 0 {
		d.DeleteRetention = 24 * time.Hour
	}
	if d.SegmentBytes <= 0 {
		d.SegmentBytes = seglog.DefaultSegmentBytes
	}
	if d.SegmentAge <= 0 {
		d.SegmentAge = seglog.DefaultSegmentAge
	}
	if d.IndexInterval <= 0 {
		d.IndexInterval = seglog.DefaultIndexInterval
	}
	if d.ProducerStateTTL <= 0 {
		d.ProducerStateTTL = producer.DefaultTTL
	}
	if d.MaxBatchBytes <= 0 {
		d.MaxBatchBytes = 64 << 20
	}
	if d.FetchMaxBytes <= 0 {
		d.FetchMaxBytes = 1 << 20
	}
	if d.FetchMaxRecords <= 0 {
		d.FetchMaxRecords = 8192
	}
	if d.CheckpointBytes <= 0 {
		d.CheckpointBytes = 64 << 20
	}
}

// CompactionFacts are the local facts of a partition handed to the
// compaction eligibility predicate.
type CompactionFacts struct {
	Topic          string
	Partition      int32
	LifecycleEpoch uint64
	CleanupPolicy  string
	LEO            uint64
	HWM            uint64
}

// NodeConfig configures a Node.
type NodeConfig struct {
	// Dir holds logs/ (one directory per partition) and state/ (pebble).
	Dir string
	// FS is the file system of the logs (default vfs.Default).
	FS vfs.FS
	// StateFS is pebble's file system (default FS).
	StateFS vfs.FS
	Clock   clock.Clock
	Logger  *slog.Logger
	// Defaults are the broker-level topic defaults and storage settings.
	Defaults Defaults
	// CompactionEligible says whether the cleaner may run on a partition
	// now (spec 4.4 rule 6: all configured replicas active and in ISR, the
	// committed HWM authoritative, local and metadata lifecycle epoch,
	// cleanup policy, LEO and HWM in agreement); reason names why not and
	// becomes the metric's reason label. Nil means never eligible.
	CompactionEligible func(CompactionFacts) (ok bool, reason string)
	// BeforeRetention, when set, runs before retention deletes segments of
	// p, moving its log start to newStart: state derived from the log that
	// must outlive the deleted records is saved there (the stream heads of
	// event sourcing). An error keeps the segments until the next pass.
	BeforeRetention func(p *Partition, newStart uint64) error
	// OnStorageFailure is told when a partition fences itself after an I/O
	// or fdatasync failure. It must not call back into the partition.
	OnStorageFailure func(topic string, partition int32, err error)
	// MaintenanceInterval starts a background loop calling Maintain; 0
	// leaves maintenance to the caller.
	MaintenanceInterval time.Duration
	// SyncParallel bounds concurrent fdatasyncs of one group commit round.
	SyncParallel int
	// ReaderCacheSize bounds the open segment readers of the node.
	ReaderCacheSize int
	// VerifyOnOpen checks the CRC of every stored batch when partitions
	// open, not only the part after each segment's checkpoint.
	VerifyOnOpen bool
}

// TopicConfig is the topic definition part a partition stores.
type TopicConfig = statestore.TopicConfig

func validPolicy(p string) bool {
	switch p {
	case "", PolicyDelete, PolicyCompact, PolicyDeleteCompact:
		return true
	}
	return false
}

func hasDelete(p string) bool  { return p == PolicyDelete || p == PolicyDeleteCompact }
func hasCompact(p string) bool { return p == PolicyCompact || p == PolicyDeleteCompact }

// validTopicName applies spec 2.1: 1-249 ASCII letters, digits, '.', '_',
// '-', '='; "." and ".." are reserved.
func validTopicName(name string) bool {
	if len(name) == 0 || len(name) > 249 || name == "." || name == ".." {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-', c == '=':
		default:
			return false
		}
	}
	return true
}

func checkSpec(topic string, p int32, cfg TopicConfig) error {
	if !validTopicName(topic) {
		return errcode.InvalidTopicName.New("topic name violates the portable contract", "topic", topic)
	}
	if p < 0 {
		return errcode.InvalidPartition.New("partition must not be negative", "partition", strconv.Itoa(int(p)))
	}
	if !validPolicy(cfg.CleanupPolicy) {
		return errcode.InvalidTopicPolicy.New("unknown cleanup policy", "cleanup_policy", cfg.CleanupPolicy)
	}
	return nil
}

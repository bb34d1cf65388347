package coordinatord

import (
	"time"

	"github.com/strataio/strata/libs/config"
	"github.com/strataio/strata/libs/groups"
)

// Config holds coordinatord's role settings.
type Config struct {
	// MetadAddrs are the metad RPC addresses to start from; the binary fills
	// them from the process's metad_addrs when empty.
	MetadAddrs []string `yaml:"metad_addrs" help:"metad internal gRPC addresses (default: the process metad_addrs)"`
	// OffsetsPartitions is the partition count __consumer_offsets is created
	// with. Once the topic exists its actual count decides group placement.
	OffsetsPartitions int32 `yaml:"offsets_partitions" min:"1" help:"partitions of __consumer_offsets when this node creates it"`
	// OffsetsReplicationFactor is the replication factor __consumer_offsets
	// is created with.
	OffsetsReplicationFactor int32 `yaml:"offsets_replication_factor" min:"1" help:"replication factor of __consumer_offsets when this node creates it"`
	// SessionTimeout expires members without a heartbeat for this long.
	SessionTimeout time.Duration `yaml:"session_timeout" min:"1ns" help:"consumer group session timeout (members silent this long are removed)"`
	// ExpiryCheckInterval is how often sessions are checked and selectors
	// re-expanded against the current topics.
	ExpiryCheckInterval time.Duration `yaml:"expiry_check_interval" min:"1ns" help:"period of session expiry and selector re-expansion (rebalance) checks"`
	// AppendTimeout bounds one durable write of a group command.
	AppendTimeout time.Duration `yaml:"append_timeout" min:"1ns" help:"bound of one durable __consumer_offsets write"`
	// LagRefreshInterval is how often partition high watermarks are read for
	// the lag and offset_out_of_range metrics.
	LagRefreshInterval time.Duration `yaml:"lag_refresh_interval" help:"period of the high-watermark refresh behind the lag metrics (0 disables)"`
	// TransactionCoordinatorShards is announced to metad (spec 4.7, fixed at
	// cluster creation).
	TransactionCoordinatorShards uint32 `yaml:"transaction_coordinator_shards" help:"transaction_coordinator_shards announced to metad"`
	// TransactionTimeout aborts an open transaction this long after
	// BEGIN_TXN (spec transaction_timeout_ms).
	TransactionTimeout time.Duration `yaml:"transaction_timeout" min:"1ns" help:"open transactions are aborted this long after BEGIN_TXN (transaction_timeout_ms)"`
	// TransactionalIDExpiration drops an idle completed transactional_id's
	// state down to an epoch tombstone (transactional_id_expiration_ms).
	TransactionalIDExpiration time.Duration `yaml:"transactional_id_expiration" min:"1ns" help:"idle completed transactional ids keep only an epoch tombstone after this long"`
}

// DefaultConfig returns coordinatord's defaults.
func DefaultConfig() Config {
	return Config{
		OffsetsPartitions:            groups.DefaultOffsetsPartitions,
		OffsetsReplicationFactor:     1,
		SessionTimeout:               30 * time.Second,
		ExpiryCheckInterval:          time.Second,
		AppendTimeout:                5 * time.Second,
		LagRefreshInterval:           10 * time.Second,
		TransactionCoordinatorShards: 50,
		TransactionTimeout:           60 * time.Second,
		TransactionalIDExpiration:    7 * 24 * time.Hour,
	}
}

// validate checks the settings' min tags.
func (c Config) validate() error { return config.Check("coordinatord", &c) }

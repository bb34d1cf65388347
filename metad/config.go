package metad

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strataio/strata/libs/config"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/metad/internal/fsm"
)

// Config holds metad's settings (the `metad` section of a configuration).
type Config struct {
	// RaftListen is the Raft (mTLS) bind address; port 0 picks one.
	RaftListen string `yaml:"raft_listen" help:"raft (mTLS) bind address (host:port)"`
	// RaftAdvertise is the Raft address peers dial. Default: this node's
	// entry in Voters, else the bound address.
	RaftAdvertise string `yaml:"raft_advertise" help:"raft address peers dial (default: own voters entry, else the bound address)"`
	// Voters is the static cluster, "id=host:port" (Raft addresses), the
	// same list on every metad. Used only on the first start of an empty
	// data directory.
	Voters []string `yaml:"voters" help:"static raft voters id=host:port, identical on every metad (comma separated)"`
	// Bootstrap: on the first start of an empty directory, bootstrap a
	// cluster from Voters, or from this node alone when Voters is empty
	// (single-voter mode). false: wait to be added to a running cluster.
	Bootstrap bool `yaml:"bootstrap" help:"bootstrap a new cluster on first start (voters, or this node alone when voters is empty)"`

	// NodeLeaseTimeout is how long a registered node stays live without a
	// heartbeat; nodes heartbeat at a third of it.
	NodeLeaseTimeout time.Duration `yaml:"node_lease_timeout" min:"100ms" help:"liveness lease of registered nodes (heartbeats every third)"`
	// TransactionCoordinatorShards is fixed at cluster creation (spec 4.7).
	TransactionCoordinatorShards uint32 `yaml:"transaction_coordinator_shards" min:"1" help:"transaction coordinator shards, immutable after cluster creation"`
	// Topic defaults resolved by the proposer (spec 8: 3 / delete).
	DefaultReplicationFactor int32  `yaml:"default_replication_factor" min:"1" help:"replication factor of topics created without one"`
	DefaultCleanupPolicy     string `yaml:"default_cleanup_policy" help:"cleanup policy of topics created without one"`
	// MinInsyncReplicas is the broker-level min_insync_replicas reported
	// as the effective value of topics without an override.
	MinInsyncReplicas int32 `yaml:"min_insync_replicas" min:"1" help:"broker default min_insync_replicas"`

	// Raft timing (hashicorp/raft semantics).
	RaftHeartbeatTimeout   time.Duration `yaml:"raft_heartbeat_timeout" help:"raft follower heartbeat timeout"`
	RaftElectionTimeout    time.Duration `yaml:"raft_election_timeout" help:"raft candidate election timeout"`
	RaftLeaderLeaseTimeout time.Duration `yaml:"raft_leader_lease_timeout" help:"raft leader lease (steps down without quorum contact)"`
	RaftSnapshotThreshold  uint64        `yaml:"raft_snapshot_threshold" help:"raft log entries between snapshots"`
	RaftSnapshotInterval   time.Duration `yaml:"raft_snapshot_interval" help:"how often raft checks whether to snapshot"`
	RaftTrailingLogs       uint64        `yaml:"raft_trailing_logs" help:"raft log entries kept after a snapshot"`
	// CoordinatorCheckTimeout bounds the DELETE/TRUNCATE guard that asks
	// coordinatords for active groups.
	CoordinatorCheckTimeout time.Duration `yaml:"coordinator_check_timeout" help:"bound of the DELETE/TRUNCATE active-group check"`
}

// DefaultConfig returns the defaults of a distributed metad: Raft on :9191,
// bootstrapping from voters (alone when none are given), 10 s node leases,
// 50 transaction coordinator shards, topics RF 3 / delete.
func DefaultConfig() Config {
	return Config{
		RaftListen:                   ":9191",
		Bootstrap:                    true,
		NodeLeaseTimeout:             10 * time.Second,
		TransactionCoordinatorShards: fsm.DefaultTxnShards,
		// 1 until replication between partition servers lands (docs/decisions.md).
		DefaultReplicationFactor: 1,
		DefaultCleanupPolicy:     "delete",
		MinInsyncReplicas:        1,
		RaftHeartbeatTimeout:     1000 * time.Millisecond,
		RaftElectionTimeout:      1000 * time.Millisecond,
		RaftLeaderLeaseTimeout:   500 * time.Millisecond,
		RaftSnapshotThreshold:    8192,
		RaftSnapshotInterval:     2 * time.Minute,
		RaftTrailingLogs:         10240,
		CoordinatorCheckTimeout:  5 * time.Second,
	}
}

// SingleVoter configures the all-in-one's mode: this node is the only voter
// (at its bound raft_listen address: the all-in-one's default is a loopback
// port of its own choosing, and a restart that binds another port updates
// the voter's address, see Role.ownAddress), and topics default to
// replication factor 1 (one partition server).
func (c *Config) SingleVoter() {
	c.Voters = nil
	c.Bootstrap = true
	c.RaftAdvertise = ""
	c.DefaultReplicationFactor = 1
}

// voter is one parsed Voters entry.
type voter struct{ id, addr string }

func parseVoters(list []string) ([]voter, error) {
	var out []voter
	seen := map[string]bool{}
	for _, v := range list {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		id, addr, ok := strings.Cut(v, "=")
		if !ok || pki.ValidNodeID(id) != nil {
			return nil, errcode.InvalidParameter.New(fmt.Sprintf("voter %q: want id=host:port with a valid node id", v), "param", "voters")
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, errcode.InvalidParameter.New(fmt.Sprintf("voter %q: %v", v, err), "param", "voters")
		}
		if seen[id] {
			return nil, errcode.InvalidParameter.New("voter "+id+" listed twice", "param", "voters")
		}
		seen[id] = true
		out = append(out, voter{id: id, addr: addr})
	}
	return out, nil
}

func (c Config) validate() error {
	if err := config.Check("metad", &c); err != nil {
		return err
	}
	if c.RaftListen == "" {
		return errcode.MissingParameter.New("raft_listen is required", "param", "raft_listen")
	}
	return nil
}

// tuneRaft applies the timing settings to raft's configuration; a zero
// setting keeps raft's default.
func (c Config) tuneRaft(rc *raft.Config) {
	setPositive(&rc.HeartbeatTimeout, c.RaftHeartbeatTimeout)
	setPositive(&rc.ElectionTimeout, c.RaftElectionTimeout)
	setPositive(&rc.LeaderLeaseTimeout, c.RaftLeaderLeaseTimeout)
	setPositive(&rc.SnapshotThreshold, c.RaftSnapshotThreshold)
	setPositive(&rc.SnapshotInterval, c.RaftSnapshotInterval)
	setPositive(&rc.TrailingLogs, c.RaftTrailingLogs)
}

// setPositive sets *dst to v when v is positive.
func setPositive[T time.Duration | uint64](dst *T, v T) {
	if v > 0 {
		*dst = v
	}
}

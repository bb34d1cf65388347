package wire

// ClusterStatus is Strata's CLUSTER_STATUS document, the JSON value of the
// reply's cluster field: the gateway encodes it, the client decodes it.
// Spec 4.4 names its content, not its field names; these are Strata's
// (docs/gateway.md, CLUSTER_STATUS).
type ClusterStatus struct {
	Brokers    ClusterBrokers    `json:"brokers"`
	RaftLeader ClusterRaftLeader `json:"raft_leader"`
	// RaftServers are metad's Raft configuration (voters and non-voters).
	RaftServers []ClusterRaftServer `json:"raft_servers"`
	// Partitions are the application topics' partitions, with the internal
	// topics' too when the request said internal=true.
	Partitions []ClusterPartition `json:"partitions"`
	// The two counts cover every partition, internal topics included: a
	// leaderless __consumer_offsets partition is what an operator must see.
	LeaderlessPartitions      int32         `json:"leaderless_partitions"`
	UnderReplicatedPartitions int32         `json:"under_replicated_partitions"`
	Topics                    ClusterTopics `json:"topics"`
	// InternalShown says whether Partitions include the internal topics.
	InternalShown bool   `json:"internal_shown"`
	Revision      uint64 `json:"revision"`
}

// ClusterBrokers are the registered nodes of CLUSTER_STATUS, by liveness.
type ClusterBrokers struct {
	Active   []ClusterNode `json:"active"`
	Inactive []ClusterNode `json:"inactive"`
}

// ClusterTopics counts the live topics (not being deleted).
type ClusterTopics struct {
	Application int `json:"application"`
	Internal    int `json:"internal"`
}

// ClusterNode is a broker of CLUSTER_STATUS.
type ClusterNode struct {
	ID            string `json:"id"`
	Role          string `json:"role"`
	RPCAddress    string `json:"rpc_address"`
	ClientAddress string `json:"client_address,omitempty"`
}

// ClusterRaftLeader is metad's Raft leader.
type ClusterRaftLeader struct {
	ID      string `json:"id"`
	Address string `json:"address"`
}

// ClusterRaftServer is a server of metad's Raft configuration.
type ClusterRaftServer struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	Suffrage string `json:"suffrage"`
}

// HWM sources of a ClusterPartition.
const (
	// HWMSourceLeader: the partition leader's LIST_OFFSETS answer, the value
	// LIST_OFFSETS and DESCRIBE report.
	HWMSourceLeader = "leader"
	// HWMSourceCheckpoint: metad's committed_hwm, a checkpoint that may lag
	// (the leader did not answer in time, or there is none).
	HWMSourceCheckpoint = "checkpoint"
)

// ClusterPartition is a partition of CLUSTER_STATUS.
type ClusterPartition struct {
	Topic       string   `json:"topic"`
	Partition   int32    `json:"partition"`
	Internal    bool     `json:"internal,omitempty"`
	Leader      string   `json:"leader"`
	LeaderEpoch uint64   `json:"leader_epoch"`
	HWM         uint64   `json:"hwm"`
	HWMSource   string   `json:"hwm_source"`
	Replicas    []string `json:"replicas"`
	ISR         []string `json:"isr"`
}

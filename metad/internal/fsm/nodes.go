package fsm

import (
	"slices"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// DefaultTxnShards is transaction_coordinator_shards when the configuration
// does not say otherwise (spec 8).
const DefaultTxnShards = 50

// MaxNodeIDLen bounds node ids (they appear in every partition's replica list).
const MaxNodeIDLen = 253

// applyInitCluster fixes the cluster-wide settings once. Repeating it with the
// same values is a no-op (every new Raft leader proposes it until it sticks);
// another transaction_coordinator_shards is refused: the value is immutable
// after cluster creation.
func applyInitCluster(tx *txn, cmd *metav1.InitClusterCommand) (*metav1.Snapshot, error) {
	shards := cmd.GetTransactionCoordinatorShards()
	if shards == 0 {
		return nil, errcode.InvalidParameter.New("transaction_coordinator_shards must be positive", "param", "transaction_coordinator_shards")
	}
	cur := tx.cur()
	if cur.initialized {
		if cur.txnShards != shards {
			return nil, errcode.TransactionShardsMismatch.New("transaction_coordinator_shards is fixed at cluster creation",
				"cluster", strconv.FormatUint(uint64(cur.txnShards), 10), "node", strconv.FormatUint(uint64(shards), 10))
		}
		return &metav1.Snapshot{TransactionCoordinatorShards: cur.txnShards}, nil
	}
	tx.settings = &settings{initialized: true, txnShards: shards, createdUnixMs: cmd.GetCreatedUnixMs()}
	return &metav1.Snapshot{TransactionCoordinatorShards: shards}, nil
}

// applyRegisterNode registers or re-registers a role instance and starts its
// lease at the proposer's time. A coordinatord must be configured with the
// cluster's transaction_coordinator_shards. A partition server that comes
// back with a new incarnation (a restart) is treated as possibly behind
// (RestartedReplica).
func applyRegisterNode(tx *txn, cmd *metav1.RegisterNodeCommand) (*metav1.RegisterNodeResponse, error) {
	in := cmd.GetNode()
	if err := validateNode(in); err != nil {
		return nil, err
	}
	if in.GetRole() == metav1.NodeRole_NODE_ROLE_COORDINATORD {
		cur := tx.cur()
		if !cur.initialized {
			return nil, errcode.ClusterMetadataUnavailable.New("cluster settings are not initialised yet", "command", "REGISTER_NODE")
		}
		if in.GetTransactionCoordinatorShards() != cur.txnShards {
			return nil, errcode.TransactionShardsMismatch.New("a coordinatord must use the cluster's transaction_coordinator_shards",
				"node_id", in.GetId(),
				"cluster", strconv.FormatUint(uint64(cur.txnShards), 10),
				"node", strconv.FormatUint(uint64(in.GetTransactionCoordinatorShards()), 10))
		}
	}
	old := tx.node(in.GetId())
	if old != nil && old.GetRole() != in.GetRole() {
		return nil, errcode.InvalidParameter.New("node id is registered with another role",
			"param", "role", "node_id", in.GetId(), "current", old.GetRole().String(), "requested", in.GetRole().String())
	}
	n := proto.CloneOf(in)
	n.Live = true
	n.LastHeartbeatUnixMs = cmd.GetNowUnixMs()
	n.LifecycleVersions = slices.Compact(slices.Sorted(slices.Values(in.GetLifecycleVersions())))
	tx.putNode(n)

	if old != nil && old.GetIncarnation() != n.GetIncarnation() && n.GetRole() == metav1.NodeRole_NODE_ROLE_PARTITIOND {
		tx.mapLivePartitions(func(p *metav1.PartitionState) *metav1.PartitionState {
			return RestartedReplica(p, n.GetId(), tx.isLivePartitiond)
		})
	}
	return &metav1.RegisterNodeResponse{Node: n}, nil
}

func validateNode(n *metav1.Node) error {
	id := n.GetId()
	switch {
	case id == "":
		return errcode.MissingParameter.New("node id is required", "param", "id")
	case len(id) > MaxNodeIDLen || !printableASCII(id):
		return errcode.InvalidParameter.New("node ids are 1-253 printable ASCII characters without spaces", "param", "id", "node_id", id)
	case n.GetIncarnation() == 0:
		return errcode.InvalidParameter.New("incarnation must be non-zero", "param", "incarnation", "node_id", id)
	}
	switch n.GetRole() {
	case metav1.NodeRole_NODE_ROLE_PARTITIOND, metav1.NodeRole_NODE_ROLE_COORDINATORD, metav1.NodeRole_NODE_ROLE_METAD:
		if n.GetRpcAddress() == "" {
			return errcode.MissingParameter.New("rpc_address is required for this role", "param", "rpc_address", "node_id", id)
		}
	case metav1.NodeRole_NODE_ROLE_GATEWAY:
		if n.GetClientAddress() == "" {
			return errcode.MissingParameter.New("a gateway must advertise its client_address", "param", "client_address", "node_id", id)
		}
	default:
		return errcode.InvalidParameter.New("unknown node role", "param", "role", "node_id", id, "role", n.GetRole().String())
	}
	return nil
}

func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// applyNodeHeartbeat renews a live node's lease. An unknown node, or one
// whose lease already expired, gets node_not_found so it registers again (the
// metaclient registrar does); a heartbeat from another incarnation is fenced.
func applyNodeHeartbeat(tx *txn, cmd *metav1.NodeHeartbeatCommand) (*metav1.NodeHeartbeatResponse, error) {
	n := tx.node(cmd.GetNodeId())
	if n == nil {
		return nil, errcode.NodeNotFound.New("node is not registered", "node", cmd.GetNodeId())
	}
	if n.GetIncarnation() != cmd.GetIncarnation() {
		return nil, errcode.StaleNodeIncarnation.New("heartbeat from another incarnation of the node",
			"node", cmd.GetNodeId(), "current", u64(n.GetIncarnation()), "requested", u64(cmd.GetIncarnation()))
	}
	if !n.GetLive() {
		return nil, errcode.NodeNotFound.New("the node's lease expired; register again", "node", cmd.GetNodeId())
	}
	if cmd.GetNowUnixMs() > n.GetLastHeartbeatUnixMs() {
		nn := proto.CloneOf(n)
		nn.LastHeartbeatUnixMs = cmd.GetNowUnixMs()
		tx.putNode(nn)
	}
	return &metav1.NodeHeartbeatResponse{}, nil
}

// RestartedReplica is the rule for a partition when replica id restarted (new
// incarnation): the restarted process is not trusted to be in sync — it
// leaves the ISR and, if it led, leadership moves to the first live in-sync
// replica with the epoch raised by one; the leader re-adds it with ALTER_ISR
// once it has caught up. When it is the only in-sync replica it stays (it
// holds the only copy of every committed record), and if it leads, the
// epoch still rises so the old process's leadership is fenced. It returns p
// itself when nothing changes.
func RestartedReplica(p *metav1.PartitionState, id string, live func(string) bool) *metav1.PartitionState {
	if !slices.Contains(p.GetIsr(), id) {
		return p
	}
	var others []string
	for _, r := range p.GetIsr() {
		if r != id && live(r) {
			others = append(others, r)
		}
	}
	if len(others) == 0 {
		if p.GetLeader() != id {
			return p
		}
		np := proto.CloneOf(p)
		np.LeaderEpoch++
		return np
	}
	np := proto.CloneOf(p)
	np.Isr = slices.DeleteFunc(slices.Clone(p.GetIsr()), func(r string) bool { return r == id })
	if p.GetLeader() == id {
		for _, r := range p.GetReplicas() {
			if slices.Contains(others, r) {
				np.Leader = r
				break
			}
		}
		np.LeaderEpoch++
	}
	return np
}

// Package groups maps a consumer group to the coordinatord that owns it, the
// same way on every node: the group name picks a __consumer_offsets
// partition (FNV-1a 32 of the name modulo the partition count), and the
// partition's ring key (ring.GroupPartitionKey) picks a live coordinatord on
// the consistent-hash ring. coordinatord uses it to decide what it serves;
// the gateway uses it to route group commands.
package groups

import (
	"github.com/strataio/strata/libs/metaclient"
	"github.com/strataio/strata/libs/placement"
	"github.com/strataio/strata/libs/ring"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// OffsetsTopic is the broker-owned internal topic holding group
// registrations, tombstones and committed offsets.
const OffsetsTopic = "__consumer_offsets"

// DefaultOffsetsPartitions is the partition count of OffsetsTopic when the
// topic does not exist yet.
const DefaultOffsetsPartitions = 16

// Partition returns the OffsetsTopic partition of group among n partitions
// (n <= 0 counts as DefaultOffsetsPartitions). The hash is fixed forever:
// changing it would move every group away from its stored state.
func Partition(group string, n int32) int32 {
	if n <= 0 {
		n = DefaultOffsetsPartitions
	}
	return placement.GroupPartition(group, n)
}

// OffsetsPartitions returns the partition count of OffsetsTopic in v, or
// def (DefaultOffsetsPartitions when def <= 0) while the topic is missing.
// The topic's count wins over configuration so every node agrees.
func OffsetsPartitions(v *metaclient.View, def int32) int32 {
	if def <= 0 {
		def = DefaultOffsetsPartitions
	}
	if v == nil {
		return def
	}
	if t, ok := v.Topic(OffsetsTopic); ok && t.GetConfig().GetPartitions() > 0 {
		return t.GetConfig().GetPartitions()
	}
	return def
}

// Ring returns the ring of live coordinatord nodes in v.
func Ring(v *metaclient.View) *ring.Ring {
	nodes := v.Nodes(metav1.NodeRole_NODE_ROLE_COORDINATORD, true)
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		ids[i] = n.GetId()
	}
	return ring.New(ids, 0)
}

// PartitionOwner returns the node id owning OffsetsTopic partition p on r
// ("" when no coordinatord is live).
func PartitionOwner(r *ring.Ring, p int32) string {
	return r.Owner(ring.GroupPartitionKey(p))
}

// Coordinator returns the coordinatord node owning group in v, with the
// group's OffsetsTopic partition. ok is false when no coordinatord is live.
// def is the configured partition count used while the topic is missing.
func Coordinator(v *metaclient.View, group string, def int32) (node *metav1.Node, partition int32, ok bool) {
	partition = Partition(group, OffsetsPartitions(v, def))
	id := PartitionOwner(Ring(v), partition)
	if id == "" {
		return nil, partition, false
	}
	node, ok = v.Node(id)
	return node, partition, ok
}

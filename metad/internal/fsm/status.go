package fsm

import (
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// ClusterStatus aggregates the state for CLUSTER_STATUS (spec 2.6): every
// node (active and inactive), every live topic with its partitions, the
// number of offline partitions (no leader) and of under-replicated ones (ISR
// smaller than the replica set). The Raft fields are the node layer's to
// fill in.
func (s *State) ClusterStatus() *metav1.ClusterStatusResponse {
	out := &metav1.ClusterStatusResponse{
		Nodes:    s.Nodes(metav1.NodeRole_NODE_ROLE_UNSPECIFIED, false),
		Revision: s.revision,
	}
	for _, t := range s.Topics() {
		if !Live(t) {
			continue
		}
		out.Topics = append(out.Topics, t)
		for _, p := range t.GetPartitions() {
			if p.GetLeader() == "" {
				out.OfflinePartitions++
			}
			if len(p.GetIsr()) < len(p.GetReplicas()) {
				out.UnderReplicatedPartitions++
			}
		}
	}
	return out
}

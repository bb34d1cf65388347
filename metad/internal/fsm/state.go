package fsm

import (
	"slices"
	"strings"

	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// ConsumerOffsetsTopic is the broker-owned internal topic (spec 2.1): it can
// be neither deleted nor truncated.
const ConsumerOffsetsTopic = "__consumer_offsets"

// TransactionStateTopic is the transaction coordinator's internal topic
// (docs/transactions.md): one partition per transaction coordinator shard,
// protected like ConsumerOffsetsTopic.
const TransactionStateTopic = "__transaction_state"

// State is the replicated metadata. It is read under the FSM's lock (see
// FSM.Read); the objects it returns are immutable and may be kept.
type State struct {
	revision      uint64
	initialized   bool
	txnShards     uint32
	createdUnixMs int64
	topics        map[string]*metav1.Topic
	nodes         map[string]*metav1.Node
}

func newState() *State {
	return &State{topics: map[string]*metav1.Topic{}, nodes: map[string]*metav1.Node{}}
}

// Revision is the watch revision of the last committed change.
func (s *State) Revision() uint64 { return s.revision }

// Initialized reports whether the cluster settings were fixed (InitCluster).
func (s *State) Initialized() bool { return s.initialized }

// TxnShards is transaction_coordinator_shards, fixed at cluster creation (0
// before InitCluster).
func (s *State) TxnShards() uint32 { return s.txnShards }

// CreatedUnixMs is the cluster creation time the first leader proposed.
func (s *State) CreatedUnixMs() int64 { return s.createdUnixMs }

// Topic returns a topic by name, including one in state DELETING.
func (s *State) Topic(name string) (*metav1.Topic, bool) {
	t, ok := s.topics[name]
	return t, ok
}

// Topics returns every topic sorted by name, including DELETING ones.
func (s *State) Topics() []*metav1.Topic {
	out := make([]*metav1.Topic, 0, len(s.topics))
	for _, t := range s.topics {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *metav1.Topic) int { return strings.Compare(a.GetConfig().GetName(), b.GetConfig().GetName()) })
	return out
}

// Node returns a node by id.
func (s *State) Node(id string) (*metav1.Node, bool) {
	n, ok := s.nodes[id]
	return n, ok
}

// Nodes returns the nodes of role (every role when unspecified), sorted by
// id; liveOnly drops nodes whose lease expired.
func (s *State) Nodes(role metav1.NodeRole, liveOnly bool) []*metav1.Node {
	out := make([]*metav1.Node, 0, len(s.nodes))
	for _, n := range s.nodes {
		if role != metav1.NodeRole_NODE_ROLE_UNSPECIFIED && n.GetRole() != role {
			continue
		}
		if liveOnly && !n.GetLive() {
			continue
		}
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b *metav1.Node) int { return strings.Compare(a.GetId(), b.GetId()) })
	return out
}

// Snapshot returns the whole state as the Watch stream's snapshot message.
func (s *State) Snapshot() *metav1.Snapshot {
	return &metav1.Snapshot{Topics: s.Topics(), Nodes: s.Nodes(metav1.NodeRole_NODE_ROLE_UNSPECIFIED, false), TransactionCoordinatorShards: s.txnShards}
}

// EffectiveMinISR is the min_in_sync_replicas a topic enforces: its override,
// else the broker-level default.
func EffectiveMinISR(cfg *metav1.TopicConfig, brokerDefault int32) int32 {
	if cfg.MinInSyncReplicas != nil {
		return cfg.GetMinInSyncReplicas()
	}
	return brokerDefault
}

// Live reports whether a topic is visible to clients (not being deleted).
func Live(t *metav1.Topic) bool {
	return t != nil && t.GetConfig().GetState() == metav1.TopicState_TOPIC_STATE_ACTIVE
}

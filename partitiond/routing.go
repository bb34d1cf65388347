package partitiond

import (
	"context"
	"strconv"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/metaclient"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/rpc"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"

	"github.com/strataio/strata/partitiond/internal/partition"
)

func itoa(v int32) string { return strconv.Itoa(int(v)) }

// route is what a request learns from metad about its partition.
type route struct {
	topic *metav1.Topic
	state *metav1.PartitionState
	part  *partition.Partition
	// isr and minISRReplicated are the replication manager's view of the
	// leadership: the ISR size and effective minimum acks=all checks.
	isr              int
	minISRReplicated int
}

// lifecycleEpoch is the lifecycle epoch a request names, or the
// partition's current one for 0: an unfenced request (the caller did not
// route by epoch) works on the current lifecycle epoch.
func (rt *route) lifecycleEpoch(requested uint64) uint64 {
	if requested == 0 {
		return rt.part.LifecycleEpoch()
	}
	return requested
}

// minISR is the effective minimum ISR of the topic (override, else broker).
func (rt *route) minISR(def int) int {
	if v := rt.topic.GetConfig().MinInSyncReplicas; v != nil && *v > 0 {
		return int(*v)
	}
	return def
}

// activeTopic reports whether the view lists topic as ACTIVE.
func activeTopic(v *metaclient.View, topic string) bool {
	t, ok := v.Topic(topic)
	return ok && t.GetConfig().GetState() != metav1.TopicState_TOPIC_STATE_DELETING
}

// view returns metad's view for a request on topic. When the view does not
// list the topic as ACTIVE it waits, at most cfg.ViewCatchUp, for a view
// that does: the caller routed by its own view, which can be ahead of this
// node's (a topic created, or deleted and created again, a moment ago), and
// topic_not_found is final for clients.
func (r *Role) view(ctx context.Context, topic string) *metaclient.View {
	v := r.meta.Cache().View()
	if !v.Ready() || activeTopic(v, topic) || r.cfg.ViewCatchUp <= 0 {
		return v
	}
	wctx, cancel := context.WithTimeout(ctx, r.cfg.ViewCatchUp)
	defer cancel()
	v, _ = r.meta.Cache().WaitFor(wctx, func(v *metaclient.View) bool { return activeTopic(v, topic) })
	return v
}

// lead resolves a request for topic/partition: the topic must exist and be
// ACTIVE in metad's view (topic_not_found otherwise, also while DELETING,
// after waiting briefly for the view to catch up), the partition must exist
// (partition_not_found), this node must lead it (NOT_LEADER with the
// leader's RPC address, leader_not_found when the partition is offline) and
// host it locally.
func (r *Role) lead(ctx context.Context, topic string, id int32) (*route, error) {
	if topic == "" {
		return nil, errcode.MissingTopic.New("topic is required", "param", "topic")
	}
	if id < 0 {
		return nil, errcode.InvalidPartition.New("partition must not be negative", "topic", topic, "partition", itoa(id))
	}
	st, err := r.storage()
	if err != nil {
		return nil, err
	}
	v := r.view(ctx, topic)
	if !v.Ready() {
		return nil, errcode.ClusterMetadataUnavailable.New("metadata cache not synced with metad yet")
	}
	t, ps, ok := v.Partition(topic, id)
	if t == nil || t.GetConfig().GetState() == metav1.TopicState_TOPIC_STATE_DELETING {
		return nil, errcode.TopicNotFound.New("unknown topic", "topic", topic)
	}
	if !ok {
		return nil, errcode.PartitionNotFound.New("unknown partition", "topic", topic, "partition", itoa(id))
	}
	if ps.GetLeader() != r.env.NodeID {
		return nil, notLeader(v, topic, id, ps.GetLeader())
	}
	p, err := st.Partition(topic, id)
	if err != nil {
		if errcode.CodeOf(err) == errcode.PartitionNotFound.Name() {
			// metad already names this node the leader; reconciliation has
			// not opened it yet. Retryable, unlike partition_not_found.
			r.rec.poke()
			return nil, errcode.LeaderNotFound.New("partition is being opened on its leader", "topic", topic, "partition", itoa(id))
		}
		return nil, err
	}
	rt := &route{topic: t, state: ps, part: p}
	if m := r.repl.Load(); m != nil {
		var led bool
		if rt.isr, rt.minISRReplicated, led = m.Leading(topic, id); !led {
			// The view names this node; the replication manager has not
			// taken the leadership up yet (its HWM is not established).
			r.rec.poke()
			return nil, errcode.LeaderNotFound.New("partition leadership is being taken up on this node", "topic", topic, "partition", itoa(id))
		}
	}
	return rt, nil
}

// local resolves a replica read (FetchRequest.replica_read): this node's own
// copy of the partition, leader or follower, for admin callers only.
func (r *Role) local(ctx context.Context, topic string, id int32) (*route, error) {
	if who, _ := rpc.PeerIdentity(ctx); who.Role != pki.RoleAdmin {
		return nil, errcode.PeerRoleForbidden.New("replica reads are for admin callers", "role", string(who.Role))
	}
	p, err := r.localPartition(topic, id)
	if err != nil {
		return nil, err
	}
	return &route{part: p}, nil
}

// localPartition returns this node's copy of a partition, whatever its
// role in it.
func (r *Role) localPartition(topic string, id int32) (*partition.Partition, error) {
	st, err := r.storage()
	if err != nil {
		return nil, err
	}
	return st.Partition(topic, id)
}

// notLeader builds the routing answer for a partition another node leads.
func notLeader(v *metaclient.View, topic string, id int32, leader string) error {
	if leader == "" {
		return errcode.LeaderNotFound.New("partition has no leader", "topic", topic, "partition", itoa(id))
	}
	addr := ""
	if n, ok := v.Node(leader); ok {
		addr = n.GetRpcAddress()
	}
	if addr == "" {
		return errcode.LeaderNotFound.New("partition leader has no known address", "topic", topic, "partition", itoa(id), "leader_id", leader)
	}
	return errcode.NotLeader.New("this node does not lead the partition", "leader", addr, "leader_id", leader,
		"topic", topic, "partition", itoa(id))
}

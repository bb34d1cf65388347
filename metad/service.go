package metad

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/rpc"
	"github.com/strataio/strata/metad/internal/fsm"
	coordv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// propose replicates a command on the leader and returns the handler's
// response as T.
func propose[T any](ctx context.Context, r *Role, payload proto.Message) (T, error) {
	var zero T
	n, err := r.raftNode()
	if err != nil {
		return zero, err
	}
	res, err := n.Propose(ctx, payload)
	r.metrics.observeCommand(payload, err)
	if err != nil {
		return zero, err
	}
	out, ok := res.Response.(T)
	if !ok {
		return zero, errcode.Internal.New(fmt.Sprintf("unexpected response %T for %s", res.Response, commandName(payload)))
	}
	return out, nil
}

// service implements MetadataService over the role.
type service struct {
	metav1.UnimplementedMetadataServiceServer
	r *Role
}

func callerRole(ctx context.Context) pki.Role {
	id, _ := rpc.PeerIdentity(ctx)
	return id.Role
}

func (s *service) effectiveMinISR(t *metav1.Topic) int32 {
	return fsm.EffectiveMinISR(t.GetConfig(), s.r.cfg.MinInsyncReplicas)
}

// CreateTopic creates or patches a topic. Gateways (client commands) may not
// create internal topics; a coordinatord may create only the offsets and
// transaction state topics.
func (s *service) CreateTopic(ctx context.Context, req *metav1.CreateTopicRequest) (*metav1.CreateTopicResponse, error) {
	switch callerRole(ctx) {
	case pki.RoleGateway:
		if req.GetInternal() {
			return nil, errcode.InternalTopicWriteForbidden.New("internal topics are created by the broker", "topic", req.GetName())
		}
	case pki.RoleCoordinatord:
		if req.GetName() != fsm.ConsumerOffsetsTopic && req.GetName() != fsm.TransactionStateTopic {
			return nil, errcode.PeerRoleForbidden.New("coordinatord may create only "+fsm.ConsumerOffsetsTopic+" and "+fsm.TransactionStateTopic,
				"method", "CreateTopic", "role", string(pki.RoleCoordinatord))
		}
	}
	r, err := propose[*metav1.CreateTopicResponse](ctx, s.r, &metav1.CreateTopicCommand{
		Request:  req,
		Defaults: &metav1.TopicDefaults{ReplicationFactor: s.r.cfg.DefaultReplicationFactor, CleanupPolicy: s.r.cfg.DefaultCleanupPolicy},
	})
	if err != nil {
		return nil, err
	}
	// The FSM's response shares committed objects: build a new one.
	return &metav1.CreateTopicResponse{Topic: r.GetTopic(), Created: r.GetCreated(), Changed: r.GetChanged(),
		EffectiveMinInSyncReplicas: s.effectiveMinISR(r.GetTopic())}, nil
}

// AlterTopicConfig replaces a topic's min ISR override.
func (s *service) AlterTopicConfig(ctx context.Context, req *metav1.AlterTopicConfigRequest) (*metav1.AlterTopicConfigResponse, error) {
	r, err := propose[*metav1.AlterTopicConfigResponse](ctx, s.r, req)
	if err != nil {
		return nil, err
	}
	return &metav1.AlterTopicConfigResponse{Topic: r.GetTopic(), EffectiveMinInSyncReplicas: s.effectiveMinISR(r.GetTopic())}, nil
}

// DeleteTopic deletes a topic after checking no group is active on it.
func (s *service) DeleteTopic(ctx context.Context, req *metav1.DeleteTopicRequest) (*metav1.DeleteTopicResponse, error) {
	if err := s.guardTopicLifecycle(ctx, req.GetName(), "DELETE"); err != nil {
		return nil, err
	}
	return propose[*metav1.DeleteTopicResponse](ctx, s.r, req)
}

// TruncateTopic truncates a topic after checking no group is active on it.
func (s *service) TruncateTopic(ctx context.Context, req *metav1.TruncateTopicRequest) (*metav1.TruncateTopicResponse, error) {
	if err := s.guardTopicLifecycle(ctx, req.GetName(), "TRUNCATE"); err != nil {
		return nil, err
	}
	return propose[*metav1.TruncateTopicResponse](ctx, s.r, req)
}

// guardTopicLifecycle is the DELETE/TRUNCATE guard that is not metad state
// (spec 4.4): every live coordinatord is asked whether groups it owns have
// active members on the topic. It fails closed — an unreachable coordinator
// is coordinator_not_available (retryable), not a silent pass. Only the
// leader asks (followers redirect first), and only for an active,
// non-internal topic: everything else the FSM rejects or answers itself.
func (s *service) guardTopicLifecycle(ctx context.Context, topic, command string) error {
	n, err := s.r.linearize(ctx)
	if err != nil {
		return err
	}
	var coords []*metav1.Node
	check := false
	n.FSM().Read(func(st *fsm.State) {
		if t, ok := st.Topic(topic); ok && fsm.Live(t) && !t.GetConfig().GetInternal() {
			check = true
			coords = st.Nodes(metav1.NodeRole_NODE_ROLE_COORDINATORD, true)
		}
	})
	if !check || len(coords) == 0 {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, s.r.cfg.CoordinatorCheckTimeout)
	defer cancel()
	type answer struct {
		node   string
		resp   *coordv1.TopicActivityResponse
		err    error
		addrOK bool
	}
	answers := make([]answer, len(coords))
	var wg sync.WaitGroup
	for i, c := range coords {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i].node = c.GetId()
			conn, err := s.r.env.Clients.Get(c.GetRpcAddress())
			if err != nil {
				answers[i].err = err
				return
			}
			answers[i].resp, answers[i].err = coordv1.NewCoordinatorServiceClient(conn).TopicActivity(cctx, &coordv1.TopicActivityRequest{Topic: topic})
		}()
	}
	wg.Wait()
	for _, a := range answers {
		if a.err != nil {
			return errcode.CoordinatorNotAvailable.New(fmt.Sprintf("cannot confirm that no group is active on the topic: coordinator %s: %v", a.node, a.err),
				"command", command, "topic", topic)
		}
		if a.resp.GetActiveMembers() {
			return errcode.TopicDeleteBlocked.New("a consumer group with active members uses the topic",
				"command", command, "topic", topic, "groups", fmt.Sprint(a.resp.GetGroups()))
		}
		if txns := a.resp.GetActiveTransactions(); len(txns) > 0 {
			return errcode.TopicDeleteBlocked.New("an open or committing transaction uses the topic",
				"command", command, "topic", topic, "transactions", fmt.Sprint(txns))
		}
	}
	return nil
}

// GetTopic reads an active topic (linearizable, leader only).
func (s *service) GetTopic(ctx context.Context, req *metav1.GetTopicRequest) (*metav1.GetTopicResponse, error) {
	n, err := s.r.linearize(ctx)
	if err != nil {
		return nil, err
	}
	var t *metav1.Topic
	n.FSM().Read(func(st *fsm.State) { t, _ = st.Topic(req.GetName()) })
	if !fsm.Live(t) {
		return nil, errcode.TopicNotFound.New("", "topic", req.GetName())
	}
	return &metav1.GetTopicResponse{Topic: t, EffectiveMinInSyncReplicas: s.effectiveMinISR(t)}, nil
}

// ListTopics lists active topics, internal ones on request.
func (s *service) ListTopics(ctx context.Context, req *metav1.ListTopicsRequest) (*metav1.ListTopicsResponse, error) {
	n, err := s.r.linearize(ctx)
	if err != nil {
		return nil, err
	}
	out := &metav1.ListTopicsResponse{}
	n.FSM().Read(func(st *fsm.State) {
		for _, t := range st.Topics() {
			if fsm.Live(t) && (req.GetIncludeInternal() || !t.GetConfig().GetInternal()) {
				out.Topics = append(out.Topics, t)
			}
		}
		out.Revision = st.Revision()
	})
	return out, nil
}

// checkNodeRole keeps a role from registering or renewing a node of another
// role (a gateway certificate cannot announce a partition server).
func checkNodeRole(ctx context.Context, role metav1.NodeRole) error {
	want := map[pki.Role]metav1.NodeRole{
		pki.RoleGateway:      metav1.NodeRole_NODE_ROLE_GATEWAY,
		pki.RolePartitiond:   metav1.NodeRole_NODE_ROLE_PARTITIOND,
		pki.RoleCoordinatord: metav1.NodeRole_NODE_ROLE_COORDINATORD,
	}
	r := callerRole(ctx)
	if w, ok := want[r]; ok && w != role {
		return errcode.PeerRoleForbidden.New("a node may only register or renew nodes of its own role",
			"role", string(r), "node_role", role.String())
	}
	return nil
}

// RegisterNode registers a node and starts its lease.
func (s *service) RegisterNode(ctx context.Context, req *metav1.RegisterNodeRequest) (*metav1.RegisterNodeResponse, error) {
	if err := checkNodeRole(ctx, req.GetNode().GetRole()); err != nil {
		return nil, err
	}
	r, err := propose[*metav1.RegisterNodeResponse](ctx, s.r, &metav1.RegisterNodeCommand{Node: req.GetNode(), NowUnixMs: time.Now().UnixMilli()})
	if err != nil {
		return nil, err
	}
	return &metav1.RegisterNodeResponse{Node: r.GetNode(), LeaseTimeoutMs: s.r.cfg.NodeLeaseTimeout.Milliseconds()}, nil
}

// NodeHeartbeat renews a node's lease.
func (s *service) NodeHeartbeat(ctx context.Context, req *metav1.NodeHeartbeatRequest) (*metav1.NodeHeartbeatResponse, error) {
	n, err := s.r.raftNode()
	if err != nil {
		return nil, err
	}
	if r := callerRole(ctx); r != pki.RoleAdmin && r != pki.RoleMetad {
		var nd *metav1.Node
		n.FSM().Read(func(st *fsm.State) { nd, _ = st.Node(req.GetNodeId()) })
		if nd != nil {
			if err := checkNodeRole(ctx, nd.GetRole()); err != nil {
				return nil, err
			}
		}
	}
	if _, err := propose[*metav1.NodeHeartbeatResponse](ctx, s.r, &metav1.NodeHeartbeatCommand{
		NodeId: req.GetNodeId(), Incarnation: req.GetIncarnation(), NowUnixMs: time.Now().UnixMilli(),
	}); err != nil {
		return nil, err
	}
	return &metav1.NodeHeartbeatResponse{LeaseTimeoutMs: s.r.cfg.NodeLeaseTimeout.Milliseconds()}, nil
}

// ShutdownNode is a node's controlled shutdown: only the node itself (its
// certificate names it) or an admin may ask.
func (s *service) ShutdownNode(ctx context.Context, req *metav1.ShutdownNodeRequest) (*metav1.ShutdownNodeResponse, error) {
	if id, _ := rpc.PeerIdentity(ctx); id.Role != pki.RoleAdmin && id.Role != pki.RoleMetad && id.NodeID != req.GetNodeId() {
		return nil, errcode.PeerRoleForbidden.New("a node may only shut itself down", "node_id", req.GetNodeId(), "caller", id.String())
	}
	return propose[*metav1.ShutdownNodeResponse](ctx, s.r, req)
}

// ListNodes lists every registered node, live or not.
func (s *service) ListNodes(ctx context.Context, _ *metav1.ListNodesRequest) (*metav1.ListNodesResponse, error) {
	n, err := s.r.linearize(ctx)
	if err != nil {
		return nil, err
	}
	out := &metav1.ListNodesResponse{}
	n.FSM().Read(func(st *fsm.State) { out.Nodes = st.Nodes(metav1.NodeRole_NODE_ROLE_UNSPECIFIED, false) })
	return out, nil
}

// ElectLeader moves partition leadership to an in-sync live replica.
func (s *service) ElectLeader(ctx context.Context, req *metav1.ElectLeaderRequest) (*metav1.ElectLeaderResponse, error) {
	return propose[*metav1.ElectLeaderResponse](ctx, s.r, req)
}

// AlterIsr changes a partition's ISR (compare-and-set on the leader epoch).
// A partition server asks for itself: requested_by must be the node its
// certificate names (the FSM then checks it leads).
func (s *service) AlterIsr(ctx context.Context, req *metav1.AlterIsrRequest) (*metav1.AlterIsrResponse, error) {
	if id, _ := rpc.PeerIdentity(ctx); id.Role == pki.RolePartitiond && req.GetRequestedBy() != id.NodeID {
		return nil, errcode.PeerRoleForbidden.New("an ISR change names its requester: the calling partition server",
			"requested_by", req.GetRequestedBy(), "caller", id.String())
	}
	return propose[*metav1.AlterIsrResponse](ctx, s.r, req)
}

// CheckpointHwm records a partition's committed high watermark.
func (s *service) CheckpointHwm(ctx context.Context, req *metav1.CheckpointHwmRequest) (*metav1.CheckpointHwmResponse, error) {
	return propose[*metav1.CheckpointHwmResponse](ctx, s.r, req)
}

// ReportCleanup records a node's finished cleanup of a topic.
func (s *service) ReportCleanup(ctx context.Context, req *metav1.ReportCleanupRequest) (*metav1.ReportCleanupResponse, error) {
	return propose[*metav1.ReportCleanupResponse](ctx, s.r, req)
}

// ClusterStatus aggregates the metadata and adds the Raft leader and
// servers. raft_leader_address is the leader's Raft address, like the
// addresses in raft_servers; its gRPC address is in the metad node entry.
func (s *service) ClusterStatus(ctx context.Context, _ *metav1.ClusterStatusRequest) (*metav1.ClusterStatusResponse, error) {
	n, err := s.r.linearize(ctx)
	if err != nil {
		return nil, err
	}
	var out *metav1.ClusterStatusResponse
	n.FSM().Read(func(st *fsm.State) { out = st.ClusterStatus() })
	addr, id := n.Raft().LeaderWithID()
	out.RaftLeaderId, out.RaftLeaderAddress = string(id), string(addr)
	if f := n.Raft().GetConfiguration(); f.Error() == nil {
		for _, srv := range f.Configuration().Servers {
			suffrage := "nonvoter"
			if srv.Suffrage == raft.Voter {
				suffrage = "voter"
			}
			out.RaftServers = append(out.RaftServers, &metav1.RaftServer{Id: string(srv.ID), Address: string(srv.Address), Suffrage: suffrage})
		}
	}
	return out, nil
}

// leaderCheckInterval is how often a Watch stream checks that this node
// still leads; a deposed leader ends its streams with NOT_LEADER so
// watchers move to the new leader instead of following a stale replica.
const leaderCheckInterval = 250 * time.Millisecond

// Watch streams the metadata: the backlog after from_revision — or one full
// snapshot when that is 0, no longer retained or unknown — then every change
// as it commits, each with its revision. A watcher whose buffer overflows
// (too far behind) is ended with a retryable error and resumes from its last
// revision, getting a fresh snapshot when the history no longer covers it.
func (s *service) Watch(req *metav1.WatchRequest, stream grpc.ServerStreamingServer[metav1.WatchResponse]) error {
	ctx := stream.Context()
	n, err := s.r.linearize(ctx)
	if err != nil {
		return err
	}
	// INIT_CLUSTER emits no watch event, so a snapshot taken before it would
	// leave watchers without transaction_coordinator_shards for good. The
	// new leader proposes it at once; until then watchers retry.
	var initialized bool
	n.FSM().Read(func(st *fsm.State) { initialized = st.Initialized() })
	if !initialized {
		return errcode.ClusterMetadataUnavailable.New("cluster settings are not initialised yet", "command", "WATCH")
	}
	backlog, sub := n.FSM().Watch(req.GetFromRevision())
	defer sub.Close()
	s.r.metrics.watchStreams.Inc()
	defer s.r.metrics.watchStreams.Dec()
	send := func(ev *metav1.WatchResponse) error {
		if ev.GetSnapshot() != nil {
			s.r.metrics.watchSnaps.Inc()
		}
		s.r.metrics.watchEvents.Inc()
		return stream.Send(ev)
	}
	for _, ev := range backlog {
		if err := send(ev); err != nil {
			return err
		}
	}
	tick := time.NewTicker(leaderCheckInterval)
	defer tick.Stop()
	for {
		select {
		case ev := <-sub.C():
			if err := send(ev); err != nil {
				return err
			}
		case <-sub.Done():
			// Events already queued are valid and in order: deliver them
			// so the watcher resumes from as late as possible.
		drain:
			for {
				select {
				case ev := <-sub.C():
					if err := send(ev); err != nil {
						return err
					}
				default:
					break drain
				}
			}
			if err := sub.Err(); err != nil {
				return err
			}
			return errcode.ClusterMetadataUnavailable.New("watch ended")
		case <-tick.C:
			if !n.IsLeader() {
				if err := n.VerifyLeader(ctx); err != nil {
					return err // NOT_LEADER with the new leader, or no_raft_leader
				}
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

package metadfake

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/fake/fakerpc"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	"github.com/strataio/strata/libs/rpc"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// Options configures a fake metad. The zero value is a leader with node id
// "m1" that every role may call.
type Options struct {
	// ID is the fake's node id (its certificate, ClusterStatus's Raft
	// leader); default "m1".
	ID string
	// Callers are the roles allowed to call; empty allows every role.
	Callers []pki.Role
	// Telemetry traces the fake's server side (zero: off).
	Telemetry rpc.Telemetry
	// LeaseTimeout is the node lease RegisterNode and NodeHeartbeat answer
	// (default 3 s); callers heartbeat at a fraction of it.
	LeaseTimeout time.Duration
	// DefaultPartitions is the partition count of a CreateTopic that names
	// none; 0 refuses such a request with invalid_parameter.
	DefaultPartitions int32
	// Placement is the node id every partition of a created topic is placed
	// on (replica, ISR and leader). Empty: the partitiond node with the
	// lowest id known at the time, or "p1" when there is none.
	Placement string
	// DeleteLeavesCleanup makes DeleteTopic leave the topic DELETING with
	// every replica in cleanup_pending_nodes until ReportCleanup clears them,
	// as metad does; otherwise the topic is removed at once.
	DeleteLeavesCleanup bool
	// NoWatchSnapshot starts every Watch stream with the next event instead
	// of a snapshot, so a test scripts whole streams with Emit.
	NoWatchSnapshot bool
}

// TxnShards is the transaction coordinator shard count the fake's
// snapshots carry (the cluster default).
const TxnShards = 50

// Server is the fake metad. Its MetadataService methods may also be called
// directly (without gRPC) to change its state as a caller would.
type Server struct {
	metav1.UnimplementedMetadataServiceServer
	fakerpc.Controls
	*fakerpc.Server // Addr, Stop, Dial

	o Options

	mu       sync.Mutex
	rev      uint64
	topics   map[string]*metav1.Topic
	nodes    map[string]*metav1.Node
	events   []*metav1.WatchResponse // every event ever sent, in order
	changed  chan struct{}           // closed and replaced on every event
	watchers map[*watcher]struct{}
	leader   string // "" = this fake leads; else NOT_LEADER naming it
	created  int
}

type watcher struct {
	broken chan struct{}
	err    error
}

// Start serves a fake metad on loopback with a metad certificate of ca
// until the test ends.
func Start(t testing.TB, ca *pkitest.PKI, o Options) *Server {
	t.Helper()
	if o.ID == "" {
		o.ID = "m1"
	}
	if o.LeaseTimeout == 0 {
		o.LeaseTimeout = 3 * time.Second
	}
	s := &Server{o: o, topics: map[string]*metav1.Topic{}, nodes: map[string]*metav1.Node{},
		changed: make(chan struct{}), watchers: map[*watcher]struct{}{}}
	s.Record("ReportCleanup", "CheckpointHwm")
	// Installed first, so the redirect comes before any test hook.
	s.On("", 0, s.redirect)
	s.Server = fakerpc.Serve(t, ca, fakerpc.Options{Role: pki.RoleMetad, ID: o.ID, Callers: o.Callers, Telemetry: o.Telemetry},
		fakerpc.Service{Desc: &metav1.MetadataService_ServiceDesc, Impl: s, Controls: &s.Controls})
	return s
}

// SetLeader makes the fake a follower of the metad at addr: every call
// answers not_leader naming addr in field "leader". "" makes it lead again.
func (s *Server) SetLeader(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leader = addr
}

func (s *Server) redirect(_ context.Context, _ proto.Message, next fakerpc.Next) (proto.Message, error) {
	s.mu.Lock()
	leader := s.leader
	s.mu.Unlock()
	if leader != "" {
		return nil, errcode.NotLeader.New("not the metad leader", "leader", leader)
	}
	return next()
}

// publishLocked records a state change as the event at the next revision.
func (s *Server) publishLocked(ev *metav1.WatchResponse) {
	s.rev++
	ev.Revision = s.rev
	s.appendEventLocked(ev)
}

func (s *Server) appendEventLocked(ev *metav1.WatchResponse) {
	s.events = append(s.events, ev)
	close(s.changed)
	s.changed = make(chan struct{})
}

// Emit sends ev, exactly as given (its revision too), to every open Watch
// stream without changing the state; streams opened later do not see it.
// With Watching it lets a test script the events a watcher receives.
func (s *Server) Emit(ev *metav1.WatchResponse) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.appendEventLocked(proto.CloneOf(ev))
}

// BreakWatches ends every open Watch stream with err (a retryable error
// makes a client reconnect). The streams stop counting in Watching at once.
func (s *Server) BreakWatches(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for w := range s.watchers {
		w.err = err
		close(w.broken)
		delete(s.watchers, w)
	}
}

// Watching returns how many Watch streams are open and past their first
// message, so an Emit reaches them.
func (s *Server) Watching() int { return locked(s, func() int { return len(s.watchers) }) }

// Revision returns the revision of the last state change.
func (s *Server) Revision() uint64 { return locked(s, func() uint64 { return s.rev }) }

// PutTopic stores a copy of t (created or replaced) and publishes
// topic_upserted.
func (s *Server) PutTopic(t *metav1.Topic) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.putTopicLocked(proto.CloneOf(t))
}

// PutTopicUnannounced stores a copy of t without publishing it to Watch
// streams: metad knows the topic (GetTopic answers it) while a watcher's
// cache trails, as after a topic created through another gateway. Announce
// publishes it.
func (s *Server) PutTopicUnannounced(t *metav1.Topic) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.topics[t.GetConfig().GetName()] = proto.CloneOf(t)
}

// Announce publishes topic name's current state to Watch streams.
func (s *Server) Announce(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.topics[name]; ok {
		s.putTopicLocked(t)
	}
}

func (s *Server) putTopicLocked(t *metav1.Topic) {
	s.topics[t.GetConfig().GetName()] = t
	s.publishLocked(&metav1.WatchResponse{Event: &metav1.WatchResponse_TopicUpserted{TopicUpserted: proto.CloneOf(t)}})
}

// Topic returns a copy of a stored topic (DELETING ones included).
func (s *Server) Topic(name string) (*metav1.Topic, bool) { return lookup(s, s.topics, name) }

// RemoveTopic deletes a topic at once and publishes topic_removed.
func (s *Server) RemoveTopic(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.topics, name)
	s.publishLocked(&metav1.WatchResponse{Event: &metav1.WatchResponse_TopicRemoved{TopicRemoved: name}})
}

// TopicsCreated returns how many CreateTopic calls created a topic.
func (s *Server) TopicsCreated() int { return locked(s, func() int { return s.created }) }

// locked returns read() under s.mu.
func locked[T any](s *Server, read func() T) T {
	s.mu.Lock()
	defer s.mu.Unlock()
	return read()
}

// PutNode stores a copy of n (registered or replaced) and publishes
// node_upserted.
func (s *Server) PutNode(n *metav1.Node) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.putNodeLocked(proto.CloneOf(n))
}

func (s *Server) putNodeLocked(n *metav1.Node) {
	s.nodes[n.GetId()] = n
	s.publishLocked(&metav1.WatchResponse{Event: &metav1.WatchResponse_NodeUpserted{NodeUpserted: proto.CloneOf(n)}})
}

// Node returns a copy of a known node.
func (s *Server) Node(id string) (*metav1.Node, bool) { return lookup(s, s.nodes, id) }

// lookup returns a copy of m[key] (a map of s's state).
func lookup[T proto.Message](s *Server, m map[string]T, key string) (T, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := m[key]
	if !ok {
		var zero T
		return zero, false
	}
	return proto.CloneOf(v), true
}

// SetLive marks a known node live or expired, as a lease change in metad.
func (s *Server) SetLive(id string, live bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.nodes[id]
	if !ok {
		return
	}
	n = proto.CloneOf(n)
	n.Live = live
	s.putNodeLocked(n)
}

// ForgetNode drops a node without an event, as metad forgets a node whose
// lease is long gone: its next heartbeat answers node_not_found and the
// node must register again.
func (s *Server) ForgetNode(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.nodes, id)
}

// CleanupReports returns every ReportCleanup request received, the failed
// ones included.
func (s *Server) CleanupReports() []*metav1.ReportCleanupRequest {
	return typed[*metav1.ReportCleanupRequest](s.Requests("ReportCleanup"))
}

// HwmCheckpoints returns every CheckpointHwm request received.
func (s *Server) HwmCheckpoints() []*metav1.CheckpointHwmRequest {
	return typed[*metav1.CheckpointHwmRequest](s.Requests("CheckpointHwm"))
}

func typed[T proto.Message](ms []proto.Message) []T {
	out := make([]T, len(ms))
	for i, m := range ms {
		out[i] = m.(T)
	}
	return out
}

// NewTopic builds an ACTIVE topic with n partitions at lifecycle epoch
// epoch, each led by leader (leader epoch 1, ISR {leader}) on replicas.
func NewTopic(name string, n int32, epoch uint64, leader string, replicas ...string) *metav1.Topic {
	t := &metav1.Topic{Config: &metav1.TopicConfig{Name: name, Revision: 1, LifecycleEpoch: epoch, Partitions: n,
		ReplicationFactor: int32(len(replicas)), CleanupPolicy: "delete", State: metav1.TopicState_TOPIC_STATE_ACTIVE}}
	for i := range n {
		t.Partitions = append(t.Partitions, &metav1.PartitionState{Id: i, Replicas: slices.Clone(replicas), Isr: []string{leader},
			Leader: leader, LeaderEpoch: 1})
	}
	return t
}

// visible says whether reads show the topic: a DELETING topic is gone for
// every caller but the Watch stream (partitiond still cleans it up).
func visible(t *metav1.Topic) bool {
	return t.GetConfig().GetState() != metav1.TopicState_TOPIC_STATE_DELETING
}

// placementLocked is the node that holds every partition of a new topic.
func (s *Server) placementLocked() string {
	if s.o.Placement != "" {
		return s.o.Placement
	}
	var ids []string
	for id, n := range s.nodes {
		if n.GetRole() == metav1.NodeRole_NODE_ROLE_PARTITIOND {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return "p1"
	}
	return slices.Min(ids)
}

func orDefault[T comparable](v *T, def T) T {
	if v == nil {
		return def
	}
	return *v
}

// CreateTopic creates a topic (or returns the existing one unchanged) with
// every partition on one node.
func (s *Server) CreateTopic(_ context.Context, req *metav1.CreateTopicRequest) (*metav1.CreateTopicResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.topics[req.GetName()]; ok && visible(t) {
		return &metav1.CreateTopicResponse{Topic: proto.CloneOf(t), EffectiveMinInSyncReplicas: 1}, nil
	}
	n := orDefault(req.Partitions, s.o.DefaultPartitions)
	if n <= 0 {
		return nil, errcode.InvalidParameter.New("the fake metad needs a partition count", "topic", req.GetName())
	}
	leader := s.placementLocked()
	cfg := &metav1.TopicConfig{Name: req.GetName(), Revision: 1, Partitions: n,
		ReplicationFactor: orDefault(req.ReplicationFactor, 1), CleanupPolicy: orDefault(req.CleanupPolicy, "delete"),
		Partitioner: orDefault(req.Partitioner, "hash_key"), AuthPolicy: orDefault(req.AuthPolicy, "open"), ReadAcl: req.GetReadAcl(), WriteAcl: req.GetWriteAcl(),
		Idempotent: req.GetIdempotent(), Internal: req.GetInternal(), State: metav1.TopicState_TOPIC_STATE_ACTIVE}
	t := &metav1.Topic{Config: cfg}
	for i := range n {
		t.Partitions = append(t.Partitions, &metav1.PartitionState{Id: i, Replicas: []string{leader}, Isr: []string{leader}, Leader: leader, LeaderEpoch: 1})
	}
	s.created++
	s.putTopicLocked(t)
	return &metav1.CreateTopicResponse{Topic: proto.CloneOf(t), Created: true, Changed: true, EffectiveMinInSyncReplicas: 1}, nil
}

// GetTopic returns a topic, or topic_not_found.
func (s *Server) GetTopic(_ context.Context, req *metav1.GetTopicRequest) (*metav1.GetTopicResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.topics[req.GetName()]
	if !ok || !visible(t) {
		return nil, errcode.TopicNotFound.New("no such topic", "topic", req.GetName())
	}
	return &metav1.GetTopicResponse{Topic: proto.CloneOf(t), EffectiveMinInSyncReplicas: 1}, nil
}

// ListTopics returns the visible topics (internal ones when asked) and the
// revision they are at.
func (s *Server) ListTopics(_ context.Context, req *metav1.ListTopicsRequest) (*metav1.ListTopicsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &metav1.ListTopicsResponse{Revision: s.rev}
	for _, t := range s.topics {
		if visible(t) && (req.GetIncludeInternal() || !t.GetConfig().GetInternal()) {
			out.Topics = append(out.Topics, proto.CloneOf(t))
		}
	}
	return out, nil
}

// DeleteTopic removes a topic, or with Options.DeleteLeavesCleanup leaves
// it DELETING until every replica reported its cleanup.
func (s *Server) DeleteTopic(_ context.Context, req *metav1.DeleteTopicRequest) (*metav1.DeleteTopicResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.topics[req.GetName()]
	if !ok || !visible(t) {
		if req.GetIfExists() {
			return &metav1.DeleteTopicResponse{CleanupPending: ok}, nil
		}
		return nil, errcode.TopicNotFound.New("no such topic", "topic", req.GetName())
	}
	if !s.o.DeleteLeavesCleanup {
		delete(s.topics, req.GetName())
		s.publishLocked(&metav1.WatchResponse{Event: &metav1.WatchResponse_TopicRemoved{TopicRemoved: req.GetName()}})
		return &metav1.DeleteTopicResponse{Deleted: true}, nil
	}
	t = proto.CloneOf(t)
	t.Config.State = metav1.TopicState_TOPIC_STATE_DELETING
	t.CleanupPendingNodes = nil
	for _, p := range t.GetPartitions() {
		for _, r := range p.GetReplicas() {
			if !slices.Contains(t.CleanupPendingNodes, r) {
				t.CleanupPendingNodes = append(t.CleanupPendingNodes, r)
			}
		}
	}
	slices.Sort(t.CleanupPendingNodes)
	s.putTopicLocked(t)
	return &metav1.DeleteTopicResponse{Deleted: true, CleanupPending: len(t.CleanupPendingNodes) > 0}, nil
}

// RegisterNode stores the node as live.
func (s *Server) RegisterNode(_ context.Context, req *metav1.RegisterNodeRequest) (*metav1.RegisterNodeResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := proto.CloneOf(req.GetNode())
	n.Live = true
	s.putNodeLocked(n)
	return &metav1.RegisterNodeResponse{Node: proto.CloneOf(n), LeaseTimeoutMs: s.o.LeaseTimeout.Milliseconds()}, nil
}

// NodeHeartbeat renews a known node's lease; an unknown node gets
// node_not_found and must register again.
func (s *Server) NodeHeartbeat(_ context.Context, req *metav1.NodeHeartbeatRequest) (*metav1.NodeHeartbeatResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.nodes[req.GetNodeId()]; !ok {
		return nil, errcode.NodeNotFound.New("unknown node", "node", req.GetNodeId())
	}
	return &metav1.NodeHeartbeatResponse{LeaseTimeoutMs: s.o.LeaseTimeout.Milliseconds()}, nil
}

// ListNodes returns every known node.
func (s *Server) ListNodes(context.Context, *metav1.ListNodesRequest) (*metav1.ListNodesResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &metav1.ListNodesResponse{Nodes: clones(s.nodes)}, nil
}

// clones copies every value of m (a map of the state, under s.mu).
func clones[T proto.Message](m map[string]T) []T {
	var out []T
	for _, v := range m {
		out = append(out, proto.CloneOf(v))
	}
	return out
}

// ClusterStatus reports this fake as the Raft leader, with every node and
// topic.
func (s *Server) ClusterStatus(context.Context, *metav1.ClusterStatusRequest) (*metav1.ClusterStatusResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &metav1.ClusterStatusResponse{RaftLeaderId: s.o.ID, RaftLeaderAddress: s.Addr, Revision: s.rev,
		Nodes: clones(s.nodes), Topics: clones(s.topics)}, nil
}

// ReportCleanup follows metad's rules: the lifecycle epoch must be
// current; the node leaves cleanup_pending_nodes; a DELETING topic with
// nobody pending is removed.
func (s *Server) ReportCleanup(_ context.Context, req *metav1.ReportCleanupRequest) (*metav1.ReportCleanupResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.topics[req.GetTopic()]
	if !ok {
		return &metav1.ReportCleanupResponse{}, nil
	}
	if t.GetConfig().GetLifecycleEpoch() != req.GetLifecycleEpoch() {
		return nil, errcode.StaleLifecycleEpoch.New("stale", "topic", req.GetTopic())
	}
	i := slices.Index(t.CleanupPendingNodes, req.GetNodeId())
	if i < 0 {
		return &metav1.ReportCleanupResponse{}, nil
	}
	t = proto.CloneOf(t)
	t.CleanupPendingNodes = slices.Delete(t.CleanupPendingNodes, i, i+1)
	if !visible(t) && len(t.CleanupPendingNodes) == 0 {
		delete(s.topics, req.GetTopic())
		s.publishLocked(&metav1.WatchResponse{Event: &metav1.WatchResponse_TopicRemoved{TopicRemoved: req.GetTopic()}})
	} else {
		s.putTopicLocked(t)
	}
	return &metav1.ReportCleanupResponse{}, nil
}

// CheckpointHwm accepts the checkpoint (HwmCheckpoints lists them).
func (s *Server) CheckpointHwm(context.Context, *metav1.CheckpointHwmRequest) (*metav1.CheckpointHwmResponse, error) {
	return &metav1.CheckpointHwmResponse{}, nil
}

// Watch sends a snapshot of the state (unless Options.NoWatchSnapshot),
// then every later event, until the caller goes or BreakWatches ends it.
func (s *Server) Watch(_ *metav1.WatchRequest, stream grpc.ServerStreamingServer[metav1.WatchResponse]) error {
	w := &watcher{broken: make(chan struct{})}
	s.mu.Lock()
	var first *metav1.WatchResponse
	if !s.o.NoWatchSnapshot {
		first = &metav1.WatchResponse{Revision: s.rev, Event: &metav1.WatchResponse_Snapshot{Snapshot: &metav1.Snapshot{
			Topics: clones(s.topics), Nodes: clones(s.nodes), TransactionCoordinatorShards: TxnShards}}}
	}
	sent := len(s.events)
	s.watchers[w] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.watchers, w)
		s.mu.Unlock()
	}()
	if first != nil {
		if err := stream.Send(first); err != nil {
			return err
		}
	}
	for {
		s.mu.Lock()
		pending := s.events[sent:len(s.events):len(s.events)]
		sent = len(s.events)
		changed := s.changed
		s.mu.Unlock()
		for _, ev := range pending {
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
		select {
		case <-stream.Context().Done():
			return nil
		case <-w.broken:
			return w.err
		case <-changed:
		}
	}
}

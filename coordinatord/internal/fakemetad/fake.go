// Package fakemetad is an in-memory MetadataService for coordinatord tests:
// Watch (snapshot, then live events), RegisterNode / NodeHeartbeat, and
// CreateTopic placing every partition on one partitiond node.
package fakemetad

import (
	"context"
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// Server is the fake metad.
type Server struct {
	metav1.UnimplementedMetadataServiceServer

	mu       sync.Mutex
	rev      uint64
	topics   map[string]*metav1.Topic
	nodes    map[string]*metav1.Node
	watchers map[chan *metav1.WatchResponse]struct{}
	creates  int
}

// New returns a fake with one live partitiond node (id, rpc address) that
// leads every partition it creates.
func New(partitiondID, partitiondAddr string) *Server {
	s := &Server{rev: 1, topics: map[string]*metav1.Topic{}, nodes: map[string]*metav1.Node{},
		watchers: map[chan *metav1.WatchResponse]struct{}{}}
	s.nodes[partitiondID] = &metav1.Node{Id: partitiondID, Role: metav1.NodeRole_NODE_ROLE_PARTITIOND, RpcAddress: partitiondAddr, Live: true}
	return s
}

func (s *Server) publishLocked(ev *metav1.WatchResponse) {
	s.rev++
	ev.Revision = s.rev
	for ch := range s.watchers {
		select {
		case ch <- ev:
		default: // a slow watcher misses events; tests keep them fast
		}
	}
}

// CreateTopics returns how many CreateTopic calls created a topic.
func (s *Server) CreateTopics() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.creates
}

// Topic returns a stored topic.
func (s *Server) Topic(name string) (*metav1.Topic, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.topics[name]
	return t, ok
}

// PutTopic creates or replaces a user topic with n partitions led by the
// partitiond node, at lifecycle epoch lifecycle.
func (s *Server) PutTopic(name string, n int32, lifecycle uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.putLocked(&metav1.TopicConfig{Name: name, Partitions: n, Revision: 1, LifecycleEpoch: lifecycle})
}

// RemoveTopic deletes a topic.
func (s *Server) RemoveTopic(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.topics, name)
	s.publishLocked(&metav1.WatchResponse{Event: &metav1.WatchResponse_TopicRemoved{TopicRemoved: name}})
}

// SetLive marks a node live or expired.
func (s *Server) SetLive(id string, live bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.nodes[id]
	if !ok {
		return
	}
	n = proto.Clone(n).(*metav1.Node)
	n.Live = live
	s.nodes[id] = n
	s.publishLocked(&metav1.WatchResponse{Event: &metav1.WatchResponse_NodeUpserted{NodeUpserted: n}})
}

func (s *Server) putLocked(cfg *metav1.TopicConfig) *metav1.Topic {
	var leader string
	for id, n := range s.nodes {
		if n.GetRole() == metav1.NodeRole_NODE_ROLE_PARTITIOND {
			leader = id
		}
	}
	t := &metav1.Topic{Config: cfg}
	for p := range cfg.GetPartitions() {
		t.Partitions = append(t.Partitions, &metav1.PartitionState{Id: p, Replicas: []string{leader}, Isr: []string{leader}, Leader: leader, LeaderEpoch: 1})
	}
	s.topics[cfg.GetName()] = t
	s.publishLocked(&metav1.WatchResponse{Event: &metav1.WatchResponse_TopicUpserted{TopicUpserted: t}})
	return t
}

// CreateTopic implements MetadataService.
func (s *Server) CreateTopic(ctx context.Context, req *metav1.CreateTopicRequest) (*metav1.CreateTopicResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.topics[req.GetName()]; ok {
		return &metav1.CreateTopicResponse{Topic: t}, nil
	}
	if req.Partitions == nil {
		return nil, errcode.InvalidParameter.New("partitions required by the fake")
	}
	s.creates++
	t := s.putLocked(&metav1.TopicConfig{Name: req.GetName(), Partitions: req.GetPartitions(), Revision: 1,
		CleanupPolicy: req.GetCleanupPolicy(), Internal: req.GetInternal(), ReplicationFactor: req.GetReplicationFactor()})
	return &metav1.CreateTopicResponse{Topic: t, Created: true}, nil
}

// RegisterNode implements MetadataService.
func (s *Server) RegisterNode(ctx context.Context, req *metav1.RegisterNodeRequest) (*metav1.RegisterNodeResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := proto.Clone(req.GetNode()).(*metav1.Node)
	n.Live = true
	s.nodes[n.GetId()] = n
	s.publishLocked(&metav1.WatchResponse{Event: &metav1.WatchResponse_NodeUpserted{NodeUpserted: n}})
	return &metav1.RegisterNodeResponse{Node: n, LeaseTimeoutMs: 3000}, nil
}

// NodeHeartbeat implements MetadataService.
func (s *Server) NodeHeartbeat(ctx context.Context, req *metav1.NodeHeartbeatRequest) (*metav1.NodeHeartbeatResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.nodes[req.GetNodeId()]; !ok {
		return nil, errcode.NodeNotFound.New("unknown node")
	}
	return &metav1.NodeHeartbeatResponse{LeaseTimeoutMs: 3000}, nil
}

// Watch implements MetadataService: a snapshot, then events until the
// stream ends.
func (s *Server) Watch(req *metav1.WatchRequest, stream metav1.MetadataService_WatchServer) error {
	ch := make(chan *metav1.WatchResponse, 1024)
	s.mu.Lock()
	snap := &metav1.Snapshot{}
	for _, t := range s.topics {
		snap.Topics = append(snap.Topics, t)
	}
	for _, n := range s.nodes {
		snap.Nodes = append(snap.Nodes, n)
	}
	first := &metav1.WatchResponse{Revision: s.rev, Event: &metav1.WatchResponse_Snapshot{Snapshot: snap}}
	s.watchers[ch] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.watchers, ch)
		s.mu.Unlock()
	}()
	if err := stream.Send(first); err != nil {
		return err
	}
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case ev := <-ch:
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
	}
}

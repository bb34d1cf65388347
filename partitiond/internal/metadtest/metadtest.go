// Package metadtest is an in-process fake of metad's MetadataService for
// partitiond tests: topics and nodes the test edits, each edit a watch event,
// with cleanup reports and HWM checkpoints recorded. It follows metad's rules
// for the calls partitiond makes (docs/metad.md), nothing more.
package metadtest

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	"github.com/strataio/strata/libs/rpc"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// Fake is an in-process MetadataService holding topics and nodes the
// test edits; every edit is a watch event. It records cleanup reports and
// HWM checkpoints.
type Fake struct {
	metav1.UnimplementedMetadataServiceServer

	mu       sync.Mutex
	rev      uint64
	topics   map[string]*metav1.Topic
	nodes    map[string]*metav1.Node
	events   []*metav1.WatchResponse
	changed  chan struct{}
	cleanups []*metav1.ReportCleanupRequest
	hwms     []*metav1.CheckpointHwmRequest
	// failCleanups makes that many next ReportCleanup calls fail with a
	// retryable error (after being recorded).
	failCleanups int

	// Addr is the fake's RPC address.
	Addr string
}

// Start serves a fake metad on loopback with a metad certificate of ca;
// partitiond and gateway identities may call it.
func Start(t testing.TB, ca *pkitest.PKI) *Fake {
	t.Helper()
	f := &Fake{topics: map[string]*metav1.Topic{}, nodes: map[string]*metav1.Node{}, changed: make(chan struct{})}
	policy := rpc.Policy{}
	srv, err := rpc.NewServer(rpc.ServerOptions{Source: ca.Source(t, pki.RoleMetad, "m1"), Policy: policy})
	if err != nil {
		t.Fatal(err)
	}
	metav1.RegisterMetadataServiceServer(srv, f)
	for svc, info := range srv.GetServiceInfo() {
		for _, m := range info.Methods {
			policy["/"+svc+"/"+m.Name] = []pki.Role{pki.RolePartitiond, pki.RoleGateway}
		}
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.Addr = lis.Addr().String()
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return f
}

// emitLocked appends an event at the next revision and wakes watchers.
func (f *Fake) emitLocked(ev *metav1.WatchResponse) {
	f.rev++
	ev.Revision = f.rev
	f.events = append(f.events, ev)
	close(f.changed)
	f.changed = make(chan struct{})
}

// PutTopic stores a topic (cloned) and emits topic_upserted.
func (f *Fake) PutTopic(t *metav1.Topic) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := proto.Clone(t).(*metav1.Topic)
	f.topics[c.GetConfig().GetName()] = c
	f.emitLocked(&metav1.WatchResponse{Event: &metav1.WatchResponse_TopicUpserted{TopicUpserted: proto.Clone(c).(*metav1.Topic)}})
}

// Topic returns a copy of a stored topic.
func (f *Fake) Topic(name string) *metav1.Topic {
	f.mu.Lock()
	defer f.mu.Unlock()
	return proto.Clone(f.topics[name]).(*metav1.Topic)
}

// PutNode stores a node and emits node_upserted.
func (f *Fake) PutNode(n *metav1.Node) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes[n.GetId()] = proto.Clone(n).(*metav1.Node)
	f.emitLocked(&metav1.WatchResponse{Event: &metav1.WatchResponse_NodeUpserted{NodeUpserted: proto.Clone(n).(*metav1.Node)}})
}

// CleanupReports returns the ReportCleanup calls seen.
func (f *Fake) CleanupReports() []*metav1.ReportCleanupRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.cleanups)
}

// Node returns a copy of a registered node.
func (f *Fake) Node(id string) (*metav1.Node, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.nodes[id]
	if !ok {
		return nil, false
	}
	return proto.Clone(n).(*metav1.Node), true
}

// FailCleanups makes the next n ReportCleanup calls fail (retryable).
func (f *Fake) FailCleanups(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failCleanups = n
}

// HwmCheckpoints returns the CheckpointHwm calls seen.
func (f *Fake) HwmCheckpoints() []*metav1.CheckpointHwmRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.hwms)
}

// RegisterNode stores the node as live.
func (f *Fake) RegisterNode(ctx context.Context, req *metav1.RegisterNodeRequest) (*metav1.RegisterNodeResponse, error) {
	n := proto.Clone(req.GetNode()).(*metav1.Node)
	n.Live = true
	f.PutNode(n)
	return &metav1.RegisterNodeResponse{Node: n, LeaseTimeoutMs: 3000}, nil
}

// NodeHeartbeat accepts every heartbeat.
func (f *Fake) NodeHeartbeat(ctx context.Context, req *metav1.NodeHeartbeatRequest) (*metav1.NodeHeartbeatResponse, error) {
	return &metav1.NodeHeartbeatResponse{LeaseTimeoutMs: 3000}, nil
}

// ReportCleanup follows metad's rules: the epoch must be current; the node
// leaves cleanup_pending_nodes; a DELETING topic with nobody pending is
// removed.
func (f *Fake) ReportCleanup(ctx context.Context, req *metav1.ReportCleanupRequest) (*metav1.ReportCleanupResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups = append(f.cleanups, proto.Clone(req).(*metav1.ReportCleanupRequest))
	if f.failCleanups > 0 {
		f.failCleanups--
		return nil, errcode.FSMNotAvailable.New("injected cleanup report failure")
	}
	t, ok := f.topics[req.GetTopic()]
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
	t = proto.Clone(t).(*metav1.Topic)
	t.CleanupPendingNodes = slices.Delete(t.CleanupPendingNodes, i, i+1)
	if t.GetConfig().GetState() == metav1.TopicState_TOPIC_STATE_DELETING && len(t.CleanupPendingNodes) == 0 {
		delete(f.topics, req.GetTopic())
		f.emitLocked(&metav1.WatchResponse{Event: &metav1.WatchResponse_TopicRemoved{TopicRemoved: req.GetTopic()}})
	} else {
		f.topics[req.GetTopic()] = t
		f.emitLocked(&metav1.WatchResponse{Event: &metav1.WatchResponse_TopicUpserted{TopicUpserted: proto.Clone(t).(*metav1.Topic)}})
	}
	return &metav1.ReportCleanupResponse{}, nil
}

// CheckpointHwm records the checkpoint.
func (f *Fake) CheckpointHwm(ctx context.Context, req *metav1.CheckpointHwmRequest) (*metav1.CheckpointHwmResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hwms = append(f.hwms, proto.Clone(req).(*metav1.CheckpointHwmRequest))
	return &metav1.CheckpointHwmResponse{}, nil
}

// Watch sends a snapshot, then every later event.
func (f *Fake) Watch(req *metav1.WatchRequest, s grpc.ServerStreamingServer[metav1.WatchResponse]) error {
	f.mu.Lock()
	snap := &metav1.Snapshot{}
	for _, t := range f.topics {
		snap.Topics = append(snap.Topics, proto.Clone(t).(*metav1.Topic))
	}
	for _, n := range f.nodes {
		snap.Nodes = append(snap.Nodes, proto.Clone(n).(*metav1.Node))
	}
	sent := len(f.events)
	first := &metav1.WatchResponse{Revision: f.rev, Event: &metav1.WatchResponse_Snapshot{Snapshot: snap}}
	f.mu.Unlock()
	if err := s.Send(first); err != nil {
		return err
	}
	for {
		f.mu.Lock()
		pending := slices.Clone(f.events[sent:])
		sent = len(f.events)
		ch := f.changed
		f.mu.Unlock()
		for _, ev := range pending {
			if err := s.Send(ev); err != nil {
				return err
			}
		}
		select {
		case <-s.Context().Done():
			return nil
		case <-ch:
		}
	}
}

// NewTopic builds an ACTIVE topic with n partitions led by leader with the
// given replicas.
func NewTopic(name string, n int32, epoch uint64, leader string, replicas ...string) *metav1.Topic {
	t := &metav1.Topic{Config: &metav1.TopicConfig{Name: name, Revision: 1, LifecycleEpoch: epoch, Partitions: n,
		ReplicationFactor: int32(len(replicas)), CleanupPolicy: "delete", State: metav1.TopicState_TOPIC_STATE_ACTIVE}}
	for i := int32(0); i < n; i++ {
		t.Partitions = append(t.Partitions, &metav1.PartitionState{Id: i, Replicas: replicas, Isr: []string{leader},
			Leader: leader, LeaderEpoch: 1})
	}
	return t
}

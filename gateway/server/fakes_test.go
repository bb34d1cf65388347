package server

import (
	"context"
	"encoding/binary"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	"github.com/strataio/strata/libs/rpc"
	"github.com/strataio/strata/libs/wire"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// serveFake serves one fake role over mTLS on a loopback port, allowing the
// gateway to call every method.
func serveFake(t testing.TB, ca *pkitest.PKI, role pki.Role, id string, tel rpc.Telemetry, register func(*grpc.Server)) string {
	t.Helper()
	policy := rpc.Policy{}
	srv, err := rpc.NewServer(rpc.ServerOptions{Source: ca.Source(t, role, id), Policy: policy, Telemetry: tel})
	if err != nil {
		t.Fatal(err)
	}
	register(srv)
	for svc, info := range srv.GetServiceInfo() {
		for _, m := range info.Methods {
			policy["/"+svc+"/"+m.Name] = []pki.Role{pki.RoleGateway}
		}
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return lis.Addr().String()
}

// fakeMetad is an in-memory MetadataService: topics get every partition
// led by the partitiond "p1"; changes are pushed to Watch streams.
type fakeMetad struct {
	metav1.UnimplementedMetadataServiceServer
	mu       sync.Mutex
	rev      uint64
	topics   map[string]*metav1.Topic
	nodes    map[string]*metav1.Node
	watchers map[chan *metav1.WatchResponse]struct{}
	// cleanupStuck makes DeleteTopic leave the topic DELETING with a node
	// that never reports its cleanup (a partition server that is down).
	cleanupStuck bool
}

func newFakeMetad() *fakeMetad {
	return &fakeMetad{rev: 1, topics: map[string]*metav1.Topic{}, nodes: map[string]*metav1.Node{}, watchers: map[chan *metav1.WatchResponse]struct{}{}}
}

func (f *fakeMetad) publishLocked(ev *metav1.WatchResponse) {
	f.rev++
	ev.Revision = f.rev
	for ch := range f.watchers {
		select {
		case ch <- ev:
		default: // a test watcher that does not keep up is a test bug
		}
	}
}

func (f *fakeMetad) addNode(n *metav1.Node) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes[n.GetId()] = n
	f.publishLocked(&metav1.WatchResponse{Event: &metav1.WatchResponse_NodeUpserted{NodeUpserted: n}})
}

func (f *fakeMetad) putTopic(t *metav1.Topic) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.topics[t.GetConfig().GetName()] = t
	f.publishLocked(&metav1.WatchResponse{Event: &metav1.WatchResponse_TopicUpserted{TopicUpserted: t}})
}

func (f *fakeMetad) CreateTopic(ctx context.Context, req *metav1.CreateTopicRequest) (*metav1.CreateTopicResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t, ok := f.topics[req.GetName()]; ok {
		return &metav1.CreateTopicResponse{Topic: t, EffectiveMinInSyncReplicas: 1}, nil
	}
	n := int32(4)
	if req.Partitions != nil {
		n = req.GetPartitions()
	}
	cfg := &metav1.TopicConfig{Name: req.GetName(), Revision: 1, Partitions: n, ReplicationFactor: 1, CleanupPolicy: "delete",
		Partitioner: "hash_key", AuthPolicy: "open", Idempotent: req.GetIdempotent()}
	if req.Partitioner != nil {
		cfg.Partitioner = req.GetPartitioner()
	}
	t := &metav1.Topic{Config: cfg}
	for i := int32(0); i < n; i++ {
		t.Partitions = append(t.Partitions, &metav1.PartitionState{Id: i, Replicas: []string{"p1"}, Isr: []string{"p1"}, Leader: "p1", LeaderEpoch: 1})
	}
	f.topics[req.GetName()] = t
	f.publishLocked(&metav1.WatchResponse{Event: &metav1.WatchResponse_TopicUpserted{TopicUpserted: t}})
	return &metav1.CreateTopicResponse{Topic: t, Created: true, Changed: true, EffectiveMinInSyncReplicas: 1}, nil
}

func (f *fakeMetad) GetTopic(ctx context.Context, req *metav1.GetTopicRequest) (*metav1.GetTopicResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.topics[req.GetName()]
	if !ok {
		return nil, errcode.TopicNotFound.New("no such topic", "topic", req.GetName())
	}
	return &metav1.GetTopicResponse{Topic: t, EffectiveMinInSyncReplicas: 1}, nil
}

func (f *fakeMetad) DeleteTopic(ctx context.Context, req *metav1.DeleteTopicRequest) (*metav1.DeleteTopicResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t, ok := f.topics[req.GetName()]; !ok || !visible(t) {
		if req.GetIfExists() {
			return &metav1.DeleteTopicResponse{CleanupPending: ok}, nil
		}
		return nil, errcode.TopicNotFound.New("no such topic", "topic", req.GetName())
	}
	if f.cleanupStuck {
		t := proto.CloneOf(f.topics[req.GetName()])
		t.Config.State = metav1.TopicState_TOPIC_STATE_DELETING
		t.CleanupPendingNodes = []string{"p1"}
		f.topics[req.GetName()] = t
		f.publishLocked(&metav1.WatchResponse{Event: &metav1.WatchResponse_TopicUpserted{TopicUpserted: t}})
		return &metav1.DeleteTopicResponse{Deleted: true, CleanupPending: true}, nil
	}
	delete(f.topics, req.GetName())
	f.publishLocked(&metav1.WatchResponse{Event: &metav1.WatchResponse_TopicRemoved{TopicRemoved: req.GetName()}})
	return &metav1.DeleteTopicResponse{Deleted: true}, nil
}

func (f *fakeMetad) RegisterNode(ctx context.Context, req *metav1.RegisterNodeRequest) (*metav1.RegisterNodeResponse, error) {
	n := req.GetNode()
	n.Live = true
	f.addNode(n)
	return &metav1.RegisterNodeResponse{Node: n, LeaseTimeoutMs: 3000}, nil
}

func (f *fakeMetad) NodeHeartbeat(ctx context.Context, req *metav1.NodeHeartbeatRequest) (*metav1.NodeHeartbeatResponse, error) {
	return &metav1.NodeHeartbeatResponse{LeaseTimeoutMs: 3000}, nil
}

func (f *fakeMetad) ListNodes(ctx context.Context, req *metav1.ListNodesRequest) (*metav1.ListNodesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &metav1.ListNodesResponse{}
	for _, n := range f.nodes {
		out.Nodes = append(out.Nodes, n)
	}
	return out, nil
}

func (f *fakeMetad) ClusterStatus(ctx context.Context, req *metav1.ClusterStatusRequest) (*metav1.ClusterStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &metav1.ClusterStatusResponse{RaftLeaderId: "m1", Revision: f.rev}
	for _, n := range f.nodes {
		out.Nodes = append(out.Nodes, n)
	}
	for _, t := range f.topics {
		out.Topics = append(out.Topics, t)
	}
	return out, nil
}

func (f *fakeMetad) Watch(req *metav1.WatchRequest, s grpc.ServerStreamingServer[metav1.WatchResponse]) error {
	ch := make(chan *metav1.WatchResponse, 256)
	f.mu.Lock()
	snap := &metav1.Snapshot{TransactionCoordinatorShards: 50}
	for _, t := range f.topics {
		snap.Topics = append(snap.Topics, t)
	}
	for _, n := range f.nodes {
		snap.Nodes = append(snap.Nodes, n)
	}
	first := &metav1.WatchResponse{Revision: f.rev, Event: &metav1.WatchResponse_Snapshot{Snapshot: snap}}
	f.watchers[ch] = struct{}{}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.watchers, ch)
		f.mu.Unlock()
	}()
	if err := s.Send(first); err != nil {
		return err
	}
	for {
		select {
		case <-s.Context().Done():
			return nil
		case ev := <-ch:
			if err := s.Send(ev); err != nil {
				return err
			}
		}
	}
}

// fakePartition is an in-memory PartitionService storing record sets as
// they arrive (offsets assigned in place).
type fakePartition struct {
	partitionv1.UnimplementedPartitionServiceServer
	mu        sync.Mutex
	logs      map[string][][]byte // "topic/partition" -> records (without length prefix)
	lastAcks  []int32
	notLeader atomic.Int32 // answer NOT_LEADER this many times
	appends   atomic.Int32
	discard   atomic.Bool // benchmarks: count offsets, keep nothing
	next      atomic.Uint64
}

func newFakePartition() *fakePartition { return &fakePartition{logs: map[string][][]byte{}} }

func logKey(topic string, p int32) string { return topic + "/" + strconv.Itoa(int(p)) }

func (f *fakePartition) records(topic string, p int32) [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.logs[logKey(topic, p)]...)
}

func (f *fakePartition) append(req *partitionv1.AppendRequest) *partitionv1.AppendResponse {
	if f.notLeader.Load() > 0 {
		f.notLeader.Add(-1)
		return &partitionv1.AppendResponse{Error: errcode.ToProto(errcode.NotLeader.New("moved", "leader", "p1"))}
	}
	f.appends.Add(1)
	if f.discard.Load() {
		last := f.next.Add(uint64(req.GetRecordCount()))
		return &partitionv1.AppendResponse{BaseOffset: last - uint64(req.GetRecordCount()), LastOffset: last - 1, Leader: "p1", LeaderEpoch: 1}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastAcks = append(f.lastAcks, req.GetAcks())
	k := logKey(req.GetTopic(), req.GetPartition())
	base := uint64(len(f.logs[k]))
	b := req.GetRecords()
	for len(b) >= 4 {
		n := binary.BigEndian.Uint32(b)
		rec := append([]byte(nil), b[4:4+n]...)
		b = b[4+n:]
		wire.SetRecordOffset(rec, uint64(len(f.logs[k])))
		f.logs[k] = append(f.logs[k], rec)
	}
	return &partitionv1.AppendResponse{BaseOffset: base, LastOffset: uint64(len(f.logs[k])) - 1, Leader: "p1", LeaderEpoch: 1}
}

func (f *fakePartition) Produce(s grpc.BidiStreamingServer[partitionv1.ProduceRequest, partitionv1.ProduceResponse]) error {
	for {
		req, err := s.Recv()
		if err != nil {
			return nil
		}
		resp := f.append(req.GetAppend())
		if err := s.Send(&partitionv1.ProduceResponse{CorrelationId: req.GetCorrelationId(), Append: resp}); err != nil {
			return err
		}
	}
}

func (f *fakePartition) Fetch(ctx context.Context, req *partitionv1.FetchRequest) (*partitionv1.FetchResponse, error) {
	deadline := time.Now().Add(time.Duration(req.GetWaitMs()) * time.Millisecond)
	for {
		f.mu.Lock()
		recs := f.logs[logKey(req.GetTopic(), req.GetPartition())]
		end := uint64(len(recs))
		f.mu.Unlock()
		if req.GetOffset() > end {
			return nil, errcode.OffsetOutOfRange.New("beyond the log", "requested", strconv.FormatUint(req.GetOffset(), 10), "earliest", "0", "latest", strconv.FormatUint(end, 10))
		}
		if req.GetOffset() < end || !time.Now().Before(deadline) {
			out := &partitionv1.FetchResponse{NextOffset: req.GetOffset(), HighWatermark: end, LogEndOffset: end}
			for i := req.GetOffset(); i < end && out.RecordCount < req.GetMaxRecords(); i++ {
				out.Records = binary.BigEndian.AppendUint32(out.Records, uint32(len(recs[i])))
				out.Records = append(out.Records, recs[i]...)
				out.RecordCount++
				out.NextOffset = i + 1
			}
			return out, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (f *fakePartition) ListOffsets(ctx context.Context, req *partitionv1.ListOffsetsRequest) (*partitionv1.ListOffsetsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := &partitionv1.ListOffsetsResponse{}
	for _, p := range req.GetPartitions() {
		n := uint64(len(f.logs[logKey(req.GetTopic(), p)]))
		out.Partitions = append(out.Partitions, &partitionv1.PartitionOffsets{Partition: p, Latest: n, Leo: n, Hwm: n})
	}
	return out, nil
}

// fakeCoordinator keeps committed offsets and answers group commands with
// fixed shapes. Group "busy" has an active member (group_not_empty).
type fakeCoordinator struct {
	coordinatorv1.UnimplementedCoordinatorServiceServer
	mu        sync.Mutex
	committed map[string]uint64
	lastReset *coordinatorv1.ResetOffsetsRequest
	joins     atomic.Int32
	// notCoord makes the next n DeleteGroup/ResetOffsets calls answer
	// NOT_COORDINATOR naming redirect.
	notCoord atomic.Int32
	redirect string
}

func newFakeCoordinator() *fakeCoordinator { return &fakeCoordinator{committed: map[string]uint64{}} }

func offKey(group, topic string, p int32) string { return group + "|" + logKey(topic, p) }

func (f *fakeCoordinator) JoinGroup(ctx context.Context, req *coordinatorv1.JoinGroupRequest) (*coordinatorv1.JoinGroupResponse, error) {
	f.joins.Add(1)
	return &coordinatorv1.JoinGroupResponse{Generation: 3, Member: req.GetMember() + "-4821", Assignments: []int32{0, 1, 2}}, nil
}

func (f *fakeCoordinator) Heartbeat(ctx context.Context, req *coordinatorv1.HeartbeatRequest) (*coordinatorv1.HeartbeatResponse, error) {
	if req.Generation != nil && req.GetGeneration() != 3 {
		return nil, errcode.GenMismatch.New("stale generation", "current", "3", "requested", strconv.FormatUint(req.GetGeneration(), 10), "group", req.GetGroup(), "member", req.GetMember())
	}
	return &coordinatorv1.HeartbeatResponse{Member: req.GetMember(), Generation: 3}, nil
}

func (f *fakeCoordinator) CommitOffset(ctx context.Context, req *coordinatorv1.CommitOffsetRequest) (*coordinatorv1.CommitOffsetResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.committed[offKey(req.GetGroup(), req.GetTopic(), req.GetPartition())] = req.GetOffset()
	return &coordinatorv1.CommitOffsetResponse{}, nil
}

func (f *fakeCoordinator) BatchCommit(ctx context.Context, req *coordinatorv1.BatchCommitRequest) (*coordinatorv1.BatchCommitResponse, error) {
	if req.GetGeneration() != 3 {
		return nil, errcode.GenMismatch.New("stale generation", "current", "3")
	}
	list, err := wire.ParseOffsetList(req.GetOffsetsList())
	if err != nil {
		return nil, err
	}
	if p, dup := wire.DuplicatePartition(list); dup {
		return nil, errcode.DuplicatePartition.New("repeat", "partition", strconv.Itoa(int(p)), "group", req.GetGroup(), "topic", req.GetTopic())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, o := range list {
		f.committed[offKey(req.GetGroup(), req.GetTopic(), o.Partition)] = o.Offset
	}
	return &coordinatorv1.BatchCommitResponse{Batched: int32(len(list))}, nil
}

func (f *fakeCoordinator) FetchOffset(ctx context.Context, req *coordinatorv1.FetchOffsetRequest) (*coordinatorv1.FetchOffsetResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.committed[offKey(req.GetGroup(), req.GetTopic(), req.GetPartition())]
	return &coordinatorv1.FetchOffsetResponse{Offset: o, Found: ok}, nil
}

// moved answers NOT_COORDINATOR while notCoord is positive.
func (f *fakeCoordinator) moved(group string) error {
	for {
		n := f.notCoord.Load()
		if n <= 0 {
			return nil
		}
		if f.notCoord.CompareAndSwap(n, n-1) {
			break
		}
	}
	return errcode.NotCoordinator.New("group is coordinated by another node", "coordinator_id", "c2",
		"coordinator_address", f.redirect, "group", group)
}

func busy(group string) error {
	return errcode.GroupNotEmpty.New("group has active members", "group", group, "members", "1")
}

func (f *fakeCoordinator) DeleteGroup(ctx context.Context, req *coordinatorv1.DeleteGroupRequest) (*coordinatorv1.DeleteGroupResponse, error) {
	if err := f.moved(req.GetGroup()); err != nil {
		return nil, err
	}
	if req.GetGroup() == "busy" {
		return nil, busy(req.GetGroup())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	found := false
	for k := range f.committed {
		if strings.HasPrefix(k, req.GetGroup()+"|") {
			delete(f.committed, k)
			found = true
		}
	}
	if !found {
		return nil, errcode.GroupNotFound.New("group is not registered", "group", req.GetGroup())
	}
	return &coordinatorv1.DeleteGroupResponse{Deleted: true}, nil
}

func (f *fakeCoordinator) ResetOffsets(ctx context.Context, req *coordinatorv1.ResetOffsetsRequest) (*coordinatorv1.ResetOffsetsResponse, error) {
	if err := f.moved(req.GetGroup()); err != nil {
		return nil, err
	}
	if req.GetGroup() == "busy" {
		return nil, busy(req.GetGroup())
	}
	list, err := wire.ParseOffsetList(req.GetOffsetsList())
	if err != nil {
		return nil, err
	}
	if p, dup := wire.DuplicatePartition(list); dup {
		return nil, errcode.DuplicatePartition.New("repeat", "partition", strconv.Itoa(int(p)), "group", req.GetGroup(), "topic", req.GetTopic())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastReset = req
	for _, o := range list {
		f.committed[offKey(req.GetGroup(), req.GetTopic(), o.Partition)] = o.Offset
	}
	return &coordinatorv1.ResetOffsetsResponse{Entries: int32(len(list))}, nil
}

func (f *fakeCoordinator) GroupStatus(ctx context.Context, req *coordinatorv1.GroupStatusRequest) (*coordinatorv1.GroupStatusResponse, error) {
	return &coordinatorv1.GroupStatusResponse{GroupName: req.GetGroup(), TopicName: "t", State: "Stable", Generation: 3, MemberCount: 1, PartitionCount: 3,
		Members: []*coordinatorv1.GroupMember{{MemberId: "m-4821", LastHeartbeatUnixMs: 1700000000000, Assignments: []int32{0, 1, 2}}}}, nil
}

func (f *fakePartition) Append(ctx context.Context, req *partitionv1.AppendRequest) (*partitionv1.AppendResponse, error) {
	return f.append(req), nil
}

package metaclient

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	"github.com/strataio/strata/libs/rpc"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeMetad is a MetadataService that either leads or redirects.
type fakeMetad struct {
	metav1.UnimplementedMetadataServiceServer
	leaderAddr func() string // "" = this node leads
	creates    atomic.Int32
	events     chan *metav1.WatchResponse
	breaks     chan struct{} // a send ends the current Watch stream
	heartbeats atomic.Int32
	forget     atomic.Bool
}

func (f *fakeMetad) CreateTopic(ctx context.Context, req *metav1.CreateTopicRequest) (*metav1.CreateTopicResponse, error) {
	if l := f.leaderAddr(); l != "" {
		return nil, errcode.NotLeader.New("", "leader", l)
	}
	f.creates.Add(1)
	return &metav1.CreateTopicResponse{Created: true, Topic: &metav1.Topic{Config: &metav1.TopicConfig{Name: req.GetName(), Revision: 1}}}, nil
}

func (f *fakeMetad) GetTopic(ctx context.Context, req *metav1.GetTopicRequest) (*metav1.GetTopicResponse, error) {
	return nil, errcode.TopicNotFound.New("", "topic", req.GetName())
}

func (f *fakeMetad) RegisterNode(ctx context.Context, req *metav1.RegisterNodeRequest) (*metav1.RegisterNodeResponse, error) {
	f.forget.Store(false)
	return &metav1.RegisterNodeResponse{Node: req.GetNode(), LeaseTimeoutMs: 300}, nil
}

func (f *fakeMetad) NodeHeartbeat(ctx context.Context, req *metav1.NodeHeartbeatRequest) (*metav1.NodeHeartbeatResponse, error) {
	f.heartbeats.Add(1)
	if f.forget.Load() {
		return nil, errcode.NodeNotFound.New("", "node", req.GetNodeId())
	}
	return &metav1.NodeHeartbeatResponse{LeaseTimeoutMs: 300}, nil
}

func (f *fakeMetad) Watch(req *metav1.WatchRequest, s grpc.ServerStreamingServer[metav1.WatchResponse]) error {
	for {
		select {
		case <-s.Context().Done():
			return nil
		case <-f.breaks:
			return errcode.NoRaftLeader.New("stream closed by test")
		case ev := <-f.events:
			if err := s.Send(ev); err != nil {
				return err
			}
		}
	}
}

type cluster struct {
	addrs []string
	fakes []*fakeMetad
	pool  *rpc.Pool
}

func startCluster(t *testing.T, n int) *cluster {
	t.Helper()
	ca := pkitest.New(t)
	c := &cluster{}
	var mu sync.Mutex
	leader := 0
	for i := 0; i < n; i++ {
		i := i
		f := &fakeMetad{events: make(chan *metav1.WatchResponse, 16), breaks: make(chan struct{})}
		f.leaderAddr = func() string {
			mu.Lock()
			defer mu.Unlock()
			if leader == i {
				return ""
			}
			return c.addrs[leader]
		}
		policy := rpc.Policy{}
		srv, err := rpc.NewServer(rpc.ServerOptions{Source: ca.Source(t, pki.RoleMetad, "m"+string(rune('0'+i))), Policy: policy})
		if err != nil {
			t.Fatal(err)
		}
		metav1.RegisterMetadataServiceServer(srv, f)
		for svc, info := range srv.GetServiceInfo() {
			for _, m := range info.Methods {
				policy["/"+svc+"/"+m.Name] = []pki.Role{pki.RoleGateway}
			}
		}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(lis)
		t.Cleanup(srv.Stop)
		c.addrs = append(c.addrs, lis.Addr().String())
		c.fakes = append(c.fakes, f)
	}
	mu.Lock()
	leader = n - 1
	mu.Unlock()
	c.pool = rpc.NewPool(rpc.ClientOptions{Source: ca.Source(t, pki.RoleGateway, "g1")})
	t.Cleanup(func() { c.pool.Close() })
	return c
}

func TestCallFollowsLeaderRedirect(t *testing.T) {
	c := startCluster(t, 3)
	cl := New(Options{Addrs: c.addrs[:1], Dial: c.pool.Get})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cl.CreateTopic(ctx, &metav1.CreateTopicRequest{Name: "orders"})
	if err != nil || !resp.GetCreated() {
		t.Fatalf("create: %v %v", resp, err)
	}
	if c.fakes[2].creates.Load() != 1 || c.fakes[0].creates.Load() != 0 {
		t.Fatal("create must run exactly once, on the leader")
	}
	if _, err := cl.GetTopic(ctx, "nope"); !errors.Is(err, errcode.TopicNotFound) {
		t.Fatalf("non-retryable errors return as they are: %v", err)
	}
}

func TestCallSkipsUnreachableSeedsAndGivesUpWithContext(t *testing.T) {
	c := startCluster(t, 1)
	dead := "127.0.0.1:1"
	cl := New(Options{Addrs: []string{dead, c.addrs[0]}, Dial: c.pool.Get, CallTimeout: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cl.CreateTopic(ctx, &metav1.CreateTopicRequest{Name: "x"}); err != nil {
		t.Fatal(err)
	}
	cl2 := New(Options{Addrs: []string{dead}, Dial: c.pool.Get, CallTimeout: 200 * time.Millisecond})
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	if _, err := cl2.CreateTopic(ctx2, &metav1.CreateTopicRequest{Name: "x"}); !errors.Is(err, errcode.ClusterMetadataUnavailable) {
		t.Fatalf("want cluster_metadata_unavailable, got %v", err)
	}
}

func topicEv(rev uint64, name string) *metav1.WatchResponse {
	return &metav1.WatchResponse{Revision: rev, Event: &metav1.WatchResponse_TopicUpserted{TopicUpserted: &metav1.Topic{Config: &metav1.TopicConfig{Name: name, Revision: rev}}}}
}

func TestWatchKeepsCacheCurrentAndNeverGoesBack(t *testing.T) {
	c := startCluster(t, 1)
	f := c.fakes[0]
	cl := New(Options{Addrs: c.addrs, Dial: c.pool.Get})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cl.Watch(ctx) }()
	defer func() { cancel(); <-done }()

	f.events <- topicEv(3, "ignored-before-snapshot")
	f.events <- &metav1.WatchResponse{Revision: 5, Event: &metav1.WatchResponse_Snapshot{Snapshot: &metav1.Snapshot{
		Topics: []*metav1.Topic{{Config: &metav1.TopicConfig{Name: "a"}}},
		Nodes:  []*metav1.Node{{Id: "p1", Role: metav1.NodeRole_NODE_ROLE_PARTITIOND, Live: true}},
	}}}
	f.events <- topicEv(4, "stale")
	f.events <- topicEv(6, "b")
	f.events <- &metav1.WatchResponse{Revision: 7, Event: &metav1.WatchResponse_TopicRemoved{TopicRemoved: "a"}}
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	v, err := cl.Cache().WaitFor(wctx, func(v *View) bool { return v.Revision == 7 })
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := v.Topic("b"); !ok {
		t.Fatal("topic b missing")
	}
	for _, name := range []string{"a", "stale", "ignored-before-snapshot"} {
		if _, ok := v.Topic(name); ok {
			t.Fatalf("topic %s must not be present", name)
		}
	}
	if n := v.Nodes(metav1.NodeRole_NODE_ROLE_PARTITIOND, true); len(n) != 1 {
		t.Fatalf("nodes = %v", n)
	}
	// A broken stream reconnects and resumes; older revisions stay ignored.
	f.breaks <- struct{}{}
	f.events <- topicEv(2, "old")
	f.events <- topicEv(8, "c")
	v, err = cl.Cache().WaitFor(wctx, func(v *View) bool { return v.Revision == 8 })
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := v.Topic("old"); ok {
		t.Fatal("stale event after reconnect was applied")
	}
}

func TestKeepAliveRenewsAndReregisters(t *testing.T) {
	c := startCluster(t, 1)
	f := c.fakes[0]
	cl := New(Options{Addrs: c.addrs, Dial: c.pool.Get})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cl.KeepAlive(ctx, &metav1.Node{Id: "p1", Incarnation: 1}) }()
	deadline := time.Now().Add(5 * time.Second)
	for f.heartbeats.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	f.forget.Store(true)
	for f.forget.Load() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	if f.heartbeats.Load() < 3 || f.forget.Load() {
		t.Fatalf("heartbeats=%d forgotten=%v", f.heartbeats.Load(), f.forget.Load())
	}
}

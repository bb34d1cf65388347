package metaclient

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/fake/metadfake"
	"github.com/strataio/strata/libs/looptest"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	"github.com/strataio/strata/libs/rpc"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type cluster struct {
	addrs []string
	fakes []*metadfake.Server
	pool  *rpc.Pool
}

// startCluster runs n fake metads (300 ms leases, one partition per topic
// unless asked): the last one leads, the others redirect to it.
func startCluster(t *testing.T, n int, o metadfake.Options) *cluster {
	t.Helper()
	ca := pkitest.New(t)
	c := &cluster{}
	o.LeaseTimeout, o.DefaultPartitions = 300*time.Millisecond, 1
	for i := range n {
		o.ID = "m" + strconv.Itoa(i)
		f := metadfake.Start(t, ca, o)
		c.addrs = append(c.addrs, f.Addr)
		c.fakes = append(c.fakes, f)
	}
	for _, f := range c.fakes[:n-1] {
		f.SetLeader(c.addrs[n-1])
	}
	c.pool = rpc.NewPool(rpc.ClientOptions{Source: ca.Source(t, pki.RoleGateway, "g1")})
	t.Cleanup(func() { c.pool.Close() })
	return c
}

func TestCallFollowsLeaderRedirect(t *testing.T) {
	c := startCluster(t, 3, metadfake.Options{})
	cl := New(Options{Addrs: c.addrs[:1], Dial: c.pool.Get})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cl.CreateTopic(ctx, &metav1.CreateTopicRequest{Name: "orders"})
	if err != nil || !resp.GetCreated() {
		t.Fatalf("create: %v %v", resp, err)
	}
	if c.fakes[2].TopicsCreated() != 1 || c.fakes[0].TopicsCreated() != 0 {
		t.Fatal("create must run exactly once, on the leader")
	}
	if _, err := cl.GetTopic(ctx, "nope"); !errors.Is(err, errcode.TopicNotFound) {
		t.Fatalf("non-retryable errors return as they are: %v", err)
	}
}

func TestCallSkipsUnreachableSeedsAndGivesUpWithContext(t *testing.T) {
	c := startCluster(t, 1, metadfake.Options{})
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
	// The test scripts every event the client receives.
	c := startCluster(t, 1, metadfake.Options{NoWatchSnapshot: true})
	f := c.fakes[0]
	cl := New(Options{Addrs: c.addrs, Dial: c.pool.Get})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cl.Watch(ctx) }()
	defer func() { cancel(); <-done }()

	looptest.Eventually(t, "watch stream", func() bool { return f.Watching() == 1 })
	f.Emit(topicEv(3, "ignored-before-snapshot"))
	f.Emit(&metav1.WatchResponse{Revision: 5, Event: &metav1.WatchResponse_Snapshot{Snapshot: &metav1.Snapshot{
		Topics: []*metav1.Topic{{Config: &metav1.TopicConfig{Name: "a"}}},
		Nodes:  []*metav1.Node{{Id: "p1", Role: metav1.NodeRole_NODE_ROLE_PARTITIOND, Live: true}},
	}}})
	f.Emit(topicEv(4, "stale"))
	f.Emit(topicEv(6, "b"))
	f.Emit(&metav1.WatchResponse{Revision: 7, Event: &metav1.WatchResponse_TopicRemoved{TopicRemoved: "a"}})
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
	f.BreakWatches(errcode.NoRaftLeader.New("stream closed by test"))
	looptest.Eventually(t, "watch stream after the break", func() bool { return f.Watching() == 1 })
	f.Emit(topicEv(2, "old"))
	f.Emit(topicEv(8, "c"))
	v, err = cl.Cache().WaitFor(wctx, func(v *View) bool { return v.Revision == 8 })
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := v.Topic("old"); ok {
		t.Fatal("stale event after reconnect was applied")
	}
}

func TestKeepAliveRenewsAndReregisters(t *testing.T) {
	c := startCluster(t, 1, metadfake.Options{})
	f := c.fakes[0]
	cl := New(Options{Addrs: c.addrs, Dial: c.pool.Get})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cl.KeepAlive(ctx, &metav1.Node{Id: "p1", Incarnation: 1}) }()
	defer func() { cancel(); <-done }()
	looptest.EventuallyWithin(t, 5*time.Second, "three heartbeats", func() bool { return f.Calls("NodeHeartbeat") >= 3 })
	// metad forgets the node: the next heartbeat answers node_not_found and
	// the client registers again.
	f.ForgetNode("p1")
	looptest.EventuallyWithin(t, 5*time.Second, "registered again", func() bool {
		_, ok := f.Node("p1")
		return ok
	})
}

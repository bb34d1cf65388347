package metad

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/metaclient"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// Three voters over the mTLS transport: a follower redirects to the leader's
// gRPC address, the leader is killed, a new one takes over, writes and the
// watch cache continue through the same metaclient, and the old leader
// restarts and catches up.
func TestClusterFailoverOverMTLS(t *testing.T) {
	ca := pkitest.New(t)
	ins := startCluster(t, ca, 3)
	ctx := ctxT(t, 45*time.Second)
	leader := waitLeader(t, ins)
	follower := without(ins, leader)[0]
	addrs := []string{follower.rpc}
	for _, in := range without(ins, follower) {
		addrs = append(addrs, in.rpc)
	}
	gw := client(t, ca, pki.RoleGateway, addrs...)
	pd := client(t, ca, pki.RolePartitiond, addrs...)
	watchInBackground(t, gw)
	registerPartitionServers(t, ctx, pd, "p1", "p2", "p3")

	// A follower answers NOT_LEADER naming the leader's gRPC address (known
	// from the leader's self-registration).
	direct := client(t, ca, pki.RoleGateway, follower.rpc)
	var redirect error
	deadline := time.Now().Add(10 * time.Second)
	redirectOK := func(err error) bool {
		e := errcode.From(err)
		named := byID(ins, e.Field("leader_id"))
		return e.Code == errcode.NotLeader.Name() && named != nil && named != follower && e.Field("leader") == named.rpc
	}
	for time.Now().Before(deadline) {
		_, redirect = metaclientAttempt(ctx, direct, follower.rpc)
		if redirectOK(redirect) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !redirectOK(redirect) {
		t.Fatalf("follower answer: %v", redirect)
	}

	if _, err := gw.CreateTopic(ctx, &metav1.CreateTopicRequest{Name: "before", Partitions: proto.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.Cache().WaitFor(ctx, func(v *metaclient.View) bool { _, ok := v.Topic("before"); return ok }); err != nil {
		t.Fatal("watch did not deliver the first topic")
	}

	// Kill the leader (whoever leads now).
	leader = waitLeader(t, ins)
	start := time.Now()
	leader.stop()
	next := waitLeader(t, without(ins, leader))
	t.Logf("new leader %s after %v", next.id, time.Since(start))
	resp, err := gw.CreateTopic(ctx, &metav1.CreateTopicRequest{Name: "after", Partitions: proto.Int32(2)})
	if err != nil {
		t.Fatalf("write after failover: %v", err)
	}
	if resp.GetTopic().GetPartitions()[0].GetReplicas()[0] == "" {
		t.Fatalf("bad placement %v", resp)
	}
	t.Logf("first write after failover %v after the kill", time.Since(start))
	if _, err := gw.Cache().WaitFor(ctx, func(v *metaclient.View) bool {
		_, a := v.Topic("after")
		_, b := v.Topic("before")
		return a && b
	}); err != nil {
		t.Fatal("watch did not follow the new leader")
	}
	if got, err := gw.GetTopic(ctx, "before"); err != nil || got.GetTopic().GetConfig().GetName() != "before" {
		t.Fatalf("committed topic lost: %v %v", got, err)
	}

	// The old leader comes back on its Raft address and catches up.
	back := leader.restart(ca)
	want := next.srv.node.Load().FSM().Revision()
	deadline = time.Now().Add(15 * time.Second)
	for back.srv.node.Load().FSM().Revision() < want {
		if time.Now().After(deadline) {
			t.Fatalf("restarted node at revision %d, want %d", back.srv.node.Load().FSM().Revision(), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// All three replicas converge to byte-identical state.
	deadline = time.Now().Add(15 * time.Second)
	for {
		all := append([]*instance{back}, without(ins, leader)...)
		ref := all[0].srv.node.Load().FSM().EncodeState()
		same := true
		for _, in := range all[1:] {
			same = same && string(in.srv.node.Load().FSM().EncodeState()) == string(ref)
		}
		if same {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("replicas did not converge to identical state")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Every metad registers itself (followers through the leader).
	deadline = time.Now().Add(10 * time.Second)
	for {
		st, err := gw.ClusterStatus(ctx)
		if err != nil || len(st.GetRaftServers()) != 3 || st.GetRaftLeaderId() == "" {
			t.Fatalf("status: %v %v", st, err)
		}
		metads := 0
		for _, n := range st.GetNodes() {
			if n.GetRole() == metav1.NodeRole_NODE_ROLE_METAD && n.GetLive() {
				metads++
			}
		}
		if metads == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("want the 3 metads registered and live, got %d: %v", metads, st.GetNodes())
		}
		time.Sleep(50 * time.Millisecond)
	}

	// With two of three gone the survivor loses its leader: cluster_leader
	// fails, /ready goes 503, strata_cluster_has_leader drops to 0, while
	// storage still passes.
	survivor := back
	for _, in := range ins {
		if in != leader && in != survivor {
			in.stop()
		}
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		res, ok := survivor.proc.Health.Evaluate(ctx)
		if !ok && res.Checks["cluster_leader"] != "ok" && res.Checks["storage"] == "ok" &&
			series(t, survivor.proc.Registry)["strata_cluster_has_leader{}"] == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("survivor without quorum still reports a leader: %v", res.Checks)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metaclientAttempt makes one direct GetTopic call to addr, without the
// client's redirect handling, and returns its error.
func metaclientAttempt(ctx context.Context, c *metaclient.Client, addr string) (*metav1.GetTopicResponse, error) {
	_ = addr
	var resp *metav1.GetTopicResponse
	var first error
	calls := 0
	err := c.Call(ctx, func(ctx context.Context, m metav1.MetadataServiceClient) (err error) {
		calls++
		if calls > 1 {
			return errcode.InvalidParameter.New("stop") // non-retryable: end Call
		}
		resp, first = m.GetTopic(ctx, &metav1.GetTopicRequest{Name: "x"})
		return first
	})
	if first != nil {
		return nil, first
	}
	return resp, err
}

// A Watch on a follower is redirected; a Watch on a leader that loses
// leadership (transfer, no restart) ends with NOT_LEADER naming the new
// leader's gRPC address.
func TestWatchFollowsLeadership(t *testing.T) {
	ca := pkitest.New(t)
	ins := startCluster(t, ca, 3)
	ctx := ctxT(t, 30*time.Second)
	leader := waitLeader(t, ins)
	admin := client(t, ca, pki.RoleAdmin, leader.rpc)
	// Wait until every metad is registered so redirects name addresses.
	// Under load the first leader may lose its term meanwhile: ask the
	// current one (ClusterStatus is answered by the leader only).
	deadline := time.Now().Add(25 * time.Second)
	for {
		var n int
		if st, err := admin.ClusterStatus(ctx); err == nil {
			for _, nd := range st.GetNodes() {
				if nd.GetRole() == metav1.NodeRole_NODE_ROLE_METAD {
					n++
				}
			}
		} else if l := waitLeader(t, ins); l != leader {
			leader, admin = l, client(t, ca, pki.RoleAdmin, l.rpc)
		}
		if n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("metads did not register")
		}
		time.Sleep(50 * time.Millisecond)
	}

	watch := func(addr string) (metav1.MetadataService_WatchClient, context.CancelFunc) {
		t.Helper()
		c := client(t, ca, pki.RoleAdmin, addr)
		var stream metav1.MetadataService_WatchClient
		wctx, cancel := context.WithCancel(ctx)
		err := c.Call(wctx, func(_ context.Context, m metav1.MetadataServiceClient) (err error) {
			stream, err = m.Watch(wctx, &metav1.WatchRequest{})
			return err
		})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		return stream, cancel
	}
	// A follower redirects the Watch. Leadership may move right after a
	// fresh bootstrap: retry with the current follower, and check that the
	// redirect names the gRPC address of the leader it identifies.
	for {
		cur := waitLeader(t, ins)
		in := without(ins, cur)[0]
		stream, cancel := watch(in.rpc)
		_, err := stream.Recv()
		cancel()
		e := errcode.From(err)
		named := byID(ins, e.Field("leader_id"))
		if e.Code == errcode.NotLeader.Name() && named != nil && named != in && e.Field("leader") == named.rpc {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("watch on follower %s: %v", in.id, err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Until the new cluster's INIT_CLUSTER commits, Watch asks to retry;
	// leadership may also still move after the fresh bootstrap.
	var stream metav1.MetadataService_WatchClient
	for {
		leader = waitLeader(t, ins)
		var cancel context.CancelFunc
		stream, cancel = watch(leader.rpc)
		defer cancel()
		first, err := stream.Recv()
		if err == nil && first.GetSnapshot() != nil {
			break
		}
		if !errcode.IsRetryable(err) || time.Now().After(deadline) {
			t.Fatalf("first event: %v %v", first, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := leader.srv.node.Load().Raft().LeadershipTransfer().Error(); err != nil {
		t.Logf("transfer: %v (leadership moved already)", err)
	}
	var err error
	for {
		_, err = stream.Recv()
		if err != nil {
			break
		}
	}
	e := errcode.From(err)
	named := byID(ins, e.Field("leader_id"))
	if e.Code != errcode.NotLeader.Name() || named == nil || named == leader || e.Field("leader") != named.rpc {
		t.Fatalf("deposed leader's watch ended with %v, want NOT_LEADER naming the new leader", err)
	}
}

// without returns ins except x, in order.
func without(ins []*instance, x *instance) []*instance {
	return slices.DeleteFunc(slices.Clone(ins), func(in *instance) bool { return in == x })
}

func byID(ins []*instance, id string) *instance {
	for _, in := range ins {
		if in.id == id {
			return in
		}
	}
	return nil
}

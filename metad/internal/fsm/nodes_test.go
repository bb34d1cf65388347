package fsm

import (
	"slices"
	"testing"

	"github.com/strataio/strata/libs/errcode"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

func coord(id string, shards uint32) *metav1.Node {
	return &metav1.Node{Id: id, Role: metav1.NodeRole_NODE_ROLE_COORDINATORD, RpcAddress: "127.0.0.1:7500", Incarnation: 1, TransactionCoordinatorShards: shards}
}

func TestInitClusterFixesTxnShardsOnce(t *testing.T) {
	x := newH(t)
	x.fails(&metav1.InitClusterCommand{}, errcode.InvalidParameter)
	x.ok(&metav1.InitClusterCommand{TransactionCoordinatorShards: 64, CreatedUnixMs: 5})
	x.ok(&metav1.InitClusterCommand{TransactionCoordinatorShards: 64, CreatedUnixMs: 9}) // a new leader re-proposes: no-op
	if s := x.state(); !s.Initialized() || s.TxnShards() != 64 || s.CreatedUnixMs() != 5 {
		t.Fatalf("settings = %v %d %d", s.Initialized(), s.TxnShards(), s.CreatedUnixMs())
	}
	x.fails(&metav1.InitClusterCommand{TransactionCoordinatorShards: 50}, errcode.TransactionShardsMismatch)
}

func TestRegisterNodeRejects(t *testing.T) {
	cases := []struct {
		name  string
		init  bool
		setup func(x *h)
		node  *metav1.Node
		code  errcode.Code
	}{
		{"MissingID", true, nil, &metav1.Node{Role: metav1.NodeRole_NODE_ROLE_PARTITIOND, RpcAddress: "a:1", Incarnation: 1}, errcode.MissingParameter},
		{"IDWithSpace", true, nil, &metav1.Node{Id: "p 1", Role: metav1.NodeRole_NODE_ROLE_PARTITIOND, RpcAddress: "a:1", Incarnation: 1}, errcode.InvalidParameter},
		{"ZeroIncarnation", true, nil, &metav1.Node{Id: "p1", Role: metav1.NodeRole_NODE_ROLE_PARTITIOND, RpcAddress: "a:1"}, errcode.InvalidParameter},
		{"UnspecifiedRole", true, nil, &metav1.Node{Id: "p1", RpcAddress: "a:1", Incarnation: 1}, errcode.InvalidParameter},
		{"UnknownRole", true, nil, &metav1.Node{Id: "p1", Role: 99, RpcAddress: "a:1", Incarnation: 1}, errcode.InvalidParameter},
		{"PartitiondWithoutAddress", true, nil, &metav1.Node{Id: "p1", Role: metav1.NodeRole_NODE_ROLE_PARTITIOND, Incarnation: 1}, errcode.MissingParameter},
		{"GatewayWithoutClientAddress", true, nil, &metav1.Node{Id: "g1", Role: metav1.NodeRole_NODE_ROLE_GATEWAY, RpcAddress: "a:1", Incarnation: 1}, errcode.MissingParameter},
		{"CoordinatorBeforeInit", false, nil, coord("c1", 50), errcode.ClusterMetadataUnavailable},
		{"CoordinatorWithOtherShardCount", true, nil, coord("c1", 64), errcode.TransactionShardsMismatch},
		{"CoordinatorWithoutShardCount", true, nil, coord("c1", 0), errcode.TransactionShardsMismatch},
		{"RoleChange", true, func(x *h) { x.register(pnode("n1", 1)) }, coord("n1", 50), errcode.InvalidParameter},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := newH(t)
			if c.init {
				x.init()
			}
			if c.setup != nil {
				c.setup(x)
			}
			x.fails(&metav1.RegisterNodeCommand{Node: c.node, NowUnixMs: x.now}, c.code)
		})
	}
}

func TestRegisterNodeStartsALease(t *testing.T) {
	x := newH(t)
	x.init()
	x.ok(&metav1.RegisterNodeCommand{Node: coord("c1", DefaultTxnShards), NowUnixMs: x.now})
	x.ok(&metav1.RegisterNodeCommand{NowUnixMs: x.now, Node: &metav1.Node{Id: "g1", Role: metav1.NodeRole_NODE_ROLE_GATEWAY,
		ClientAddress: "127.0.0.1:9000", Incarnation: 3}})
	x.register(pnode("p1", 1, 2, 1, 2))
	p := x.node("p1")
	if !p.GetLive() || p.GetLastHeartbeatUnixMs() != x.now || len(p.GetLifecycleVersions()) != 2 || p.GetLifecycleVersions()[0] != 1 {
		t.Fatalf("registered node = %v", p)
	}
	if n := len(x.state().Nodes(metav1.NodeRole_NODE_ROLE_UNSPECIFIED, true)); n != 3 {
		t.Fatalf("%d live nodes", n)
	}
}

func TestHeartbeatRenewsWithoutWatchEvents(t *testing.T) {
	x := newH(t)
	x.register(pnode("p1", 7))
	drain := x.watchFrom(x.f.Revision())
	rev := x.f.Revision()
	x.now += 1000
	if r := x.heartbeat("p1", 7); r.Err != nil {
		t.Fatal(r.Err)
	}
	if got := x.node("p1").GetLastHeartbeatUnixMs(); got != x.now {
		t.Fatalf("last heartbeat = %d, want %d", got, x.now)
	}
	if evs := drain(); len(evs) != 0 || x.f.Revision() != rev {
		t.Fatalf("heartbeat emitted %d events, revision %d -> %d", len(evs), rev, x.f.Revision())
	}
	// An older proposer clock never moves the lease backwards.
	x.now -= 500
	x.heartbeat("p1", 7)
	if got := x.node("p1").GetLastHeartbeatUnixMs(); got != x.now+500 {
		t.Fatalf("lease moved backwards to %d", got)
	}
}

func TestHeartbeatRejects(t *testing.T) {
	x := newH(t)
	x.register(pnode("p1", 7))
	x.fails(&metav1.NodeHeartbeatCommand{NodeId: "nope", Incarnation: 1, NowUnixMs: x.now}, errcode.NodeNotFound)
	x.fails(&metav1.NodeHeartbeatCommand{NodeId: "p1", Incarnation: 6, NowUnixMs: x.now}, errcode.StaleNodeIncarnation)
	x.now += lease
	x.reconcile()
	if x.node("p1").GetLive() {
		t.Fatal("lease did not expire")
	}
	// Expired: register again (what the metaclient registrar does on
	// node_not_found).
	x.fails(&metav1.NodeHeartbeatCommand{NodeId: "p1", Incarnation: 7, NowUnixMs: x.now}, errcode.NodeNotFound)
	x.register(pnode("p1", 7))
	if !x.node("p1").GetLive() {
		t.Fatal("re-registration did not revive the node")
	}
}

func TestNewIncarnationFencesThePartitionsTheNodeLeads(t *testing.T) {
	x := newH(t)
	x.partitionds(3)
	x.ok(create("t", func(r *metav1.CreateTopicRequest) { r.Partitions = ptr[int32](6) }))
	before := x.topic("t").GetPartitions()
	x.register(pnode("p1", 1)) // same incarnation: nothing changes
	if got := x.topic("t").GetPartitions(); got[0] != before[0] {
		t.Fatal("same-incarnation re-registration touched partitions")
	}
	x.register(pnode("p1", 2)) // restarted
	for i, p := range x.topic("t").GetPartitions() {
		b := before[i]
		// New partitions start with every replica in sync, so the
		// restarted node is never the only copy: it leaves the ISR, and
		// where it led, leadership moves on with the epoch raised.
		if slices.Contains(p.GetIsr(), "p1") {
			t.Fatalf("partition %d: restarted p1 still in the ISR %v", i, p.GetIsr())
		}
		switch {
		case b.GetLeader() == "p1" && (p.GetLeader() == "p1" || p.GetLeaderEpoch() != b.GetLeaderEpoch()+1):
			t.Fatalf("partition %d: p1 led; now leader %s epoch %d (was %d)", i, p.GetLeader(), p.GetLeaderEpoch(), b.GetLeaderEpoch())
		case b.GetLeader() != "p1" && (p.GetLeader() != b.GetLeader() || p.GetLeaderEpoch() != b.GetLeaderEpoch()):
			t.Fatalf("partition %d: leader %s epoch %d changed (was %s %d)", i, p.GetLeader(), p.GetLeaderEpoch(), b.GetLeader(), b.GetLeaderEpoch())
		}
	}
}

func TestRestartedReplicaLeavesTheISRUnlessItIsTheOnlyCopy(t *testing.T) {
	x := newH(t)
	p := setupRF3(x) // ISR = all three replicas
	leader, follower := p.GetReplicas()[0], p.GetReplicas()[2]
	x.register(pnode(follower, 2)) // a follower restarts
	got := x.topic("t").GetPartitions()[0]
	if got.GetLeader() != leader || got.GetLeaderEpoch() != p.GetLeaderEpoch() || len(got.GetIsr()) != 2 || slices.Contains(got.GetIsr(), follower) {
		t.Fatalf("after follower restart = %v", got)
	}
	x.register(pnode(leader, 2)) // the leader restarts: leadership moves to the next in-sync replica
	got = x.topic("t").GetPartitions()[0]
	if got.GetLeader() != p.GetReplicas()[1] || got.GetLeaderEpoch() != p.GetLeaderEpoch()+1 || !slices.Equal(got.GetIsr(), []string{p.GetReplicas()[1]}) {
		t.Fatalf("after leader restart = %v", got)
	}
	x.register(pnode(p.GetReplicas()[1], 2)) // the only in-sync copy restarts: it stays, fenced by a new epoch
	last := x.topic("t").GetPartitions()[0]
	if last.GetLeader() != p.GetReplicas()[1] || last.GetLeaderEpoch() != got.GetLeaderEpoch()+1 || !slices.Equal(last.GetIsr(), got.GetIsr()) {
		t.Fatalf("after sole ISR restart = %v", last)
	}
}

// SHUTDOWN_NODE (controlled shutdown) moves leadership off the node and
// takes it out of every ISR where another member is live, in one step; the
// node is no longer live. A stale incarnation or an unknown node is a no-op.
func TestShutdownNodeMovesLeadershipAtOnce(t *testing.T) {
	x := newH(t)
	x.partitionds(3)
	x.ok(create("t", func(r *metav1.CreateTopicRequest) { r.Partitions = ptr[int32](6) }))
	before := x.topic("t").GetPartitions()
	rev := x.f.Revision()
	if r := x.ok(&metav1.ShutdownNodeRequest{NodeId: "p1", Incarnation: 9}).(*metav1.ShutdownNodeResponse); r.GetLeaderChanges() != 0 || x.f.Revision() != rev {
		t.Fatal("a stale incarnation's shutdown changed something")
	}
	x.ok(&metav1.ShutdownNodeRequest{NodeId: "ghost", Incarnation: 1})
	r := x.ok(&metav1.ShutdownNodeRequest{NodeId: "p1", Incarnation: 1}).(*metav1.ShutdownNodeResponse)
	if x.node("p1").GetLive() {
		t.Fatal("p1 still live after its shutdown")
	}
	led := 0
	for i, p := range x.topic("t").GetPartitions() {
		b := before[i]
		if slices.Contains(p.GetIsr(), "p1") {
			t.Fatalf("partition %d: p1 still in the ISR %v", i, p.GetIsr())
		}
		if b.GetLeader() == "p1" {
			led++
			if p.GetLeader() == "p1" || p.GetLeader() == "" || p.GetLeaderEpoch() != b.GetLeaderEpoch()+1 {
				t.Fatalf("partition %d: p1 led; now %q epoch %d", i, p.GetLeader(), p.GetLeaderEpoch())
			}
		} else if p.GetLeader() != b.GetLeader() || p.GetLeaderEpoch() != b.GetLeaderEpoch() {
			t.Fatalf("partition %d: leader changed without cause", i)
		}
	}
	if led == 0 || int(r.GetLeaderChanges()) != led {
		t.Fatalf("p1 led %d partitions, %d leader changes reported", led, r.GetLeaderChanges())
	}
	// A second shutdown of the same incarnation is a no-op; the node comes
	// back by registering (a new process).
	rev = x.f.Revision()
	x.ok(&metav1.ShutdownNodeRequest{NodeId: "p1", Incarnation: 1})
	if x.f.Revision() != rev {
		t.Fatal("repeated shutdown changed the state")
	}
	x.register(pnode("p1", 2))
	if !x.node("p1").GetLive() {
		t.Fatal("p1 not live after registering again")
	}
}

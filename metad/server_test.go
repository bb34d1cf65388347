package metad

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/looptest"
	"github.com/strataio/strata/libs/metaclient"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

func ctxT(t *testing.T, d time.Duration) context.Context { return looptest.Context(t, d) }

func registerPartitionServers(t *testing.T, ctx context.Context, c *metaclient.Client, ids ...string) {
	t.Helper()
	for i, id := range ids {
		_, err := c.Register(ctx, &metav1.Node{Id: id, Role: metav1.NodeRole_NODE_ROLE_PARTITIOND,
			RpcAddress: "127.0.0.1:1", Incarnation: uint64(i + 1), LifecycleVersions: []uint32{1, 2}})
		if err != nil {
			t.Fatalf("register %s: %v", id, err)
		}
	}
}

// watchInBackground runs c.Watch until the test ends.
func watchInBackground(t *testing.T, c *metaclient.Client) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Watch(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

func TestSingleVoterServesTopicsNodesWatchAndSurvivesRestart(t *testing.T) {
	ca := pkitest.New(t)
	dir := t.TempDir()
	m := startSingle(t, ca, dir)
	ctx := ctxT(t, 30*time.Second)

	gw := client(t, ca, pki.RoleGateway, m.rpc)
	pd := client(t, ca, pki.RolePartitiond, m.rpc)
	watchInBackground(t, gw)

	registerPartitionServers(t, ctx, pd, "p1")
	resp, err := gw.CreateTopic(ctx, &metav1.CreateTopicRequest{Name: "orders", Partitions: proto.Int32(3)})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.GetCreated() || resp.GetTopic().GetConfig().GetReplicationFactor() != 1 || resp.GetEffectiveMinInSyncReplicas() != 1 {
		t.Fatalf("create: %v", resp)
	}
	// The watch cache sees the node and the topic with their revisions.
	v, err := gw.Cache().WaitFor(ctx, func(v *metaclient.View) bool {
		_, ok := v.Topic("orders")
		return ok && len(v.Nodes(metav1.NodeRole_NODE_ROLE_PARTITIOND, true)) == 1
	})
	if err != nil {
		t.Fatalf("watch never delivered the topic: %v", err)
	}
	if v.TxnShards != 50 {
		t.Fatalf("txn shards %d", v.TxnShards)
	}
	got, err := gw.GetTopic(ctx, "orders")
	if err != nil || len(got.GetTopic().GetPartitions()) != 3 || got.GetTopic().GetPartitions()[0].GetLeader() != "p1" {
		t.Fatalf("get topic: %v %v", got, err)
	}
	if _, err := gw.GetTopic(ctx, "missing"); errcode.CodeOf(err) != errcode.TopicNotFound.Name() {
		t.Fatalf("missing topic: %v", err)
	}
	st, err := gw.ClusterStatus(ctx)
	if err != nil || st.GetRaftLeaderId() != "m1" || len(st.GetRaftServers()) != 1 || st.GetRevision() != v.Revision {
		t.Fatalf("status: %v %v (cache revision %d)", st, err, v.Revision)
	}
	// Revisions keep rising event by event.
	if _, err := gw.CreateTopic(ctx, &metav1.CreateTopicRequest{Name: "orders", Partitions: proto.Int32(5)}); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.Cache().WaitFor(ctx, func(nv *metaclient.View) bool {
		t, ok := nv.Topic("orders")
		return ok && len(t.GetPartitions()) == 5 && nv.Revision > v.Revision
	}); err != nil {
		t.Fatal("patch not watched")
	}
	rev := m.srv.node.Load().FSM().Revision()

	// Restart on the same directory (and a new loopback Raft port): the
	// committed state is back.
	m.stop()
	m2 := startSingle(t, ca, dir)
	gw2 := client(t, ca, pki.RoleGateway, m2.rpc)
	got, err = gw2.GetTopic(ctx, "orders")
	if err != nil || len(got.GetTopic().GetPartitions()) != 5 {
		t.Fatalf("after restart: %v %v", got, err)
	}
	if r := m2.srv.node.Load().FSM().Revision(); r != rev {
		t.Fatalf("revision %d after restart, want %d", r, rev)
	}
}

func TestRolePolicyAndHandlerChecks(t *testing.T) {
	ca := pkitest.New(t)
	m := startSingle(t, ca, t.TempDir())
	ctx := ctxT(t, 20*time.Second)
	gw := client(t, ca, pki.RoleGateway, m.rpc)
	pd := client(t, ca, pki.RolePartitiond, m.rpc)
	cd := client(t, ca, pki.RoleCoordinatord, m.rpc)
	registerPartitionServers(t, ctx, pd, "p1")

	cases := []struct {
		name string
		call func() error
		code string
	}{
		{"gateway AlterIsr", callWith(ctx, gw, svc.AlterIsr,
			&metav1.AlterIsrRequest{Topic: "x"}), errcode.PeerRoleForbidden.Name()},
		{"partitiond CreateTopic", callWith(ctx, pd, svc.CreateTopic,
			&metav1.CreateTopicRequest{Name: "x"}), errcode.PeerRoleForbidden.Name()},
		{"gateway internal topic", callWith(ctx, gw, svc.CreateTopic,
			&metav1.CreateTopicRequest{Name: "__consumer_offsets", Internal: true}), errcode.InternalTopicWriteForbidden.Name()},
		{"coordinatord other topic", callWith(ctx, cd, svc.CreateTopic,
			&metav1.CreateTopicRequest{Name: "x", Internal: true}), errcode.PeerRoleForbidden.Name()},
		{"gateway registers a partitiond", callWith(ctx, gw, svc.RegisterNode,
			&metav1.RegisterNodeRequest{Node: &metav1.Node{Id: "fake", Role: metav1.NodeRole_NODE_ROLE_PARTITIOND, RpcAddress: "127.0.0.1:1", Incarnation: 1}}), errcode.PeerRoleForbidden.Name()},
		{"invalid topic name (FSM rule)", callWith(ctx, gw, svc.CreateTopic,
			&metav1.CreateTopicRequest{Name: "bad/name"}), errcode.InvalidTopicName.Name()},
	}
	for _, c := range cases {
		if err := c.call(); errcode.CodeOf(err) != c.code {
			t.Errorf("%s: got %v, want %s", c.name, err, c.code)
		}
	}
	// The coordinatord may create the offsets topic.
	resp, err := cd.CreateTopic(ctx, &metav1.CreateTopicRequest{Name: "__consumer_offsets", Internal: true, Partitions: proto.Int32(2)})
	if err != nil || !resp.GetTopic().GetConfig().GetInternal() {
		t.Fatalf("offsets topic: %v %v", resp, err)
	}
	// ...which gateways list only on request.
	for _, internal := range []bool{false, true} {
		lt, err := metaclient.Invoke(ctx, gw, metav1.MetadataServiceClient.ListTopics, &metav1.ListTopicsRequest{IncludeInternal: internal})
		if want := map[bool]int{false: 0, true: 1}[internal]; err != nil || len(lt.GetTopics()) != want {
			t.Fatalf("list (internal=%v): %v %v", internal, lt, err)
		}
	}
}

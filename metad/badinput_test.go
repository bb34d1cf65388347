package metad

import (
	"bytes"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// Bad input over gRPC (invalid names, illegal patches, stale epochs, unknown
// nodes, stale revisions) gets the catalogue's typed error — code, class and
// retryable flag survive the gRPC status — and leaves the replicated state
// byte for byte as it was.
func TestBadInputOverGRPCIsTypedAndChangesNothing(t *testing.T) {
	ca := pkitest.New(t)
	m := startSingleStable(t, ca, t.TempDir()) // no expiry may change the state mid-test
	ctx := ctxT(t, 20*time.Second)
	admin := client(t, ca, pki.RoleAdmin, m.rpc)
	pd := client(t, ca, pki.RolePartitiond, m.rpc)
	for _, id := range []string{"p1", "p2"} {
		if _, err := pd.Register(ctx, &metav1.Node{Id: id, Role: metav1.NodeRole_NODE_ROLE_PARTITIOND, RpcAddress: "127.0.0.1:1", Incarnation: 7}); err != nil {
			t.Fatal(err)
		}
	}
	created, err := admin.CreateTopic(ctx, &metav1.CreateTopicRequest{Name: "t", Partitions: proto.Int32(2), ReplicationFactor: proto.Int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	p0 := created.GetTopic().GetPartitions()[0]
	rev := created.GetTopic().GetConfig().GetRevision()

	cases := []struct {
		name string
		call func() error
		code errcode.Code
	}{
		{"InvalidName", callWith(ctx, admin, svc.CreateTopic,
			&metav1.CreateTopicRequest{Name: "a b"}), errcode.InvalidTopicName},
		{"ZeroPartitions", callWith(ctx, admin, svc.CreateTopic,
			&metav1.CreateTopicRequest{Name: "n", Partitions: proto.Int32(0)}), errcode.InvalidParameter},
		{"ReplicationFactorAboveLiveServers", callWith(ctx, admin, svc.CreateTopic,
			&metav1.CreateTopicRequest{Name: "n", ReplicationFactor: proto.Int32(3)}), errcode.InvalidReplicationFactor},
		{"PatchDecreasesPartitions", callWith(ctx, admin, svc.CreateTopic,
			&metav1.CreateTopicRequest{Name: "t", Partitions: proto.Int32(1)}), errcode.PartitionCountDecrease},
		{"PatchChangesReplicationFactor", callWith(ctx, admin, svc.CreateTopic,
			&metav1.CreateTopicRequest{Name: "t", ReplicationFactor: proto.Int32(1)}), errcode.ImmutableTopicField},
		// The valid half (growth) must not be applied either.
		{"PatchWithUnknownPolicyAndGrowth", callWith(ctx, admin, svc.CreateTopic,
			&metav1.CreateTopicRequest{Name: "t", Partitions: proto.Int32(4), CleanupPolicy: proto.String("forever")}), errcode.InvalidTopicPolicy},
		{"MinISRAboveReplicationFactor", callWith(ctx, admin, svc.AlterTopicConfig,
			&metav1.AlterTopicConfigRequest{Name: "t", MinInSyncReplicas: "3"}), errcode.InvalidParameter},
		{"AlterIsrStaleEpoch", callWith(ctx, admin, svc.AlterIsr,
			&metav1.AlterIsrRequest{Topic: "t", LeaderEpoch: p0.GetLeaderEpoch() + 1, Isr: p0.GetReplicas()}), errcode.StaleLeaderEpoch},
		{"AlterIsrUnknownNode", callWith(ctx, admin, svc.AlterIsr,
			&metav1.AlterIsrRequest{Topic: "t", LeaderEpoch: p0.GetLeaderEpoch(), Isr: []string{p0.GetLeader(), "ghost"}}), errcode.InvalidParameter},
		{"CheckpointStaleLeaderEpoch", callWith(ctx, admin, svc.CheckpointHwm,
			&metav1.CheckpointHwmRequest{Topic: "t", LeaderEpoch: p0.GetLeaderEpoch() + 1, LifecycleEpoch: 1, Hwm: 5}), errcode.StaleLeaderEpoch},
		{"CheckpointStaleLifecycleEpoch", callWith(ctx, admin, svc.CheckpointHwm,
			&metav1.CheckpointHwmRequest{Topic: "t", LeaderEpoch: p0.GetLeaderEpoch(), LifecycleEpoch: 2, Hwm: 5}), errcode.StaleLifecycleEpoch},
		{"HeartbeatUnknownNode", callWith(ctx, admin, svc.NodeHeartbeat,
			&metav1.NodeHeartbeatRequest{NodeId: "ghost", Incarnation: 1}), errcode.NodeNotFound},
		{"HeartbeatStaleIncarnation", callWith(ctx, admin, svc.NodeHeartbeat,
			&metav1.NodeHeartbeatRequest{NodeId: "p1", Incarnation: 6}), errcode.StaleNodeIncarnation},
		{"RegisterZeroIncarnation", callWith(ctx, admin, svc.RegisterNode,
			&metav1.RegisterNodeRequest{Node: &metav1.Node{Id: "p3", Role: metav1.NodeRole_NODE_ROLE_PARTITIOND, RpcAddress: "127.0.0.1:1"}}), errcode.InvalidParameter},
		{"ElectUnknownBroker", callWith(ctx, admin, svc.ElectLeader,
			&metav1.ElectLeaderRequest{Topic: "t", BrokerId: "ghost"}), errcode.LeaderElectionRejected},
		{"TruncateStaleRevision", callWith(ctx, admin, svc.TruncateTopic,
			&metav1.TruncateTopicRequest{Name: "t", ExpectedRevision: rev + 1}), errcode.VersionConflict},
		{"DeleteMissing", callWith(ctx, admin, svc.DeleteTopic, &metav1.DeleteTopicRequest{Name: "missing"}), errcode.TopicNotFound},
		{"GetMissing", callWith(ctx, admin, svc.GetTopic, &metav1.GetTopicRequest{Name: "missing"}), errcode.TopicNotFound},
	}
	fsmState := func() []byte { return m.srv.node.Load().FSM().EncodeState() }
	for _, c := range cases {
		before := fsmState()
		err := c.call()
		e, ok := errcode.As(err)
		switch {
		case err == nil:
			t.Errorf("%s: succeeded, want %s", c.name, c.code.Name())
		case !ok || e.Code != c.code.Name() || e.Class != c.code.Class() || e.Retryable != c.code.Retryable():
			t.Errorf("%s: %v (typed %v), want %s class %v retryable %v", c.name, err, ok, c.code.Name(), c.code.Class(), c.code.Retryable())
		}
		if !bytes.Equal(before, fsmState()) {
			t.Errorf("%s: the rejected call changed the state", c.name)
		}
	}
}

package server

import (
	"bytes"
	"context"
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

	call := func(f func(context.Context, metav1.MetadataServiceClient) error) func() error {
		return func() error { return admin.Call(ctx, f) }
	}
	cases := []struct {
		name string
		call func() error
		code errcode.Code
	}{
		{"InvalidName", call(func(ctx context.Context, c metav1.MetadataServiceClient) error {
			_, err := c.CreateTopic(ctx, &metav1.CreateTopicRequest{Name: "a b"})
			return err
		}), errcode.InvalidTopicName},
		{"ZeroPartitions", call(func(ctx context.Context, c metav1.MetadataServiceClient) error {
			_, err := c.CreateTopic(ctx, &metav1.CreateTopicRequest{Name: "n", Partitions: proto.Int32(0)})
			return err
		}), errcode.InvalidParameter},
		{"ReplicationFactorAboveLiveServers", call(func(ctx context.Context, c metav1.MetadataServiceClient) error {
			_, err := c.CreateTopic(ctx, &metav1.CreateTopicRequest{Name: "n", ReplicationFactor: proto.Int32(3)})
			return err
		}), errcode.InvalidReplicationFactor},
		{"PatchDecreasesPartitions", call(func(ctx context.Context, c metav1.MetadataServiceClient) error {
			_, err := c.CreateTopic(ctx, &metav1.CreateTopicRequest{Name: "t", Partitions: proto.Int32(1)})
			return err
		}), errcode.PartitionCountDecrease},
		{"PatchChangesReplicationFactor", call(func(ctx context.Context, c metav1.MetadataServiceClient) error {
			_, err := c.CreateTopic(ctx, &metav1.CreateTopicRequest{Name: "t", ReplicationFactor: proto.Int32(1)})
			return err
		}), errcode.ImmutableTopicField},
		{"PatchWithUnknownPolicyAndGrowth", call(func(ctx context.Context, c metav1.MetadataServiceClient) error {
			// The valid half (growth) must not be applied either.
			_, err := c.CreateTopic(ctx, &metav1.CreateTopicRequest{Name: "t", Partitions: proto.Int32(4), CleanupPolicy: proto.String("forever")})
			return err
		}), errcode.InvalidTopicPolicy},
		{"MinISRAboveReplicationFactor", call(func(ctx context.Context, c metav1.MetadataServiceClient) error {
			_, err := c.AlterTopicConfig(ctx, &metav1.AlterTopicConfigRequest{Name: "t", MinInSyncReplicas: "3"})
			return err
		}), errcode.InvalidParameter},
		{"AlterIsrStaleEpoch", call(func(ctx context.Context, c metav1.MetadataServiceClient) error {
			_, err := c.AlterIsr(ctx, &metav1.AlterIsrRequest{Topic: "t", LeaderEpoch: p0.GetLeaderEpoch() + 1, Isr: p0.GetReplicas()})
			return err
		}), errcode.StaleLeaderEpoch},
		{"AlterIsrUnknownNode", call(func(ctx context.Context, c metav1.MetadataServiceClient) error {
			_, err := c.AlterIsr(ctx, &metav1.AlterIsrRequest{Topic: "t", LeaderEpoch: p0.GetLeaderEpoch(), Isr: []string{p0.GetLeader(), "ghost"}})
			return err
		}), errcode.InvalidParameter},
		{"CheckpointStaleLeaderEpoch", call(func(ctx context.Context, c metav1.MetadataServiceClient) error {
			_, err := c.CheckpointHwm(ctx, &metav1.CheckpointHwmRequest{Topic: "t", LeaderEpoch: p0.GetLeaderEpoch() + 1, LifecycleEpoch: 1, Hwm: 5})
			return err
		}), errcode.StaleLeaderEpoch},
		{"CheckpointStaleLifecycleEpoch", call(func(ctx context.Context, c metav1.MetadataServiceClient) error {
			_, err := c.CheckpointHwm(ctx, &metav1.CheckpointHwmRequest{Topic: "t", LeaderEpoch: p0.GetLeaderEpoch(), LifecycleEpoch: 2, Hwm: 5})
			return err
		}), errcode.StaleLifecycleEpoch},
		{"HeartbeatUnknownNode", call(func(ctx context.Context, c metav1.MetadataServiceClient) error {
			_, err := c.NodeHeartbeat(ctx, &metav1.NodeHeartbeatRequest{NodeId: "ghost", Incarnation: 1})
			return err
		}), errcode.NodeNotFound},
		{"HeartbeatStaleIncarnation", call(func(ctx context.Context, c metav1.MetadataServiceClient) error {
			_, err := c.NodeHeartbeat(ctx, &metav1.NodeHeartbeatRequest{NodeId: "p1", Incarnation: 6})
			return err
		}), errcode.StaleNodeIncarnation},
		{"RegisterZeroIncarnation", call(func(ctx context.Context, c metav1.MetadataServiceClient) error {
			_, err := c.RegisterNode(ctx, &metav1.RegisterNodeRequest{Node: &metav1.Node{Id: "p3", Role: metav1.NodeRole_NODE_ROLE_PARTITIOND, RpcAddress: "127.0.0.1:1"}})
			return err
		}), errcode.InvalidParameter},
		{"ElectUnknownBroker", call(func(ctx context.Context, c metav1.MetadataServiceClient) error {
			_, err := c.ElectLeader(ctx, &metav1.ElectLeaderRequest{Topic: "t", BrokerId: "ghost"})
			return err
		}), errcode.MissingBroker},
		{"TruncateStaleRevision", call(func(ctx context.Context, c metav1.MetadataServiceClient) error {
			_, err := c.TruncateTopic(ctx, &metav1.TruncateTopicRequest{Name: "t", ExpectedRevision: rev + 1})
			return err
		}), errcode.VersionConflict},
		{"DeleteMissing", call(func(ctx context.Context, c metav1.MetadataServiceClient) error {
			_, err := c.DeleteTopic(ctx, &metav1.DeleteTopicRequest{Name: "missing"})
			return err
		}), errcode.TopicNotFound},
		{"GetMissing", call(func(ctx context.Context, c metav1.MetadataServiceClient) error {
			_, err := c.GetTopic(ctx, &metav1.GetTopicRequest{Name: "missing"})
			return err
		}), errcode.TopicNotFound},
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

package metadfake_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/fake/fakerpc"
	"github.com/strataio/strata/libs/fake/metadfake"
	"github.com/strataio/strata/libs/looptest"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func start(t *testing.T, o metadfake.Options) (*metadfake.Server, metav1.MetadataServiceClient) {
	t.Helper()
	f := metadfake.Start(t, pkitest.New(t), o)
	return f, metav1.NewMetadataServiceClient(f.Dial(t, pki.RolePartitiond))
}

func ctxT(t *testing.T) context.Context { return looptest.Context(t, 10*time.Second) }

func TestCreatePlacesOnOnePartitiondAndIsIdempotent(t *testing.T) {
	f, c := start(t, metadfake.Options{})
	ctx := ctxT(t)
	if _, err := c.CreateTopic(ctx, &metav1.CreateTopicRequest{Name: "t"}); !errors.Is(err, errcode.InvalidParameter) {
		t.Fatalf("no partition count and no default: %v", err)
	}
	for _, id := range []string{"p2", "p1"} {
		if _, err := c.RegisterNode(ctx, &metav1.RegisterNodeRequest{Node: &metav1.Node{Id: id, Role: metav1.NodeRole_NODE_ROLE_PARTITIOND}}); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := c.CreateTopic(ctx, &metav1.CreateTopicRequest{Name: "t", Partitions: proto.Int32(2), CleanupPolicy: proto.String("compact"), Internal: true})
	if err != nil || !resp.GetCreated() {
		t.Fatalf("create: %v %v", resp, err)
	}
	tp := resp.GetTopic()
	if len(tp.GetPartitions()) != 2 || tp.GetPartitions()[1].GetLeader() != "p1" || tp.GetConfig().GetCleanupPolicy() != "compact" || !tp.GetConfig().GetInternal() {
		t.Fatalf("topic %v", tp)
	}
	again, err := c.CreateTopic(ctx, &metav1.CreateTopicRequest{Name: "t", Partitions: proto.Int32(5)})
	if err != nil || again.GetCreated() || len(again.GetTopic().GetPartitions()) != 2 || f.TopicsCreated() != 1 {
		t.Fatalf("second create: %v %v (created %d)", again, err, f.TopicsCreated())
	}
	if _, err := c.GetTopic(ctx, &metav1.GetTopicRequest{Name: "nope"}); !errors.Is(err, errcode.TopicNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	lt, err := c.ListTopics(ctx, &metav1.ListTopicsRequest{})
	if err != nil || len(lt.GetTopics()) != 0 {
		t.Fatalf("internal topics are listed only when asked: %v %v", lt, err)
	}
	st, err := c.ClusterStatus(ctx, &metav1.ClusterStatusRequest{})
	if err != nil || st.GetRaftLeaderId() != "m1" || len(st.GetNodes()) != 2 || len(st.GetTopics()) != 1 {
		t.Fatalf("status %v %v", st, err)
	}
}

func TestWatchSendsSnapshotThenEveryChange(t *testing.T) {
	f, c := start(t, metadfake.Options{DefaultPartitions: 1})
	ctx := ctxT(t)
	f.PutTopic(metadfake.NewTopic("a", 1, 1, "p1", "p1"))
	w, err := c.Watch(ctx, &metav1.WatchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	first, err := w.Recv()
	if err != nil || len(first.GetSnapshot().GetTopics()) != 1 || first.GetRevision() != f.Revision() ||
		first.GetSnapshot().GetTransactionCoordinatorShards() != metadfake.TxnShards {
		t.Fatalf("snapshot %v %v", first, err)
	}
	if _, err := c.CreateTopic(ctx, &metav1.CreateTopicRequest{Name: "b"}); err != nil {
		t.Fatal(err)
	}
	f.SetLive("p1", true) // unknown node: no event
	f.RemoveTopic("a")
	for _, want := range []string{"upsert b", "remove a"} {
		ev, err := w.Recv()
		if err != nil {
			t.Fatal(err)
		}
		got := "upsert " + ev.GetTopicUpserted().GetConfig().GetName()
		if ev.GetTopicRemoved() != "" {
			got = "remove " + ev.GetTopicRemoved()
		}
		if got != want || ev.GetRevision() <= first.GetRevision() {
			t.Fatalf("event %v, want %s after revision %d", ev, want, first.GetRevision())
		}
	}
	f.BreakWatches(errcode.NoRaftLeader.New("test"))
	if _, err := w.Recv(); !errors.Is(err, errcode.NoRaftLeader) {
		t.Fatalf("broken stream: %v", err)
	}
}

func TestScriptedWatchWithoutSnapshot(t *testing.T) {
	f, c := start(t, metadfake.Options{NoWatchSnapshot: true})
	ctx := ctxT(t)
	w, err := c.Watch(ctx, &metav1.WatchRequest{})
	if err != nil {
		t.Fatal(err)
	}
	looptest.Eventually(t, "stream open", func() bool { return f.Watching() == 1 })
	f.Emit(&metav1.WatchResponse{Revision: 42, Event: &metav1.WatchResponse_TopicRemoved{TopicRemoved: "x"}})
	ev, err := w.Recv()
	if err != nil || ev.GetRevision() != 42 || ev.GetTopicRemoved() != "x" {
		t.Fatalf("scripted event %v %v", ev, err)
	}
}

func TestFollowerRedirectsEveryCall(t *testing.T) {
	f, c := start(t, metadfake.Options{})
	ctx := ctxT(t)
	f.SetLeader("127.0.0.1:7")
	_, err := c.ListNodes(ctx, &metav1.ListNodesRequest{})
	if e := errcode.From(err); e.Code != errcode.NotLeader.Name() || e.Field("leader") != "127.0.0.1:7" {
		t.Fatalf("follower answer: %v", err)
	}
	f.SetLeader("")
	if _, err := c.ListNodes(ctx, &metav1.ListNodesRequest{}); err != nil {
		t.Fatal(err)
	}
}

func TestLeasesAndForgottenNodes(t *testing.T) {
	f, c := start(t, metadfake.Options{LeaseTimeout: 300 * time.Millisecond})
	ctx := ctxT(t)
	reg, err := c.RegisterNode(ctx, &metav1.RegisterNodeRequest{Node: &metav1.Node{Id: "p1", Role: metav1.NodeRole_NODE_ROLE_PARTITIOND}})
	if err != nil || reg.GetLeaseTimeoutMs() != 300 || !reg.GetNode().GetLive() {
		t.Fatalf("register %v %v", reg, err)
	}
	if _, err := c.NodeHeartbeat(ctx, &metav1.NodeHeartbeatRequest{NodeId: "p1"}); err != nil {
		t.Fatal(err)
	}
	f.ForgetNode("p1")
	if _, err := c.NodeHeartbeat(ctx, &metav1.NodeHeartbeatRequest{NodeId: "p1"}); !errors.Is(err, errcode.NodeNotFound) {
		t.Fatalf("heartbeat of a forgotten node: %v", err)
	}
	if _, ok := f.Node("p1"); ok {
		t.Fatal("forgotten node still known")
	}
}

func TestDeleteCleanupReportsAndCheckpoints(t *testing.T) {
	f, c := start(t, metadfake.Options{DeleteLeavesCleanup: true})
	ctx := ctxT(t)
	f.PutTopic(metadfake.NewTopic("d", 2, 3, "p1", "p1", "p2"))
	del, err := c.DeleteTopic(ctx, &metav1.DeleteTopicRequest{Name: "d"})
	if err != nil || !del.GetCleanupPending() {
		t.Fatalf("delete %v %v", del, err)
	}
	if _, err := c.GetTopic(ctx, &metav1.GetTopicRequest{Name: "d"}); !errors.Is(err, errcode.TopicNotFound) {
		t.Fatalf("a DELETING topic is hidden: %v", err)
	}
	if _, err := c.ReportCleanup(ctx, &metav1.ReportCleanupRequest{Topic: "d", NodeId: "p1", LifecycleEpoch: 2}); !errors.Is(err, errcode.StaleLifecycleEpoch) {
		t.Fatalf("stale report: %v", err)
	}
	f.On("ReportCleanup", 1, fakerpc.Fail(errcode.FSMNotAvailable.New("injected")))
	if _, err := c.ReportCleanup(ctx, &metav1.ReportCleanupRequest{Topic: "d", NodeId: "p1", LifecycleEpoch: 3}); !errors.Is(err, errcode.FSMNotAvailable) {
		t.Fatalf("injected failure: %v", err)
	}
	for _, n := range []string{"p1", "p2"} {
		if _, err := c.ReportCleanup(ctx, &metav1.ReportCleanupRequest{Topic: "d", NodeId: n, LifecycleEpoch: 3}); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := f.Topic("d"); ok {
		t.Fatal("topic still there after every replica reported")
	}
	if n := len(f.CleanupReports()); n != 4 {
		t.Fatalf("%d reports recorded, want 4 (the failed ones too)", n)
	}
	if _, err := c.CheckpointHwm(ctx, &metav1.CheckpointHwmRequest{Topic: "d", Hwm: 9}); err != nil {
		t.Fatal(err)
	}
	if h := f.HwmCheckpoints(); len(h) != 1 || h[0].GetHwm() != 9 {
		t.Fatalf("checkpoints %v", h)
	}
}

package server

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	"github.com/strataio/strata/libs/rpc"
	coordv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

type fakeCoordinator struct {
	coordv1.UnimplementedCoordinatorServiceServer
	active atomic.Bool
	asked  atomic.Int32
}

func (f *fakeCoordinator) TopicActivity(_ context.Context, req *coordv1.TopicActivityRequest) (*coordv1.TopicActivityResponse, error) {
	f.asked.Add(1)
	if f.active.Load() {
		return &coordv1.TopicActivityResponse{ActiveMembers: true, Groups: []string{"g1"}}, nil
	}
	return &coordv1.TopicActivityResponse{}, nil
}

// DELETE asks every live coordinatord first: active members block it
// (topic_delete_blocked), an unreachable coordinator fails closed.
func TestDeleteAsksCoordinatorsFirst(t *testing.T) {
	ca := pkitest.New(t)
	m := startSingle(t, ca, t.TempDir())
	ctx := ctxT(t, 20*time.Second)

	fake := &fakeCoordinator{}
	srv, err := rpc.NewServer(rpc.ServerOptions{Source: ca.Source(t, pki.RoleCoordinatord, "c1"),
		Policy: rpc.Policy{"/" + coordv1.CoordinatorService_ServiceDesc.ServiceName + "/TopicActivity": {pki.RoleMetad}}})
	if err != nil {
		t.Fatal(err)
	}
	coordv1.RegisterCoordinatorServiceServer(srv, fake)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()

	gw := client(t, ca, pki.RoleGateway, m.rpc)
	pd := client(t, ca, pki.RolePartitiond, m.rpc)
	cd := client(t, ca, pki.RoleCoordinatord, m.rpc)
	registerPartitionServers(t, ctx, pd, "p1")
	if _, err := cd.Register(ctx, &metav1.Node{Id: "c1", Role: metav1.NodeRole_NODE_ROLE_COORDINATORD, RpcAddress: ln.Addr().String(), Incarnation: 1, TransactionCoordinatorShards: 50}); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.CreateTopic(ctx, &metav1.CreateTopicRequest{Name: "t", Partitions: proto.Int32(1)}); err != nil {
		t.Fatal(err)
	}

	fake.active.Store(true)
	_, err = gw.DeleteTopic(ctx, &metav1.DeleteTopicRequest{Name: "t"})
	if e := errcode.From(err); e.Code != errcode.TopicDeleteBlocked.Name() || e.Field("topic") != "t" {
		t.Fatalf("delete with active members: %v", err)
	}
	if _, err := gw.GetTopic(ctx, "t"); err != nil {
		t.Fatalf("blocked delete changed the topic: %v", err)
	}
	fake.active.Store(false)
	resp, err := gw.DeleteTopic(ctx, &metav1.DeleteTopicRequest{Name: "t"})
	if err != nil || !resp.GetDeleted() {
		t.Fatalf("delete: %v %v", resp, err)
	}
	if fake.asked.Load() != 2 {
		t.Fatalf("coordinator asked %d times", fake.asked.Load())
	}

	// The coordinator goes away while still registered as live: fail closed.
	if _, err := gw.CreateTopic(ctx, &metav1.CreateTopicRequest{Name: "u", Partitions: proto.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = gw.DeleteTopic(cctx, &metav1.DeleteTopicRequest{Name: "u"})
	if !errcode.IsRetryable(err) {
		t.Fatalf("delete with an unreachable coordinator: %v", err)
	}
	if _, err := gw.GetTopic(ctx, "u"); err != nil {
		t.Fatalf("topic u must remain: %v", err)
	}
}

package metad

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/fake/coordfake"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	coordv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// DELETE asks every live coordinatord first: active members block it
// (topic_delete_blocked), an unreachable coordinator fails closed.
func TestDeleteAsksCoordinatorsFirst(t *testing.T) {
	ca := pkitest.New(t)
	m := startSingle(t, ca, t.TempDir())
	ctx := ctxT(t, 20*time.Second)

	fake := coordfake.Start(t, ca, coordfake.Options{ID: "c1", Callers: []pki.Role{pki.RoleMetad}})

	gw := client(t, ca, pki.RoleGateway, m.rpc)
	pd := client(t, ca, pki.RolePartitiond, m.rpc)
	cd := client(t, ca, pki.RoleCoordinatord, m.rpc)
	registerPartitionServers(t, ctx, pd, "p1")
	if _, err := cd.Register(ctx, &metav1.Node{Id: "c1", Role: metav1.NodeRole_NODE_ROLE_COORDINATORD, RpcAddress: fake.Addr, Incarnation: 1, TransactionCoordinatorShards: 50}); err != nil {
		t.Fatal(err)
	}
	if _, err := gw.CreateTopic(ctx, &metav1.CreateTopicRequest{Name: "t", Partitions: proto.Int32(1)}); err != nil {
		t.Fatal(err)
	}

	// A member on t makes the group active.
	member, err := fake.JoinGroup(ctx, &coordv1.JoinGroupRequest{Group: "g1", Member: "m", Topic: "t"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = gw.DeleteTopic(ctx, &metav1.DeleteTopicRequest{Name: "t"})
	if e := errcode.From(err); e.Code != errcode.TopicDeleteBlocked.Name() || e.Field("topic") != "t" {
		t.Fatalf("delete with active members: %v", err)
	}
	if _, err := gw.GetTopic(ctx, "t"); err != nil {
		t.Fatalf("blocked delete changed the topic: %v", err)
	}
	if _, err := fake.LeaveGroup(ctx, &coordv1.LeaveGroupRequest{Group: "g1", Member: member.GetMember()}); err != nil {
		t.Fatal(err)
	}
	resp, err := gw.DeleteTopic(ctx, &metav1.DeleteTopicRequest{Name: "t"})
	if err != nil || !resp.GetDeleted() {
		t.Fatalf("delete: %v %v", resp, err)
	}
	if n := fake.Calls("TopicActivity"); n != 2 {
		t.Fatalf("coordinator asked %d times", n)
	}

	// The coordinator goes away while still registered as live: fail closed.
	if _, err := gw.CreateTopic(ctx, &metav1.CreateTopicRequest{Name: "u", Partitions: proto.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	fake.Stop()
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

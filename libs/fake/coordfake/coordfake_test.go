package coordfake_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/fake/coordfake"
	"github.com/strataio/strata/libs/fake/fakerpc"
	"github.com/strataio/strata/libs/looptest"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func start(t *testing.T) (*coordfake.Server, coordinatorv1.CoordinatorServiceClient) {
	t.Helper()
	f := coordfake.Start(t, pkitest.New(t), coordfake.Options{})
	return f, coordinatorv1.NewCoordinatorServiceClient(f.Dial(t, pki.RoleGateway))
}

func ctxT(t *testing.T) context.Context { return looptest.Context(t, 10*time.Second) }

func TestMembershipGenerationsAndAssignments(t *testing.T) {
	f, c := start(t)
	ctx := ctxT(t)
	f.SetPartitions("orders", 3)
	a, err := c.JoinGroup(ctx, &coordinatorv1.JoinGroupRequest{Group: "g", Member: "a", Topic: "orders"})
	if err != nil || a.GetGeneration() != 1 || len(a.GetAssignments()) != 3 || len(a.GetMember()) != len("a")+5 {
		t.Fatalf("first join %v %v", a, err)
	}
	b, err := c.JoinGroup(ctx, &coordinatorv1.JoinGroupRequest{Group: "g", Member: "b", Topic: "orders"})
	if err != nil || b.GetGeneration() != 2 || !slices.Equal(b.GetAssignments(), []int32{1}) {
		t.Fatalf("second join %v %v", b, err)
	}
	gen := a.GetGeneration()
	_, err = c.Heartbeat(ctx, &coordinatorv1.HeartbeatRequest{Group: "g", Member: a.GetMember(), Generation: &gen})
	if e := errcode.From(err); e.Code != errcode.GenMismatch.Name() || e.Field("current") != "2" {
		t.Fatalf("stale heartbeat: %v", err)
	}
	sy, err := c.SyncGroup(ctx, &coordinatorv1.SyncGroupRequest{Group: "g", Member: a.GetMember(), Generation: 2})
	if err != nil || !slices.Equal(sy.GetAssignments(), []int32{0, 2}) {
		t.Fatalf("sync %v %v", sy, err)
	}
	act, err := c.TopicActivity(ctx, &coordinatorv1.TopicActivityRequest{Topic: "orders"})
	if err != nil || !act.GetActiveMembers() || !slices.Equal(act.GetGroups(), []string{"g"}) {
		t.Fatalf("activity %v %v", act, err)
	}
	if _, err := c.DeleteGroup(ctx, &coordinatorv1.DeleteGroupRequest{Group: "g"}); !errors.Is(err, errcode.GroupNotEmpty) {
		t.Fatalf("delete with members: %v", err)
	}
	for _, m := range []string{a.GetMember(), b.GetMember()} {
		if _, err := c.LeaveGroup(ctx, &coordinatorv1.LeaveGroupRequest{Group: "g", Member: m}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := c.GroupStatus(ctx, &coordinatorv1.GroupStatusRequest{Group: "g"})
	if err != nil || st.GetState() != "Empty" || st.GetGeneration() != 4 || st.GetPartitionCount() != 3 {
		t.Fatalf("status %v %v", st, err)
	}
	if _, err := c.Heartbeat(ctx, &coordinatorv1.HeartbeatRequest{Group: "g", Member: a.GetMember()}); !errors.Is(err, errcode.MemberNotFound) {
		t.Fatalf("heartbeat after leaving: %v", err)
	}
	if _, err := c.DeleteGroup(ctx, &coordinatorv1.DeleteGroupRequest{Group: "g"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GroupStatus(ctx, &coordinatorv1.GroupStatusRequest{Group: "g"}); !errors.Is(err, errcode.GroupNotFound) {
		t.Fatalf("deleted group: %v", err)
	}
}

func TestOffsets(t *testing.T) {
	f, c := start(t)
	ctx := ctxT(t)
	if _, err := c.CommitOffset(ctx, &coordinatorv1.CommitOffsetRequest{Group: "g", Topic: "t", Partition: 1, Offset: 5}); err != nil {
		t.Fatal(err)
	}
	bc, err := c.BatchCommit(ctx, &coordinatorv1.BatchCommitRequest{Group: "g", Topic: "t", OffsetsList: "P0:3,P2:9"})
	if err != nil || bc.GetBatched() != 2 {
		t.Fatalf("batch %v %v", bc, err)
	}
	if _, err := c.BatchCommit(ctx, &coordinatorv1.BatchCommitRequest{Group: "g", Topic: "t", OffsetsList: "P0:3,P0:4"}); !errors.Is(err, errcode.DuplicatePartition) {
		t.Fatalf("duplicate: %v", err)
	}
	fo, err := c.FetchOffset(ctx, &coordinatorv1.FetchOffsetRequest{Group: "g", Topic: "t", Partition: 2})
	if err != nil || !fo.GetFound() || fo.GetOffset() != 9 {
		t.Fatalf("fetch %v %v", fo, err)
	}
	rs, err := c.ResetOffsets(ctx, &coordinatorv1.ResetOffsetsRequest{Group: "new", Topic: "t", Offsets: []*coordinatorv1.PartitionOffset{{Partition: 0, Offset: 1}}})
	if err != nil || !rs.GetCreated() || rs.GetEntries() != 1 {
		t.Fatalf("reset %v %v", rs, err)
	}
	if o, ok := f.Committed("g", "t", 1); !ok || o != 5 {
		t.Fatalf("committed %d %v", o, ok)
	}
	lg, err := c.ListGroups(ctx, &coordinatorv1.ListGroupsRequest{})
	if err != nil || len(lg.GetGroups()) != 2 || lg.GetGroups()[0].GetGroup() != "g" {
		t.Fatalf("list %v %v", lg, err)
	}
}

func TestPeerThatFailsOrHangs(t *testing.T) {
	f, c := start(t)
	ctx := ctxT(t)
	if _, err := c.RegisterGroup(ctx, &coordinatorv1.RegisterGroupRequest{Group: "multi", Topics: []string{"u", "t"}}); err != nil {
		t.Fatal(err)
	}
	remove := f.On("ListGroups", 0, fakerpc.Fail(errcode.CoordinatorNotAvailable.New("not replayed")))
	if _, err := c.ListGroups(ctx, &coordinatorv1.ListGroupsRequest{}); !errors.Is(err, errcode.CoordinatorNotAvailable) {
		t.Fatalf("failing peer: %v", err)
	}
	remove()
	f.On("ListGroups", 1, fakerpc.Hang())
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := c.ListGroups(short, &coordinatorv1.ListGroupsRequest{}); err == nil {
		t.Fatal("a hanging peer answered")
	}
	lg, err := c.ListGroups(ctx, &coordinatorv1.ListGroupsRequest{})
	if err != nil || !slices.Equal(lg.GetGroups()[0].GetTopics(), []string{"t", "u"}) {
		t.Fatalf("list %v %v", lg, err)
	}
}

// The group is checked before the entries, as coordinatord does (spec 4.5):
// a stale generation or an active group wins over a bad list.
func TestGroupCheckedBeforeEntries(t *testing.T) {
	_, c := start(t)
	ctx := ctxT(t)
	j, err := c.JoinGroup(ctx, &coordinatorv1.JoinGroupRequest{Group: "g", Member: "a", Topic: "t"})
	if err != nil {
		t.Fatal(err)
	}
	stale := j.GetGeneration() + 1
	_, err = c.BatchCommit(ctx, &coordinatorv1.BatchCommitRequest{Group: "g", Topic: "t", Member: j.GetMember(), Generation: &stale, OffsetsList: "P0:1,P0:2"})
	if !errors.Is(err, errcode.GenMismatch) {
		t.Fatalf("batch commit at another generation with a bad list: %v", err)
	}
	if _, err := c.ResetOffsets(ctx, &coordinatorv1.ResetOffsetsRequest{Group: "g", Topic: "t", OffsetsList: "P0:1,P0:2"}); !errors.Is(err, errcode.GroupNotEmpty) {
		t.Fatalf("reset of an active group with a bad list: %v", err)
	}
	if _, err := c.ResetOffsets(ctx, &coordinatorv1.ResetOffsetsRequest{Group: "new", Topic: "t", OffsetsList: "P0:1,P0:2"}); !errors.Is(err, errcode.DuplicatePartition) {
		t.Fatalf("reset with a bad list: %v", err)
	}
	if _, err := c.GroupStatus(ctx, &coordinatorv1.GroupStatusRequest{Group: "new"}); !errors.Is(err, errcode.GroupNotFound) {
		t.Fatalf("a refused reset left a group behind: %v", err)
	}
}

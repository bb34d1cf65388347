package coordinatord

import (
	"context"
	"slices"
	"testing"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pki"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
)

// fetch returns the committed offset of (group, orders, p) and whether one
// is stored.
func fetch(t *testing.T, ctx context.Context, cl coordinatorv1.CoordinatorServiceClient, g string, p int32) (uint64, bool) {
	t.Helper()
	fo, err := cl.FetchOffset(ctx, &coordinatorv1.FetchOffsetRequest{Group: g, Topic: "orders", Partition: p})
	if err != nil {
		t.Fatalf("FetchOffset %s P%d: %v", g, p, err)
	}
	return fo.GetOffset(), fo.GetFound()
}

func wantOffsets(t *testing.T, ctx context.Context, cl coordinatorv1.CoordinatorServiceClient, g string, want map[int32]uint64) {
	t.Helper()
	for p, w := range want {
		if off, found := fetch(t, ctx, cl, g, p); off != w || !found {
			t.Fatalf("%s P%d = %d (found %v), want %d", g, p, off, found, w)
		}
	}
}

func wantErr(t *testing.T, err error, code string, kv ...string) {
	t.Helper()
	e := errcode.From(err)
	if err == nil || e.Code != code {
		t.Fatalf("want %s, got %v", code, err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if e.Field(kv[i]) != kv[i+1] {
			t.Fatalf("%s: field %s = %q, want %q (%v)", code, kv[i], e.Field(kv[i]), kv[i+1], e)
		}
	}
}

// TestResetOffsets drives ResetOffsets over gRPC/mTLS against fake metad and
// partitiond: an empty group's offsets go down and up, an active group is
// refused, a missing group is registered (and is not when anything is
// wrong), a restart replays the reset offsets, and DeleteGroup drops them.
func TestResetOffsets(t *testing.T) {
	c, co := startSingle(t, "orders", 3)
	ctx := ctxT(t)
	cl := co.client

	// Group g: a member commits, then leaves, so the group is empty.
	j, err := cl.JoinGroup(ctx, &coordinatorv1.JoinGroupRequest{Group: "g", Member: "m", Topic: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.BatchCommit(ctx, &coordinatorv1.BatchCommitRequest{Group: "g", Topic: "orders", Member: j.GetMember(),
		Generation: u64(j.GetGeneration()), OffsetsList: "P0:40,P1:10,P2:20"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.LeaveGroup(ctx, &coordinatorv1.LeaveGroupRequest{Group: "g", Member: j.GetMember(), Topic: "orders"}); err != nil {
		t.Fatal(err)
	}

	t.Run("empty group: offsets go down and up", func(t *testing.T) {
		r, err := cl.ResetOffsets(ctx, &coordinatorv1.ResetOffsetsRequest{Group: "g", Topic: "orders", OffsetsList: "P0:5,P1:30"})
		if err != nil || r.GetEntries() != 2 || r.GetCreated() {
			t.Fatalf("reset %v %v", r, err)
		}
		wantOffsets(t, ctx, cl, "g", map[int32]uint64{0: 5, 1: 30, 2: 20})
		// Structured entries, and a value equal to the committed one.
		r, err = cl.ResetOffsets(ctx, &coordinatorv1.ResetOffsetsRequest{Group: "g", Topic: "orders",
			Offsets: []*coordinatorv1.PartitionOffset{{Partition: 2, Offset: 0}, {Partition: 1, Offset: 30}}})
		if err != nil || r.GetEntries() != 2 {
			t.Fatalf("structured reset %v %v", r, err)
		}
		wantOffsets(t, ctx, cl, "g", map[int32]uint64{0: 5, 1: 30, 2: 0})
	})

	t.Run("invalid requests change nothing", func(t *testing.T) {
		for _, tc := range []struct {
			name, topic, list, code string
			kv                      []string
		}{
			{name: "partition outside the topic", topic: "orders", list: "P0:1,P3:1", code: "partition_not_found", kv: []string{"topic", "orders", "partition", "3"}},
			{name: "duplicate partition", topic: "orders", list: "P0:1,P0:2", code: "duplicate_partition", kv: []string{"partition", "0"}},
			{name: "malformed entry", topic: "orders", list: "P0:1,x", code: "invalid_batch_commit_entry", kv: []string{"reason", "bad_entry"}},
			{name: "empty list", topic: "orders", code: "no_valid_offsets"},
			{name: "other topic", topic: "payments", list: "P0:1", code: "topic_not_assigned_to_group"},
			{name: "no topic", list: "P0:1", code: "missing_topic"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := cl.ResetOffsets(ctx, &coordinatorv1.ResetOffsetsRequest{Group: "g", Topic: tc.topic, OffsetsList: tc.list})
				wantErr(t, err, tc.code, tc.kv...)
				wantOffsets(t, ctx, cl, "g", map[int32]uint64{0: 5, 1: 30, 2: 0})
			})
		}
		_, err := cl.ResetOffsets(ctx, &coordinatorv1.ResetOffsetsRequest{Topic: "orders", OffsetsList: "P0:1"})
		wantErr(t, err, "missing_parameter", "param", "group")
	})

	t.Run("active member: group_not_empty, offsets unchanged", func(t *testing.T) {
		a, err := cl.JoinGroup(ctx, &coordinatorv1.JoinGroupRequest{Group: "g", Member: "busy", Topic: "orders"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = cl.ResetOffsets(ctx, &coordinatorv1.ResetOffsetsRequest{Group: "g", Topic: "orders", OffsetsList: "P0:0"})
		wantErr(t, err, "group_not_empty", "group", "g", "members", "1")
		if e := errcode.From(err); e.Class != errcode.ClassConflict || e.Retryable {
			t.Fatalf("group_not_empty class %v retryable %v", e.Class, e.Retryable)
		}
		wantOffsets(t, ctx, cl, "g", map[int32]uint64{0: 5, 1: 30, 2: 0})
		if _, err := cl.LeaveGroup(ctx, &coordinatorv1.LeaveGroupRequest{Group: "g", Member: a.GetMember(), Topic: "orders"}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("missing group is registered with its offsets", func(t *testing.T) {
		r, err := cl.ResetOffsets(ctx, &coordinatorv1.ResetOffsetsRequest{Group: "fresh", Topic: "orders", OffsetsList: "P2:7,P0:3"})
		if err != nil || r.GetEntries() != 2 || !r.GetCreated() {
			t.Fatalf("reset of a missing group %v %v", r, err)
		}
		st, err := cl.GroupStatus(ctx, &coordinatorv1.GroupStatusRequest{Group: "fresh"})
		if err != nil || st.GetState() != "Empty" || st.GetTopicName() != "orders" || st.GetPartitionCount() != 3 {
			t.Fatalf("registered group %v %v", st, err)
		}
		wantOffsets(t, ctx, cl, "fresh", map[int32]uint64{0: 3, 2: 7})
		if _, found := fetch(t, ctx, cl, "fresh", 1); found {
			t.Fatal("P1 of the new group was never reset")
		}
		// Its consumers start from there: a join resumes the registration.
		j, err := cl.JoinGroup(ctx, &coordinatorv1.JoinGroupRequest{Group: "fresh", Member: "m", Topic: "orders"})
		if err != nil || len(j.GetAssignments()) != 3 {
			t.Fatalf("join of the registered group %v %v", j, err)
		}
		if _, err := cl.LeaveGroup(ctx, &coordinatorv1.LeaveGroupRequest{Group: "fresh", Member: j.GetMember(), Topic: "orders"}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("missing group stays missing when the reset fails", func(t *testing.T) {
		for _, tc := range []struct{ name, group, topic, list, code string }{
			{"unknown topic", "ghost1", "nope", "P0:1", "topic_not_found"},
			{"partition outside the topic", "ghost2", "orders", "P5:1", "partition_not_found"},
			{"malformed list", "ghost3", "orders", "P0:", "invalid_batch_commit_entry"},
			{"no topic", "ghost4", "", "P0:1", "missing_topic"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := cl.ResetOffsets(ctx, &coordinatorv1.ResetOffsetsRequest{Group: tc.group, Topic: tc.topic, OffsetsList: tc.list})
				wantErr(t, err, tc.code)
				_, err = cl.GroupStatus(ctx, &coordinatorv1.GroupStatusRequest{Group: tc.group})
				wantErr(t, err, "group_not_found")
			})
		}
		lg, err := cl.ListGroups(ctx, &coordinatorv1.ListGroupsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range lg.GetGroups() {
			names = append(names, s.GetGroup())
		}
		if !slices.Equal(names, []string{"fresh", "g"}) {
			t.Fatalf("groups %v", names)
		}
	})

	// Restart: replay restores the reset offsets (lowered ones included)
	// and the group the reset registered.
	co.stop()
	co2 := startCoord(t, c, "c1", testConfig(c))
	co2.waitReady(t)
	cl = co2.client
	t.Run("replay restores reset offsets", func(t *testing.T) {
		wantOffsets(t, ctx, cl, "g", map[int32]uint64{0: 5, 1: 30, 2: 0})
		wantOffsets(t, ctx, cl, "fresh", map[int32]uint64{0: 3, 2: 7})
		if st, err := cl.GroupStatus(ctx, &coordinatorv1.GroupStatusRequest{Group: "fresh"}); err != nil || st.GetTopicName() != "orders" {
			t.Fatalf("registered group after restart %v %v", st, err)
		}
	})

	t.Run("DeleteGroup drops the offsets", func(t *testing.T) {
		d, err := cl.DeleteGroup(ctx, &coordinatorv1.DeleteGroupRequest{Group: "g"})
		if err != nil || !d.GetDeleted() {
			t.Fatalf("delete %v %v", d, err)
		}
		for p := range int32(3) {
			if off, found := fetch(t, ctx, cl, "g", p); off != 0 || found {
				t.Fatalf("P%d after delete = %d (found %v)", p, off, found)
			}
		}
		_, err = cl.DeleteGroup(ctx, &coordinatorv1.DeleteGroupRequest{Group: "g"})
		wantErr(t, err, "group_not_found", "group", "g")
		// A reset after the delete registers the group anew; the old
		// offsets do not come back.
		if _, err := cl.ResetOffsets(ctx, &coordinatorv1.ResetOffsetsRequest{Group: "g", Topic: "orders", OffsetsList: "P1:2"}); err != nil {
			t.Fatal(err)
		}
		if off, found := fetch(t, ctx, cl, "g", 0); off != 0 || found {
			t.Fatalf("P0 of the re-created group = %d (found %v)", off, found)
		}
		wantOffsets(t, ctx, cl, "g", map[int32]uint64{1: 2})
	})
}

// The new RPC is callable by the gateway and admin tools like every group
// command, and not by other roles.
func TestPolicyCoversResetOffsets(t *testing.T) {
	m := "/" + coordinatorv1.CoordinatorService_ServiceDesc.ServiceName + "/ResetOffsets"
	roles, ok := Policy()[m]
	if !ok || !slices.Equal(roles, []pki.Role{pki.RoleGateway, pki.RoleAdmin}) {
		t.Fatalf("policy of %s: %v", m, roles)
	}
}

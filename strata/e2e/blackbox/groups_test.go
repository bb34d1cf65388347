package blackbox

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/strata/e2e/framework"
)

// groups drives the group commands of spec 4.5 over the wire:
// FIND_COORDINATOR, REGISTER_GROUP, JOIN_GROUP, SYNC_GROUP, HEARTBEAT,
// COMMIT_OFFSET, FETCH_OFFSET, BATCH_COMMIT, GROUP_STATUS, LIST_GROUPS,
// LEAVE_GROUP, with the fencing and validation errors each can produce.
func groups(t *testing.T, c framework.Cluster) {
	ctx, cl := framework.Connect(t, c, 90*time.Second)
	framework.OK(t, ctx, cl, "CREATE topic=grp partitions=4")
	framework.OK(t, ctx, cl, "CREATE topic=grp2 partitions=2")

	t.Run("FIND_COORDINATOR", func(t *testing.T) {
		coord, err := cl.FindCoordinator(ctx, "g1")
		if err != nil {
			t.Fatal(err)
		}
		// Any broker answers (spec 4.5) with a gateway clients can reach:
		// the one gateway of the all-in-one, one of several elsewhere.
		if coord.ID == "" || !framework.IsGateway(c, coord.Addr()) {
			t.Fatalf("coordinator %+v: host:port must be a gateway of %v", coord, framework.ClientAddrs(c))
		}
		framework.RunCases(t, ctx, cl, []framework.Case{
			{Cmd: "FIND_COORDINATOR transactional_id=tx", Prefix: "OK", Fields: map[string]string{"coordinator_id": "*", "host": "*", "port": "*"}},
			{Cmd: "FIND_COORDINATOR", Err: framework.Want("missing_group", cValidation, false)},
		})
		tx := framework.OK(t, ctx, cl, "FIND_COORDINATOR transactional_id=tx")
		if addr := net.JoinHostPort(tx["host"], tx["port"]); !framework.IsGateway(c, addr) {
			t.Fatalf("FIND_COORDINATOR transactional_id=tx: %s, want a gateway of %v", addr, framework.ClientAddrs(c))
		}
	})

	t.Run("REGISTER_GROUP", func(t *testing.T) {
		framework.RunCases(t, ctx, cl, []framework.Case{
			{Cmd: "REGISTER_GROUP group=g1 topic=grp", Prefix: "OK", Fields: map[string]string{"group": "g1", "partitions": "4", "created": "true"}},
			{Cmd: "REGISTER_GROUP group=g1 topic=grp", Prefix: "OK", Fields: map[string]string{"group": "g1", "created": "false"}},
			{Cmd: "REGISTER_GROUP group=gmulti topics=grp,grp2", Prefix: "OK", Fields: map[string]string{"partitions": "6", "created": "true"}},
			// grp and grp2 only: no other scenario's topic starts with grp.
			{Cmd: "REGISTER_GROUP group=gpat pattern=grp*", Prefix: "OK", Fields: map[string]string{"partitions": "6", "created": "true"}},
			{Cmd: "REGISTER_GROUP group=gbad", Err: framework.Want("invalid_group_selector", cValidation, false)},
			{Cmd: "REGISTER_GROUP group=gbad topic=grp pattern=grp*", Err: framework.Want("invalid_group_selector", cValidation, false)},
			{Cmd: "REGISTER_GROUP topic=grp", Err: framework.Want("missing_group", cValidation, false)},
			{Cmd: "REGISTER_GROUP group=gbad topic=nope", Err: framework.Want("topic_not_found", cNotFound, false, "topic", "nope")},
			{Cmd: "REGISTER_GROUP group=gbad topics=grp,nope", Err: framework.Want("topic_not_found", cNotFound, false, "topic", "nope")},
		})
		r, err := cl.RegisterGroup(ctx, "g1", "grp", "", "")
		if err != nil || r.Value("created") != "false" {
			t.Fatalf("RegisterGroup again: %v %s", err, r.Text)
		}
	})

	member := regexp.MustCompile(`^m1-[0-9]{4}$`)
	j1 := join(t, ctx, cl, "g1", "m1", "grp")
	if !member.MatchString(j1.Member) || j1.Generation < 1 || fmt.Sprint(j1.Assignments) != "[0 1 2 3]" {
		t.Fatalf("first join %+v", j1)
	}

	t.Run("JOIN SYNC HEARTBEAT one member", func(t *testing.T) {
		a, err := cl.SyncGroup(ctx, "g1", j1.Member, j1.Generation, "grp")
		if err != nil || fmt.Sprint(a) != "[0 1 2 3]" {
			t.Fatalf("sync %v %v", a, err)
		}
		gen, err := cl.Heartbeat(ctx, "grp", "g1", j1.Member, j1.Generation)
		if err != nil || gen != j1.Generation {
			t.Fatalf("heartbeat %d %v", gen, err)
		}
		g := strconv.FormatInt(j1.Generation, 10)
		framework.RunCases(t, ctx, cl, []framework.Case{
			{Cmd: "HEARTBEAT topic=grp group=g1 member=" + j1.Member, Prefix: "OK", Fields: map[string]string{"member": j1.Member, "generation": g}},
			{Cmd: "SYNC_GROUP group=g1 member=" + j1.Member + " generation=" + g + " topic=grp", Prefix: "OK assignments=[0 1 2 3]"},
			{Cmd: "JOIN_GROUP group=g1 topic=grp", Err: framework.Want("missing_member", cValidation, false)},
			{Cmd: "JOIN_GROUP member=m topic=grp", Err: framework.Want("missing_group", cValidation, false)},
			{Cmd: "JOIN_GROUP group=g1 member=mx topic=grp2", Err: framework.Want("topic_not_assigned_to_group", cConflict, false)},
			{Cmd: "JOIN_GROUP group=gnew member=m topic=nope", Err: framework.Want("topic_not_found", cNotFound, false)},
			{Cmd: "SYNC_GROUP group=g1 member=" + j1.Member + " topic=grp", Err: framework.Want("missing_generation", cValidation, false)},
			{Cmd: "SYNC_GROUP group=g1 member=m1 generation=" + g + " topic=grp", Err: framework.Want("member_not_found", cFencing, false, "member", "m1", "group", "g1")},
			{Cmd: "SYNC_GROUP group=nog member=m generation=1 topic=grp", Err: framework.Want("group_not_found", cNotFound, false, "group", "nog")},
			{Cmd: "HEARTBEAT topic=grp group=g1 member=m1", Err: framework.Want("member_not_found", cFencing, false)},
			{Cmd: "HEARTBEAT topic=grp group=nog member=m", Err: framework.Want("group_not_found", cNotFound, false)},
			{Cmd: "HEARTBEAT topic=grp group=g1", Err: framework.Want("missing_member", cValidation, false)},
		})
	})

	// A second member: the generation advances and the partitions split.
	j2, err := cl.JoinGroup(ctx, "g1", "m2", "grp")
	if err != nil {
		t.Fatal(err)
	}
	if j2.Generation <= j1.Generation {
		t.Fatalf("second join generation %d, first %d", j2.Generation, j1.Generation)
	}
	gen := j2.Generation
	gs := strconv.FormatInt(gen, 10)
	old := strconv.FormatInt(j1.Generation, 10)
	var own1, own2 []int32

	t.Run("rebalance and GEN_MISMATCH", func(t *testing.T) {
		_, err := cl.Heartbeat(ctx, "grp", "g1", j1.Member, j1.Generation)
		framework.CheckErr(t, "heartbeat with the old generation", err, framework.ExpectedError{Code: "GEN_MISMATCH", Class: cFencing,
			Fields: map[string]string{"current": gs, "requested": old, "group": "g1", "member": j1.Member}})
		// The fenced member rejoins, then both sync on the new generation.
		r, err := cl.JoinGroup(ctx, "g1", j1.Member, "grp")
		if err != nil {
			t.Fatal(err)
		}
		if r.Member != j1.Member {
			t.Fatalf("rejoin with the actual id changed it: %s -> %s", j1.Member, r.Member)
		}
		if r.Generation != gen {
			// A rejoin may itself rebalance; follow the server.
			gen = r.Generation
			gs = strconv.FormatInt(gen, 10)
		}
		if own1, err = cl.SyncGroup(ctx, "g1", j1.Member, gen, "grp"); err != nil {
			t.Fatal(err)
		}
		if own2, err = cl.SyncGroup(ctx, "g1", j2.Member, gen, "grp"); err != nil {
			t.Fatal(err)
		}
		all := append(append([]int32{}, own1...), own2...)
		sort.Slice(all, func(i, k int) bool { return all[i] < all[k] })
		if fmt.Sprint(all) != "[0 1 2 3]" || len(own1) == 0 || len(own2) == 0 {
			t.Fatalf("assignments m1 %v m2 %v: each partition to exactly one member", own1, own2)
		}
	})

	t.Run("COMMIT_OFFSET and FETCH_OFFSET", func(t *testing.T) {
		p1 := strconv.Itoa(int(own1[0]))
		p2 := strconv.Itoa(int(own2[0]))
		commit := func(p, off, m, g string) string {
			return fmt.Sprintf("COMMIT_OFFSET topic=grp partition=%s group=g1 offset=%s member=%s generation=%s", p, off, m, g)
		}
		framework.RunCases(t, ctx, cl, []framework.Case{
			{Cmd: "FETCH_OFFSET topic=grp partition=" + p1 + " group=g1", Prefix: "OK offset=0"},
			{Cmd: commit(p1, "5", j1.Member, gs), Prefix: "OK"},
			{Cmd: "FETCH_OFFSET topic=grp partition=" + p1 + " group=g1", Prefix: "OK offset=5"},
			{Cmd: commit(p1, "5", j1.Member, gs), Prefix: "OK"}, // same value: idempotent
			{Cmd: commit(p1, "4", j1.Member, gs), Err: framework.Want("offset_regression", cConflict, false)},
			{Cmd: "FETCH_OFFSET topic=grp partition=" + p1 + " group=g1", Prefix: "OK offset=5"},
			{Cmd: commit(p2, "3", j1.Member, gs), Err: framework.Want("NOT_OWNER", cFencing, false, "partition", p2, "member", j1.Member, "group", "g1")},
			{Cmd: commit(p1, "6", j1.Member, old), Err: framework.Want("GEN_MISMATCH", cFencing, false, "current", gs, "requested", old)},
			{Cmd: commit(p1, "6", "ghost", gs), Err: framework.Want("member_not_found", cFencing, false, "member", "ghost")},
			{Cmd: fmt.Sprintf("COMMIT_OFFSET topic=grp partition=%s group=g1 offset=6 member=%s", p1, j1.Member), Err: framework.Want("missing_generation", cValidation, false, "command", "COMMIT_OFFSET")},
			{Cmd: fmt.Sprintf("COMMIT_OFFSET topic=grp partition=%s group=g1 offset=6 generation=%s", p1, gs), Err: framework.Want("missing_member", cValidation, false)},
			{Cmd: commit(p1, "6", j1.Member, gs) + "x", Err: framework.Want("invalid_parameter", cValidation, false, "param", "generation")},
			{Cmd: "COMMIT_OFFSET topic=grp partition=0 group=nog offset=1 member=m generation=1", Err: framework.Want("group_not_found", cNotFound, false)},
			{Cmd: "FETCH_OFFSET topic=grp partition=" + p2 + " group=g1", Prefix: "OK offset=0"},
			{Cmd: "FETCH_OFFSET topic=grp partition=0 group=never-registered", Prefix: "OK offset=0"},
			{Cmd: "FETCH_OFFSET topic=grp group=g1", Err: framework.Want("missing_partition", cValidation, false)},
			{Cmd: "FETCH_OFFSET topic=grp partition=0", Err: framework.Want("missing_group", cValidation, false)},
		})
		if err := cl.CommitOffset(ctx, "grp", own2[0], "g1", 7, j2.Member, gen); err != nil {
			t.Fatal(err)
		}
		if off, err := cl.FetchOffset(ctx, "grp", own2[0], "g1"); err != nil || off != 7 {
			t.Fatalf("FetchOffset %d %v", off, err)
		}
	})

	t.Run("BATCH_COMMIT", func(t *testing.T) {
		bc := func(m, g, offsets string) string {
			cmd := "BATCH_COMMIT topic=grp group=g1 member=" + m
			if g != "" {
				cmd += " generation=" + g
			}
			return cmd + " offsets=" + offsets
		}
		entries := make([]string, len(own1))
		for i, p := range own1 {
			entries[i] = fmt.Sprintf("P%d:%d", p, 10+i)
		}
		mine := strings.Join(entries, ",")
		foreign := fmt.Sprintf("P%d:20,P%d:20", own1[0], own2[0])
		framework.RunCases(t, ctx, cl, []framework.Case{
			{Cmd: bc(j1.Member, gs, mine), Prefix: "OK", Fields: map[string]string{"batched": strconv.Itoa(len(own1))}},
			// The whole batch is rejected when one partition is not owned.
			{Cmd: bc(j1.Member, gs, foreign), Err: framework.Want("NOT_OWNER", cFencing, false, "partition", strconv.Itoa(int(own2[0])))},
			{Cmd: bc(j1.Member, gs, fmt.Sprintf("P%d:30,P%d:31", own1[0], own1[0])), Err: framework.Want("duplicate_partition", cValidation, false, "partition", strconv.Itoa(int(own1[0])))},
			{Cmd: bc(j1.Member, gs, "0:1"), Err: framework.Want("invalid_batch_commit_entry", cValidation, false)},
			{Cmd: bc(j1.Member, gs, "Px:1"), Err: framework.Want("invalid_batch_commit_entry", cValidation, false)},
			// Every entry below its committed offset: nothing usable remains.
			{Cmd: bc(j1.Member, gs, fmt.Sprintf("P%d:1", own1[0])), Err: framework.Want("no_valid_offsets", cValidation, false)},
			{Cmd: bc(j1.Member, old, mine), Err: framework.Want("GEN_MISMATCH", cFencing, false)},
			{Cmd: bc("ghost", gs, mine), Err: framework.Want("member_not_found", cFencing, false)},
			// Member and generation are checked before the list.
			{Cmd: bc(j1.Member, "", "garbage"), Err: framework.Want("missing_generation", cValidation, false, "command", "BATCH_COMMIT")},
			{Cmd: "BATCH_COMMIT topic=grp group=g1 member=" + j1.Member + " generation=" + gs, Err: framework.Want("invalid_batch_commit_entry", cValidation, false, "reason", "missing_offsets")},
		})
		// Nothing of the rejected batches changed the stored offsets.
		if off, _ := cl.FetchOffset(ctx, "grp", own1[0], "g1"); off != 10 {
			t.Fatalf("P%d committed %d after rejected batches, want 10", own1[0], off)
		}
		if off, _ := cl.FetchOffset(ctx, "grp", own2[0], "g1"); off != 7 {
			t.Fatalf("P%d committed %d after a rejected batch, want 7", own2[0], off)
		}
		n, err := cl.BatchCommit(ctx, "grp", "g1", j2.Member, gen, []wire.PartitionOffset{{Partition: own2[0], Offset: 8}})
		if err != nil || n != 1 {
			t.Fatalf("client BatchCommit %d %v", n, err)
		}
		if off, err := cl.FetchOffset(ctx, "grp", own2[0], "g1"); err != nil || off != 8 {
			t.Fatalf("P%d committed %d after BATCH_COMMIT batched=1 of offset 8 (%v)", own2[0], off, err)
		}
	})

	t.Run("GROUP_STATUS and LIST_GROUPS", func(t *testing.T) {
		st, err := cl.GroupStatus(ctx, "g1")
		if err != nil {
			t.Fatal(err)
		}
		if st.GroupName != "g1" || st.TopicName != "grp" || st.State == "" || st.Generation != gen || st.MemberCount != 2 ||
			st.PartitionCount != 4 || len(st.Members) != 2 || len(st.LastRebalance) == 0 {
			t.Fatalf("GROUP_STATUS %s", st.Raw)
		}
		for _, m := range st.Members {
			var ts string
			if err := json.Unmarshal(m.LastHeartbeat, &ts); err != nil {
				t.Fatalf("last_heartbeat %s: %v", m.LastHeartbeat, err)
			}
			if _, err := time.Parse(time.RFC3339, ts); err != nil {
				t.Fatalf("last_heartbeat %q is not a timestamp", ts)
			}
			if m.MemberID != j1.Member && m.MemberID != j2.Member {
				t.Fatalf("unknown member %s", m.MemberID)
			}
		}
		raw := framework.JSON(t, "GROUP_STATUS", st.Raw)
		for _, k := range []string{"group_name", "topic_name", "state", "generation", "member_count", "partition_count", "members", "last_rebalance"} {
			if _, ok := raw[k]; !ok {
				t.Fatalf("GROUP_STATUS lacks %s", k)
			}
		}
		framework.RunCases(t, ctx, cl, []framework.Case{
			{Cmd: "GROUP_STATUS group=nog", Err: framework.Want("group_not_found", cNotFound, false, "group", "nog")},
			{Cmd: "GROUP_STATUS", Err: framework.Want("missing_group", cValidation, false)},
		})
		lg, err := cl.ListGroups(ctx)
		if err != nil {
			t.Fatal(err)
		}
		groups := strings.Split(lg.Value("groups"), ",")
		for _, g := range []string{"g1", "gmulti", "gpat"} {
			if !slices.Contains(groups, g) {
				t.Fatalf("LIST_GROUPS %q lacks %s", lg.Text, g)
			}
		}
		if lg.Value("count") != strconv.Itoa(len(groups)) {
			t.Fatalf("LIST_GROUPS count: %s", lg.Text)
		}
		// The internal offsets topic stays hidden from LIST.
		if topics, _ := cl.ListTopics(ctx); slices.Contains(topics, "__consumer_offsets") {
			t.Fatalf("LIST shows __consumer_offsets: %v", topics)
		}
	})

	t.Run("active members block DELETE and TRUNCATE", func(t *testing.T) {
		rev := framework.OK(t, ctx, cl, "CREATE topic=grp")["revision"]
		framework.RunCases(t, ctx, cl, []framework.Case{
			{Cmd: "DELETE topic=grp", Err: framework.Want("topic_delete_blocked", cConflict, false)},
			{Cmd: "TRUNCATE topic=grp expected_revision=" + rev, Err: framework.Want("topic_delete_blocked", cConflict, false)},
		})
	})

	t.Run("multi-topic group", func(t *testing.T) {
		j := join(t, ctx, cl, "gmulti", "mm", "")
		if len(j.TopicAssignments) != 6 {
			t.Fatalf("multi-topic join %+v", j)
		}
		for _, ta := range j.TopicAssignments {
			if !strings.HasPrefix(ta, "grp:P") && !strings.HasPrefix(ta, "grp2:P") {
				t.Fatalf("topic assignment %q", ta)
			}
		}
		if err := cl.LeaveGroup(ctx, "", "gmulti", j.Member); err != nil {
			// LEAVE_GROUP requires a topic (spec 4.5); a multi-topic member
			// names one of its topics.
			if err := cl.LeaveGroup(ctx, "grp", "gmulti", j.Member); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("LEAVE_GROUP", func(t *testing.T) {
		framework.RunCases(t, ctx, cl, []framework.Case{
			{Cmd: "LEAVE_GROUP topic=grp group=g1 member=" + j2.Member, Prefix: "OK", Fields: map[string]string{"group": "g1", "member": j2.Member, "left": "true"}},
			{Cmd: "LEAVE_GROUP topic=grp group=g1 member=" + j2.Member, Err: framework.Want("member_not_found", cFencing, false)},
			{Cmd: "LEAVE_GROUP topic=grp group=g1", Err: framework.Want("missing_member", cValidation, false)},
			{Cmd: "LEAVE_GROUP topic=grp group=nog member=m", Err: framework.Want("group_not_found", cNotFound, false)},
			// The remaining member is fenced by the new generation.
			{Cmd: "HEARTBEAT topic=grp group=g1 member=" + j1.Member + " generation=" + gs, Err: framework.Want("GEN_MISMATCH", cFencing, false)},
		})
		if err := cl.LeaveGroup(ctx, "grp", "g1", j1.Member); err != nil {
			t.Fatal(err)
		}
		st, err := cl.GroupStatus(ctx, "g1")
		if err != nil || st.MemberCount != 0 {
			t.Fatalf("after leaving: %v %s", err, st.Raw)
		}
		// Committed offsets outlive membership.
		if off, _ := cl.FetchOffset(ctx, "grp", own2[0], "g1"); off != 8 {
			t.Fatalf("committed offset after leave %d", off)
		}
		// With no active members the topic can be deleted again.
		if _, err := cl.DeleteTopic(ctx, "grp2", false); err != nil {
			t.Fatalf("delete after members left: %v", err)
		}
	})
}

// join joins group as member (of topic; "" for the group's own selection),
// retrying while the answer is retryable (the offsets partitions may still be
// opening right after startup); any other error fails the test.
func join(t *testing.T, ctx context.Context, cl *client.Client, group, member, topic string) client.JoinResult {
	t.Helper()
	var j client.JoinResult
	framework.Retry(t, ctx, func() (err error) {
		j, err = cl.JoinGroup(ctx, group, member, topic)
		if err != nil && !errcode.IsRetryable(err) {
			t.Fatal(err)
		}
		return err
	})
	return j
}

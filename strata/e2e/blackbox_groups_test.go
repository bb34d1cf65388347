package e2e

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/wire"
)

// TestBlackboxGroups drives the group commands of spec 4.5 over the wire:
// FIND_COORDINATOR, REGISTER_GROUP, JOIN_GROUP, SYNC_GROUP, HEARTBEAT,
// COMMIT_OFFSET, FETCH_OFFSET, BATCH_COMMIT, GROUP_STATUS, LIST_GROUPS,
// LEAVE_GROUP, with the fencing and validation errors each can produce.
func TestBlackboxGroups(t *testing.T) {
	srv := bbStart(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	gw := srv.ClientAddr()
	cl := dial(t, ctx, gw)
	bbOK(t, ctx, cl, "CREATE topic=grp partitions=4")
	bbOK(t, ctx, cl, "CREATE topic=grp2 partitions=2")

	t.Run("FIND_COORDINATOR", func(t *testing.T) {
		c, err := cl.FindCoordinator(ctx, "g1")
		if err != nil {
			t.Fatal(err)
		}
		if c.ID == "" || c.Addr() != gw {
			t.Fatalf("coordinator %+v: host:port must be the gateway %s", c, gw)
		}
		bbRun(t, ctx, cl, []bbCase{
			{cmd: "FIND_COORDINATOR transactional_id=tx", prefix: "OK", fields: map[string]string{"coordinator_id": "*", "host": strings.Split(gw, ":")[0], "port": strings.Split(gw, ":")[1]}},
			{cmd: "FIND_COORDINATOR", err: verr("missing_group", cValidation, false)},
		})
	})

	t.Run("REGISTER_GROUP", func(t *testing.T) {
		bbRun(t, ctx, cl, []bbCase{
			{cmd: "REGISTER_GROUP group=g1 topic=grp", prefix: "OK", fields: map[string]string{"group": "g1", "partitions": "4", "created": "true"}},
			{cmd: "REGISTER_GROUP group=g1 topic=grp", prefix: "OK", fields: map[string]string{"group": "g1", "created": "false"}},
			{cmd: "REGISTER_GROUP group=gmulti topics=grp,grp2", prefix: "OK", fields: map[string]string{"partitions": "6", "created": "true"}},
			{cmd: "REGISTER_GROUP group=gpat pattern=grp*", prefix: "OK", fields: map[string]string{"partitions": "6", "created": "true"}},
			{cmd: "REGISTER_GROUP group=gbad", err: verr("invalid_group_selector", cValidation, false)},
			{cmd: "REGISTER_GROUP group=gbad topic=grp pattern=grp*", err: verr("invalid_group_selector", cValidation, false)},
			{cmd: "REGISTER_GROUP topic=grp", err: verr("missing_group", cValidation, false)},
			{cmd: "REGISTER_GROUP group=gbad topic=nope", err: verr("topic_not_found", cNotFound, false, "topic", "nope")},
			{cmd: "REGISTER_GROUP group=gbad topics=grp,nope", err: verr("topic_not_found", cNotFound, false, "topic", "nope")},
		})
		r, err := cl.RegisterGroup(ctx, "g1", "grp", "", "")
		if err != nil || r.Value("created") != "false" {
			t.Fatalf("RegisterGroup again: %v %s", err, r.Text)
		}
	})

	member := regexp.MustCompile(`^m1-[0-9]{4}$`)
	var j1 client.JoinResult
	retry(t, ctx, func() (err error) {
		j1, err = cl.JoinGroup(ctx, "g1", "m1", "grp")
		if err != nil && !errcodeRetryable(err) {
			t.Fatal(err)
		}
		return err
	})
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
		bbRun(t, ctx, cl, []bbCase{
			{cmd: "HEARTBEAT topic=grp group=g1 member=" + j1.Member, prefix: "OK", fields: map[string]string{"member": j1.Member, "generation": g}},
			{cmd: "SYNC_GROUP group=g1 member=" + j1.Member + " generation=" + g + " topic=grp", prefix: "OK assignments=[0 1 2 3]"},
			{cmd: "JOIN_GROUP group=g1 topic=grp", err: verr("missing_member", cValidation, false)},
			{cmd: "JOIN_GROUP member=m topic=grp", err: verr("missing_group", cValidation, false)},
			{cmd: "JOIN_GROUP group=g1 member=mx topic=grp2", err: verr("topic_not_assigned_to_group", cConflict, false)},
			{cmd: "JOIN_GROUP group=gnew member=m topic=nope", err: verr("topic_not_found", cNotFound, false)},
			{cmd: "SYNC_GROUP group=g1 member=" + j1.Member + " topic=grp", err: verr("missing_generation", cValidation, false)},
			{cmd: "SYNC_GROUP group=g1 member=m1 generation=" + g + " topic=grp", err: verr("member_not_found", cFencing, false, "member", "m1", "group", "g1")},
			{cmd: "SYNC_GROUP group=nog member=m generation=1 topic=grp", err: verr("group_not_found", cNotFound, false, "group", "nog")},
			{cmd: "HEARTBEAT topic=grp group=g1 member=m1", err: verr("member_not_found", cFencing, false)},
			{cmd: "HEARTBEAT topic=grp group=nog member=m", err: verr("group_not_found", cNotFound, false)},
			{cmd: "HEARTBEAT topic=grp group=g1", err: verr("missing_member", cValidation, false)},
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
		bbCheckErr(t, "heartbeat with the old generation", err, bbWant{code: "GEN_MISMATCH", class: cFencing,
			fields: map[string]string{"current": gs, "requested": old, "group": "g1", "member": j1.Member}})
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
		bbRun(t, ctx, cl, []bbCase{
			{cmd: "FETCH_OFFSET topic=grp partition=" + p1 + " group=g1", prefix: "OK offset=0"},
			{cmd: commit(p1, "5", j1.Member, gs), prefix: "OK"},
			{cmd: "FETCH_OFFSET topic=grp partition=" + p1 + " group=g1", prefix: "OK offset=5"},
			{cmd: commit(p1, "5", j1.Member, gs), prefix: "OK"}, // same value: idempotent
			{cmd: commit(p1, "4", j1.Member, gs), err: verr("offset_regression", cConflict, false)},
			{cmd: "FETCH_OFFSET topic=grp partition=" + p1 + " group=g1", prefix: "OK offset=5"},
			{cmd: commit(p2, "3", j1.Member, gs), err: verr("NOT_OWNER", cFencing, false, "partition", p2, "member", j1.Member, "group", "g1")},
			{cmd: commit(p1, "6", j1.Member, old), err: verr("GEN_MISMATCH", cFencing, false, "current", gs, "requested", old)},
			{cmd: commit(p1, "6", "ghost", gs), err: verr("member_not_found", cFencing, false, "member", "ghost")},
			{cmd: fmt.Sprintf("COMMIT_OFFSET topic=grp partition=%s group=g1 offset=6 member=%s", p1, j1.Member), err: verr("missing_generation", cValidation, false, "command", "COMMIT_OFFSET")},
			{cmd: fmt.Sprintf("COMMIT_OFFSET topic=grp partition=%s group=g1 offset=6 generation=%s", p1, gs), err: verr("missing_member", cValidation, false)},
			{cmd: commit(p1, "6", j1.Member, gs) + "x", err: verr("invalid_parameter", cValidation, false, "param", "generation")},
			{cmd: "COMMIT_OFFSET topic=grp partition=0 group=nog offset=1 member=m generation=1", err: verr("group_not_found", cNotFound, false)},
			{cmd: "FETCH_OFFSET topic=grp partition=" + p2 + " group=g1", prefix: "OK offset=0"},
			{cmd: "FETCH_OFFSET topic=grp partition=0 group=never-registered", prefix: "OK offset=0"},
			{cmd: "FETCH_OFFSET topic=grp group=g1", err: verr("missing_partition", cValidation, false)},
			{cmd: "FETCH_OFFSET topic=grp partition=0", err: verr("missing_group", cValidation, false)},
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
		bbRun(t, ctx, cl, []bbCase{
			{cmd: bc(j1.Member, gs, mine), prefix: "OK", fields: map[string]string{"batched": strconv.Itoa(len(own1))}},
			// The whole batch is rejected when one partition is not owned.
			{cmd: bc(j1.Member, gs, foreign), err: verr("NOT_OWNER", cFencing, false, "partition", strconv.Itoa(int(own2[0])))},
			{cmd: bc(j1.Member, gs, fmt.Sprintf("P%d:30,P%d:31", own1[0], own1[0])), err: verr("duplicate_partition", cValidation, false, "partition", strconv.Itoa(int(own1[0])))},
			{cmd: bc(j1.Member, gs, "0:1"), err: verr("invalid_batch_commit_entry", cValidation, false)},
			{cmd: bc(j1.Member, gs, "Px:1"), err: verr("invalid_batch_commit_entry", cValidation, false)},
			// Every entry below its committed offset: nothing usable remains.
			{cmd: bc(j1.Member, gs, fmt.Sprintf("P%d:1", own1[0])), err: verr("no_valid_offsets", cValidation, false)},
			{cmd: bc(j1.Member, old, mine), err: verr("GEN_MISMATCH", cFencing, false)},
			{cmd: bc("ghost", gs, mine), err: verr("member_not_found", cFencing, false)},
			// Member and generation are checked before the list.
			{cmd: bc(j1.Member, "", "garbage"), err: verr("missing_generation", cValidation, false, "command", "BATCH_COMMIT")},
			{cmd: "BATCH_COMMIT topic=grp group=g1 member=" + j1.Member + " generation=" + gs, err: verr("invalid_batch_commit_entry", cValidation, false, "reason", "missing_offsets")},
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
			if err := jsonUnmarshalString(m.LastHeartbeat, &ts); err != nil {
				t.Fatalf("last_heartbeat %s: %v", m.LastHeartbeat, err)
			}
			if _, err := time.Parse(time.RFC3339, ts); err != nil {
				t.Fatalf("last_heartbeat %q is not a timestamp", ts)
			}
			if m.MemberID != j1.Member && m.MemberID != j2.Member {
				t.Fatalf("unknown member %s", m.MemberID)
			}
		}
		raw := bbJSON(t, "GROUP_STATUS", st.Raw)
		for _, k := range []string{"group_name", "topic_name", "state", "generation", "member_count", "partition_count", "members", "last_rebalance"} {
			if _, ok := raw[k]; !ok {
				t.Fatalf("GROUP_STATUS lacks %s", k)
			}
		}
		bbRun(t, ctx, cl, []bbCase{
			{cmd: "GROUP_STATUS group=nog", err: verr("group_not_found", cNotFound, false, "group", "nog")},
			{cmd: "GROUP_STATUS", err: verr("missing_group", cValidation, false)},
		})
		lg, err := cl.ListGroups(ctx)
		if err != nil {
			t.Fatal(err)
		}
		groups := strings.Split(lg.Value("groups"), ",")
		for _, g := range []string{"g1", "gmulti", "gpat"} {
			if !contains(groups, g) {
				t.Fatalf("LIST_GROUPS %q lacks %s", lg.Text, g)
			}
		}
		if lg.Value("count") != strconv.Itoa(len(groups)) {
			t.Fatalf("LIST_GROUPS count: %s", lg.Text)
		}
		// The internal offsets topic stays hidden from LIST.
		if topics, _ := cl.ListTopics(ctx); contains(topics, "__consumer_offsets") {
			t.Fatalf("LIST shows __consumer_offsets: %v", topics)
		}
	})

	t.Run("active members block DELETE and TRUNCATE", func(t *testing.T) {
		rev := bbOK(t, ctx, cl, "CREATE topic=grp")["revision"]
		bbRun(t, ctx, cl, []bbCase{
			{cmd: "DELETE topic=grp", err: verr("topic_delete_blocked", cConflict, false)},
			{cmd: "TRUNCATE topic=grp expected_revision=" + rev, err: verr("topic_delete_blocked", cConflict, false)},
		})
	})

	t.Run("multi-topic group", func(t *testing.T) {
		var j client.JoinResult
		retry(t, ctx, func() (err error) {
			j, err = cl.JoinGroup(ctx, "gmulti", "mm", "")
			if err != nil && !errcodeRetryable(err) {
				t.Fatal(err)
			}
			return err
		})
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
		bbRun(t, ctx, cl, []bbCase{
			{cmd: "LEAVE_GROUP topic=grp group=g1 member=" + j2.Member, prefix: "OK", fields: map[string]string{"group": "g1", "member": j2.Member, "left": "true"}},
			{cmd: "LEAVE_GROUP topic=grp group=g1 member=" + j2.Member, err: verr("member_not_found", cFencing, false)},
			{cmd: "LEAVE_GROUP topic=grp group=g1", err: verr("missing_member", cValidation, false)},
			{cmd: "LEAVE_GROUP topic=grp group=nog member=m", err: verr("group_not_found", cNotFound, false)},
			// The remaining member is fenced by the new generation.
			{cmd: "HEARTBEAT topic=grp group=g1 member=" + j1.Member + " generation=" + gs, err: verr("GEN_MISMATCH", cFencing, false)},
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

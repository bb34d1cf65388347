package blackbox

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/strata/e2e/framework"
)

// groupAdmin drives Strata's two extension commands end to end:
// RESET_OFFSETS through `strata group reset-offsets` (dry run, then
// --execute) makes a new consumer of the group re-read the topic from 0;
// DELETE_GROUP through `strata group delete` removes the group; both refuse
// a group with an active member.
func groupAdmin(t *testing.T, c framework.Cluster) {
	ctx, cl := framework.Connect(t, c, 2*time.Minute)
	gw := c.Gateways()[0].ClientAddr
	const topic, group, n = "adm-grp", "adm-g", 40
	framework.OK(t, ctx, cl, "CREATE topic="+topic+" partitions=2")
	acked := framework.PublishAcked(t, ctx, cl, topic, n)
	if len(acked) != 2 {
		t.Fatalf("records on %d partitions, want both", len(acked))
	}
	first := framework.ConsumeGroup(t, ctx, cl, group, topic, n) // commits, then leaves
	committed := func(part int32) uint64 {
		t.Helper()
		return framework.Committed(t, ctx, cl, topic, part, group)
	}
	for part, vals := range acked {
		if off := committed(part); off != uint64(len(vals)) {
			t.Fatalf("P%d committed %d after consuming, want %d", part, off, len(vals))
		}
	}
	strata := func(args ...string) (int, string, string) { return strataCLI(ctx, gw, args...) }

	t.Run("reset-offsets dry run changes nothing", func(t *testing.T) {
		code, out, errs := strata("group", "reset-offsets", group, "--topic", topic, "--to-earliest")
		if code != 0 || !strings.Contains(out, "TOPIC") || !strings.Contains(out, "dry run: nothing changed") {
			t.Fatalf("exit %d\n%s%s", code, out, errs)
		}
		for part, vals := range acked {
			if off := committed(part); off != uint64(len(vals)) {
				t.Fatalf("dry run moved P%d to %d", part, off)
			}
		}
	})

	t.Run("reset-offsets --to-earliest --execute, then the group re-reads from 0", func(t *testing.T) {
		code, out, errs := strata("group", "reset-offsets", group, "--topic", topic, "--to-earliest", "--execute")
		if code != 0 || !strings.Contains(out, "reset 2 offsets of group "+group+" on topic "+topic) {
			t.Fatalf("exit %d\n%s%s", code, out, errs)
		}
		for part := range acked {
			if off := committed(part); off != 0 {
				t.Fatalf("P%d committed %d after the reset, want 0", part, off)
			}
		}
		again := framework.ConsumeGroup(t, ctx, cl, group, topic, n)
		if !slices.Equal(again, first) {
			t.Fatalf("after the reset the group read %d records, not the %d from the start", len(again), len(first))
		}
		for part, vals := range acked {
			if off := committed(part); off != uint64(len(vals)) {
				t.Fatalf("P%d committed %d after re-reading, want %d", part, off, len(vals))
			}
		}
	})

	t.Run("RESET_OFFSETS and DELETE_GROUP over the wire", func(t *testing.T) {
		framework.RunCases(t, ctx, cl, []framework.Case{
			{Cmd: "RESET_OFFSETS group=" + group + " topic=" + topic + " offsets=P1:3", Prefix: "OK",
				Fields: map[string]string{"group": group, "topic": topic, "reset": "1"}},
			{Cmd: "FETCH_OFFSET topic=" + topic + " partition=1 group=" + group, Prefix: "OK offset=3"},
			{Cmd: "RESET_OFFSETS group=" + group + " topic=" + topic + " offsets=P0:1,P5:1", Err: framework.Want("partition_not_found", cNotFound, false, "topic", topic, "partition", "5")},
			{Cmd: "RESET_OFFSETS group=" + group + " topic=" + topic + " offsets=P0:1,P0:2", Err: framework.Want("duplicate_partition", cValidation, false, "partition", "0")},
			{Cmd: "RESET_OFFSETS group=" + group + " topic=" + topic + " offsets=0:1", Err: framework.Want("invalid_batch_commit_entry", cValidation, false)},
			{Cmd: "RESET_OFFSETS group=" + group + " topic=" + topic + " offsets=", Err: framework.Want("no_valid_offsets", cValidation, false)},
			{Cmd: "RESET_OFFSETS group=" + group + " topic=grp-other offsets=P0:1", Err: framework.Want("topic_not_assigned_to_group", cConflict, false)},
			{Cmd: "RESET_OFFSETS group=adm-new topic=nope offsets=P0:1", Err: framework.Want("topic_not_found", cNotFound, false, "topic", "nope")},
			{Cmd: "RESET_OFFSETS topic=" + topic + " offsets=P0:1", Err: framework.Want("missing_group", cValidation, false)},
			{Cmd: "RESET_OFFSETS group=" + group + " offsets=P0:1", Err: framework.Want("missing_topic", cValidation, false)},
			{Cmd: "FETCH_OFFSET topic=" + topic + " partition=0 group=" + group, Prefix: "OK offset=" + strconv.Itoa(len(acked[0]))},
			{Cmd: "DELETE_GROUP", Err: framework.Want("missing_group", cValidation, false)},
			{Cmd: "DELETE_GROUP group=adm-nog", Err: framework.Want("group_not_found", cNotFound, false, "group", "adm-nog")},
		})
	})

	t.Run("group delete, then group list no longer shows it", func(t *testing.T) {
		code, out, errs := strata("group", "delete", group)
		if code != 0 || out != "group "+group+" deleted\n" {
			t.Fatalf("exit %d\n%s%s", code, out, errs)
		}
		code, out, errs = strata("group", "list")
		if code != 0 || slices.Contains(strings.Split(out, "\n"), group) {
			t.Fatalf("group list after delete: exit %d\n%s%s", code, out, errs)
		}
		if off := committed(1); off != 0 {
			t.Fatalf("P1 committed %d after the delete", off)
		}
		code, _, errs = strata("group", "delete", group)
		if code != 1 || !strings.Contains(errs, "ERROR: group_not_found class=not_found retryable=false") {
			t.Fatalf("second delete: exit %d %s", code, errs)
		}
	})

	t.Run("an active member blocks delete and reset", func(t *testing.T) {
		var j client.JoinResult
		framework.Retry(t, ctx, func() (err error) {
			j, err = cl.JoinGroup(ctx, "adm-busy", "m", topic)
			return err
		})
		code, _, errs := strata("group", "delete", "adm-busy")
		if code != 1 || !strings.Contains(errs, "strata group delete: ERROR: group_not_empty class=conflict retryable=false") {
			t.Fatalf("delete of an active group: exit %d %s", code, errs)
		}
		code, _, errs = strata("group", "reset-offsets", "adm-busy", "--topic", topic, "--to-latest", "--execute")
		if code != 1 || !strings.Contains(errs, "ERROR: group_not_empty class=conflict retryable=false") {
			t.Fatalf("reset of an active group: exit %d %s", code, errs)
		}
		framework.RunCases(t, ctx, cl, []framework.Case{
			{Cmd: "DELETE_GROUP group=adm-busy", Err: framework.Want("group_not_empty", cConflict, false, "group", "adm-busy", "members", "1")},
			{Cmd: "RESET_OFFSETS group=adm-busy topic=" + topic + " offsets=P0:1", Err: framework.Want("group_not_empty", cConflict, false, "group", "adm-busy", "members", "1")},
			{Cmd: "FETCH_OFFSET topic=" + topic + " partition=0 group=adm-busy", Prefix: "OK offset=0"},
		})
		if err := cl.LeaveGroup(ctx, topic, "adm-busy", j.Member); err != nil {
			t.Fatal(err)
		}
		if err := cl.DeleteGroup(ctx, "adm-busy"); err != nil {
			t.Fatalf("delete after the member left: %v", err)
		}
	})
}

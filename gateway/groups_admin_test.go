package gateway

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/fake/coordfake"
	"github.com/strataio/strata/libs/fake/fakerpc"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/libs/wire/wiretest"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
)

// startGroupAdmin starts a cluster with topic t of the given partition
// count, group g holding offsets (a BATCH_COMMIT list) without members, and
// group busy with an active member (group_not_empty).
func startGroupAdmin(t *testing.T, partitions int32, offsets string) (*cluster, *wiretest.Conn) {
	t.Helper()
	c, cl := startDialed(t)
	cl.OK(fmt.Sprintf("CREATE topic=t partitions=%d", partitions))
	c.coord.SetPartitions("t", partitions)
	commitAndLeave(t, c, cl, "g", "t", offsets)
	join(t, c, cl, "busy", "m", "t")
	return c, cl
}

// RESET_OFFSETS through the wire: the raw list reaches the coordinator,
// offsets move down and up, the reply is `OK group= topic= reset=`, and
// missing parameters and coordinator errors come back typed.
func TestResetOffsetsCommand(t *testing.T) {
	c, cl := startGroupAdmin(t, 3, "P0:40,P1:2")
	c.coord.Record("ResetOffsets")

	if got := cl.OK("RESET_OFFSETS group=g topic=t offsets=P0:1,P1:9"); got != "OK group=g topic=t reset=2" {
		t.Fatalf("RESET_OFFSETS = %q", got)
	}
	last := c.coord.Requests("ResetOffsets")[0].(*coordinatorv1.ResetOffsetsRequest)
	if last.GetOffsetsList() != "P0:1,P1:9" || last.GetGroup() != "g" || last.GetTopic() != "t" || len(last.GetOffsets()) != 0 {
		t.Fatalf("coordinator got %v", last)
	}
	for text, want := range map[string]string{"FETCH_OFFSET topic=t partition=0 group=g": "OK offset=1", "FETCH_OFFSET topic=t partition=1 group=g": "OK offset=9"} {
		if got := cl.OK(text); got != want {
			t.Fatalf("%s = %q, want %q", text, got, want)
		}
	}
	// BATCH_COMMIT's list rules: one positional list is accepted too.
	if got := cl.OK("RESET_OFFSETS group=g topic=t P2:5"); got != "OK group=g topic=t reset=1" {
		t.Fatalf("positional RESET_OFFSETS = %q", got)
	}
	for _, tc := range []struct {
		name, text, code string
		class            errcode.Class
		kv               []string
	}{
		{"group required", "RESET_OFFSETS topic=t offsets=P0:1", "missing_group", errcode.ClassValidation, []string{"param", "group"}},
		{"topic required", "RESET_OFFSETS group=g offsets=P0:1", "missing_topic", errcode.ClassValidation, []string{"param", "topic"}},
		{"offsets required", "RESET_OFFSETS group=g topic=t", "invalid_batch_commit_entry", errcode.ClassValidation, []string{"reason", "missing_offsets"}},
		{"malformed list", "RESET_OFFSETS group=g topic=t offsets=0:1", "invalid_batch_commit_entry", errcode.ClassValidation, []string{"reason", "bad_entry"}},
		{"duplicate partition", "RESET_OFFSETS group=g topic=t offsets=P0:1,P0:2", "duplicate_partition", errcode.ClassValidation, []string{"partition", "0"}},
		{"active group", "RESET_OFFSETS group=busy topic=t offsets=P0:1", "group_not_empty", errcode.ClassConflict, []string{"group", "busy", "members", "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if e := cl.FailWith(tc.text, tc.code, tc.kv...); e.Class != tc.class || e.Retryable {
				t.Fatalf("%s: %v", tc.text, e)
			}
		})
	}
	if got := cl.OK("FETCH_OFFSET topic=t partition=0 group=g"); got != "OK offset=1" {
		t.Fatalf("rejected resets changed the offset: %q", got)
	}
	if _, changed := c.coord.Committed("busy", "t", 0); changed {
		t.Fatal("the reset of the active group wrote an offset")
	}
	if v := testutil.ToFloat64(c.gw.m.commands.WithLabelValues("RESET_OFFSETS", "ok")); v != 2 {
		t.Fatalf("strata_broker_commands_total{command=RESET_OFFSETS,result=ok} = %v", v)
	}
	if v := testutil.ToFloat64(c.gw.m.errors.WithLabelValues("RESET_OFFSETS", "group_not_empty")); v != 1 {
		t.Fatalf("strata_broker_command_errors_total{command=RESET_OFFSETS,code=group_not_empty} = %v", v)
	}
}

// DELETE_GROUP through the wire: `OK group= deleted=true`, the offsets are
// gone, and a missing, unknown or active group is a typed error.
func TestDeleteGroupCommand(t *testing.T) {
	c, cl := startGroupAdmin(t, 2, "P0:4,P1:6")
	if got := cl.OK("DELETE_GROUP group=g"); got != "OK group=g deleted=true" {
		t.Fatalf("DELETE_GROUP = %q", got)
	}
	if got := cl.OK("FETCH_OFFSET topic=t partition=1 group=g"); got != "OK offset=0" {
		t.Fatalf("FETCH_OFFSET after delete = %q", got)
	}
	for _, tc := range []struct {
		name, text, code string
		class            errcode.Class
	}{
		{"group required", "DELETE_GROUP", "missing_group", errcode.ClassValidation},
		{"deleted group", "DELETE_GROUP group=g", "group_not_found", errcode.ClassNotFound},
		{"active group", "DELETE_GROUP group=busy", "group_not_empty", errcode.ClassConflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if e := cl.FailWith(tc.text, tc.code); e.Class != tc.class || e.Retryable {
				t.Fatalf("%s: %v", tc.text, e)
			}
		})
	}
	if v := testutil.ToFloat64(c.gw.m.commands.WithLabelValues("DELETE_GROUP", "ok")); v != 1 {
		t.Fatalf("strata_broker_commands_total{command=DELETE_GROUP,result=ok} = %v", v)
	}
}

// Both commands follow NOT_COORDINATOR to the named coordinator, as every
// group command does: the second coordinator is reachable only through the
// redirect.
func TestGroupAdminCommandsFollowNotCoordinator(t *testing.T) {
	c := startCluster(t, nil)
	other := coordfake.Start(t, c.ca, coordfake.Options{ID: "c2", Callers: []pki.Role{pki.RoleGateway}})
	moved := errcode.NotCoordinator.New("group is coordinated by another node", "coordinator_id", "c2",
		"coordinator_address", other.Addr, "group", "moved")
	cl := wiretest.Negotiate(t, c.addr, wire.CompressionNone)
	cl.OK("CREATE topic=t partitions=2")

	c.coord.On("ResetOffsets", 1, fakerpc.Fail(moved))
	if got := cl.OK("RESET_OFFSETS group=moved topic=t offsets=P1:8"); got != "OK group=moved topic=t reset=1" {
		t.Fatalf("RESET_OFFSETS = %q", got)
	}
	if o, ok := other.Committed("moved", "t", 1); !ok || o != 8 || c.coord.Calls("ResetOffsets") != 1 {
		t.Fatalf("reset did not reach the redirected coordinator: %d %v", o, ok)
	}
	c.coord.On("DeleteGroup", 1, fakerpc.Fail(moved))
	if got := cl.OK("DELETE_GROUP group=moved"); got != "OK group=moved deleted=true" {
		t.Fatalf("DELETE_GROUP = %q", got)
	}
	if _, ok := other.Committed("moved", "t", 1); ok || c.coord.Calls("DeleteGroup") != 1 {
		t.Fatal("delete did not reach the redirected coordinator: its offsets are left")
	}
}

// HELP lists the extension commands after the published ones, under both
// tables, and a table-B (Python SDK) client reaches them with the same ids.
func TestExtensionCommandsInHelpAndTableB(t *testing.T) {
	c, cl := startDialed(t)
	help := strings.TrimPrefix(cl.OK("HELP"), "OK commands=")
	if !strings.HasSuffix(help, ",DELETE_GROUP,RESET_OFFSETS,LIST_TXNS,ABORT_TXN") || !strings.Contains(help, "READ_STREAM_HISTORY,DELETE_GROUP") {
		t.Fatalf("HELP = %q", help)
	}
	cb := wiretest.NegotiateTable(t, c.addr, wire.TableB, wire.CompressionGzip, wire.CompressionNone)
	if help := cb.OK("HELP"); !strings.HasSuffix(help, ",DELETE_GROUP,RESET_OFFSETS,LIST_TXNS,ABORT_TXN") {
		t.Fatalf("table B HELP = %q", help)
	}
	id := cb.SendText("DELETE_GROUP group=nobody")
	f := cb.MustRead()
	if f.Header.Command != 1000 || f.Header.RequestID != id {
		t.Fatalf("table B DELETE_GROUP reply header %+v", f.Header)
	}
	if e := wiretest.FrameErr(t, f); e.Code != "group_not_found" {
		t.Fatalf("table B DELETE_GROUP: %v", e)
	}
	if got := cb.OK("RESET_OFFSETS group=g topic=t offsets=P0:2"); got != "OK group=g topic=t reset=1" {
		t.Fatalf("table B RESET_OFFSETS = %q", got)
	}
}

package server

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/rpc"
	"github.com/strataio/strata/libs/wire"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
)

// RESET_OFFSETS through the wire: the raw list reaches the coordinator,
// offsets move down and up, the reply is `OK group= topic= reset=`, and
// missing parameters and coordinator errors come back typed.
func TestResetOffsetsCommand(t *testing.T) {
	c := startCluster(t, nil)
	cl := dial(t, c.addr, wire.CompressionNone)
	cl.ok("CREATE topic=t partitions=3")
	cl.ok("BATCH_COMMIT topic=t group=g member=m-4821 generation=3 offsets=P0:40,P1:2")

	if got := cl.ok("RESET_OFFSETS group=g topic=t offsets=P0:1,P1:9"); got != "OK group=g topic=t reset=2" {
		t.Fatalf("RESET_OFFSETS = %q", got)
	}
	c.coord.mu.Lock()
	last := c.coord.lastReset
	c.coord.mu.Unlock()
	if last.GetOffsetsList() != "P0:1,P1:9" || last.GetGroup() != "g" || last.GetTopic() != "t" || len(last.GetOffsets()) != 0 {
		t.Fatalf("coordinator got %v", last)
	}
	for text, want := range map[string]string{"FETCH_OFFSET topic=t partition=0 group=g": "OK offset=1", "FETCH_OFFSET topic=t partition=1 group=g": "OK offset=9"} {
		if got := cl.ok(text); got != want {
			t.Fatalf("%s = %q, want %q", text, got, want)
		}
	}
	// BATCH_COMMIT's list rules: one positional list is accepted too.
	if got := cl.ok("RESET_OFFSETS group=g topic=t P2:5"); got != "OK group=g topic=t reset=1" {
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
			e := cl.fail(tc.text)
			if e.Code != tc.code || e.Class != tc.class || e.Retryable {
				t.Fatalf("%s: %v", tc.text, e)
			}
			for i := 0; i+1 < len(tc.kv); i += 2 {
				if e.Field(tc.kv[i]) != tc.kv[i+1] {
					t.Fatalf("%s: field %s = %q (%v)", tc.text, tc.kv[i], e.Field(tc.kv[i]), e)
				}
			}
		})
	}
	if got := cl.ok("FETCH_OFFSET topic=t partition=0 group=g"); got != "OK offset=1" {
		t.Fatalf("rejected resets changed the offset: %q", got)
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
	c := startCluster(t, nil)
	cl := dial(t, c.addr, wire.CompressionNone)
	cl.ok("CREATE topic=t partitions=2")
	cl.ok("BATCH_COMMIT topic=t group=g member=m-4821 generation=3 offsets=P0:4,P1:6")
	if got := cl.ok("DELETE_GROUP group=g"); got != "OK group=g deleted=true" {
		t.Fatalf("DELETE_GROUP = %q", got)
	}
	if got := cl.ok("FETCH_OFFSET topic=t partition=1 group=g"); got != "OK offset=0" {
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
			if e := cl.fail(tc.text); e.Code != tc.code || e.Class != tc.class || e.Retryable {
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
	other := newFakeCoordinator()
	other.committed[offKey("moved", "t", 0)] = 3
	c.coord.redirect = serveFake(t, c.ca, pki.RoleCoordinatord, "c2", rpc.Telemetry{}, func(s *grpc.Server) {
		coordinatorv1.RegisterCoordinatorServiceServer(s, other)
	})
	cl := dial(t, c.addr, wire.CompressionNone)
	cl.ok("CREATE topic=t partitions=2")

	c.coord.notCoord.Store(1)
	if got := cl.ok("RESET_OFFSETS group=moved topic=t offsets=P1:8"); got != "OK group=moved topic=t reset=1" {
		t.Fatalf("RESET_OFFSETS = %q", got)
	}
	other.mu.Lock()
	moved := other.committed[offKey("moved", "t", 1)]
	other.mu.Unlock()
	if moved != 8 || c.coord.notCoord.Load() != 0 {
		t.Fatalf("reset did not reach the redirected coordinator: %d", moved)
	}
	c.coord.notCoord.Store(1)
	if got := cl.ok("DELETE_GROUP group=moved"); got != "OK group=moved deleted=true" {
		t.Fatalf("DELETE_GROUP = %q", got)
	}
	other.mu.Lock()
	left := len(other.committed)
	other.mu.Unlock()
	if left != 0 {
		t.Fatalf("delete did not reach the redirected coordinator: %d offsets left", left)
	}
}

// HELP lists the extension commands after the published ones, under both
// tables, and a table-B (Python SDK) client reaches them with the same ids.
func TestExtensionCommandsInHelpAndTableB(t *testing.T) {
	c := startCluster(t, nil)
	cl := dial(t, c.addr, wire.CompressionNone)
	help := strings.TrimPrefix(cl.ok("HELP"), "OK commands=")
	if !strings.HasSuffix(help, ",DELETE_GROUP,RESET_OFFSETS") || !strings.Contains(help, "READ_STREAM_HISTORY,DELETE_GROUP") {
		t.Fatalf("HELP = %q", help)
	}
	cb := dialTableB(t, c.addr)
	if help := cb.ok("HELP"); !strings.HasSuffix(help, ",DELETE_GROUP,RESET_OFFSETS") {
		t.Fatalf("table B HELP = %q", help)
	}
	id := cb.sendText("DELETE_GROUP group=nobody")
	f := cb.read()
	if f.Header.Command != 1000 || f.Header.RequestID != id {
		t.Fatalf("table B DELETE_GROUP reply header %+v", f.Header)
	}
	if e := frameError(t, f); e.Code != "group_not_found" {
		t.Fatalf("table B DELETE_GROUP: %v", e)
	}
	if got := cb.ok("RESET_OFFSETS group=g topic=t offsets=P0:2"); got != "OK group=g topic=t reset=1" {
		t.Fatalf("table B RESET_OFFSETS = %q", got)
	}
}

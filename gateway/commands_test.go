package gateway

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/strataio/strata/gateway/internal/auth"
	"github.com/strataio/strata/gateway/internal/command"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// TestEveryWireCommandIsAnswered walks libs/wire's command rows (both
// numberings) and fails on a command the gateway's table does not answer:
// a client command needs a family's handler or a not-built entry
// (UNSUPPORTED_FEATURE), internal broker commands are refused by the
// table's one rule, and NEGOTIATE has its own answer.
func TestEveryWireCommandIsAnswered(t *testing.T) {
	tbl := newCommandTable(nil, DefaultConfig(), &metrics{}, slog.Default(), openGuard(t))
	seen := map[wire.Command]bool{}
	for _, wt := range []*wire.CommandTable{wire.TableA, wire.TableB} {
		for _, cmd := range wt.Commands() {
			if seen[cmd] {
				continue
			}
			seen[cmd] = true
			got := tbl.Answer(cmd)
			switch {
			case cmd.IsInternal():
				if got != command.Refused {
					t.Errorf("%s is internal: answer %d, want refused", cmd, got)
				}
			case cmd == wire.CmdNegotiate:
				if got != command.Handled {
					t.Errorf("NEGOTIATE: answer %d, want its own handler", got)
				}
			case got != command.Handled && got != command.NotBuilt:
				t.Errorf("%s has no handler and no UNSUPPORTED_FEATURE entry", cmd)
			}
		}
	}
	if len(seen) < 50 {
		t.Fatalf("only %d commands in the wire tables", len(seen))
	}
}

// TestTableAnswersWithoutAFamily checks the answers the table gives itself,
// through Dispatch with a request of each kind: internal commands refused,
// NEGOTIATE after the handshake unknown (no subsystem is unbuilt any more:
// notBuilt is empty, and TestEveryWireCommandIsAnswered keeps it honest).
func TestTableAnswersWithoutAFamily(t *testing.T) {
	tbl := newCommandTable(nil, DefaultConfig(), &metrics{}, slog.Default(), openGuard(t))
	for _, tc := range []struct {
		cmd        wire.Command
		code, text string
	}{
		{wire.CmdReplicateMessage, "internal_command_unauthorized", "internal broker command"},
		{wire.CmdRaftApply, "internal_command_unauthorized", "internal broker command"},
		{wire.CmdNegotiate, "unknown_command", "only as the connection's first frame"},
		{wire.CmdAuth, "authentication_failed", "not enabled on this broker"},
	} {
		t.Run(tc.cmd.String(), func(t *testing.T) {
			_, err := tbl.Dispatch(context.Background(), &command.Call{Command: tc.cmd, Req: &wire.Request{}, Session: auth.NewSession("127.0.0.1:1")})
			e, ok := errcode.As(err)
			if !ok || e.Code != tc.code || (e.Field("command") != tc.cmd.String() && tc.cmd != wire.CmdAuth) || !strings.Contains(e.Message, tc.text) {
				t.Fatalf("%s answered %v", tc.cmd, err)
			}
		})
	}
}

// openGuard is the guard of a gateway with enable_sasl off.
func openGuard(t *testing.T) *auth.Guard {
	t.Helper()
	cfg := DefaultConfig()
	a, err := auth.New(cfg.authConfig(), slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	return auth.NewGuard(a, nil)
}

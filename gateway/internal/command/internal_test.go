package command

import (
	"context"
	"testing"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// TestInternalCommandGuard checks spec 4.9 for every internal command of
// both wire tables: without internal_token the answer is
// internal_command_unauthorized; with one (any value: no internal token is
// ever configured) internal_auth_not_configured. Both are authorization
// errors, not retryable, naming the command, and no handler runs.
func TestInternalCommandGuard(t *testing.T) {
	tbl := NewTable()
	seen := map[wire.Command]bool{}
	for _, wt := range []*wire.CommandTable{wire.TableA, wire.TableB} {
		for _, cmd := range wt.Commands() {
			if !cmd.IsInternal() || seen[cmd] {
				continue
			}
			seen[cmd] = true
			withToken := &wire.Request{}
			withToken.Add("topic", "t")
			withToken.Add(InternalTokenField, "s3cret")
			emptyToken := &wire.Request{}
			emptyToken.Add(InternalTokenField, "")
			for _, tc := range []struct {
				name string
				req  *wire.Request
				code string
			}{
				{"no token", &wire.Request{}, "internal_command_unauthorized"},
				{"empty token", emptyToken, "internal_command_unauthorized"},
				{"token", withToken, "internal_auth_not_configured"},
			} {
				_, err := tbl.Dispatch(context.Background(), &Call{Command: cmd, Req: tc.req, Conn: fakeConn{}})
				e, ok := errcode.As(err)
				if !ok || e.Code != tc.code || e.Class != errcode.ClassAuthorization || e.Retryable || e.Field("command") != cmd.String() {
					t.Errorf("%s %s: %v", cmd, tc.name, err)
				}
			}
		}
	}
	for _, c := range []wire.Command{wire.CmdListSnapshots, wire.CmdFetchSnapshot, wire.CmdCatchupSnapshots, wire.CmdReplicateSnapshot, wire.CmdReplicateMessage} {
		if !seen[c] {
			t.Errorf("spec 4.9 command %s is not internal in the wire tables", c)
		}
	}
}

type certConn struct{ fakeConn }

func (certConn) CertPrincipal() string { return "alice" }

func TestCertPrincipal(t *testing.T) {
	if got := CertPrincipal(fakeConn{}); got != "" {
		t.Fatalf("a connection without TLS: %q", got)
	}
	if got := CertPrincipal(certConn{}); got != "alice" {
		t.Fatalf("CertPrincipal = %q", got)
	}
}

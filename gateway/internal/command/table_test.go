package command

import (
	"context"
	"strings"
	"testing"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

type family func(*Table)

func (f family) Register(t *Table) { f(t) }

// fakeConn is a connection numbered by table A that writes nothing.
type fakeConn struct{}

func (fakeConn) Table() *wire.CommandTable                        { return wire.TableA }
func (fakeConn) WriteFrame(wire.Header, []byte) bool              { return true }
func (fakeConn) StartStream(func(context.Context, func() string)) {}

func TestDispatchChecksTextBeforeHandlersButNotRawOnes(t *testing.T) {
	ran := map[wire.Command]bool{}
	record := func(_ context.Context, c *Call) ([]byte, error) {
		ran[c.Command] = true
		return wire.AppendOK(c.Out), nil
	}
	tbl := NewTable(family(func(t *Table) {
		t.Handle(wire.CmdList, record)
		t.HandleRaw(wire.CmdPublish, record)
	}))
	bad := &wire.Request{}
	bad.Add("topic", "bad\xff")
	for _, tc := range []struct {
		cmd     wire.Command
		code    string
		handled bool
	}{
		{wire.CmdList, "invalid_parameter", false},
		{wire.CmdBeginTxn, "invalid_parameter", false}, // the text check comes before UNSUPPORTED_FEATURE
		{wire.CmdReplicateMessage, "internal_command_unauthorized", false},
		{wire.CmdPublish, "", true},
	} {
		_, err := tbl.Dispatch(context.Background(), &Call{Command: tc.cmd, Req: bad, Conn: fakeConn{}})
		if errcode.CodeOf(err) != tc.code || ran[tc.cmd] != tc.handled {
			t.Errorf("%s: err %v, handler ran %v", tc.cmd, err, ran[tc.cmd])
		}
	}
}

func TestConnectionCommands(t *testing.T) {
	tbl := NewTable()
	call := func(cmd wire.Command) (string, error) {
		out, err := tbl.Dispatch(context.Background(), &Call{Command: cmd, Req: &wire.Request{}, Conn: fakeConn{}})
		return string(out), err
	}
	if got, err := call(wire.CmdExit); got != "OK" || err != nil {
		t.Fatalf("EXIT = %q, %v", got, err)
	}
	got, err := call(wire.CmdHelp)
	names, ok := strings.CutPrefix(got, "OK commands=")
	if err != nil || !ok || !strings.HasPrefix(names, "AUTH,CREATE,") || !strings.HasSuffix(names, ",DELETE_GROUP,RESET_OFFSETS,LIST_TXNS,ABORT_TXN") {
		t.Fatalf("HELP = %q, %v", got, err)
	}
	for _, name := range strings.Split(names, ",") {
		if name == "NEGOTIATE" || name == "REPLICATE_MESSAGE" || name == "RAFT_APPLY" {
			t.Fatalf("HELP lists %s: %q", name, got)
		}
	}
	if _, err := call(wire.CmdNegotiate); errcode.CodeOf(err) != "unknown_command" {
		t.Fatalf("NEGOTIATE after the handshake: %v", err)
	}
}

func TestRegistrationMistakesPanic(t *testing.T) {
	ok := func(context.Context, *Call) ([]byte, error) { return nil, nil }
	for name, register := range map[string]func(*Table){
		"not built": func(t *Table) {
			// Every subsystem is built now: list one for the test.
			notBuilt[wire.CmdBrowseMessages] = "test"
			defer delete(notBuilt, wire.CmdBrowseMessages)
			t.Handle(wire.CmdBrowseMessages, ok)
		},
		"internal":   func(t *Table) { t.Handle(wire.CmdRaftApply, ok) },
		"twice":      func(t *Table) { t.Handle(wire.CmdList, ok); t.Handle(wire.CmdList, ok) },
		"builtin":    func(t *Table) { t.Handle(wire.CmdHelp, ok) },
		"no handler": func(t *Table) { t.Handle(wire.CmdList, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("registration did not panic")
				}
			}()
			NewTable(family(register))
		})
	}
}

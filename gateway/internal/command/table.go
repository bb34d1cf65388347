package command

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// notBuilt lists the client commands whose subsystem Strata has not built
// yet, with the message of their UNSUPPORTED_FEATURE answer (field command
// names the command). It is the one place that says so: when a subsystem
// lands, its lines go and its family registers handlers (registering a
// command still listed here panics).
var notBuilt = map[wire.Command]string{}

// Family is a set of command handlers (admin, records, groups); Register
// adds them to the table.
type Family interface {
	Register(t *Table)
}

// Answer says how the table answers a command.
type Answer uint8

// Answers.
const (
	// Missing: nothing answers the command; it would get a generic
	// UNSUPPORTED_FEATURE. The gateway's tests fail on any.
	Missing Answer = iota
	// Handled: a handler answers (a family's, or the table's own for
	// NEGOTIATE, HELP and EXIT).
	Handled
	// NotBuilt: UNSUPPORTED_FEATURE naming the subsystem not built yet.
	NotBuilt
	// Refused: an internal broker command, internal_command_unauthorized
	// or internal_auth_not_configured (internalGuard).
	Refused
)

type entry struct {
	handle Handler
	// raw: the handler checks the request text itself (CheckText).
	raw bool
}

// Table maps every client command to its handler. It is built once and
// only read afterwards, so dispatch needs no lock.
type Table struct {
	entries [256]entry // indexed by wire.Command (a uint8)
	guard   Guard
}

// Guard decides whether a command may run (client authentication and
// authorization, gateway/internal/auth) and runs it with next. It is the
// one place every client command passes before its handler, its text check
// or its UNSUPPORTED_FEATURE answer; internal commands are refused before.
type Guard func(ctx context.Context, c *Call, next Handler) ([]byte, error)

// SetGuard installs g; set once while the table is built.
func (t *Table) SetGuard(g Guard) { t.guard = g }

// NewTable returns the table of the connection-level commands (NEGOTIATE,
// HELP, EXIT) and every family's handlers.
func NewTable(families ...Family) *Table {
	t := &Table{}
	t.Handle(wire.CmdNegotiate, negotiate)
	t.Handle(wire.CmdHelp, help)
	t.Handle(wire.CmdExit, exit)
	for _, f := range families {
		f.Register(t)
	}
	return t
}

// Handle registers h for cmd. The table checks the request text (CheckText)
// before h runs. Registering an internal command, one listed as not built or
// one already registered panics: the table is built at startup.
func (t *Table) Handle(cmd wire.Command, h Handler) { t.add(cmd, entry{handle: h}) }

// HandleRaw is Handle for a handler that checks the request text itself
// (with CheckText), because even that failure must be answered its own way
// (an acks=0 PUBLISH is never answered).
func (t *Table) HandleRaw(cmd wire.Command, h Handler) { t.add(cmd, entry{handle: h, raw: true}) }

func (t *Table) add(cmd wire.Command, e entry) {
	switch {
	case !cmd.Valid() || e.handle == nil:
		panic("command: invalid registration of " + cmd.String())
	case cmd.IsInternal():
		panic("command: " + cmd.String() + " is an internal broker command; the table refuses those")
	case notBuilt[cmd] != "":
		panic("command: " + cmd.String() + " is listed as not built; remove it from notBuilt")
	case t.entries[cmd].handle != nil:
		panic("command: " + cmd.String() + " registered twice")
	}
	t.entries[cmd] = e
}

// Answer says how the table answers cmd.
func (t *Table) Answer(cmd wire.Command) Answer {
	switch {
	case cmd.IsInternal():
		return Refused
	case t.entries[cmd].handle != nil:
		return Handled
	case notBuilt[cmd] != "":
		return NotBuilt
	}
	return Missing
}

// Dispatch runs the command of c and returns its reply payload.
func (t *Table) Dispatch(ctx context.Context, c *Call) ([]byte, error) {
	cmd := c.Command
	if cmd.IsInternal() {
		// Broker-to-broker commands never reach a client listener (spec 4.9);
		// Strata's internal hops are gRPC, so no token can make them valid.
		return nil, internalGuard(cmd, c.Req)
	}
	if t.guard != nil {
		return t.guard(ctx, c, t.run)
	}
	return t.run(ctx, c)
}

// run is the command after the guard: the text check, then its handler.
func (t *Table) run(ctx context.Context, c *Call) ([]byte, error) {
	e := t.entries[c.Command]
	if !e.raw {
		if err := CheckText(c.Req); err != nil {
			return nil, err
		}
	}
	if e.handle == nil {
		return nil, unsupported(c.Command)
	}
	return e.handle(ctx, c)
}

// unsupported answers a command whose subsystem Strata has not built yet
// with a typed error naming the command and what is missing.
func unsupported(cmd wire.Command) error {
	what, ok := notBuilt[cmd]
	if !ok {
		what = "this command is not available in Strata yet"
	}
	return errcode.UnsupportedFeature.New(what, "command", cmd.String())
}

// CheckText refuses request text that is not UTF-8 (WIRE-V2 6: values are
// UTF-8). Internal hops carry names and ids in protobuf strings, which must
// be UTF-8, so such a value would otherwise fail deep inside as an internal
// error instead of the client's validation error. Record payloads
// (message, payload, metadata) are bytes and may hold anything.
func CheckText(r *wire.Request) error {
	for _, p := range r.Positionals {
		if !utf8.ValidString(p) {
			return errcode.InvalidParameter.New("a positional argument is not valid UTF-8", "param", "positional")
		}
	}
	for k, v := range r.All() {
		switch k {
		case "message", "payload", "metadata":
			continue
		}
		if !utf8.ValidString(v) {
			return errcode.InvalidParameter.New(k+" is not valid UTF-8", "param", k)
		}
	}
	return nil
}

// negotiate answers NEGOTIATE after the handshake: negotiation happens once,
// as the first frame; there is no text or in-session renegotiation (spec 9).
func negotiate(context.Context, *Call) ([]byte, error) {
	return nil, errcode.UnknownCommand.New("NEGOTIATE is valid only as the connection's first frame", "command", "NEGOTIATE")
}

// help answers the HELP list: every client command of the connection's
// table in wire-id order (Strata's extension commands last), without
// NEGOTIATE and internal commands.
func help(_ context.Context, c *Call) ([]byte, error) {
	var names []string
	for _, cmd := range c.Conn.Table().Commands() {
		if cmd.IsInternal() || cmd == wire.CmdNegotiate {
			continue
		}
		names = append(names, cmd.String())
	}
	out := wire.AppendOK(c.Out)
	return wire.AppendOKField(out, "commands", strings.Join(names, ",")), nil
}

// exit answers OK; the connection closes after writing it.
func exit(_ context.Context, c *Call) ([]byte, error) {
	return wire.AppendOK(c.Out), nil
}

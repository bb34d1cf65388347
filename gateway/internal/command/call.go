// Package command is the gateway's command table: one handler per client
// command, keyed by wire.Command, filled by the command families
// (gateway/internal/admin, records, groups) and checked against libs/wire's
// command rows by the gateway's tests, so a command the codec knows but no
// family answers fails a test instead of a client.
//
// The table itself decides, before any handler runs, the answers that do not
// depend on a family: internal broker commands are refused
// (internal_command_unauthorized), request text must be UTF-8, commands of
// subsystems not built yet answer UNSUPPORTED_FEATURE (notBuilt, the one list
// of them), and NEGOTIATE, HELP and EXIT are answered here. Every client
// command passes the Guard installed with SetGuard (client authentication
// and authorization) before any of that.
package command

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/strataio/strata/gateway/internal/auth"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// Call is one client request as a handler sees it. The connection reuses it
// between requests: a handler must not keep it (or Out) after returning.
type Call struct {
	Command wire.Command
	Header  wire.Header
	// Req is the decoded CRQ2 request; empty for a batch payload.
	Req *wire.Request
	// Batch is the CBV2 payload of a batch PUBLISH, nil otherwise.
	Batch []byte
	// Out is the connection's reply buffer: a handler appends its reply
	// payload to Out[:0] and returns it.
	Out []byte
	// Conn is the client connection.
	Conn Conn
	// Session is the connection's authentication state (the table's
	// Guard reads it; AUTH changes it).
	Session *auth.Session
}

// Handler runs one command and returns its reply payload, or a typed error
// the connection answers with. ErrNoReply means the handler answered itself
// or must not answer (acks 0, STREAM).
type Handler func(ctx context.Context, c *Call) ([]byte, error)

// ErrNoReply tells the connection a handler already answered (or, for
// acks=0, must not answer).
var ErrNoReply = errors.New("no reply")

// Conn is what a handler may do with the client connection besides
// returning its reply.
type Conn interface {
	// Table is the connection's command numbering (HELP lists it).
	Table() *wire.CommandTable
	// WriteFrame writes one frame to the client; false when the connection
	// broke.
	WriteFrame(h wire.Header, payload []byte) bool
	// StartStream makes push the connection's active stream: it runs on
	// its own goroutine, which the gateway owns and waits for, until ctx
	// ends (the next request, the connection closing, the gateway
	// stopping); stopReason then names the STREAM_CONTROL close reason.
	StartStream(push func(ctx context.Context, stopReason func() string))
}

// CertPrincipal returns the principal the gateway mapped from the client's
// verified TLS certificate (gateway.tls_principal_rule), "" when the
// connection has none. Authentication may attach it to the connection; until
// it does, it is only logged (docs/security.md).
func CertPrincipal(c Conn) string {
	if p, ok := c.(interface{ CertPrincipal() string }); ok {
		return p.CertPrincipal()
	}
	return ""
}

// Two-frame commands (READ_STREAM, READ_STREAM_HISTORY, BROWSE_MESSAGES)
// answer a JSON envelope, then a CBV2 batch (WIRE-V2 9.1, 9.3).

// JSONError is a two-frame command's early failure: one frame holding
// {"status":"ERROR","error":"<code and details>"} (the error's readable
// form without its "ERROR: " prefix; errcode.ParseText reads it back with
// the prefix), and no batch frame.
func JSONError(out []byte, err error) ([]byte, error) {
	b, merr := json.Marshal(struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	}{"ERROR", strings.TrimPrefix(errcode.From(err).Error(), "ERROR: ")})
	if merr != nil {
		return nil, merr
	}
	return append(out, b...), nil
}

// TwoFrames answers a two-frame command: env as the JSON first frame, then
// records (a record set of topic's partition part, offsets written) as the
// CBV2 batch the handler returns. A batch that cannot be built is the
// command's one JSON ERROR frame instead, before any frame is written.
func TwoFrames(c *Call, env any, topic string, part int32, records []byte) ([]byte, error) {
	var bb wire.BatchBuilder
	err := bb.Reset(c.Out, wire.BatchHeader{Topic: topic, Partition: part, Acks: "1"})
	if err == nil && len(records) > 0 {
		err = bb.AppendRecords(records)
	}
	var batch []byte
	if err == nil {
		batch, err = bb.Bytes()
	}
	if err != nil {
		return JSONError(c.Out, err)
	}
	b, err := json.Marshal(env)
	if err != nil {
		return nil, err
	}
	h := wire.Header{Kind: wire.KindResponse, Command: c.Header.Command, Status: wire.StatusOK, RequestID: c.Header.RequestID}
	if !c.Conn.WriteFrame(h, b) {
		return nil, errcode.RequestCancelled.New("the client connection broke before the batch frame", "command", c.Command.String())
	}
	return batch, nil
}

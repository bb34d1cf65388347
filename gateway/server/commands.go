package server

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// handle runs one command and returns its reply payload. errNoReply means
// the handler answered itself or must not answer (acks=0, STREAM).
func (g *Role) handle(ctx context.Context, c *conn, cmd wire.Command, h wire.Header, r *wire.Request, batch []byte) ([]byte, error) {
	if cmd.IsInternal() {
		// Broker-to-broker commands never reach a client listener (spec 4.9);
		// Strata's internal hops are gRPC, so no token can make them valid.
		return nil, errcode.InternalCommandUnauthorized.New("internal broker command on the client listener", "command", cmd.String())
	}
	if err := checkUTF8(r); err != nil {
		if cmd == wire.CmdPublish {
			return nil, g.publishFailed(r, batch, err)
		}
		return nil, err
	}
	if r.Has("transactional_id") || r.Has("transaction_state") || r.Has("transaction_marker") {
		if cmd == wire.CmdPublish {
			return nil, g.publishFailed(r, nil, errcode.TransactionMetadataForbidden.New("transaction metadata fields are internal to PUBLISH", "command", "PUBLISH"))
		}
	}
	out := c.out[:0]
	switch cmd {
	case wire.CmdCreate:
		return g.cmdCreate(ctx, out, r)
	case wire.CmdAlterTopicConfig:
		return g.cmdAlterTopicConfig(ctx, out, r)
	case wire.CmdDelete:
		return g.cmdDelete(ctx, out, r)
	case wire.CmdTruncate:
		return g.cmdTruncate(ctx, out, r)
	case wire.CmdList:
		return g.cmdList(out)
	case wire.CmdHelp:
		return g.cmdHelp(out, c.codec.Table)
	case wire.CmdDescribe:
		return g.cmdDescribe(ctx, out, r)
	case wire.CmdMetadata:
		return g.cmdMetadata(ctx, out, r)
	case wire.CmdListOffsets:
		return g.cmdListOffsets(ctx, out, r)
	case wire.CmdClusterStatus:
		return g.cmdClusterStatus(ctx, out)
	case wire.CmdElectLeader:
		return g.cmdElectLeader(ctx, out, r)
	case wire.CmdPublish:
		reply, err := g.cmdPublish(ctx, c, out, r, batch)
		return reply, g.publishFailed(r, batch, err)
	case wire.CmdConsume:
		return g.cmdConsume(ctx, out, r)
	case wire.CmdStream:
		return g.cmdStream(ctx, c, h, r)
	case wire.CmdExit:
		return wire.AppendOK(out), nil
	case wire.CmdNegotiate:
		// Negotiation happens once, as the first frame; there is no text
		// or in-session renegotiation (spec 9).
		return nil, errcode.UnknownCommand.New("NEGOTIATE is valid only as the connection's first frame", "command", "NEGOTIATE")
	case wire.CmdFindCoordinator:
		return g.cmdFindCoordinator(ctx, out, r)
	case wire.CmdRegisterGroup:
		return g.cmdRegisterGroup(ctx, out, r)
	case wire.CmdJoinGroup:
		return g.cmdJoinGroup(ctx, out, r)
	case wire.CmdSyncGroup:
		return g.cmdSyncGroup(ctx, out, r)
	case wire.CmdHeartbeat:
		return g.cmdHeartbeat(ctx, out, r)
	case wire.CmdLeaveGroup:
		return g.cmdLeaveGroup(ctx, out, r)
	case wire.CmdGroupStatus:
		return g.cmdGroupStatus(ctx, out, r)
	case wire.CmdListGroups:
		return g.cmdListGroups(ctx, out)
	case wire.CmdCommitOffset:
		return g.cmdCommitOffset(ctx, out, r)
	case wire.CmdBatchCommit:
		return g.cmdBatchCommit(ctx, out, r)
	case wire.CmdFetchOffset:
		return g.cmdFetchOffset(ctx, out, r)
	case wire.CmdDeleteGroup:
		return g.cmdDeleteGroup(ctx, out, r)
	case wire.CmdResetOffsets:
		return g.cmdResetOffsets(ctx, out, r)
	}
	return nil, unsupported(cmd)
}

// checkUTF8 refuses request text that is not UTF-8 (WIRE-V2 6: values are
// UTF-8). Internal hops carry names and ids in protobuf strings, which must
// be UTF-8, so such a value would otherwise fail deep inside as an internal
// error instead of the client's validation error. Record payloads
// (message, payload, metadata) are bytes and may hold anything.
func checkUTF8(r *wire.Request) error {
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

// unsupported answers a command whose subsystem Strata has not built yet
// with a typed error naming the command and what is missing.
func unsupported(cmd wire.Command) error {
	what := "this command is not available in Strata yet"
	switch cmd {
	case wire.CmdInitProducerID, wire.CmdBeginTxn, wire.CmdTxnPublish, wire.CmdSendOffsetsToTxn, wire.CmdEndTxn,
		wire.CmdTxnStatus, wire.CmdTxnAppendStream:
		what = "transactions are not built yet in Strata"
	case wire.CmdAppendStream, wire.CmdReadStream, wire.CmdStreamVersion, wire.CmdSaveSnapshot, wire.CmdReadSnapshot,
		wire.CmdReadStreamHistory, wire.CmdAggregateReplayProof, wire.CmdAggregateEventRangeRead:
		what = "event sourcing is not built yet in Strata"
	case wire.CmdAuth:
		what = "client authentication is not built yet in Strata (enable_sasl is unsupported)"
	case wire.CmdBrowseMessages, wire.CmdListCluster:
		what = cmd.String() + " is not built yet in Strata"
	}
	return errcode.UnsupportedFeature.New(what, "command", cmd.String())
}

// cmdHelp answers the HELP list: every client command of the connection's
// table in wire-id order (Strata's extension commands last), without
// NEGOTIATE and internal commands.
func (g *Role) cmdHelp(out []byte, t *wire.CommandTable) ([]byte, error) {
	var names []string
	for _, c := range t.Commands() {
		if c.IsInternal() || c == wire.CmdNegotiate {
			continue
		}
		names = append(names, c.String())
	}
	out = wire.AppendOK(out)
	return wire.AppendOKField(out, "commands", strings.Join(names, ",")), nil
}

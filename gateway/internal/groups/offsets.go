package groups

import (
	"context"

	"github.com/strataio/strata/gateway/internal/command"
	"github.com/strataio/strata/gateway/internal/param"
	"github.com/strataio/strata/gateway/internal/route"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
)

// commitOffset is COMMIT_OFFSET.
func (g *Handlers) commitOffset(ctx context.Context, c *command.Call) ([]byte, error) {
	p := param.Read(c.Req, c.Command)
	topic, part, group := p.Required(param.Topic), p.Partition(), p.Required(param.Group)
	offset, member, gen := p.RequiredUint(param.Offset), p.Required(param.Member), p.Generation()
	_, err := forward(ctx, g.r, p.Err(), group, coordinatorv1.CoordinatorServiceClient.CommitOffset,
		&coordinatorv1.CommitOffsetRequest{Group: group, Topic: topic, Partition: part, Offset: offset, Member: member, Generation: &gen})
	if err != nil {
		return nil, err
	}
	return wire.AppendOK(c.Out), nil
}

// batchOffsets reads the raw list of BATCH_COMMIT (and RESET_OFFSETS): the
// offsets field, or (as the Python and Java SDKs send BATCH_COMMIT's)
// exactly one positional. The coordinator parses it after checking member
// and generation (spec 4.5 order), so the gateway forwards the text
// unparsed.
func batchOffsets(r *wire.Request) (string, error) {
	v, ok := r.Get("offsets")
	if !ok {
		if len(r.Positionals) != 1 {
			return "", errcode.InvalidBatchCommitEntry.New("offsets is required as P<partition>:<offset>,...", "reason", "missing_offsets")
		}
		v = r.Positionals[0]
	}
	if len(v) > 64<<10 {
		// 1,024 entries of P<int32>:<uint64> fit in 32 KiB; refuse more
		// before it travels.
		return "", errcode.InvalidBatchCommitEntry.New("offset list too long", "reason", "too_long")
	}
	return v, nil
}

// batchCommit is BATCH_COMMIT: member and generation are checked before
// the list, which travels raw to the coordinator (spec 4.5 order).
func (g *Handlers) batchCommit(ctx context.Context, c *command.Call) ([]byte, error) {
	p := param.Read(c.Req, c.Command)
	topic, group, member, gen := p.Required(param.Topic), p.Required(param.Group), p.Required(param.Member), p.Generation()
	list, err := batchOffsets(c.Req)
	p.Check(err)
	resp, err := forward(ctx, g.r, p.Err(), group, coordinatorv1.CoordinatorServiceClient.BatchCommit,
		&coordinatorv1.BatchCommitRequest{Group: group, Topic: topic, Member: member, Generation: &gen, OffsetsList: list})
	if err != nil {
		return nil, err
	}
	return wire.AppendOKInt(wire.AppendOK(c.Out), "batched", int64(resp.GetBatched())), nil
}

// fetchOffset is FETCH_OFFSET: a group's committed next offset (waiting
// out a transaction about to commit or abort offsets of the partition).
func (g *Handlers) fetchOffset(ctx context.Context, c *command.Call) ([]byte, error) {
	p := param.Read(c.Req, c.Command)
	topic, part, group := p.Required(param.Topic), p.Partition(), p.Required(param.Group)
	if err := p.Err(); err != nil {
		return nil, err
	}
	resp, err := route.FetchCommitted(ctx, g.r, &coordinatorv1.FetchOffsetRequest{Group: group, Topic: topic, Partition: part})
	if err != nil {
		return nil, err
	}
	return wire.AppendOKUint(wire.AppendOK(c.Out), "offset", resp.GetOffset()), nil
}

// deleteGroup is DELETE_GROUP (Strata extension command, admin): the
// coordinator tombstones the group's offsets, then the group; a group with
// active members is group_not_empty.
func (g *Handlers) deleteGroup(ctx context.Context, c *command.Call) ([]byte, error) {
	group, perr := requiredGroup(c)
	_, err := forward(ctx, g.r, perr, group, coordinatorv1.CoordinatorServiceClient.DeleteGroup,
		&coordinatorv1.DeleteGroupRequest{Group: group})
	if err != nil {
		return nil, err
	}
	out := wire.AppendOKField(wire.AppendOK(c.Out), "group", group)
	return wire.AppendOKBool(out, "deleted", true), nil
}

// resetOffsets is RESET_OFFSETS (Strata extension command, admin): set
// committed offsets of a group without active members, down or up. The
// offset list follows BATCH_COMMIT's rules and travels raw; the coordinator
// parses and checks it.
func (g *Handlers) resetOffsets(ctx context.Context, c *command.Call) ([]byte, error) {
	p := param.Read(c.Req, c.Command)
	group, topic := p.Required(param.Group), p.Required(param.Topic)
	list, err := batchOffsets(c.Req)
	p.Check(err)
	resp, err := forward(ctx, g.r, p.Err(), group, coordinatorv1.CoordinatorServiceClient.ResetOffsets,
		&coordinatorv1.ResetOffsetsRequest{Group: group, Topic: topic, OffsetsList: list})
	if err != nil {
		return nil, err
	}
	out := wire.AppendOKField(wire.AppendOK(c.Out), "group", group)
	out = wire.AppendOKField(out, "topic", topic)
	return wire.AppendOKInt(out, "reset", int64(resp.GetEntries())), nil
}

package client

import (
	"context"
	"strconv"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// Acks values of PUBLISH (spec 4.6).
const (
	AcksNone   = "0"
	AcksLeader = "1"
	AcksAll    = "all"
)

// PublishRequest is a text-form PUBLISH of one message.
type PublishRequest struct {
	Topic string
	// Partition < 0 lets the server route (key hash or round robin).
	Partition  int32
	Acks       string
	ProducerID string
	SeqNum     uint64
	Epoch      int64
	Idempotent bool
	Message    string
}

// Publish sends one message in the text form. With acks 0 it returns once the
// frame is written and the AckResponse is zero. Publishing in batches
// (PublishBatch, Producer) is the default path; this is for tools and tests.
func (c *Client) Publish(ctx context.Context, p PublishRequest) (wire.AckResponse, error) {
	if p.ProducerID == "" {
		p.ProducerID = c.opts.ClientID
	}
	part := ""
	if p.Partition >= 0 {
		part = strconv.Itoa(int(p.Partition))
	}
	seq, epoch, idem := "", "", ""
	if p.SeqNum != 0 {
		seq = strconv.FormatUint(p.SeqNum, 10)
	}
	if p.Epoch != 0 {
		epoch = strconv.FormatInt(p.Epoch, 10)
	}
	if p.Idempotent {
		idem = "true"
	}
	req := params("topic", p.Topic, "acks", p.Acks, "producerId", p.ProducerID, "partition", part,
		"seqNum", seq, "epoch", epoch, "isIdempotent", idem)
	// message= takes the rest of the line, so it always comes last.
	req.Add("message", p.Message)
	if isAcksZero(p.Acks) {
		payload, err := req.AppendTo(nil)
		if err != nil {
			return wire.AckResponse{}, err
		}
		return wire.AckResponse{}, c.sendOnly(ctx, wire.CmdPublish, payload)
	}
	return c.ack(ctx, req, nil)
}

// PublishBatch sends a CBV2 batch (one topic partition). The batch's Acks
// decides the wait: "0"/"none" returns after the write, anything else waits
// for the AckResponse. BatchStart/BatchEnd are filled from the records'
// sequence numbers when zero.
func (c *Client) PublishBatch(ctx context.Context, b *wire.Batch) (wire.AckResponse, error) {
	b.FillSequenceRange()
	payload, err := b.AppendTo(nil)
	if err != nil {
		return wire.AckResponse{}, err
	}
	return c.PublishEncoded(ctx, payload, b.Acks)
}

// PublishEncoded sends an already encoded CBV2 batch (the load tool reuses
// one encoding); acks must equal the batch header's acks.
func (c *Client) PublishEncoded(ctx context.Context, batch []byte, acks string) (wire.AckResponse, error) {
	if !wire.IsBatch(batch) {
		return wire.AckResponse{}, errcode.MalformedInput.New("payload is not a CBV2 batch", "payload", "cbv2")
	}
	if isAcksZero(acks) {
		return wire.AckResponse{}, c.sendOnly(ctx, wire.CmdPublish, batch)
	}
	return c.ack(ctx, nil, batch)
}

func (c *Client) ack(ctx context.Context, req *wire.Request, raw []byte) (wire.AckResponse, error) {
	fs, err := c.roundTrip(ctx, wire.CmdPublish, req, raw, 1)
	if err != nil {
		return wire.AckResponse{}, err
	}
	if len(fs) == 0 {
		return wire.AckResponse{}, errcode.DecodeFailed.New("empty PUBLISH reply", "payload", "ack")
	}
	a, err := wire.ParseAck(fs[0].payload)
	if err != nil {
		return a, err
	}
	if e := a.Failure(); e != nil {
		return a, e
	}
	return a, nil
}

// ConsumeRequest is one CONSUME poll (spec 4.6); empty strings and zero
// numbers take the server defaults.
type ConsumeRequest struct {
	Topic     string
	Partition int32
	Offset    uint64
	Member    string
	Group     string
	// AutoOffsetReset is earliest (default) or latest.
	AutoOffsetReset string
	// Isolation is read_committed (default) or read_uncommitted.
	Isolation string
	// MaxRecords is the batch parameter (server default 8192).
	MaxRecords int
	// WaitMS is the long-poll timeout (server default 0, capped at 30000).
	WaitMS int
}

func (r ConsumeRequest) params(member string) *wire.Request {
	if r.Member == "" {
		r.Member = member
	}
	return params("topic", r.Topic, "partition", strconv.Itoa(int(r.Partition)),
		"offset", strconv.FormatUint(r.Offset, 10), "member", r.Member, "group", r.Group,
		"autoOffsetReset", r.AutoOffsetReset, "isolation", r.Isolation,
		"batch", itoaIf(int64(r.MaxRecords)), "wait_ms", itoaIf(int64(r.WaitMS)))
}

// Consume polls one partition and returns the decoded batch (possibly with no
// records). OFFSET_OUT_OF_RANGE arrives as a typed error with requested,
// earliest and latest fields.
func (c *Client) Consume(ctx context.Context, r ConsumeRequest) (*wire.Batch, error) {
	p, err := c.consumeReply(ctx, r)
	if err != nil {
		return nil, err
	}
	return wire.DecodeBatchOwned(p) // p is a frame payload the connection handed over
}

// ConsumeView is Consume without building a Record struct per record: it
// returns a zero-copy view of the reply whose header is checked, and the
// records are validated as they are iterated (check the iterator's Err after
// the loop; a bad record ends the iteration). The view owns its bytes. For
// consumers that read records once, at high rates.
func (c *Client) ConsumeView(ctx context.Context, r ConsumeRequest) (wire.BatchView, error) {
	p, err := c.consumeReply(ctx, r)
	if err != nil {
		return wire.BatchView{}, err
	}
	return wire.ParseBatchHeader(p)
}

// consumeReply sends one CONSUME and returns the reply's payload, a CBV2
// batch the caller owns, or the error it carries.
func (c *Client) consumeReply(ctx context.Context, r ConsumeRequest) ([]byte, error) {
	fs, err := c.roundTrip(ctx, wire.CmdConsume, r.params(c.opts.ClientID), nil, 1)
	if err != nil {
		return nil, err
	}
	if len(fs) == 0 {
		return nil, errcode.DecodeFailed.New("empty CONSUME reply", "payload", "cbv2")
	}
	return batchReply(fs[0].payload)
}

// batchReply returns p, a batch reply, or the text error it carries instead.
func batchReply(p []byte) ([]byte, error) {
	if len(p) > 0 && p[0] == 'E' {
		if e, ok := errcode.ParseText(string(p)); ok {
			return nil, e
		}
	}
	return p, nil
}

func decodeBatchReply(p []byte) (*wire.Batch, error) {
	p, err := batchReply(p)
	if err != nil {
		return nil, err
	}
	return wire.DecodeBatchOwned(p) // p is a frame payload the connection handed over
}

package eventsourcing

import (
	"context"
	"encoding/binary"

	"github.com/strataio/strata/gateway/internal/command"
	"github.com/strataio/strata/gateway/internal/param"
	"github.com/strataio/strata/gateway/internal/route"
	"github.com/strataio/strata/gateway/internal/txn"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
)

// txnAppendStream is TXN_APPEND_STREAM: APPEND_STREAM's event (topic, key,
// version, message, event_type, schema_version, metadata; event_id on
// aggregate replay topics) written in a transaction (transactional_id,
// producerId, epoch, seqNum > 0, as TXN_PUBLISH). The event goes to the
// aggregate's partition through the transaction coordinator, like a
// TXN_PUBLISH record (the partition is added to the transaction first); the
// partition leader checks the version under its append lock against the
// stream's head counting this transaction's open events
// (docs/event-sourcing.md). Answer: `OK transactional_id= appended=true
// staged_messages=1 topic= partition= version= offset= state=open`, plus
// duplicate=true when the seqNum was answered before in this transaction
// (offset and partition are then the first answer's).
func (h *Handlers) txnAppendStream(ctx context.Context, c *command.Call) ([]byte, error) {
	if c.Batch != nil {
		return nil, errcode.InvalidParameter.New("TXN_APPEND_STREAM takes one event, not a batch", "param", "batch")
	}
	p := param.Read(c.Req, c.Command)
	id, producer := p.Required(txn.TransactionalID), p.Required(param.ProducerID)
	epoch, ok := p.OptIntIfSet("epoch", 0, 1<<31-1)
	if !ok && p.Err() == nil {
		p.Check(errcode.MissingParameter.New("epoch is required", "param", "epoch"))
	}
	topic, key := p.Required(param.Topic), p.Required(keyParam)
	seq, hasSeq := p.OptUint("seqNum", 0)
	if p.Err() == nil && (!hasSeq || seq == 0) {
		p.Check(errcode.InvalidParameter.New("TXN_APPEND_STREAM needs seqNum above 0", "param", "seqNum"))
	}
	s, rec, err := h.eventRecord(ctx, c, &p, topic, key)
	if err != nil {
		return nil, err
	}
	rec.Partition = s.part
	// The transaction's producer fields, on aggregate replay topics too
	// (the session's producerId and epoch are the ones stored).
	rec.ProducerID, rec.SeqNum, rec.Epoch = producer, seq, epoch
	rec.TransactionalID, rec.TransactionState = id, wire.TxnStateOpen
	buf, err := rec.AppendTo([]byte{0, 0, 0, 0})
	if err != nil {
		return nil, err
	}
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	resp, err := route.ToTxnCoordinator(ctx, h.r, id, coordinatorv1.CoordinatorServiceClient.TxnPublish,
		&coordinatorv1.TxnPublishRequest{TransactionalId: id, ProducerId: producer, Epoch: epoch, Seq: seq, Topic: topic,
			Partition: s.part, Records: buf, RecordCount: 1})
	if err != nil {
		return nil, err
	}
	out := wire.AppendOKField(wire.AppendOK(c.Out), "transactional_id", resp.GetTransactionalId())
	out = wire.AppendOKBool(out, "appended", true)
	out = wire.AppendOKInt(out, "staged_messages", 1)
	out = wire.AppendOKField(out, "topic", resp.GetTopic())
	out = wire.AppendOKInt(out, "partition", int64(resp.GetPartition()))
	out = wire.AppendOKUint(out, "version", rec.AggregateVersion)
	out = wire.AppendOKUint(out, "offset", resp.GetOffset())
	out = wire.AppendOKField(out, "state", "open")
	if resp.GetDuplicate() {
		out = wire.AppendOKBool(out, "duplicate", true)
	}
	return out, nil
}

// Package txn holds the gateway's transaction commands (SERVICE-SPEC 4.7;
// docs/transactions.md): each is forwarded to the coordinatord owning the
// transactional_id's shard (route.ToTxnCoordinator, following
// NOT_COORDINATOR). TXN_PUBLISH builds the record here (the partition is
// chosen like PUBLISH's: key hash, else round robin) and the coordinator
// writes it to the partition.
package txn

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strataio/strata/gateway/internal/command"
	"github.com/strataio/strata/gateway/internal/param"
	"github.com/strataio/strata/gateway/internal/route"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/placement"
	"github.com/strataio/strata/libs/wire"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// TransactionalID is the transactional_id parameter.
var TransactionalID = param.Name{Key: "transactional_id", Missing: errcode.MissingParameter}

// Handlers are the transaction commands over a Router.
type Handlers struct {
	r route.Router

	rrMu sync.Mutex
	rr   map[string]*placement.RoundRobin
}

// New returns the transaction commands routed through r.
func New(r route.Router) *Handlers { return &Handlers{r: r, rr: map[string]*placement.RoundRobin{}} }

// Register implements command.Family. TXN_APPEND_STREAM, a transactional
// event append, is the event-sourcing family's (gateway/internal/eventsourcing).
func (h *Handlers) Register(t *command.Table) {
	t.Handle(wire.CmdSendOffsetsToTxn, h.sendOffsetsToTxn)
	t.Handle(wire.CmdInitProducerID, h.initProducerID)
	t.Handle(wire.CmdBeginTxn, h.beginTxn)
	t.Handle(wire.CmdTxnPublish, h.txnPublish)
	t.Handle(wire.CmdEndTxn, h.endTxn)
	t.Handle(wire.CmdTxnStatus, h.txnStatus)
	t.Handle(wire.CmdListTxns, h.listTxns)
	t.Handle(wire.CmdAbortTxn, h.abortTxn)
}

// TxnJSON is one transaction of LIST_TXNS and ABORT_TXN (extension
// commands; admin only once AUTH exists).
type TxnJSON struct {
	TransactionalID string   `json:"transactional_id"`
	ProducerID      string   `json:"producer_id"`
	Epoch           int64    `json:"epoch"`
	State           string   `json:"state"`
	Messages        uint64   `json:"messages"`
	Offsets         uint32   `json:"offsets"`
	AgeMs           int64    `json:"age_ms"`
	Participants    []string `json:"participants"`
}

func txnJSON(info *coordinatorv1.TxnInfo, now time.Time) TxnJSON {
	out := TxnJSON{TransactionalID: info.GetTransactionalId(), ProducerID: info.GetProducerId(), Epoch: info.GetEpoch(),
		State: info.GetState(), Messages: info.GetMessages(), Offsets: info.GetOffsets(), Participants: []string{}}
	if info.GetStartUnixMs() > 0 {
		out.AgeMs = max(0, now.UnixMilli()-info.GetStartUnixMs())
	}
	for _, tp := range info.GetParticipants() {
		out.Participants = append(out.Participants, tp.GetTopic()+"/"+strconv.Itoa(int(tp.GetPartition())))
	}
	return out
}

// listTxns is LIST_TXNS: the active (open or completing) transactions of
// every live coordinatord, oldest first, as JSON {"txns":[...]}.
func (h *Handlers) listTxns(ctx context.Context, c *command.Call) ([]byte, error) {
	now := time.Now()
	out := struct {
		Txns []TxnJSON `json:"txns"`
	}{Txns: []TxnJSON{}}
	err := h.r.EachCoordinator(func(cc coordinatorv1.CoordinatorServiceClient) error {
		resp, err := cc.ListTxns(ctx, &coordinatorv1.ListTxnsRequest{})
		if err != nil {
			return err
		}
		for _, info := range resp.GetTxns() {
			out.Txns = append(out.Txns, txnJSON(info, now))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out.Txns, func(a, b TxnJSON) int {
		if a.AgeMs != b.AgeMs {
			return int(b.AgeMs - a.AgeMs)
		}
		return strings.Compare(a.TransactionalID, b.TransactionalID)
	})
	b, err := json.Marshal(out)
	if err != nil {
		return nil, errcode.Internal.New("list transactions: " + err.Error())
	}
	return append(c.Out, b...), nil
}

// abortTxn is ABORT_TXN transactional_id=: the operator's abort of a
// hanging transaction (a decided commit is refused:
// transaction_not_abortable). The answer is the transaction as JSON.
func (h *Handlers) abortTxn(ctx context.Context, c *command.Call) ([]byte, error) {
	p := param.Read(c.Req, c.Command)
	id := p.Required(TransactionalID)
	resp, err := forward(ctx, h.r, p.Err(), id, coordinatorv1.CoordinatorServiceClient.AbortTxn,
		&coordinatorv1.AbortTxnRequest{TransactionalId: id})
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(txnJSON(resp.GetTxn(), time.Now()))
	if err != nil {
		return nil, errcode.Internal.New("abort transaction: " + err.Error())
	}
	return append(c.Out, b...), nil
}

func forward[Req, Resp any](ctx context.Context, r route.Router, paramErr error, id string,
	method route.CoordinatorMethod[Req, Resp], req Req) (Resp, error) {
	if paramErr != nil {
		var zero Resp
		return zero, paramErr
	}
	return route.ToTxnCoordinator(ctx, r, id, method, req)
}

// session reads transactional_id, producerId and epoch (all required).
func session(p *param.Reader) (id, producer string, epoch int64) {
	id, producer = p.Required(TransactionalID), p.Required(param.ProducerID)
	e, ok := p.OptIntIfSet("epoch", 0, 1<<31-1)
	if !ok && p.Err() == nil {
		p.Check(errcode.MissingParameter.New("epoch is required", "param", "epoch"))
	}
	return id, producer, e
}

func (h *Handlers) initProducerID(ctx context.Context, c *command.Call) ([]byte, error) {
	p := param.Read(c.Req, c.Command)
	id := p.Required(TransactionalID)
	resp, err := forward(ctx, h.r, p.Err(), id, coordinatorv1.CoordinatorServiceClient.InitProducerId,
		&coordinatorv1.InitProducerIdRequest{TransactionalId: id})
	if err != nil {
		return nil, err
	}
	out := wire.AppendOKField(wire.AppendOK(c.Out), "transactional_id", resp.GetTransactionalId())
	out = wire.AppendOKField(out, "producerId", resp.GetProducerId())
	return wire.AppendOKInt(out, "epoch", resp.GetEpoch()), nil
}

func (h *Handlers) beginTxn(ctx context.Context, c *command.Call) ([]byte, error) {
	p := param.Read(c.Req, c.Command)
	id, producer, epoch := session(&p)
	resp, err := forward(ctx, h.r, p.Err(), id, coordinatorv1.CoordinatorServiceClient.BeginTxn,
		&coordinatorv1.BeginTxnRequest{TransactionalId: id, ProducerId: producer, Epoch: epoch})
	if err != nil {
		return nil, err
	}
	out := wire.AppendOKField(wire.AppendOK(c.Out), "transactional_id", resp.GetTransactionalId())
	out = wire.AppendOKField(out, "state", resp.GetState())
	out = wire.AppendOKField(out, "producerId", resp.GetProducerId())
	return wire.AppendOKInt(out, "epoch", resp.GetEpoch()), nil
}

func (h *Handlers) choosePartition(t *metav1.Topic, key string) int32 {
	n := t.GetConfig().GetPartitions()
	if n <= 0 {
		n = int32(len(t.GetPartitions()))
	}
	if n <= 0 {
		return 0
	}
	if key != "" && t.GetConfig().GetPartitioner() != "round_robin" {
		return placement.KeyPartition([]byte(key), n)
	}
	h.rrMu.Lock()
	rr := h.rr[t.GetConfig().GetName()]
	if rr == nil {
		rr = &placement.RoundRobin{}
		h.rr[t.GetConfig().GetName()] = rr
	}
	h.rrMu.Unlock()
	return rr.Next(n)
}

// txnPublish is TXN_PUBLISH: the record carries the transactional id and
// state open; the coordinator adds the partition to the transaction and
// appends it (idempotent on seqNum).
func (h *Handlers) txnPublish(ctx context.Context, c *command.Call) ([]byte, error) {
	if c.Batch != nil {
		return nil, errcode.InvalidParameter.New("TXN_PUBLISH takes one message, not a batch", "param", "batch")
	}
	p := param.Read(c.Req, c.Command)
	id, producer, epoch := session(&p)
	topic, msg := p.Required(param.Topic), p.Present(param.Message)
	seq, hasSeq := p.OptUint("seqNum", 0)
	part, hasPart := p.OptPartition()
	if p.Err() == nil && (!hasSeq || seq == 0) {
		p.Check(errcode.InvalidParameter.New("TXN_PUBLISH needs seqNum above 0", "param", "seqNum"))
	}
	if err := p.Err(); err != nil {
		return nil, err
	}
	t, err := h.r.LookupTopic(ctx, topic)
	if err != nil {
		return nil, err
	}
	key := c.Req.Value("key")
	if !hasPart {
		part = h.choosePartition(t, key)
	}
	rec := wire.Record{Topic: topic, Partition: part, Payload: []byte(msg), Timestamp: time.Now().UnixMilli(),
		ProducerID: producer, SeqNum: seq, Epoch: epoch, Key: key, TransactionalID: id, TransactionState: wire.TxnStateOpen}
	buf, err := rec.AppendTo([]byte{0, 0, 0, 0})
	if err != nil {
		return nil, err
	}
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	resp, err := route.ToTxnCoordinator(ctx, h.r, id, coordinatorv1.CoordinatorServiceClient.TxnPublish,
		&coordinatorv1.TxnPublishRequest{TransactionalId: id, ProducerId: producer, Epoch: epoch, Seq: seq, Topic: topic,
			Partition: part, Records: buf, RecordCount: 1})
	if err != nil {
		return nil, err
	}
	out := wire.AppendOKField(wire.AppendOK(c.Out), "transactional_id", resp.GetTransactionalId())
	out = wire.AppendOKBool(out, "appended", true)
	out = wire.AppendOKInt(out, "staged_messages", 1)
	out = wire.AppendOKField(out, "topic", resp.GetTopic())
	out = wire.AppendOKInt(out, "partition", int64(resp.GetPartition()))
	return wire.AppendOKField(out, "state", "open"), nil
}

// sendOffsetsToTxn is SEND_OFFSETS_TO_TXN: the offsets list travels raw
// (the group's coordinator parses it after checking member and generation,
// as for BATCH_COMMIT).
func (h *Handlers) sendOffsetsToTxn(ctx context.Context, c *command.Call) ([]byte, error) {
	p := param.Read(c.Req, c.Command)
	id, producer, epoch := session(&p)
	topic, group, member, gen := p.Required(param.Topic), p.Required(param.Group), p.Required(param.Member), p.Generation()
	list, ok := c.Req.Get("offsets")
	if p.Err() == nil && (!ok || list == "") {
		p.Check(errcode.InvalidBatchCommitEntry.New("offsets is required as P<partition>:<offset>,...", "reason", "missing_offsets"))
	}
	if p.Err() == nil && len(list) > 64<<10 {
		p.Check(errcode.InvalidBatchCommitEntry.New("offset list too long", "reason", "too_long"))
	}
	resp, err := forward(ctx, h.r, p.Err(), id, coordinatorv1.CoordinatorServiceClient.SendOffsetsToTxn,
		&coordinatorv1.SendOffsetsToTxnRequest{TransactionalId: id, ProducerId: producer, Epoch: epoch, Topic: topic,
			Group: group, Member: member, Generation: gen, OffsetsList: list})
	if err != nil {
		return nil, err
	}
	out := wire.AppendOKField(wire.AppendOK(c.Out), "transactional_id", resp.GetTransactionalId())
	return wire.AppendOKUint(out, "staged_offsets", uint64(resp.GetStagedOffsets())), nil
}

func (h *Handlers) endTxn(ctx context.Context, c *command.Call) ([]byte, error) {
	p := param.Read(c.Req, c.Command)
	id, producer, epoch := session(&p)
	var commit bool
	switch v := strings.ToLower(c.Req.Value("result")); v {
	case "commit":
		commit = true
	case "abort":
	case "":
		p.Check(errcode.MissingParameter.New("result is required (commit or abort)", "param", "result"))
	default:
		p.Check(errcode.InvalidParameter.New("result must be commit or abort", "param", "result", "value", v))
	}
	resp, err := forward(ctx, h.r, p.Err(), id, coordinatorv1.CoordinatorServiceClient.EndTxn,
		&coordinatorv1.EndTxnRequest{TransactionalId: id, ProducerId: producer, Epoch: epoch, Commit: commit})
	if err != nil {
		return nil, err
	}
	out := wire.AppendOKField(wire.AppendOK(c.Out), "transactional_id", resp.GetTransactionalId())
	out = wire.AppendOKField(out, "state", resp.GetState())
	out = wire.AppendOKUint(out, "messages", resp.GetMessages())
	return wire.AppendOKUint(out, "offsets", uint64(resp.GetOffsets())), nil
}

func (h *Handlers) txnStatus(ctx context.Context, c *command.Call) ([]byte, error) {
	p := param.Read(c.Req, c.Command)
	id := p.Required(TransactionalID)
	resp, err := forward(ctx, h.r, p.Err(), id, coordinatorv1.CoordinatorServiceClient.TxnStatus,
		&coordinatorv1.TxnStatusRequest{TransactionalId: id})
	if err != nil {
		return nil, err
	}
	info := resp.GetTxn()
	parts := make([]string, 0, len(info.GetParticipants()))
	for _, tp := range info.GetParticipants() {
		parts = append(parts, tp.GetTopic()+"/"+strconv.Itoa(int(tp.GetPartition())))
	}
	state := info.GetState()
	if state == "" {
		state = "none"
	}
	out := wire.AppendOKField(wire.AppendOK(c.Out), "transactional_id", info.GetTransactionalId())
	out = wire.AppendOKField(out, "mode", "exactly_once")
	out = wire.AppendOKField(out, "state", state)
	out = wire.AppendOKUint(out, "messages", info.GetMessages())
	out = wire.AppendOKField(out, "participants", strings.Join(parts, ","))
	return wire.AppendOKUint(out, "offsets", uint64(info.GetOffsets())), nil
}

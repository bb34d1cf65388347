package records

import (
	"context"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/strataio/strata/gateway/internal/command"
	"github.com/strataio/strata/gateway/internal/param"
	"github.com/strataio/strata/gateway/internal/route"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/placement"
	"github.com/strataio/strata/libs/wire"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// ackMode is a normalised acks setting.
type ackMode int32

const (
	acksNone   ackMode = 0
	acksLeader ackMode = 1
	acksAll    ackMode = -1
)

// parseAcks normalises an acks value: "" is the default 1; "none" is the Go
// SDK's alias of 0; "all" is -1.
func parseAcks(v string) (ackMode, error) {
	switch strings.ToLower(v) {
	case "", "1":
		return acksLeader, nil
	case "0", "none":
		return acksNone, nil
	case "-1", "all":
		return acksAll, nil
	}
	return 0, param.Invalid("acks", v, "must be 0, 1, -1 or all")
}

func (a ackMode) label() string {
	switch a {
	case acksNone:
		return "0"
	case acksAll:
		return "all"
	}
	return "1"
}

// choosePartition applies the topic's partitioner (spec 4.6): hash_key sends
// keyed records to FNV-1a 64(key) mod partitions and round-robins unkeyed
// ones; round_robin ignores keys.
func (h *Handlers) choosePartition(t *metav1.Topic, key []byte, hasKey bool) int32 {
	n := t.GetConfig().GetPartitions()
	if n <= 0 {
		n = int32(len(t.GetPartitions()))
	}
	if n <= 0 {
		return 0
	}
	if hasKey && t.GetConfig().GetPartitioner() != "round_robin" {
		return placement.KeyPartition(key, n)
	}
	return h.roundRobin(t.GetConfig().GetName()).Next(n)
}

func (h *Handlers) roundRobin(topic string) *placement.RoundRobin {
	h.rrMu.Lock()
	defer h.rrMu.Unlock()
	rr, ok := h.rr[topic]
	if !ok {
		rr = &placement.RoundRobin{}
		h.rr[topic] = rr
	}
	return rr
}

// recordBufs pools the record-set buffers of text publishes.
var recordBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// publishInput is one publish, text or batch, ready to route.
type publishInput struct {
	topic      string
	acks       ackMode
	records    []byte // [u32 len][record] entries
	count      uint32
	bytes      int
	producerID string
	epoch      int64
	seqStart   uint64
	seqEnd     uint64
	idempotent bool
}

// publish is PUBLISH, text or batch form. Every failure goes through
// publishFailed, so an acks=0 publish is never answered.
func (h *Handlers) publish(ctx context.Context, c *command.Call) ([]byte, error) {
	reply, err := h.publishChecked(ctx, c)
	return reply, h.publishFailed(c.Req, c.Batch, err)
}

func (h *Handlers) publishChecked(ctx context.Context, c *command.Call) ([]byte, error) {
	r := c.Req
	if err := command.CheckText(r); err != nil {
		return nil, err
	}
	if r.Has("transactional_id") || r.Has("transaction_state") || r.Has("transaction_marker") {
		return nil, errTransactionMetadata()
	}
	if c.Batch != nil {
		return h.publishBatch(ctx, c.Out, c.Batch)
	}
	p := param.Read(r, c.Command)
	topic, msg, producer := p.RequiredNamingCommand(param.Topic), p.Present(param.Message), p.Required(param.ProducerID)
	acks, err := parseAcks(r.Value("acks"))
	p.Check(err)
	idem, _ := p.OptBool("isIdempotent", false)
	seq, _ := p.OptUint("seqNum", 0)
	epoch := p.OptInt("epoch", 0, -1<<63, 1<<63-1)
	part, hasPart := p.OptPartition()
	if err := p.Err(); err != nil {
		return nil, err
	}
	if err := h.checkIdempotence(idem, acks); err != nil {
		return nil, err
	}
	t, err := h.r.LookupTopic(ctx, topic)
	if err != nil {
		return nil, err
	}
	key, hasKey := r.Get("key")
	if !hasPart {
		part = h.choosePartition(t, []byte(key), hasKey && key != "")
	}
	bp := recordBufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 1<<20 {
			recordBufs.Put(bp)
		}
	}()
	rec := wire.Record{Topic: topic, Partition: part, Payload: []byte(msg), Timestamp: time.Now().UnixMilli(),
		ProducerID: producer, SeqNum: seq, Epoch: epoch, Key: key}
	buf := append((*bp)[:0], 0, 0, 0, 0)
	buf, err = rec.AppendTo(buf)
	if err != nil {
		return nil, err
	}
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	*bp = buf
	in := publishInput{topic: topic, acks: acks, records: buf, count: 1, bytes: len(msg), producerID: producer,
		epoch: epoch, seqStart: seq, seqEnd: seq, idempotent: idem}
	return h.append(ctx, c.Out, t, part, &in)
}

// txnPresence are the presence bits of the transaction metadata fields a
// client may not send with PUBLISH.
const txnPresence = wire.PresenceTransactionalID | wire.PresenceTransactionState | wire.PresenceTransactionMarker

func errTransactionMetadata() error {
	return errcode.TransactionMetadataForbidden.New("transaction metadata fields are internal to PUBLISH", "command", "PUBLISH")
}

// checkIdempotence applies spec 4.6 rule 6: idempotent publishing needs
// acks=all; a refusal is counted here.
func (h *Handlers) checkIdempotence(idempotent bool, acks ackMode) error {
	if !idempotent || acks == acksAll {
		return nil
	}
	h.m.Acks.WithLabelValues(acks.label(), "rejected").Inc()
	return errcode.IdempotenceRequiresAcksAll.New("idempotent publishing requires acks=all or -1", "acks", acks.label())
}

// publishFailed turns the failure of an acks=0 PUBLISH (text field or batch
// header) into ErrNoReply: such a request gets no response frame at all,
// even when it fails validation (spec 4.6, docs/gateway.md), so the failure
// is only counted and logged. The acks value is looked at only on this
// error path; a request whose acks value is itself invalid is answered.
func (h *Handlers) publishFailed(r *wire.Request, batch []byte, err error) error {
	if err == nil || errors.Is(err, command.ErrNoReply) || !AcksZero(r, batch) {
		return err
	}
	if errcode.CodeOf(err) != errcode.IdempotenceRequiresAcksAll.Name() { // counted where it is raised
		h.m.Acks.WithLabelValues(acksNone.label(), "rejected").Inc()
	}
	h.log.Debug("acks=0 publish rejected", "topic", r.Value("topic"), "err", err)
	return command.ErrNoReply
}

// AcksZero reports whether a PUBLISH (text field or batch header) asks for
// acks 0, whose failures are never answered; false for a missing or invalid
// acks value, which is answered.
func AcksZero(r *wire.Request, batch []byte) bool {
	var acks string
	if batch != nil {
		v, err := wire.ParseBatch(batch)
		if err != nil {
			return false
		}
		acks = string(v.Acks())
	} else {
		acks = r.Value("acks")
		if acks == "" {
			return false
		}
	}
	a, err := parseAcks(acks)
	return err == nil && a == acksNone
}

// publishBatch is the batch form: the CBV2 payload is validated in place in
// one pass over its records, which also gathers what the append needs (payload
// bytes, the first record's producer and key, transaction fields refused), and
// its records section is forwarded as is.
func (h *Handlers) publishBatch(ctx context.Context, out []byte, batch []byte) ([]byte, error) {
	v, err := wire.ParseBatchHeader(batch)
	if err != nil {
		return nil, err
	}
	in := publishInput{count: uint32(v.RecordCount()), idempotent: v.Idempotent(), seqStart: v.BatchStart(), seqEnd: v.BatchEnd()}
	var firstKey []byte
	first, hasKey, txnMeta := true, false, false
	it := v.Records()
	for rec, ok := it.Next(); ok; rec, ok = it.Next() {
		// A record with transaction metadata is refused, but only after the
		// whole batch validated: a malformed batch answers decode_failed,
		// as when validation was a pass of its own.
		txnMeta = txnMeta || rec.Presence()&txnPresence != 0
		in.bytes += len(rec.Payload())
		if first {
			first = false
			if id, _, epoch, ok := rec.Producer(); ok {
				in.producerID = string(id)
				in.epoch = epoch
			}
			firstKey, hasKey = rec.Key()
		}
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	acks, err := parseAcks(string(v.Acks()))
	if err != nil {
		return nil, err
	}
	if err := h.checkIdempotence(v.Idempotent(), acks); err != nil {
		return nil, err
	}
	if txnMeta {
		return nil, errTransactionMetadata()
	}
	if in.count == 0 {
		return nil, errcode.DecodeFailed.New("a PUBLISH batch needs at least one record", "payload", "cbv2", "reason", "empty_batch")
	}
	in.topic, in.acks = string(v.Topic()), acks
	t, err := h.r.LookupTopic(ctx, in.topic)
	if err != nil {
		return nil, err
	}
	part := v.Partition()
	if part < 0 {
		part = h.choosePartition(t, firstKey, hasKey && len(firstKey) > 0)
		v.SetPartition(part)
	}
	in.records = v.RecordsSection()
	return h.append(ctx, out, t, part, &in)
}

// appendUnary is PartitionService.Append with the answer's in-band error
// returned as the call's error, so Retry follows a NOT_LEADER.
func appendUnary(pc partitionv1.PartitionServiceClient, ctx context.Context, req *partitionv1.AppendRequest, opts ...grpc.CallOption) (*partitionv1.AppendResponse, error) {
	resp, err := pc.Append(ctx, req, opts...)
	if err == nil && resp.GetError() != nil {
		err = errcode.FromProto(resp.GetError())
	}
	return resp, err
}

// append appends in to the partition leader, following leader moves, and
// writes the AckResponse (nothing for acks=0).
func (h *Handlers) append(ctx context.Context, out []byte, t *metav1.Topic, part int32, in *publishInput) ([]byte, error) {
	cfg := t.GetConfig()
	switch {
	case cfg.GetInternal():
		return nil, errcode.InternalTopicWriteForbidden.New("internal topics are written by the broker only", "topic", in.topic)
	case cfg.GetAggregateReplay():
		return nil, errcode.InvalidTopicPolicy.New("aggregate replay topics reject PUBLISH; use APPEND_STREAM", "topic", in.topic, "command", "PUBLISH")
	case part >= int32(len(t.GetPartitions())):
		return nil, errcode.PartitionNotFound.New("partition does not exist", "topic", in.topic, "partition", strconv.Itoa(int(part)))
	}
	req := &partitionv1.AppendRequest{Topic: in.topic, Partition: part, Acks: int32(in.acks), Records: in.records,
		RecordCount: in.count, ProducerId: in.producerID, ProducerEpoch: in.epoch, BaseSequence: in.seqStart,
		LastSequence: in.seqEnd, Idempotent: in.idempotent}
	h.m.PublishRecords.WithLabelValues(in.topic).Add(float64(in.count))
	h.m.PublishBytes.WithLabelValues(in.topic).Add(float64(in.bytes))
	if in.acks == acksNone {
		h.appendNoAck(ctx, t, part, req, in)
		return nil, command.ErrNoReply
	}
	atEpoch := func(t *metav1.Topic) *partitionv1.AppendRequest {
		req.LifecycleEpoch = t.GetConfig().GetLifecycleEpoch()
		return req
	}
	var resp *partitionv1.AppendResponse
	traced := trace.SpanContextFromContext(ctx).IsSampled()
	attempt, lastClass := 0, ""
	err := h.r.Retry(ctx, func() (err error) {
		if attempt++; attempt > 1 && h.m.ReplicationRetries != nil {
			h.m.ReplicationRetries.WithLabelValues(in.topic, in.acks.label(), lastClass).Inc()
		}
		defer func() { lastClass = classOf(err) }()
		if traced {
			// The shared produce stream carries no per-request trace
			// context; a sampled publish takes the unary Append so its
			// trace continues into partitiond (tracing is off by default).
			resp, err = route.CallLeader(ctx, h.r, in.topic, part, appendUnary, atEpoch)
			return err
		}
		t, leader, err := h.r.PartitionLeader(ctx, in.topic, part)
		if err != nil {
			return err
		}
		m, err := h.r.ProduceStream(leader)
		if err != nil {
			return err
		}
		resp, err = m.Append(ctx, atEpoch(t))
		return route.LeaderErr(h.r, in.topic, err)
	})
	if err != nil {
		h.m.Acks.WithLabelValues(in.acks.label(), "error").Inc()
		return nil, err
	}
	h.m.Acks.WithLabelValues(in.acks.label(), "ok").Inc()
	ack := wire.AckResponse{Status: "OK", LastOffset: resp.GetLastOffset(), ProducerEpoch: in.epoch, ProducerID: in.producerID,
		SeqStart: in.seqStart, SeqEnd: in.seqEnd, Leader: h.r.Advertised()}
	return ack.AppendJSON(out), nil
}

// appendNoAck sends an acks=0 append down the leader's produce stream
// without waiting: no response frame for the client, whatever happens
// (spec 4.6); failures are only counted.
func (h *Handlers) appendNoAck(ctx context.Context, t *metav1.Topic, part int32, req *partitionv1.AppendRequest, in *publishInput) {
	_, leader, err := h.r.PartitionLeader(ctx, in.topic, part)
	if err == nil {
		var m interface {
			Send(*partitionv1.AppendRequest) error
		}
		if m, err = h.r.ProduceStream(leader); err == nil {
			req.LifecycleEpoch = t.GetConfig().GetLifecycleEpoch()
			err = m.Send(req)
		}
	}
	result := "ok"
	if err != nil {
		result = "error"
		h.log.Debug("acks=0 publish failed", "topic", in.topic, "partition", part, "err", err)
	}
	h.m.Acks.WithLabelValues(in.acks.label(), result).Inc()
}

// classOf is err's error class label ("" for nil).
func classOf(err error) string {
	if err == nil {
		return ""
	}
	return errcode.From(err).Class.String()
}

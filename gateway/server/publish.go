package server

import (
	"context"
	"encoding/binary"
	"errors"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/strataio/strata/gateway/internal/routing"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// roundRobin is the per-topic counter for unkeyed records.
type roundRobin = routing.RoundRobin

func (g *Role) roundRobinFor(topic string) *roundRobin {
	g.rrMu.Lock()
	defer g.rrMu.Unlock()
	rr, ok := g.rr[topic]
	if !ok {
		rr = &roundRobin{}
		g.rr[topic] = rr
	}
	return rr
}

// choosePartition applies the topic's partitioner (spec 4.6): hash_key sends
// keyed records to FNV-1a 64(key) mod partitions and round-robins unkeyed
// ones; round_robin ignores keys.
func (g *Role) choosePartition(t *metav1.Topic, key []byte, hasKey bool) int32 {
	n := t.GetConfig().GetPartitions()
	if n <= 0 {
		n = int32(len(t.GetPartitions()))
	}
	if n <= 0 {
		return 0
	}
	if hasKey && t.GetConfig().GetPartitioner() != "round_robin" {
		return routing.KeyPartition(key, n)
	}
	return g.roundRobinFor(t.GetConfig().GetName()).Next(n)
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

func (g *Role) cmdPublish(ctx context.Context, c *conn, out []byte, r *wire.Request, batch []byte) ([]byte, error) {
	if batch != nil {
		return g.publishBatch(ctx, out, batch)
	}
	topic, ok := r.Get("topic")
	if !ok || topic == "" {
		return nil, errcode.MissingTopic.New("topic is required", "command", "PUBLISH")
	}
	msg, ok := r.Get("message")
	if !ok {
		return nil, errcode.Lookup("missing_message").New("message is required", "param", "message")
	}
	producer, err := required(r, "producerId")
	if err != nil {
		return nil, err
	}
	acks, err := parseAcks(r.Value("acks"))
	if err != nil {
		return nil, err
	}
	idem, _, err := optBool(r, "isIdempotent", false)
	if err != nil {
		return nil, err
	}
	seq, _, err := optUint(r, "seqNum", 0)
	if err != nil {
		return nil, err
	}
	epoch, err := optInt(r, "epoch", 0, -1<<63, 1<<63-1)
	if err != nil {
		return nil, err
	}
	part, hasPart, err := partitionParam(r, "PUBLISH")
	if err != nil {
		return nil, err
	}
	if idem && acks != acksAll {
		g.m.acks.WithLabelValues(acks.label(), "rejected").Inc()
		return nil, errcode.IdempotenceRequiresAcksAll.New("idempotent publishing requires acks=all or -1", "acks", acks.label())
	}
	t, err := g.lookupTopic(ctx, topic)
	if err != nil {
		return nil, err
	}
	key, hasKey := r.Get("key")
	if !hasPart {
		part = g.choosePartition(t, []byte(key), hasKey && key != "")
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
	return g.publish(ctx, out, t, part, &in)
}

// publishFailed turns the failure of an acks=0 PUBLISH (text field or batch
// header) into errNoReply: such a request gets no response frame at all,
// even when it fails validation (spec 4.6, docs/gateway.md), so the failure
// is only counted and logged. The acks value is looked at only on this
// error path; a request whose acks value is itself invalid is answered.
func (g *Role) publishFailed(r *wire.Request, batch []byte, err error) error {
	if err == nil || errors.Is(err, errNoReply) {
		return err
	}
	var acks string
	if batch != nil {
		v, perr := wire.ParseBatch(batch)
		if perr != nil {
			return err
		}
		acks = string(v.Acks())
	} else {
		acks = r.Value("acks")
		if acks == "" {
			return err
		}
	}
	if a, aerr := parseAcks(acks); aerr != nil || a != acksNone {
		return err
	}
	if errcode.CodeOf(err) != errcode.IdempotenceRequiresAcksAll.Name() { // counted where it is raised
		g.m.acks.WithLabelValues(acksNone.label(), "rejected").Inc()
	}
	g.log.Debug("acks=0 publish rejected", "topic", r.Value("topic"), "err", err)
	return errNoReply
}

func (g *Role) publishBatch(ctx context.Context, out []byte, batch []byte) ([]byte, error) {
	v, err := wire.ParseBatch(batch)
	if err != nil {
		return nil, err
	}
	acks, err := parseAcks(string(v.Acks()))
	if err != nil {
		return nil, err
	}
	if v.Idempotent() && acks != acksAll {
		g.m.acks.WithLabelValues(acks.label(), "rejected").Inc()
		return nil, errcode.IdempotenceRequiresAcksAll.New("idempotent publishing requires acks=all or -1", "acks", acks.label())
	}
	in := publishInput{topic: string(v.Topic()), acks: acks, count: uint32(v.RecordCount()), idempotent: v.Idempotent(),
		seqStart: v.BatchStart(), seqEnd: v.BatchEnd()}
	var firstKey []byte
	hasKey := false
	it := v.Records()
	first := true
	for rec, ok := it.Next(); ok; rec, ok = it.Next() {
		if _, ok := rec.TransactionalID(); ok {
			return nil, errcode.TransactionMetadataForbidden.New("transaction metadata fields are internal to PUBLISH", "command", "PUBLISH")
		}
		if _, ok := rec.TransactionState(); ok {
			return nil, errcode.TransactionMetadataForbidden.New("transaction metadata fields are internal to PUBLISH", "command", "PUBLISH")
		}
		if _, ok := rec.TransactionMarker(); ok {
			return nil, errcode.TransactionMetadataForbidden.New("transaction metadata fields are internal to PUBLISH", "command", "PUBLISH")
		}
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
	if in.count == 0 {
		return nil, errcode.DecodeFailed.New("a PUBLISH batch needs at least one record", "payload", "cbv2", "reason", "empty_batch")
	}
	t, err := g.lookupTopic(ctx, in.topic)
	if err != nil {
		return nil, err
	}
	part := v.Partition()
	if part < 0 {
		part = g.choosePartition(t, firstKey, hasKey && len(firstKey) > 0)
		v.SetPartition(part)
	}
	in.records = v.RecordsSection()
	return g.publish(ctx, out, t, part, &in)
}

// publish appends in to the partition leader, following leader moves, and
// writes the AckResponse (nothing for acks=0).
func (g *Role) publish(ctx context.Context, out []byte, t *metav1.Topic, part int32, in *publishInput) ([]byte, error) {
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
	g.m.publishRecords.Add(float64(in.count))
	g.m.publishBytes.Add(float64(in.bytes))
	if in.acks == acksNone {
		// Fire and forget: no response frame for the client, whatever
		// happens (spec 4.6); failures are only counted.
		_, leader, err := g.partitionLeader(ctx, in.topic, part)
		if err == nil {
			var m interface {
				Send(*partitionv1.AppendRequest) error
			}
			if m, err = g.mux(leader); err == nil {
				req.LifecycleEpoch = t.GetConfig().GetLifecycleEpoch()
				err = m.Send(req)
			}
		}
		result := "ok"
		if err != nil {
			result = "error"
			g.log.Debug("acks=0 publish failed", "topic", in.topic, "partition", part, "err", err)
		}
		g.m.acks.WithLabelValues(in.acks.label(), result).Inc()
		return nil, errNoReply
	}
	var resp *partitionv1.AppendResponse
	traced := trace.SpanContextFromContext(ctx).IsSampled()
	err := g.retryRoute(ctx, func() error {
		t, leader, err := g.partitionLeader(ctx, in.topic, part)
		if err != nil {
			return err
		}
		req.LifecycleEpoch = t.GetConfig().GetLifecycleEpoch()
		if traced {
			// The shared produce stream carries no per-request trace
			// context; a sampled publish takes the unary Append so its
			// trace continues into partitiond (tracing is off by default).
			pc, err := g.partitionClient(leader)
			if err != nil {
				return err
			}
			if resp, err = pc.Append(ctx, req); err == nil && resp.GetError() != nil {
				err = errcode.FromProto(resp.GetError())
			}
			return err
		}
		m, err := g.mux(leader)
		if err != nil {
			return err
		}
		resp, err = m.Append(ctx, req)
		return err
	})
	if err != nil {
		g.m.acks.WithLabelValues(in.acks.label(), "error").Inc()
		return nil, err
	}
	g.m.acks.WithLabelValues(in.acks.label(), "ok").Inc()
	ack := wire.AckResponse{Status: "OK", LastOffset: resp.GetLastOffset(), ProducerEpoch: in.epoch, ProducerID: in.producerID,
		SeqStart: in.seqStart, SeqEnd: in.seqEnd, Leader: g.advertised()}
	return ack.AppendJSON(out), nil
}

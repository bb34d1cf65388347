package partitiond

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/rpc"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"

	"github.com/strataio/strata/partitiond/internal/partition"
)

// service implements PartitionService.
type service struct {
	partitionv1.UnimplementedPartitionServiceServer
	r *Role
}

func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, errcode.CodeOf(err))
	}
	span.End()
}

// startAppend routes and writes one append; the returned pending append's
// Wait is the acknowledgement point for acks 1 and all.
func (s *service) startAppend(ctx context.Context, req *partitionv1.AppendRequest) (*partition.PendingAppend, error) {
	return s.startAppendTxn(ctx, req, false)
}

func (s *service) startAppendTxn(ctx context.Context, req *partitionv1.AppendRequest, transactional bool) (*partition.PendingAppend, error) {
	rt, err := s.r.lead(ctx, req.GetTopic(), req.GetPartition())
	if err != nil {
		return nil, err
	}
	var guard func() error
	var appended func(uint64)
	if transactional && rt.topic.GetConfig().GetEventSourcing() {
		if guard, appended, err = s.r.txnEventGuard(ctx, rt, req); err != nil {
			return nil, err
		}
	}
	pa, err := rt.part.AppendAsync(ctx, &partition.AppendRequest{
		Guard:          guard,
		Appended:       appended,
		LifecycleEpoch: rt.lifecycleEpoch(req.GetLifecycleEpoch()),
		Acks:           req.GetAcks(),
		Records:        req.GetRecords(),
		RecordCount:    req.GetRecordCount(),
		ProducerID:     req.GetProducerId(),
		ProducerEpoch:  req.GetProducerEpoch(),
		BaseSequence:   req.GetBaseSequence(),
		LastSequence:   req.GetLastSequence(),
		Idempotent:     req.GetIdempotent(),
		Transactional:  transactional,
		// acks all/-1 are refused before the append when the ISR is
		// smaller than the effective minimum (spec 4.6 rule 3; rule 5 for
		// a single replica).
		ISRSize: rt.isr,
		MinISR:  rt.minISRReplicated,
	})
	s.r.m.observeAppend(req, pa, err)
	return pa, err
}

func (s *service) appendResponse(pa *partition.PendingAppend) *partitionv1.AppendResponse {
	return &partitionv1.AppendResponse{
		BaseOffset: pa.Result.BaseOffset, LastOffset: pa.Result.LastOffset, Duplicate: pa.Result.Duplicate,
		Leader: s.r.env.NodeID, LeaderEpoch: pa.Result.LeaderEpoch,
	}
}

// needsWait says whether the answer waits for the covering fdatasync: acks 1
// and all do; a duplicate always does (its original may not be durable yet).
func needsWait(req *partitionv1.AppendRequest, pa *partition.PendingAppend) bool {
	return req.GetAcks() != partition.AcksNone || pa.Result.Duplicate
}

// Append is the unary form of one Produce request.
func (s *service) Append(ctx context.Context, req *partitionv1.AppendRequest) (_ *partitionv1.AppendResponse, err error) {
	ctx, span := s.r.tracer.Start(ctx, "partitiond.Append", trace.WithAttributes(
		attribute.String("strata.topic", req.GetTopic()), attribute.Int("strata.partition", int(req.GetPartition())),
		attribute.Int("strata.records", int(req.GetRecordCount())), attribute.Int("strata.acks", int(req.GetAcks()))))
	defer func() { endSpan(span, err) }()
	pa, err := s.startAppend(ctx, req)
	if err != nil {
		return nil, err
	}
	if needsWait(req, pa) {
		if err := pa.Wait(ctx); err != nil {
			return nil, err
		}
	}
	return s.appendResponse(pa), nil
}

// Produce serves a pipelined stream: requests are written to their logs in
// the order they arrive (so one producer's batches keep their order), and
// each acknowledgement is sent when the group-commit fdatasync covering it
// finished, without holding up the requests behind it. Responses carry the
// request's correlation_id and may come in any order; a failed request
// answers with ProduceResponse.append.error and the stream goes on.
func (s *service) Produce(stream grpc.BidiStreamingServer[partitionv1.ProduceRequest, partitionv1.ProduceResponse]) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()

	out := make(chan *partitionv1.ProduceResponse, 64)
	sendDone := make(chan error, 1)
	go func() {
		var serr error
		for resp := range out {
			if serr != nil {
				continue // keep draining so no waiter blocks
			}
			if serr = stream.Send(resp); serr != nil {
				cancel()
			}
		}
		sendDone <- serr
	}()

	// On the direct path the record set of each request is this handler's
	// own pool buffer (rpc.ReceivesOwned), given back once written.
	owned := rpc.ReceivesOwned(stream.Context())
	slots := make(chan struct{}, s.r.cfg.MaxInFlightPerStream)
	var waiters sync.WaitGroup
	var recvErr error
	for {
		// Over gRPC a large request is decoded into a transport pool
		// buffer the message aliases (rpc.Pooled), given back below once
		// its batch is written, instead of a fresh allocation per batch.
		pr := &rpc.Pooled[*partitionv1.ProduceRequest]{Msg: &partitionv1.ProduceRequest{}}
		err := stream.RecvMsg(pr)
		msg := pr.Msg
		if err != nil {
			if !errors.Is(err, io.EOF) {
				recvErr = err
			}
			break
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		id, req := msg.GetCorrelationId(), msg.GetAppend()
		if req == nil {
			out <- produceError(id, errcode.MissingParameter.New("produce request without an append", "param", "append"))
			<-slots
			continue
		}
		pa, err := s.startAppend(ctx, req)
		// The batch is written (or refused) and nothing of partitiond
		// keeps its bytes: startAppend's log write is synchronous and the
		// log keeps no reference to them (the other fields of the request
		// are copies proto.Unmarshal made).
		switch {
		case owned:
			rpc.RecycleRecords(req.GetRecords())
			req.Records = nil
		default: // over gRPC: the pool buffer, if the codec used one
			req.Records = nil
			pr.Buf.Release()
		}
		if err != nil {
			out <- produceError(id, err)
			<-slots
			continue
		}
		if !needsWait(req, pa) {
			out <- &partitionv1.ProduceResponse{CorrelationId: id, Append: s.appendResponse(pa)}
			<-slots
			continue
		}
		waiters.Add(1)
		go func() {
			defer waiters.Done()
			defer func() { <-slots }()
			if err := pa.Wait(ctx); err != nil {
				out <- produceError(id, err)
				return
			}
			out <- &partitionv1.ProduceResponse{CorrelationId: id, Append: s.appendResponse(pa)}
		}()
	}
	// A half-closed stream still gets the answers of everything it sent.
	waiters.Wait()
	close(out)
	sendErr := <-sendDone
	switch {
	case recvErr != nil:
		return recvErr
	case sendErr != nil:
		return sendErr
	}
	return nil
}

func produceError(id uint64, err error) *partitionv1.ProduceResponse {
	return &partitionv1.ProduceResponse{CorrelationId: id,
		Append: &partitionv1.AppendResponse{Error: errcode.ToProto(errcode.From(err))}}
}

// Fetch reads from the partition this node leads (spec 4.6 CONSUME):
// OFFSET_OUT_OF_RANGE with requested/earliest/latest outside the retained
// log, a long-poll of up to wait_ms at the end.
func (s *service) Fetch(ctx context.Context, req *partitionv1.FetchRequest) (_ *partitionv1.FetchResponse, err error) {
	ctx, span := s.r.tracer.Start(ctx, "partitiond.Fetch", trace.WithAttributes(
		attribute.String("strata.topic", req.GetTopic()), attribute.Int("strata.partition", int(req.GetPartition())),
		attribute.Int64("strata.offset", int64(req.GetOffset())), attribute.Int("strata.wait_ms", int(req.GetWaitMs()))))
	defer func() { endSpan(span, err) }()
	cfg := &s.r.cfg
	var iso partition.Isolation
	switch req.GetIsolation() {
	case partitionv1.Isolation_ISOLATION_UNSPECIFIED, partitionv1.Isolation_ISOLATION_READ_COMMITTED:
		iso = partition.ReadCommitted
	case partitionv1.Isolation_ISOLATION_READ_UNCOMMITTED:
		iso = partition.ReadUncommitted
	default:
		return nil, errcode.InvalidParameter.New("unknown isolation level", "param", "isolation",
			"value", strconv.Itoa(int(req.GetIsolation())))
	}
	maxRecords := int(req.GetMaxRecords())
	if maxRecords == 0 || maxRecords > cfg.FetchMaxRecordsLimit {
		maxRecords = min(max(maxRecords, cfg.FetchMaxRecords), cfg.FetchMaxRecordsLimit)
	}
	maxBytes := int(req.GetMaxBytes())
	if maxBytes == 0 || maxBytes > cfg.FetchMaxBytesLimit {
		maxBytes = min(max(maxBytes, cfg.FetchMaxBytes), cfg.FetchMaxBytesLimit)
	}
	wait := min(time.Duration(req.GetWaitMs())*time.Millisecond, cfg.FetchMaxWait)

	var rt *route
	if req.GetReplicaRead() {
		rt, err = s.r.local(ctx, req.GetTopic(), req.GetPartition())
	} else {
		rt, err = s.r.lead(ctx, req.GetTopic(), req.GetPartition())
	}
	if err != nil {
		return nil, err
	}
	res, err := rt.part.Fetch(ctx, &partition.FetchRequest{
		LifecycleEpoch: rt.lifecycleEpoch(req.GetLifecycleEpoch()), Offset: req.GetOffset(), MaxRecords: maxRecords, MaxBytes: maxBytes,
		Wait: wait, Isolation: iso,
	})
	if err != nil {
		return nil, err
	}
	span.SetAttributes(attribute.Int("strata.records", res.RecordCount))
	return &partitionv1.FetchResponse{
		Records: res.Records, RecordCount: uint32(res.RecordCount), NextOffset: res.NextOffset,
		LogStartOffset: res.LogStartOffset, HighWatermark: res.HighWatermark, LogEndOffset: res.LogEndOffset,
		LastStableOffset: res.LastStableOffset,
	}, nil
}

// ListOffsets answers earliest, latest, leo and hwm per partition; an empty
// partition list means every partition of the topic this node leads.
// Per-partition failures (NOT_LEADER, ...) travel in the entry's error.
func (s *service) ListOffsets(ctx context.Context, req *partitionv1.ListOffsetsRequest) (*partitionv1.ListOffsetsResponse, error) {
	if req.GetTopic() == "" {
		return nil, errcode.MissingTopic.New("topic is required", "param", "topic")
	}
	if _, err := s.r.storage(); err != nil {
		return nil, err
	}
	v := s.r.view(ctx, req.GetTopic())
	if !v.Ready() {
		return nil, errcode.ClusterMetadataUnavailable.New("metadata cache not synced with metad yet")
	}
	t, ok := v.Topic(req.GetTopic())
	if !ok || t.GetConfig().GetState() == metav1.TopicState_TOPIC_STATE_DELETING {
		return nil, errcode.TopicNotFound.New("unknown topic", "topic", req.GetTopic())
	}
	ids := req.GetPartitions()
	if len(ids) == 0 {
		for _, ps := range t.GetPartitions() {
			if ps.GetLeader() == s.r.env.NodeID {
				ids = append(ids, ps.GetId())
			}
		}
	}
	resp := &partitionv1.ListOffsetsResponse{}
	for _, id := range ids {
		po := &partitionv1.PartitionOffsets{Partition: id}
		rt, err := s.r.lead(ctx, req.GetTopic(), id)
		var o partition.Offsets
		if err == nil {
			if want, have := rt.topic.GetConfig().GetLifecycleEpoch(), rt.part.LifecycleEpoch(); want > have {
				// metad truncated the topic and reconciliation has not
				// applied it yet: the local offsets are the old
				// incarnation's, so answer retryably rather than with them.
				s.r.rec.poke()
				err = errcode.LifecycleEpochPending.New("this node has not applied the topic's lifecycle epoch yet",
					"topic", req.GetTopic(), "partition", itoa(id), "current", strconv.FormatUint(have, 10), "want", strconv.FormatUint(want, 10))
			} else {
				o, err = rt.part.ListOffsets()
			}
		}
		if err == nil && req.TimestampMs != nil {
			po.OffsetForTime, err = offsetForTime(rt.part, o, req.GetTimestampMs())
		}
		if err != nil {
			po.Error = errcode.ToProto(errcode.From(err))
		} else {
			po.Earliest, po.Latest, po.Leo, po.Hwm, po.Lso = o.Earliest, o.Latest, o.LEO, o.HWM, o.LSO
		}
		resp.Partitions = append(resp.Partitions, po)
	}
	return resp, nil
}

// offsetForTime is the first offset of the first batch whose max timestamp
// is at least ts (the time index), kept within what a reader may fetch:
// [earliest, hwm]. A time later than every committed batch gives the HWM,
// where a reader starting "at that time" waits for the next record.
func offsetForTime(p *partition.Partition, o partition.Offsets, ts int64) (uint64, error) {
	off, ok, err := p.OffsetForTime(ts)
	if err != nil {
		return 0, err
	}
	if !ok || off > o.HWM {
		return o.HWM, nil
	}
	return max(off, o.Earliest), nil
}

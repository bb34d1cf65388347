package partitiond

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/strataio/strata/libs/errcode"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"

	"github.com/strataio/strata/partitiond/internal/partition"
)

// The transaction RPCs (docs/transactions.md). The role policy lets only
// coordinatord (and admin) call them: the gateway's Append can never write
// transaction metadata, so a transactional record reaches a partition only
// through the coordinator that added the partition to the transaction.

// AddTxnPartition registers a producer epoch's transaction on a partition
// this node leads (KIP-890).
func (s *service) AddTxnPartition(ctx context.Context, req *partitionv1.AddTxnPartitionRequest) (_ *partitionv1.AddTxnPartitionResponse, err error) {
	ctx, span := s.r.tracer.Start(ctx, "partitiond.AddTxnPartition", trace.WithAttributes(
		attribute.String("strata.topic", req.GetTopic()), attribute.Int("strata.partition", int(req.GetPartition()))))
	defer func() { endSpan(span, err) }()
	rt, err := s.r.lead(ctx, req.GetTopic(), req.GetPartition())
	if err != nil {
		return nil, err
	}
	if err := rt.part.AddTxn(rt.lifecycleEpoch(req.GetLifecycleEpoch()), req.GetProducerId(), req.GetProducerEpoch(), req.GetCoordinatorEpoch()); err != nil {
		return nil, err
	}
	return &partitionv1.AddTxnPartitionResponse{Leader: s.r.env.NodeID}, nil
}

// TxnAppend writes records of an open transaction; it is Append with the
// transactional rules (acks all, seqNum > 0, the epoch added).
func (s *service) TxnAppend(ctx context.Context, req *partitionv1.TxnAppendRequest) (_ *partitionv1.TxnAppendResponse, err error) {
	a := req.GetAppend()
	if a == nil {
		return nil, errcode.MissingParameter.New("TxnAppend without an append", "param", "append")
	}
	ctx, span := s.r.tracer.Start(ctx, "partitiond.TxnAppend", trace.WithAttributes(
		attribute.String("strata.topic", a.GetTopic()), attribute.Int("strata.partition", int(a.GetPartition())),
		attribute.Int("strata.records", int(a.GetRecordCount()))))
	defer func() { endSpan(span, err) }()
	pa, err := s.startAppendTxn(ctx, a, true)
	if err != nil {
		return nil, err
	}
	if err := pa.Wait(ctx); err != nil {
		return nil, err
	}
	return &partitionv1.TxnAppendResponse{Append: s.appendResponse(pa)}, nil
}

// WriteTxnMarker appends a commit or abort marker and answers once the high
// watermark covers it.
func (s *service) WriteTxnMarker(ctx context.Context, req *partitionv1.WriteTxnMarkerRequest) (_ *partitionv1.WriteTxnMarkerResponse, err error) {
	ctx, span := s.r.tracer.Start(ctx, "partitiond.WriteTxnMarker", trace.WithAttributes(
		attribute.String("strata.topic", req.GetTopic()), attribute.Int("strata.partition", int(req.GetPartition())),
		attribute.Bool("strata.commit", req.GetCommit())))
	defer func() { endSpan(span, err) }()
	rt, err := s.r.lead(ctx, req.GetTopic(), req.GetPartition())
	if err != nil {
		return nil, err
	}
	res, err := rt.part.WriteMarker(ctx, &partition.MarkerRequest{
		LifecycleEpoch: rt.lifecycleEpoch(req.GetLifecycleEpoch()), ProducerID: req.GetProducerId(),
		ProducerEpoch: req.GetProducerEpoch(), CoordinatorEpoch: req.GetCoordinatorEpoch(),
		TransactionalID: req.GetTransactionalId(), Commit: req.GetCommit(),
		ISRSize: rt.isr, MinISR: rt.minISRReplicated,
	})
	if err != nil {
		return nil, err
	}
	return &partitionv1.WriteTxnMarkerResponse{Offset: res.Offset, Duplicate: res.Duplicate, Leader: s.r.env.NodeID}, nil
}

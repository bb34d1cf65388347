package partitionfake

import (
	"context"
	"strconv"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// Marker is a transaction marker the fake received.
type Marker struct {
	Topic      string
	Partition  int32
	ProducerID string
	Epoch      int64
	Commit     bool
}

type txnState struct {
	added   map[key]map[string]int64 // producer -> added epoch
	ended   map[key]map[string]int64 // producer -> last ended epoch
	markers []Marker
}

func (s *Server) txnLocked() *txnState {
	if s.txn == nil {
		s.txn = &txnState{added: map[key]map[string]int64{}, ended: map[key]map[string]int64{}}
	}
	return s.txn
}

// AddTxnPartition registers the producer epoch on the partition
// (partitiond's KIP-890 rule, simplified: no coordinator epochs).
func (s *Server) AddTxnPartition(_ context.Context, req *partitionv1.AddTxnPartitionRequest) (*partitionv1.AddTxnPartitionResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{req.GetTopic(), req.GetPartition()}
	t := s.txnLocked()
	if e, ok := t.ended[k][req.GetProducerId()]; ok && req.GetProducerEpoch() <= e {
		return nil, errcode.StaleProducerEpoch.New("epoch already ended", "producer", req.GetProducerId())
	}
	if t.added[k] == nil {
		t.added[k] = map[string]int64{}
	}
	t.added[k][req.GetProducerId()] = req.GetProducerEpoch()
	return &partitionv1.AddTxnPartitionResponse{Leader: s.o.ID}, nil
}

// TxnAppend appends like Append (idempotent) once the epoch was added.
func (s *Server) TxnAppend(ctx context.Context, req *partitionv1.TxnAppendRequest) (*partitionv1.TxnAppendResponse, error) {
	a := req.GetAppend()
	s.mu.Lock()
	k := key{a.GetTopic(), a.GetPartition()}
	t := s.txnLocked()
	if e, ok := t.ended[k][a.GetProducerId()]; ok && a.GetProducerEpoch() <= e {
		s.mu.Unlock()
		return nil, errcode.StaleProducerEpoch.New("epoch already ended", "producer", a.GetProducerId())
	}
	if e, ok := t.added[k][a.GetProducerId()]; !ok || e != a.GetProducerEpoch() {
		s.mu.Unlock()
		return nil, errcode.TransactionPartitionNotAdded.New("not added", "producer", a.GetProducerId())
	}
	s.mu.Unlock()
	resp, err := s.Append(ctx, &partitionv1.AppendRequest{Topic: a.GetTopic(), Partition: a.GetPartition(), LifecycleEpoch: a.GetLifecycleEpoch(),
		Acks: -1, Records: a.GetRecords(), RecordCount: a.GetRecordCount(), ProducerId: a.GetProducerId(), ProducerEpoch: a.GetProducerEpoch(),
		BaseSequence: a.GetBaseSequence(), LastSequence: a.GetBaseSequence() + uint64(a.GetRecordCount()) - 1, Idempotent: true})
	if err != nil {
		return nil, err
	}
	return &partitionv1.TxnAppendResponse{Append: resp}, nil
}

// WriteTxnMarker records the marker (Markers) and appends a marker record.
func (s *Server) WriteTxnMarker(_ context.Context, req *partitionv1.WriteTxnMarkerRequest) (*partitionv1.WriteTxnMarkerResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{req.GetTopic(), req.GetPartition()}
	t := s.txnLocked()
	if e, ok := t.ended[k][req.GetProducerId()]; ok && req.GetProducerEpoch() <= e {
		if req.GetProducerEpoch() == e {
			return &partitionv1.WriteTxnMarkerResponse{Duplicate: true, Leader: s.o.ID}, nil
		}
		return nil, errcode.StaleProducerEpoch.New("older epoch", "producer", req.GetProducerId(),
			"got", strconv.FormatInt(req.GetProducerEpoch(), 10))
	}
	if t.ended[k] == nil {
		t.ended[k] = map[string]int64{}
	}
	t.ended[k][req.GetProducerId()] = req.GetProducerEpoch()
	delete(t.added[k], req.GetProducerId())
	t.markers = append(t.markers, Marker{Topic: req.GetTopic(), Partition: req.GetPartition(), ProducerID: req.GetProducerId(),
		Epoch: req.GetProducerEpoch(), Commit: req.GetCommit()})
	rec := wire.TxnMarkerRecord(req.GetTopic(), req.GetPartition(), req.GetProducerId(), req.GetProducerEpoch(),
		req.GetTransactionalId(), wire.TxnMarker{Commit: req.GetCommit(), CoordinatorEpoch: int32(req.GetCoordinatorEpoch())}, 0)
	b, err := rec.AppendTo(nil)
	if err != nil {
		return nil, err
	}
	off := uint64(len(s.logs[k]))
	s.storeLocked(k, b)
	return &partitionv1.WriteTxnMarkerResponse{Offset: off, Leader: s.o.ID}, nil
}

// Markers returns the markers received so far, in order.
func (s *Server) Markers() []Marker {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Marker(nil), s.txnLocked().markers...)
}

// Package fakepartition is an in-memory PartitionService for coordinatord
// tests: Append with the idempotent-producer epoch and sequence rules that
// matter to the coordinator (fencing by a higher epoch, duplicate retries),
// Fetch, ListOffsets, and back doors to inject raw records, compact a log
// and fail calls.
package fakepartition

import (
	"context"
	"encoding/binary"
	"strconv"
	"sync"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

type key struct {
	topic string
	p     int32
}

type producer struct {
	epoch int64
	last  uint64
}

// Server is the fake. The zero value is not usable; call New.
type Server struct {
	partitionv1.UnimplementedPartitionServiceServer

	mu        sync.Mutex
	logs      map[key][][]byte // records, offset = index (after compaction: holes are nil)
	producers map[key]map[string]*producer
	// FailAppends makes the next n appends fail with a retryable error.
	failAppends int
	loseAnswers int
	appends     int
	lists       int
	listDelay   time.Duration
}

// LoseNextAnswers makes the next n appends take effect as usual but answer
// a retryable error, as when the response is lost on the way back.
func (s *Server) LoseNextAnswers(n int) {
	s.mu.Lock()
	s.loseAnswers = n
	s.mu.Unlock()
}

// New returns an empty fake.
func New() *Server {
	return &Server{logs: map[key][][]byte{}, producers: map[key]map[string]*producer{}}
}

// FailNextAppends makes the next n appends answer a retryable error after
// storing nothing.
func (s *Server) FailNextAppends(n int) {
	s.mu.Lock()
	s.failAppends = n
	s.mu.Unlock()
}

// Appends returns the number of stored (non-duplicate) appends.
func (s *Server) Appends() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.appends
}

// Len returns the log end offset of a partition.
func (s *Server) Len(topic string, p int32) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.logs[key{topic, p}])
}

// Inject appends one raw record (key and payload) without producer checks.
func (s *Server) Inject(topic string, p int32, recKey string, payload []byte) {
	r := wire.Record{Topic: topic, Partition: p, Key: recKey, Payload: payload}
	b, err := r.AppendTo(nil)
	if err != nil {
		panic(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{topic, p}
	wire.SetRecordOffset(b, uint64(len(s.logs[k])))
	s.logs[k] = append(s.logs[k], b)
}

// Compact keeps only the latest record of every key, as log compaction does.
func (s *Server) Compact(topic string, p int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{topic, p}
	latest := map[string]int{}
	for i, b := range s.logs[k] {
		if b == nil {
			continue
		}
		v, _ := wire.ParseRecord(b)
		latest[v.KeyString()] = i
	}
	for i, b := range s.logs[k] {
		if b == nil {
			continue
		}
		v, _ := wire.ParseRecord(b)
		if latest[v.KeyString()] != i {
			s.logs[k][i] = nil
		}
	}
}

// Append implements PartitionService.
func (s *Server) Append(ctx context.Context, req *partitionv1.AppendRequest) (*partitionv1.AppendResponse, error) {
	resp, err := s.append(req)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.loseAnswers > 0 {
		s.loseAnswers--
		return nil, errcode.RequestTimeout.New("injected lost answer")
	}
	return resp, err
}

func (s *Server) append(req *partitionv1.AppendRequest) (*partitionv1.AppendResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failAppends > 0 {
		s.failAppends--
		return nil, errcode.ReplicationUnavailable.New("injected failure")
	}
	recs, err := split(req.GetRecords())
	if err != nil {
		return nil, err
	}
	if uint32(len(recs)) != req.GetRecordCount() {
		return nil, errcode.DecodeFailed.New("record_count mismatch")
	}
	k := key{req.GetTopic(), req.GetPartition()}
	if req.GetIdempotent() && req.GetBaseSequence() > 0 {
		ps := s.producers[k]
		if ps == nil {
			ps = map[string]*producer{}
			s.producers[k] = ps
		}
		pr := ps[req.GetProducerId()]
		switch {
		case pr != nil && req.GetProducerEpoch() < pr.epoch:
			return nil, errcode.StaleProducerEpoch.New("fenced", "producer", req.GetProducerId(),
				"current", strconv.FormatInt(pr.epoch, 10), "got", strconv.FormatInt(req.GetProducerEpoch(), 10))
		case pr != nil && req.GetProducerEpoch() == pr.epoch && req.GetLastSequence() <= pr.last:
			return &partitionv1.AppendResponse{Duplicate: true}, nil
		case pr != nil && req.GetProducerEpoch() == pr.epoch && req.GetBaseSequence() != pr.last+1:
			return nil, errcode.OutOfOrderSequence.New("gap")
		case (pr == nil || req.GetProducerEpoch() > pr.epoch) && req.GetBaseSequence() != 1:
			return nil, errcode.OutOfOrderSequence.New("first batch must start at 1")
		}
		ps[req.GetProducerId()] = &producer{epoch: req.GetProducerEpoch(), last: req.GetLastSequence()}
	}
	base := uint64(len(s.logs[k]))
	for i, r := range recs {
		c := append([]byte(nil), r...)
		wire.SetRecordOffset(c, base+uint64(i))
		s.logs[k] = append(s.logs[k], c)
	}
	s.appends++
	return &partitionv1.AppendResponse{BaseOffset: base, LastOffset: base + uint64(len(recs)) - 1, Leader: "p1"}, nil
}

// Fetch implements PartitionService (everything appended is committed).
func (s *Server) Fetch(ctx context.Context, req *partitionv1.FetchRequest) (*partitionv1.FetchResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	log := s.logs[key{req.GetTopic(), req.GetPartition()}]
	end := uint64(len(log))
	if req.GetOffset() > end {
		return nil, errcode.OffsetOutOfRange.New("beyond end", "requested", strconv.FormatUint(req.GetOffset(), 10), "earliest", "0",
			"latest", strconv.FormatUint(end, 10))
	}
	var out []byte
	n := uint32(0)
	at := req.GetOffset()
	for ; at < end && n < max(req.GetMaxRecords(), 1); at++ {
		if log[at] == nil {
			continue
		}
		out = binary.BigEndian.AppendUint32(out, uint32(len(log[at])))
		out = append(out, log[at]...)
		n++
	}
	return &partitionv1.FetchResponse{Records: out, RecordCount: n, NextOffset: at, HighWatermark: end, LogEndOffset: end}, nil
}

// ListOffsetsCalls returns how many ListOffsets calls were answered.
func (s *Server) ListOffsetsCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lists
}

// DelayListOffsets makes every later ListOffsets answer d later (the
// offsets are read before the delay).
func (s *Server) DelayListOffsets(d time.Duration) {
	s.mu.Lock()
	s.listDelay = d
	s.mu.Unlock()
}

// ListOffsets implements PartitionService.
func (s *Server) ListOffsets(ctx context.Context, req *partitionv1.ListOffsetsRequest) (*partitionv1.ListOffsetsResponse, error) {
	resp, delay := s.listOffsets(req)
	if delay > 0 {
		time.Sleep(delay)
	}
	return resp, nil
}

func (s *Server) listOffsets(req *partitionv1.ListOffsetsRequest) (*partitionv1.ListOffsetsResponse, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists++
	out := &partitionv1.ListOffsetsResponse{}
	for _, p := range req.GetPartitions() {
		end := uint64(len(s.logs[key{req.GetTopic(), p}]))
		out.Partitions = append(out.Partitions, &partitionv1.PartitionOffsets{Partition: p, Latest: end, Leo: end, Hwm: end})
	}
	return out, s.listDelay
}

// SetLog replaces a partition's log with n placeholder records (for lag tests).
func (s *Server) SetLog(topic string, p int32, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{topic, p}
	for len(s.logs[k]) < n {
		r := wire.Record{Topic: topic, Partition: p, Payload: []byte("x")}
		b, _ := r.AppendTo(nil)
		wire.SetRecordOffset(b, uint64(len(s.logs[k])))
		s.logs[k] = append(s.logs[k], b)
	}
}

func split(b []byte) ([][]byte, error) {
	var out [][]byte
	for pos := 0; pos < len(b); {
		if len(b)-pos < 4 {
			return nil, errcode.DecodeFailed.New("truncated record set")
		}
		l := int(binary.BigEndian.Uint32(b[pos:]))
		pos += 4
		if l > len(b)-pos {
			return nil, errcode.DecodeFailed.New("truncated record")
		}
		if _, err := wire.ParseRecord(b[pos : pos+l]); err != nil {
			return nil, err
		}
		out = append(out, b[pos:pos+l])
		pos += l
	}
	return out, nil
}

package partitionfake

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/fake/fakerpc"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	"github.com/strataio/strata/libs/rpc"
	"github.com/strataio/strata/libs/wire"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// Options configures a fake partitiond. The zero value is node "p1" that
// every role may call, answering fetches at once.
type Options struct {
	// ID is the fake's node id (its certificate, the leader it answers);
	// default "p1".
	ID string
	// Callers are the roles allowed to call; empty allows every role.
	Callers []pki.Role
	// Telemetry traces the fake's server side (zero: off).
	Telemetry rpc.Telemetry
	// LongPoll makes a Fetch at the log end wait up to its wait_ms for
	// records, as partitiond does; otherwise it answers at once, empty.
	LongPoll bool
	// Discard makes appends keep no records, only the offsets they were
	// given (benchmarks: memory stays flat however much is written); reads
	// then see empty partitions.
	Discard bool
}

type key struct {
	topic string
	p     int32
}

type producer struct {
	epoch int64
	last  uint64
}

// Server is the fake partitiond. Its PartitionService methods may also be
// called directly (without gRPC).
type Server struct {
	partitionv1.UnimplementedPartitionServiceServer
	fakerpc.Controls
	*fakerpc.Server // Addr, Stop, Dial

	o Options

	mu        sync.Mutex
	logs      map[key][][]byte // offset = index; nil = removed by Compact
	discarded map[key]uint64   // with Options.Discard: offsets given out
	producers map[key]map[string]*producer
	appends   int
	changed   chan struct{} // closed and replaced on every append
	txn       *txnState     // transactions (txn.go)
}

// Start serves a fake partitiond on loopback with a partitiond certificate
// of ca until the test ends.
func Start(t testing.TB, ca *pkitest.PKI, o Options) *Server {
	t.Helper()
	if o.ID == "" {
		o.ID = "p1"
	}
	s := &Server{o: o, logs: map[key][][]byte{}, discarded: map[key]uint64{}, producers: map[key]map[string]*producer{},
		changed: make(chan struct{})}
	s.Server = fakerpc.Serve(t, ca, fakerpc.Options{Role: pki.RolePartitiond, ID: o.ID, Callers: o.Callers, Telemetry: o.Telemetry},
		fakerpc.Service{Desc: &partitionv1.PartitionService_ServiceDesc, Impl: s, Controls: &s.Controls})
	return s
}

// Appends returns how many appends stored records (duplicates and failures
// not counted).
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

// Records returns copies of a partition's records (with their offsets set);
// a record removed by Compact is nil.
func (s *Server) Records(topic string, p int32) [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]byte, len(s.logs[key{topic, p}]))
	for i, r := range s.logs[key{topic, p}] {
		if r != nil {
			out[i] = append([]byte(nil), r...)
		}
	}
	return out
}

// Inject appends one raw record (key and payload) without any check.
func (s *Server) Inject(topic string, p int32, recKey string, payload []byte) {
	r := wire.Record{Topic: topic, Partition: p, Key: recKey, Payload: payload}
	b, err := r.AppendTo(nil)
	if err != nil {
		panic(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.storeLocked(key{topic, p}, b)
}

// SetLog fills a partition with placeholder records up to offset n (for
// lag tests).
func (s *Server) SetLog(topic string, p int32, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{topic, p}
	for len(s.logs[k]) < n {
		r := wire.Record{Topic: topic, Partition: p, Payload: []byte("x")}
		b, _ := r.AppendTo(nil)
		s.storeLocked(k, b)
	}
}

// storeLocked appends one record, setting its offset, and wakes fetches.
func (s *Server) storeLocked(k key, rec []byte) {
	wire.SetRecordOffset(rec, uint64(len(s.logs[k])))
	s.logs[k] = append(s.logs[k], rec)
	close(s.changed)
	s.changed = make(chan struct{})
}

// Compact keeps only the latest record of every key, as log compaction
// does; offsets stay where they are.
func (s *Server) Compact(topic string, p int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	log := s.logs[key{topic, p}]
	latest := map[string]int{}
	for i, b := range log {
		if b != nil {
			v, _ := wire.ParseRecord(b)
			latest[v.KeyString()] = i
		}
	}
	for i, b := range log {
		if b != nil {
			v, _ := wire.ParseRecord(b)
			if latest[v.KeyString()] != i {
				log[i] = nil
			}
		}
	}
}

// Append stores a record set, following the idempotent-producer rules.
func (s *Server) Append(_ context.Context, req *partitionv1.AppendRequest) (*partitionv1.AppendResponse, error) {
	recs, err := split(req.GetRecords())
	if err != nil {
		return nil, err
	}
	if uint32(len(recs)) != req.GetRecordCount() || len(recs) == 0 {
		return nil, errcode.DecodeFailed.New("record_count does not match the record set",
			"record_count", strconv.FormatUint(uint64(req.GetRecordCount()), 10))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key{req.GetTopic(), req.GetPartition()}
	if req.GetIdempotent() && req.GetBaseSequence() > 0 {
		dup, err := s.sequenceLocked(k, req)
		if err != nil {
			return nil, err
		}
		if dup {
			return &partitionv1.AppendResponse{Duplicate: true, Leader: s.o.ID, LeaderEpoch: 1}, nil
		}
	}
	s.appends++
	if s.o.Discard {
		base := s.discarded[k]
		s.discarded[k] += uint64(len(recs))
		return &partitionv1.AppendResponse{BaseOffset: base, LastOffset: base + uint64(len(recs)) - 1, Leader: s.o.ID, LeaderEpoch: 1}, nil
	}
	base := uint64(len(s.logs[k]))
	for _, r := range recs {
		s.storeLocked(k, append([]byte(nil), r...))
	}
	return &partitionv1.AppendResponse{BaseOffset: base, LastOffset: base + uint64(len(recs)) - 1, Leader: s.o.ID, LeaderEpoch: 1}, nil
}

// sequenceLocked checks an idempotent batch against its producer's last
// one: a lower epoch is fenced, a repeat is a duplicate, a gap is out of
// order; an accepted batch becomes the producer's last.
func (s *Server) sequenceLocked(k key, req *partitionv1.AppendRequest) (duplicate bool, err error) {
	ps := s.producers[k]
	if ps == nil {
		ps = map[string]*producer{}
		s.producers[k] = ps
	}
	pr := ps[req.GetProducerId()]
	epoch := req.GetProducerEpoch()
	switch {
	case pr != nil && epoch < pr.epoch:
		return false, errcode.StaleProducerEpoch.New("fenced", "producer", req.GetProducerId(),
			"current", strconv.FormatInt(pr.epoch, 10), "got", strconv.FormatInt(epoch, 10))
	case pr != nil && epoch == pr.epoch && req.GetLastSequence() <= pr.last:
		return true, nil
	case pr != nil && epoch == pr.epoch && req.GetBaseSequence() != pr.last+1:
		return false, errcode.OutOfOrderSequence.New("gap")
	case (pr == nil || epoch > pr.epoch) && req.GetBaseSequence() != 1:
		return false, errcode.OutOfOrderSequence.New("first batch must start at 1")
	}
	ps[req.GetProducerId()] = &producer{epoch: epoch, last: req.GetLastSequence()}
	return false, nil
}

// Produce answers every append of the stream in order; a failed append
// answers with the error in band and the stream goes on (InBand injects
// such an answer).
func (s *Server) Produce(stream grpc.BidiStreamingServer[partitionv1.ProduceRequest, partitionv1.ProduceResponse]) error {
	for {
		req, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) || stream.Context().Err() != nil {
				return nil // the client closed its side or went away
			}
			return err // a hook failed the message
		}
		resp, err := s.Append(stream.Context(), req.GetAppend())
		if err != nil {
			resp = &partitionv1.AppendResponse{Error: errcode.ToProto(errcode.From(err))}
		}
		if err := stream.Send(&partitionv1.ProduceResponse{CorrelationId: req.GetCorrelationId(), Append: resp}); err != nil {
			return err
		}
	}
}

// InBand is a hook for "Produce" that answers the append it sees with err
// in band, as partitiond answers an append it refuses (not_leader, say):
// nothing is stored and the stream goes on.
func InBand(err error) fakerpc.Hook {
	return func(_ context.Context, req proto.Message, _ fakerpc.Next) (proto.Message, error) {
		return &partitionv1.ProduceResponse{CorrelationId: req.(*partitionv1.ProduceRequest).GetCorrelationId(),
			Append: &partitionv1.AppendResponse{Error: errcode.ToProto(errcode.From(err))}}, nil
	}
}

// Fetch reads from an offset (everything appended is committed); with
// Options.LongPoll a fetch at the log end waits up to wait_ms.
func (s *Server) Fetch(ctx context.Context, req *partitionv1.FetchRequest) (*partitionv1.FetchResponse, error) {
	k := key{req.GetTopic(), req.GetPartition()}
	var deadline <-chan time.Time
	if s.o.LongPoll && req.GetWaitMs() > 0 {
		t := time.NewTimer(time.Duration(req.GetWaitMs()) * time.Millisecond)
		defer t.Stop()
		deadline = t.C
	}
	for {
		s.mu.Lock()
		log, changed := s.logs[k], s.changed
		s.mu.Unlock()
		end := uint64(len(log))
		if req.GetOffset() > end {
			return nil, errcode.OffsetOutOfRange.New("beyond the log end", "requested", strconv.FormatUint(req.GetOffset(), 10),
				"earliest", "0", "latest", strconv.FormatUint(end, 10))
		}
		if req.GetOffset() < end || deadline == nil {
			return read(log, req), nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline:
			deadline = nil
		case <-changed:
		}
	}
}

// read answers a fetch from a snapshot of the log: at most max_records
// (at least one) records from the offset, skipping compacted ones.
func read(log [][]byte, req *partitionv1.FetchRequest) *partitionv1.FetchResponse {
	end := uint64(len(log))
	out := &partitionv1.FetchResponse{HighWatermark: end, LogEndOffset: end}
	at := req.GetOffset()
	for ; at < end && out.RecordCount < max(req.GetMaxRecords(), 1); at++ {
		if log[at] == nil {
			continue
		}
		out.Records = binary.BigEndian.AppendUint32(out.Records, uint32(len(log[at])))
		out.Records = append(out.Records, log[at]...)
		out.RecordCount++
	}
	out.NextOffset = at
	return out
}

// ListOffsets reports every asked partition's log end (earliest 0).
func (s *Server) ListOffsets(_ context.Context, req *partitionv1.ListOffsetsRequest) (*partitionv1.ListOffsetsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &partitionv1.ListOffsetsResponse{}
	for _, p := range req.GetPartitions() {
		end := uint64(len(s.logs[key{req.GetTopic(), p}]))
		out.Partitions = append(out.Partitions, &partitionv1.PartitionOffsets{Partition: p, Latest: end, Leo: end, Hwm: end, Lso: end})
	}
	return out, nil
}

// split cuts a record set (u32 length, record, ...) into checked records.
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

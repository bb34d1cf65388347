package partitionfake_test

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/fake/fakerpc"
	"github.com/strataio/strata/libs/fake/partitionfake"
	"github.com/strataio/strata/libs/looptest"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	"github.com/strataio/strata/libs/wire"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func start(t *testing.T, o partitionfake.Options) (*partitionfake.Server, partitionv1.PartitionServiceClient) {
	t.Helper()
	f := partitionfake.Start(t, pkitest.New(t), o)
	return f, partitionv1.NewPartitionServiceClient(f.Dial(t, pki.RoleCoordinatord))
}

func ctxT(t *testing.T) context.Context { return looptest.Context(t, 10*time.Second) }

// set builds the record set (u32 length, record, ...) of one record per key.
func set(t *testing.T, keys ...string) []byte {
	t.Helper()
	var out []byte
	for _, k := range keys {
		rec, err := (&wire.Record{Topic: "t", Key: k, Payload: []byte("v-" + k)}).AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(binary.BigEndian.AppendUint32(out, uint32(len(rec))), rec...)
	}
	return out
}

func keys(t *testing.T, set []byte) (out []string) {
	t.Helper()
	for len(set) > 0 {
		n := binary.BigEndian.Uint32(set)
		v, err := wire.ParseRecord(set[4 : 4+n])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v.KeyString())
		set = set[4+n:]
	}
	return out
}

func TestAppendFetchCompactAndOffsets(t *testing.T) {
	f, c := start(t, partitionfake.Options{})
	ctx := ctxT(t)
	resp, err := c.Append(ctx, &partitionv1.AppendRequest{Topic: "t", Records: set(t, "a", "b", "a"), RecordCount: 3})
	if err != nil || resp.GetBaseOffset() != 0 || resp.GetLastOffset() != 2 || resp.GetLeader() != "p1" {
		t.Fatalf("append %v %v", resp, err)
	}
	if _, err := c.Append(ctx, &partitionv1.AppendRequest{Topic: "t", Records: set(t, "c"), RecordCount: 2}); !errors.Is(err, errcode.DecodeFailed) {
		t.Fatalf("count mismatch: %v", err)
	}
	f.Inject("t", 0, "c", []byte("raw"))
	fr, err := c.Fetch(ctx, &partitionv1.FetchRequest{Topic: "t", Offset: 1, MaxRecords: 10})
	if err != nil || fr.GetRecordCount() != 3 || fr.GetNextOffset() != 4 || fr.GetHighWatermark() != 4 {
		t.Fatalf("fetch %v %v", fr, err)
	}
	f.Compact("t", 0)
	fr, err = c.Fetch(ctx, &partitionv1.FetchRequest{Topic: "t", MaxRecords: 10})
	if got := keys(t, fr.GetRecords()); err != nil || len(got) != 3 || got[0] != "b" || got[1] != "a" || got[2] != "c" {
		t.Fatalf("after compaction: %v %v", got, err)
	}
	if _, err := c.Fetch(ctx, &partitionv1.FetchRequest{Topic: "t", Offset: 9}); !errors.Is(err, errcode.OffsetOutOfRange) {
		t.Fatalf("beyond the end: %v", err)
	}
	f.SetLog("u", 1, 7)
	lo, err := c.ListOffsets(ctx, &partitionv1.ListOffsetsRequest{Topic: "u", Partitions: []int32{0, 1}})
	if err != nil || lo.GetPartitions()[0].GetLatest() != 0 || lo.GetPartitions()[1].GetHwm() != 7 {
		t.Fatalf("offsets %v %v", lo, err)
	}
	if f.Appends() != 1 || f.Len("t", 0) != 4 || f.Records("t", 0)[0] != nil {
		t.Fatalf("appends %d len %d", f.Appends(), f.Len("t", 0))
	}
}

func TestIdempotentProducerRules(t *testing.T) {
	_, c := start(t, partitionfake.Options{})
	ctx := ctxT(t)
	app := func(epoch int64, base, last uint64) (*partitionv1.AppendResponse, error) {
		n := int(last - base + 1)
		ks := make([]string, n)
		for i := range ks {
			ks[i] = "k"
		}
		return c.Append(ctx, &partitionv1.AppendRequest{Topic: "t", Records: set(t, ks...), RecordCount: uint32(n),
			Idempotent: true, ProducerId: "pr", ProducerEpoch: epoch, BaseSequence: base, LastSequence: last})
	}
	if _, err := app(1, 2, 2); !errors.Is(err, errcode.OutOfOrderSequence) {
		t.Fatalf("first batch not at 1: %v", err)
	}
	if _, err := app(1, 1, 2); err != nil {
		t.Fatal(err)
	}
	if r, err := app(1, 1, 2); err != nil || !r.GetDuplicate() {
		t.Fatalf("retry: %v %v", r, err)
	}
	if _, err := app(1, 4, 4); !errors.Is(err, errcode.OutOfOrderSequence) {
		t.Fatalf("gap: %v", err)
	}
	if _, err := app(2, 1, 1); err != nil {
		t.Fatalf("a new epoch starts over: %v", err)
	}
	if _, err := app(1, 3, 3); !errors.Is(err, errcode.StaleProducerEpoch) {
		t.Fatalf("fenced: %v", err)
	}
}

func TestProduceAnswersInBandAndHooksApply(t *testing.T) {
	f, c := start(t, partitionfake.Options{})
	ctx := ctxT(t)
	s, err := c.Produce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	produce := func(id uint64, req *partitionv1.AppendRequest) *partitionv1.AppendResponse {
		if err := s.Send(&partitionv1.ProduceRequest{CorrelationId: id, Append: req}); err != nil {
			t.Fatal(err)
		}
		resp, err := s.Recv()
		if err != nil || resp.GetCorrelationId() != id {
			t.Fatalf("produce %d: %v %v", id, resp, err)
		}
		return resp.GetAppend()
	}
	if r := produce(7, &partitionv1.AppendRequest{Topic: "t", Records: set(t, "a"), RecordCount: 1}); r.GetError() != nil {
		t.Fatalf("append: %v", r)
	}
	if r := produce(8, &partitionv1.AppendRequest{Topic: "t", Records: set(t, "b"), RecordCount: 5}); r.GetError() == nil {
		t.Fatalf("a wrong record count answered %v", r)
	}
	// A hook answers one message in band; the message never reaches the fake.
	f.On("Produce", 1, partitionfake.InBand(errcode.NotLeader.New("moved", "leader", "p2")))
	if r := produce(9, &partitionv1.AppendRequest{Topic: "t", Records: set(t, "c"), RecordCount: 1}); errcode.FromProto(r.GetError()).Field("leader") != "p2" {
		t.Fatalf("in-band answer %v", r)
	}
	s.CloseSend()
	f.On("Append", 1, fakerpc.LoseAnswer(errcode.RequestTimeout.New("lost")))
	if _, err := c.Append(ctx, &partitionv1.AppendRequest{Topic: "t", Records: set(t, "c"), RecordCount: 1}); !errors.Is(err, errcode.RequestTimeout) {
		t.Fatalf("lost answer: %v", err)
	}
	if f.Len("t", 0) != 2 || f.Calls("Produce") != 3 || f.Calls("Append") != 1 {
		t.Fatalf("len %d produce calls %d append calls %d", f.Len("t", 0), f.Calls("Produce"), f.Calls("Append"))
	}
}

func TestLongPollWaitsForRecords(t *testing.T) {
	f, c := start(t, partitionfake.Options{LongPoll: true})
	ctx := ctxT(t)
	began := time.Now()
	fr, err := c.Fetch(ctx, &partitionv1.FetchRequest{Topic: "t", WaitMs: 100})
	if err != nil || fr.GetRecordCount() != 0 || time.Since(began) < 100*time.Millisecond {
		t.Fatalf("empty long poll: %v %v after %v", fr, err, time.Since(began))
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		f.Inject("t", 0, "late", nil)
	}()
	fr, err = c.Fetch(ctx, &partitionv1.FetchRequest{Topic: "t", WaitMs: 5000})
	if err != nil || fr.GetRecordCount() != 1 {
		t.Fatalf("woken long poll: %v %v", fr, err)
	}
}

func TestDiscardGivesOffsetsAndKeepsNothing(t *testing.T) {
	f, c := start(t, partitionfake.Options{Discard: true})
	ctx := ctxT(t)
	for _, want := range []uint64{1, 3} {
		r, err := c.Append(ctx, &partitionv1.AppendRequest{Topic: "t", Records: set(t, "a", "b"), RecordCount: 2})
		if err != nil || r.GetLastOffset() != want {
			t.Fatalf("append: %v %v, want last offset %d", r, err, want)
		}
	}
	if f.Len("t", 0) != 0 || f.Appends() != 2 {
		t.Fatalf("len %d appends %d", f.Len("t", 0), f.Appends())
	}
}

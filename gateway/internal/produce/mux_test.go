package produce

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/strataio/strata/libs/errcode"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeProduce answers in batches of two, in reverse order, so responses
// arrive out of request order; partition 99 fails in-band; topic "break"
// ends the stream.
type fakeProduce struct {
	partitionv1.UnimplementedPartitionServiceServer
	streams atomic.Int32
}

func (f *fakeProduce) Produce(s grpc.BidiStreamingServer[partitionv1.ProduceRequest, partitionv1.ProduceResponse]) error {
	f.streams.Add(1)
	var held []*partitionv1.ProduceRequest
	for {
		req, err := s.Recv()
		if err != nil {
			return nil
		}
		if req.GetAppend().GetTopic() == "break" {
			return errcode.StorageUnavailable.New("stream broken by test")
		}
		held = append(held, req)
		if len(held) < 2 {
			continue
		}
		for i := len(held) - 1; i >= 0; i-- {
			r := held[i]
			resp := &partitionv1.AppendResponse{LastOffset: uint64(r.GetAppend().GetPartition())}
			if r.GetAppend().GetPartition() == 99 {
				resp.Error = errcode.ToProto(errcode.NotLeader.New("moved", "leader", "p2"))
			}
			if err := s.Send(&partitionv1.ProduceResponse{CorrelationId: r.GetCorrelationId(), Append: resp}); err != nil {
				return err
			}
		}
		held = held[:0]
	}
}

func start(t *testing.T) (*Mux, *fakeProduce) {
	t.Helper()
	f := &fakeProduce{}
	srv := grpc.NewServer()
	partitionv1.RegisterPartitionServiceServer(srv, f)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	m := New(cc)
	t.Cleanup(func() {
		m.Close()
		cc.Close()
		srv.Stop()
	})
	return m, f
}

func TestAppendsMatchResponsesByCorrelationID(t *testing.T) {
	m, _ := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for p := int32(0); p < 8; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := m.Append(ctx, &partitionv1.AppendRequest{Topic: "t", Partition: p})
			if err != nil {
				errs <- err
				return
			}
			if resp.GetLastOffset() != uint64(p) {
				errs <- errcode.Internal.Errorf("partition %d got response for %d", p, resp.GetLastOffset())
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestInBandErrorIsTyped(t *testing.T) {
	m, _ := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := m.Append(ctx, &partitionv1.AppendRequest{Topic: "t", Partition: 99})
		done <- err
	}()
	if _, err := m.Append(ctx, &partitionv1.AppendRequest{Topic: "t", Partition: 1}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; errcode.CodeOf(err) != "NOT_LEADER" {
		t.Fatalf("want NOT_LEADER, got %v", err)
	}
}

func TestBrokenStreamFailsPendingAndReopens(t *testing.T) {
	m, f := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pending := make(chan error, 1)
	go func() {
		_, err := m.Append(ctx, &partitionv1.AppendRequest{Topic: "t", Partition: 1}) // held by the fake
		pending <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if _, err := m.Append(ctx, &partitionv1.AppendRequest{Topic: "break"}); err == nil {
		t.Fatal("append on a broken stream must fail")
	}
	if err := <-pending; !errcode.IsRetryable(err) {
		t.Fatalf("pending request must fail retryable, got %v", err)
	}
	// The next appends open a new stream.
	var wg sync.WaitGroup
	for p := int32(0); p < 2; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := m.Append(ctx, &partitionv1.AppendRequest{Topic: "t", Partition: p}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if f.streams.Load() < 2 {
		t.Fatalf("streams opened %d", f.streams.Load())
	}
}

func TestCancelledAppendReturns(t *testing.T) {
	m, _ := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	// Held forever by the fake (it answers pairs only).
	if _, err := m.Append(ctx, &partitionv1.AppendRequest{Topic: "t", Partition: 1}); err == nil {
		t.Fatal("want a deadline error")
	}
}

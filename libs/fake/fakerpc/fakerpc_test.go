package fakerpc_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/fake/fakerpc"
	"github.com/strataio/strata/libs/looptest"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// health is a tiny fake: Check answers SERVING and counts what it did;
// Watch sends SERVING once and waits.
type health struct {
	healthpb.UnimplementedHealthServer
	fakerpc.Controls
	served int
}

func (h *health) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	h.served++ // one call at a time in these tests
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func (h *health) Watch(_ *healthpb.HealthCheckRequest, s grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	if err := s.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}); err != nil {
		return err
	}
	<-s.Context().Done()
	return nil
}

func start(t *testing.T, callers ...pki.Role) (*health, *fakerpc.Server, healthpb.HealthClient) {
	t.Helper()
	ca := pkitest.New(t)
	h := &health{}
	srv := fakerpc.Serve(t, ca, fakerpc.Options{Role: pki.RoleMetad, ID: "m1", Callers: callers},
		fakerpc.Service{Desc: &healthpb.Health_ServiceDesc, Impl: h, Controls: &h.Controls})
	return h, srv, healthpb.NewHealthClient(srv.Dial(t, pki.RoleGateway))
}

func ctxT(t *testing.T) context.Context { return looptest.Context(t, 10*time.Second) }

func check(ctx context.Context, c healthpb.HealthClient) error {
	_, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: "x"})
	return err
}

func TestHooksFailLoseAnswerAndExpire(t *testing.T) {
	h, _, c := start(t)
	ctx := ctxT(t)
	injected := errcode.ReplicationUnavailable.New("injected")
	h.On("Check", 2, fakerpc.Fail(injected))
	for i := range 2 {
		if err := check(ctx, c); !errors.Is(err, errcode.ReplicationUnavailable) {
			t.Fatalf("call %d: %v, want the injected typed error", i, err)
		}
	}
	if h.served != 0 {
		t.Fatalf("a failed call reached the fake (%d)", h.served)
	}
	if err := check(ctx, c); err != nil {
		t.Fatalf("a hook for 2 calls still acts on the third: %v", err)
	}
	remove := h.On("Check", 0, fakerpc.LoseAnswer(errcode.RequestTimeout.New("lost")))
	if err := check(ctx, c); !errors.Is(err, errcode.RequestTimeout) || h.served != 2 {
		t.Fatalf("lost answer: %v, served %d (the fake must act)", err, h.served)
	}
	remove()
	if err := check(ctx, c); err != nil || h.served != 3 {
		t.Fatalf("after remove: %v served %d", err, h.served)
	}
	if n := h.Calls("Check"); n != 5 {
		t.Fatalf("Calls = %d, want every call counted (5)", n)
	}
}

func TestHooksChainInOrderAndSeeTheRequest(t *testing.T) {
	h, _, c := start(t)
	ctx := ctxT(t)
	var order []string
	h.On("", 0, func(ctx context.Context, req proto.Message, next fakerpc.Next) (proto.Message, error) {
		order = append(order, "outer:"+req.(*healthpb.HealthCheckRequest).GetService())
		return next()
	})
	h.On("Check", 0, func(ctx context.Context, req proto.Message, next fakerpc.Next) (proto.Message, error) {
		order = append(order, "inner")
		resp, err := next()
		resp.(*healthpb.HealthCheckResponse).Status = healthpb.HealthCheckResponse_NOT_SERVING
		return resp, err
	})
	resp, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: "x"})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("changed answer: %v %v", resp, err)
	}
	if len(order) != 2 || order[0] != "outer:x" || order[1] != "inner" {
		t.Fatalf("order %v", order)
	}
	h.On("Check", 1, fakerpc.Answer(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVICE_UNKNOWN}))
	if resp, err := c.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
		// Answer is innermost here: the earlier hook still rewrites it.
		t.Fatalf("answered: %v %v", resp, err)
	}
}

func TestDelayHangAndRecord(t *testing.T) {
	h, _, c := start(t)
	ctx := ctxT(t)
	h.Record("Check")
	h.On("Check", 1, fakerpc.Delay(100*time.Millisecond))
	began := time.Now()
	if err := check(ctx, c); err != nil || time.Since(began) < 100*time.Millisecond {
		t.Fatalf("delay: %v after %v", err, time.Since(began))
	}
	h.On("Check", 1, fakerpc.DelayAnswer(50*time.Millisecond))
	if err := check(ctx, c); err != nil || h.served != 2 {
		t.Fatalf("delayed answer: %v served %d", err, h.served)
	}
	h.On("Check", 1, fakerpc.Hang())
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := check(short, c); err == nil {
		t.Fatal("a hung call answered")
	}
	if reqs := h.Requests("Check"); len(reqs) != 3 || reqs[0].(*healthpb.HealthCheckRequest).GetService() != "x" {
		t.Fatalf("recorded %v", reqs)
	}
}

func TestStreamHookEndsTheStream(t *testing.T) {
	h, _, c := start(t)
	ctx := ctxT(t)
	h.On("Watch", 1, fakerpc.Fail(errcode.NoRaftLeader.New("no stream for you")))
	s, err := c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = s.Recv()
	}
	if !errors.Is(err, errcode.NoRaftLeader) {
		t.Fatalf("stream: %v", err)
	}
	s, err = c.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := s.Recv(); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("second stream: %v %v", resp, err)
	}
	if n := h.Calls("Watch"); n != 2 {
		t.Fatalf("Calls(Watch) = %d", n)
	}
}

func TestCallersAndStop(t *testing.T) {
	_, srv, c := start(t, pki.RolePartitiond)
	ctx := ctxT(t)
	if err := check(ctx, c); !errors.Is(err, errcode.PeerRoleForbidden) {
		t.Fatalf("a gateway may not call a fake open to partitiond only: %v", err)
	}
	srv.Stop()
	srv.Stop()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := check(short, c); err == nil {
		t.Fatal("a stopped fake answered")
	}
}

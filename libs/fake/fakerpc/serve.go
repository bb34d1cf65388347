package fakerpc

import (
	"context"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	"github.com/strataio/strata/libs/rpc"
)

// Options says who a fake is and who may call it.
type Options struct {
	// Role and ID name the fake's server certificate (issued by the test CA).
	Role pki.Role
	ID   string
	// Callers are the roles allowed to call every method; empty allows every
	// known role.
	Callers []pki.Role
	// Telemetry traces the fake's server side (zero: off).
	Telemetry rpc.Telemetry
}

// Service is one fake service to serve: its generated descriptor, the
// implementation, and the controls every call passes through.
type Service struct {
	Desc     *grpc.ServiceDesc
	Impl     any
	Controls *Controls
}

// Server is a running fake server. Fakes embed it, so a test calls Addr,
// Stop and Dial on the fake itself.
type Server struct {
	// Addr is the loopback host:port the fake listens on.
	Addr string

	ca   *pkitest.PKI
	role pki.Role
	srv  *rpc.Server
	done chan struct{}
	once sync.Once
}

// Serve runs svcs on one mTLS gRPC server on 127.0.0.1 (a fresh port) with
// a certificate of o.Role/o.ID from ca, allowing o.Callers to call every
// method. The server stops at the end of the test (t.Cleanup) or at Stop.
func Serve(t testing.TB, ca *pkitest.PKI, o Options, svcs ...Service) *Server {
	t.Helper()
	callers := o.Callers
	if len(callers) == 0 {
		callers = pki.KnownRoles
	}
	policy := rpc.Policy{}
	srv, err := rpc.NewServer(rpc.ServerOptions{Source: ca.Source(t, o.Role, o.ID), Policy: policy, Telemetry: o.Telemetry})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range svcs {
		srv.RegisterService(controlled(s.Desc, s.Controls), s.Impl)
	}
	for svc, info := range srv.GetServiceInfo() {
		for _, m := range info.Methods {
			policy["/"+svc+"/"+m.Name] = callers
		}
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: lis.Addr().String(), ca: ca, role: o.Role, srv: srv, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(s.Stop)
	return s
}

// Stop closes the listener and every connection at once, as when the node
// dies; calls in flight fail. It returns when the server has stopped and
// may be called more than once.
func (s *Server) Stop() {
	s.once.Do(func() {
		s.srv.Stop()
		<-s.done
	})
}

// Dial connects to the fake as a caller of role as (a certificate for node
// "<as>-caller" from the fake's CA); the connection is closed at the end of
// the test.
func (s *Server) Dial(t testing.TB, as pki.Role) rpc.Conn {
	t.Helper()
	conn, err := rpc.Dial(s.Addr, rpc.ClientOptions{Source: s.ca.Source(t, as, string(as)+"-caller"), ServerRoles: []pki.Role{s.role}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// controlled returns a copy of desc whose handlers pass every unary call
// and every received stream message through c before the implementation.
func controlled(desc *grpc.ServiceDesc, c *Controls) *grpc.ServiceDesc {
	if c == nil {
		c = &Controls{}
	}
	out := *desc
	out.Methods = make([]grpc.MethodDesc, len(desc.Methods))
	for i, m := range desc.Methods {
		out.Methods[i] = grpc.MethodDesc{MethodName: m.MethodName, Handler: controlledUnary(m.Handler, c)}
	}
	out.Streams = make([]grpc.StreamDesc, len(desc.Streams))
	for i, sd := range desc.Streams {
		h := sd.Handler
		full := "/" + desc.ServiceName + "/" + sd.StreamName
		sd.Handler = func(srv any, stream grpc.ServerStream) error {
			return h(srv, &controlledStream{ServerStream: stream, c: c, method: full})
		}
		out.Streams[i] = sd
	}
	return &out
}

// controlledUnary wraps a generated unary handler: the server's own
// interceptors (policy, typed errors) run first, then the controls, then
// the implementation. A generated handler decodes the request and hands it
// to the interceptor it is given, so the controls go in as the innermost
// interceptor.
func controlledUnary(h grpc.MethodHandler, c *Controls) grpc.MethodHandler {
	return func(srv any, ctx context.Context, dec func(any) error, outer grpc.UnaryServerInterceptor) (any, error) {
		controls := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, impl grpc.UnaryHandler) (any, error) {
			resp, err := c.Intercept(ctx, info.FullMethod, req.(proto.Message), func() (proto.Message, error) {
				r, err := impl(ctx, req)
				m, _ := r.(proto.Message)
				return m, err
			})
			if resp == nil {
				return nil, err // a nil proto.Message must not become a non-nil any
			}
			return resp, err
		}
		if outer == nil {
			return h(srv, ctx, dec, controls)
		}
		return h(srv, ctx, dec, func(ctx context.Context, req any, info *grpc.UnaryServerInfo, impl grpc.UnaryHandler) (any, error) {
			return outer(ctx, req, info, func(ctx context.Context, req any) (any, error) { return controls(ctx, req, info, impl) })
		})
	}
}

// controlledStream passes every message the client sends through the
// controls.
type controlledStream struct {
	grpc.ServerStream
	c      *Controls
	method string
}

// RecvMsg receives the next message and runs it through the controls: a
// hook's error is the stream handler's receive error. A hook that answers a
// message itself (a response, no error) has that response sent on the
// stream in the message's place; the message never reaches the fake, which
// receives the next one. The answer is sent from the receiving goroutine,
// so this suits streams whose handler sends from that goroutine too (a
// request/response stream such as Produce).
func (s *controlledStream) RecvMsg(m any) error {
	for {
		if err := s.ServerStream.RecvMsg(m); err != nil {
			return err
		}
		answer, err := s.c.Intercept(s.Context(), s.method, m.(proto.Message), func() (proto.Message, error) { return nil, nil })
		if err != nil || answer == nil {
			return err
		}
		if err := s.ServerStream.SendMsg(answer); err != nil {
			return err
		}
	}
}

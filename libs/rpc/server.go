package rpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pki"
)

// MaxMessageSize bounds every internal gRPC message: a Wire v2 payload may be
// up to 267,108,864 bytes (spec section 8) plus framing.
const MaxMessageSize = 272 << 20

// Transport sizes for every internal connection (server and client side).
// Strata's data path sends megabyte batches over one long-lived stream per
// peer (the gateway's produce mux, fetches), so the defaults (64 KiB windows
// grown by BDP probing, 32 KiB buffers flushed per HTTP/2 frame) stall the
// stream on flow control and pay a write syscall per 32 KiB. Static windows
// let a few batches be in flight per stream while still bounding what a
// peer may make us buffer (StreamWindow per stream, ConnWindow per
// connection); a larger write buffer cuts flushes, and the shared write
// buffer gives an idle connection's buffer back between flushes so many
// quiet connections do not pin memory.
//
// No read buffer (ReadBufferSize 0: gRPC's framer reads the connection
// directly): every internal connection is TLS, and crypto/tls returns at
// most one decrypted record per Read whatever the caller's buffer size, so
// a bufio.Reader in front saved no syscall and only copied every received
// byte once more, out of its buffer into gRPC's frame buffer.
const (
	StreamWindow    = 8 << 20
	ConnWindow      = 16 << 20
	WriteBufferSize = 256 << 10
	ReadBufferSize  = 0
)

// Policy maps a full gRPC method name ("/pkg.Service/Method") to the peer
// roles allowed to call it. Methods absent from the policy are denied: every
// registered method must have an entry (see CheckPolicy).
type Policy map[string][]pki.Role

// Merge returns a policy holding the entries of every argument.
func Merge(ps ...Policy) Policy {
	out := Policy{}
	for _, p := range ps {
		for k, v := range p {
			out[k] = v
		}
	}
	return out
}

// Telemetry carries the tracing setup for stats handlers. The zero value
// disables tracing (no-op provider).
type Telemetry struct {
	TracerProvider trace.TracerProvider
	Propagator     propagation.TextMapPropagator
}

// off reports whether t traces nothing: its provider is OpenTelemetry's
// no-op one (telemetry.Disabled). otelgrpc's handlers then record no span;
// what they still do is carry a caller's trace context and baggage on, so
// the direct path skips them only for calls without either (linkConn.begin).
// A nil provider means the global one, which may trace.
func (t Telemetry) off() bool {
	_, ok := t.TracerProvider.(tracenoop.TracerProvider)
	return ok
}

func (t Telemetry) options() []otelgrpc.Option {
	opts := []otelgrpc.Option{otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider())}
	if t.TracerProvider != nil {
		opts = append(opts, otelgrpc.WithTracerProvider(t.TracerProvider))
	}
	if t.Propagator != nil {
		opts = append(opts, otelgrpc.WithPropagators(t.Propagator))
	}
	return opts
}

// ServerOptions configures NewServer.
type ServerOptions struct {
	// Source supplies the server certificate and the CA verifying clients.
	Source *pki.Source
	// Policy is the per-method role policy (required).
	Policy    Policy
	Logger    *slog.Logger
	Telemetry Telemetry
	// Metrics, when set, records per-method request counts and latency.
	Metrics *Metrics
}

// Server is a gRPC server with mTLS, the role policy, recovery, typed-error
// conversion and tracing, which also serves in-process callers directly
// once registered with Links.Register (see direct.go). Register services
// on it, call CheckPolicy, then Serve.
type Server struct {
	*grpc.Server
	direct
}

// NewServer builds a Server. Register services on it, then call
// CheckPolicy before serving.
func NewServer(o ServerOptions) (*Server, error) {
	if o.Source == nil {
		return nil, errors.New("rpc: server needs a certificate source")
	}
	if o.Policy == nil {
		return nil, errors.New("rpc: server needs a role policy")
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	in := interceptors{policy: o.Policy, log: log, metrics: o.Metrics}
	st := otelgrpc.NewServerHandler(o.Telemetry.options()...)
	s := &Server{Server: grpc.NewServer(
		grpc.Creds(batchedTLS{credentials.NewTLS(o.Source.ServerConfig())}),
		grpc.StatsHandler(st),
		grpc.ChainUnaryInterceptor(in.unary),
		grpc.ChainStreamInterceptor(in.stream),
		grpc.MaxRecvMsgSize(MaxMessageSize),
		grpc.MaxSendMsgSize(MaxMessageSize),
		grpc.InitialWindowSize(StreamWindow),
		grpc.InitialConnWindowSize(ConnWindow),
		grpc.WriteBufferSize(WriteBufferSize),
		grpc.ReadBufferSize(ReadBufferSize),
		grpc.SharedWriteBuffer(true),
		experimental.BufferPool(transportPool),
		grpc.ForceServerCodecV2(codec{}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	)}
	s.direct.init(o.Source, in, st, o.Telemetry.off())
	return s, nil
}

// RegisterService registers impl for gRPC and for in-process callers.
func (s *Server) RegisterService(desc *grpc.ServiceDesc, impl any) {
	s.Server.RegisterService(desc, impl) // checks impl and refuses after Serve
	s.direct.register(desc, impl)
}

// Serve serves lis over gRPC and, from its first call on, in-process
// callers (who wait until then).
func (s *Server) Serve(lis net.Listener) error {
	s.direct.open()
	return s.Server.Serve(lis)
}

// GracefulStop refuses new calls, in process and over gRPC, and waits for
// the calls in flight to finish.
func (s *Server) GracefulStop() {
	s.direct.refuse()
	s.Server.GracefulStop()
	s.direct.drained()
}

// Stop refuses new calls and ends every call in flight at once: in-process
// callers get unavailable, as gRPC's callers do when their connection
// closes, and handlers see their context cancelled. Like grpc.Server.Stop
// it does not wait for handlers to return.
func (s *Server) Stop() {
	s.direct.kill()
	s.Server.Stop()
}

// CheckPolicy fails when a method registered on srv has no policy entry, or
// a policy entry names no registered method (a typo would deny silently).
func CheckPolicy(srv interface {
	GetServiceInfo() map[string]grpc.ServiceInfo
}, p Policy) error {
	registered := map[string]bool{}
	var missing []string
	for svc, info := range srv.GetServiceInfo() {
		for _, m := range info.Methods {
			full := "/" + svc + "/" + m.Name
			registered[full] = true
			if _, ok := p[full]; !ok {
				missing = append(missing, full)
			}
		}
	}
	var unknown []string
	for full := range p {
		if !registered[full] {
			unknown = append(unknown, full)
		}
	}
	sort.Strings(missing)
	sort.Strings(unknown)
	if len(missing) > 0 || len(unknown) > 0 {
		return fmt.Errorf("rpc: policy mismatch: methods without policy %v; policy entries without method %v", missing, unknown)
	}
	return nil
}

type identityKey struct{}

// PeerIdentity returns the verified identity of the caller of the current
// RPC, as checked by the policy interceptor.
func PeerIdentity(ctx context.Context) (pki.Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(pki.Identity)
	return id, ok
}

type interceptors struct {
	policy  Policy
	log     *slog.Logger
	metrics *Metrics
}

// authorize checks the caller's certificate role against the policy before
// the handler runs.
func (in interceptors) authorize(ctx context.Context, method string) (context.Context, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ctx, errcode.PeerRoleForbidden.New("no peer information", "method", method)
	}
	tlsInfo, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return ctx, errcode.PeerRoleForbidden.New("connection is not mutual TLS", "method", method)
	}
	id, err := pki.PeerIdentity(tlsInfo.State)
	if err != nil {
		return ctx, errcode.PeerRoleForbidden.New(err.Error(), "method", method)
	}
	allowed, ok := in.policy[method]
	if !ok {
		return ctx, errcode.PeerRoleForbidden.New("method has no role policy", "method", method, "role", string(id.Role))
	}
	for _, r := range allowed {
		if r == id.Role {
			return context.WithValue(ctx, identityKey{}, id), nil
		}
	}
	return ctx, errcode.PeerRoleForbidden.New("role may not call method", "method", method, "role", string(id.Role))
}

func (in interceptors) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	start := time.Now()
	defer func() {
		if r := recover(); r != nil {
			in.log.ErrorContext(ctx, "panic in rpc handler", "method", info.FullMethod, "panic", r, "stack", string(debug.Stack()))
			err = errcode.Internal.New(fmt.Sprintf("panic in %s", info.FullMethod))
		}
		in.metrics.observe(info.FullMethod, err, time.Since(start))
		err = errcode.ToStatus(err)
	}()
	ctx, err = in.authorize(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

type authedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *authedStream) Context() context.Context { return s.ctx }

func (in interceptors) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	start := time.Now()
	defer func() {
		if r := recover(); r != nil {
			in.log.Error("panic in rpc stream handler", "method", info.FullMethod, "panic", r, "stack", string(debug.Stack()))
			err = errcode.Internal.New(fmt.Sprintf("panic in %s", info.FullMethod))
		}
		in.metrics.observe(info.FullMethod, err, time.Since(start))
		err = errcode.ToStatus(err)
	}()
	ctx, err := in.authorize(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	return handler(srv, &authedStream{ServerStream: ss, ctx: ctx})
}

// shortMethod turns "/strata.meta.v1.MetadataService/CreateTopic" into
// "MetadataService/CreateTopic" for metric labels.
func shortMethod(full string) string {
	full = strings.TrimPrefix(full, "/")
	svc, m, ok := strings.Cut(full, "/")
	if !ok {
		return full
	}
	if i := strings.LastIndexByte(svc, '.'); i >= 0 {
		svc = svc[i+1:]
	}
	return svc + "/" + m
}

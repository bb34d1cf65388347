package rpc

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/pki"
)

// direct is the in-process side of a Server: the registered handlers,
// called with Go values by clients of the same process (linkConn), behind
// the same interceptors (role policy, recovery, metrics, typed errors) and
// the same OpenTelemetry stats handler as gRPC calls.
//
// A unary call runs its handler on the caller's goroutine. The request is
// copied into the handler's message once (proto.Merge: the handler may keep
// or change it, the caller may reuse its own), and the answer is copied into
// the caller's (the handler may keep its answer), except where handOver
// proves the copy unneeded. A stream runs its handler on a goroutine of its
// own, as gRPC does, with a bounded queue per direction (queue).
//
// Lifecycle, as gRPC's: calls wait until Serve; GracefulStop refuses new
// calls with unavailable and waits for those in flight; Stop also ends the
// calls in flight (callers get unavailable, handlers a cancelled context).
type direct struct {
	src     *pki.Source
	in      interceptors
	stats   stats.Handler
	quiet   bool     // the server does not trace (Telemetry.off): see linkConn.quiet
	addr    linkAddr // set by Links.Register
	methods map[string]*directMethod

	mu      sync.Mutex
	state   directState
	down    atomic.Bool        // state is stateStopped (read without mu by bindings)
	ready   chan struct{}      // closed when serving or stopping
	calls   map[*call]struct{} // in flight
	drainCh chan struct{}      // closed when draining and calls is empty, or killed
}

type directState uint8

const (
	stateIdle directState = iota
	stateServing
	stateDraining
	stateStopped
)

type directMethod struct {
	impl   any
	unary  grpc.MethodHandler // nil for a stream
	stream *grpc.StreamDesc
	info   *grpc.StreamServerInfo
}

// call is one in-process call in flight on a server.
type call struct {
	cancel context.CancelFunc
	stream *dstream // nil for a unary call
	killed bool     // ended by Stop (under direct.mu)
}

func (d *direct) init(src *pki.Source, in interceptors, st stats.Handler, quiet bool) {
	d.src, d.in, d.stats, d.quiet = src, in, st, quiet
	d.methods = map[string]*directMethod{}
	d.ready = make(chan struct{})
	d.calls = map[*call]struct{}{}
	d.drainCh = make(chan struct{})
}

// register records desc's handlers. The map is not locked: registration
// happens before Serve (gRPC panics otherwise), and calls read it only
// after ready, which Serve closes.
func (d *direct) register(desc *grpc.ServiceDesc, impl any) {
	for _, m := range desc.Methods {
		d.methods["/"+desc.ServiceName+"/"+m.MethodName] = &directMethod{impl: impl, unary: m.Handler}
	}
	for i := range desc.Streams {
		sd := &desc.Streams[i]
		full := "/" + desc.ServiceName + "/" + sd.StreamName
		d.methods[full] = &directMethod{impl: impl, stream: sd,
			info: &grpc.StreamServerInfo{FullMethod: full, IsClientStream: sd.ClientStreams, IsServerStream: sd.ServerStreams}}
	}
}

func (d *direct) open() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state == stateIdle {
		d.state = stateServing
		close(d.ready)
	}
}

func (d *direct) refuse() {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch d.state {
	case stateIdle:
		close(d.ready)
		fallthrough
	case stateServing:
		d.state = stateDraining
		d.checkDrained()
	}
}

// checkDrained closes drainCh once a draining server has no call left.
// d.mu held.
func (d *direct) checkDrained() {
	if d.state == stateDraining && len(d.calls) == 0 {
		close(d.drainCh)
		d.state = stateStopped
		d.down.Store(true)
	}
}

func (d *direct) drained() { <-d.drainCh }

func (d *direct) kill() {
	d.mu.Lock()
	if d.state == stateIdle {
		close(d.ready)
	}
	if d.state != stateStopped {
		close(d.drainCh)
	}
	d.state = stateStopped
	d.down.Store(true)
	calls := make([]*call, 0, len(d.calls))
	for c := range d.calls {
		c.killed = true
		calls = append(calls, c)
	}
	d.mu.Unlock()
	for _, c := range calls {
		if c.stream != nil {
			c.stream.abort(errServerStopped, errServerStopped)
		}
		c.cancel()
	}
}

// errServerStopped is what a caller gets from a server that stopped: the
// unavailable status of a closed gRPC connection.
var errServerStopped = status.Error(codes.Unavailable, "error reading from server: in-process server stopped")

// enter admits a call: it waits (bounded by ctx) until the server serves,
// and refuses it once the server drains or stopped.
func (d *direct) enter(ctx context.Context, c *call) error {
	select {
	case <-d.ready:
	default:
		select {
		case <-d.ready:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.state != stateServing {
		return errServerStopped
	}
	d.calls[c] = struct{}{}
	return nil
}

// leave ends a call; it reports whether Stop killed it.
func (d *direct) leave(c *call) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.calls, c)
	d.checkDrained()
	return c.killed
}

// detached is the base of a handler's context: the caller's deadline and
// cancellation, none of its values. A handler over gRPC sees only what
// crossed the wire (metadata, deadline, trace context), not the caller's
// context values (its outgoing metadata, its own peer and identity, its
// spans); so does a direct handler. AfterFunc lets context.WithCancel tie
// a child to the caller's context without a goroutine.
type detached struct {
	context.Context // values: context.Background
	caller          context.Context
}

func (d *detached) Deadline() (time.Time, bool)    { return d.caller.Deadline() }
func (d *detached) Done() <-chan struct{}          { return d.caller.Done() }
func (d *detached) Err() error                     { return d.caller.Err() }
func (d *detached) AfterFunc(f func()) func() bool { return context.AfterFunc(d.caller, f) }

// unknown is gRPC's answer to a method the server does not have.
func (d *direct) unknown(method string) error {
	svc, name, _ := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	for full := range d.methods {
		if strings.HasPrefix(full, "/"+svc+"/") {
			return status.Errorf(codes.Unimplemented, "unknown method %v for service %v", name, svc)
		}
	}
	return status.Errorf(codes.Unimplemented, "unknown service %v", svc)
}

// callContext returns the cancellable base of a handler's context for a
// call from ctx: the caller's deadline and cancellation, none of its
// values.
func callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithCancel(&detached{Context: context.Background(), caller: ctx})
}

// serverContext completes base into the handler context of a call from
// ctx over b: the verified caller as peer, the caller's outgoing metadata
// as incoming metadata (the trace context among it), and the server's
// trace span (when traced).
func (d *direct) serverContext(base, ctx context.Context, b *binding, method string, traced bool) context.Context {
	sctx := peer.NewContext(base, b.serverPeer)
	md, _ := metadata.FromOutgoingContext(ctx)
	if md != nil {
		sctx = metadata.NewIncomingContext(sctx, md)
	}
	if !traced {
		// What otelgrpc's server handler leaves in the context when it
		// has nothing to extract and a no-op tracer: an empty remote span
		// context.
		return trace.ContextWithRemoteSpanContext(sctx, trace.SpanContext{})
	}
	sctx = d.stats.TagRPC(sctx, &stats.RPCTagInfo{FullMethodName: method})
	d.stats.HandleRPC(sctx, &stats.InHeader{FullMethod: method, RemoteAddr: linkClientAddr, LocalAddr: d.addr, Header: md})
	return sctx
}

// invoke runs a unary call from ctx (the client's context, with its span)
// and fills reply. It returns the status error the caller sees. traced
// says whether the client's stats handler saw the call; the server's sees
// it too unless both are quiet.
func (d *direct) invoke(ctx context.Context, b *binding, method string, args, reply any, traced bool) error {
	base, cancel := callContext(ctx)
	defer cancel() // the call is over for the handler's goroutines, as after gRPC sent the answer
	c := &call{cancel: cancel}
	if err := d.enter(ctx, c); err != nil {
		return err
	}
	m := d.methods[method]
	if m == nil || m.unary == nil {
		d.leave(c)
		return d.unknown(method)
	}
	traced = traced || !d.quiet
	begin := time.Now()
	sctx := d.serverContext(base, ctx, b, method, traced)
	resp, err := m.unary(m.impl, sctx, func(in any) error {
		proto.Merge(in.(proto.Message), args.(proto.Message))
		return nil
	}, d.in.unary)
	cancel()
	if _, ok := resp.(proto.Message); !ok && err == nil {
		// What gRPC's codec answers for a nil interface; a nil message
		// of the right type goes out as an empty one.
		err = status.Errorf(codes.Internal, "grpc: error while marshaling: rpc codec: cannot marshal %T: not a proto.Message", resp)
	}
	if traced {
		d.stats.HandleRPC(sctx, &stats.End{BeginTime: begin, EndTime: time.Now(), Error: err})
	}
	switch {
	case d.leave(c):
		// Stopped meanwhile: the caller's connection closed under it.
		return errServerStopped
	case ctx.Err() != nil:
		// The caller gave up before the answer, as a gRPC caller returns
		// at its deadline whatever the handler still does.
		return status.FromContextError(ctx.Err()).Err()
	case err != nil:
		return err
	}
	handOver(reply.(proto.Message), resp.(proto.Message))
	return nil
}

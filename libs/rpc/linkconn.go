package rpc

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/strataio/strata/libs/errcode"
)

// linkConn is Dial's connection with Links: each call goes directly to the
// role of this process registered at the target, or over mTLS (a
// *grpc.ClientConn dialed on first need) when none is.
type linkConn struct {
	target string
	opts   ClientOptions
	stats  stats.Handler // otelgrpc's client handler, as the gRPC path has
	// quiet: the process does not trace (Telemetry.off), so a call whose
	// context carries no trace context or baggage skips the stats
	// handlers, which could produce nothing from it.
	quiet bool

	bound atomic.Pointer[binding]

	mu      sync.Mutex
	tcp     *grpc.ClientConn
	streams map[*clientStream]struct{}
	closed  bool
}

func newLinkConn(target string, o ClientOptions) *linkConn {
	return &linkConn{target: target, opts: o, stats: otelgrpc.NewClientHandler(o.Telemetry.options()...),
		quiet: o.Telemetry.off(), streams: map[*clientStream]struct{}{}}
}

var errConnClosing = status.Error(codes.Canceled, "grpc: the client connection is closing")

// bind returns the binding to the in-process server at the target, nil
// when no role of this process registered it. A binding to a stopped
// server is replaced once another server registered the address.
func (c *linkConn) bind() (*binding, error) {
	b := c.bound.Load()
	if b != nil && !b.srv.down.Load() {
		return b, nil
	}
	srv := c.opts.Links.lookup(c.target)
	if srv == nil {
		return nil, nil
	}
	if b != nil && b.srv == srv {
		return b, nil
	}
	nb, err := handshake(c, srv)
	if err != nil {
		return nil, err
	}
	c.bound.CompareAndSwap(b, nb)
	return nb, nil
}

// tcpConn returns the mTLS connection for a target outside this process.
func (c *linkConn) tcpConn() (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errConnClosing
	}
	if c.tcp == nil {
		o := c.opts
		o.Links = nil
		tc, err := dialTCP(c.target, o)
		if err != nil {
			return nil, err
		}
		c.tcp = tc
	}
	return c.tcp, nil
}

func (c *linkConn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// begin starts the client side of a direct call as gRPC's client does:
// otelgrpc's client span (which also puts the trace context into the
// outgoing metadata) and its header event. traced is false when the call
// skips the stats handlers (quiet).
func (c *linkConn) begin(ctx context.Context, method string, b *binding, clientStream, serverStream bool) (_ context.Context, begin time.Time, traced bool) {
	if c.quiet && !trace.SpanContextFromContext(ctx).IsValid() && baggage.FromContext(ctx).Len() == 0 {
		return ctx, time.Time{}, false
	}
	ctx = c.stats.TagRPC(ctx, &stats.RPCTagInfo{FullMethodName: method, FailFast: true})
	begin = time.Now()
	c.stats.HandleRPC(ctx, &stats.Begin{Client: true, BeginTime: begin, FailFast: true, IsClientStream: clientStream, IsServerStream: serverStream})
	if b != nil {
		md, _ := metadata.FromOutgoingContext(ctx)
		c.stats.HandleRPC(ctx, &stats.OutHeader{Client: true, FullMethod: method, RemoteAddr: b.srv.addr, LocalAddr: linkClientAddr, Header: md})
	}
	return ctx, begin, true
}

// end is the client's end event of a traced call.
func (c *linkConn) end(ctx context.Context, traced bool, begin time.Time, err error) {
	if traced {
		c.stats.HandleRPC(ctx, &stats.End{Client: true, BeginTime: begin, EndTime: time.Now(), Error: err})
	}
}

// Invoke makes a unary call: directly when a role of this process serves
// the target, else over mTLS.
func (c *linkConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	b, herr := c.bind()
	if b == nil && herr == nil {
		tc, err := c.tcpConn()
		if err != nil {
			return errcode.FromStatus(err)
		}
		return tc.Invoke(ctx, method, args, reply, opts...)
	}
	ctx, begin, traced := c.begin(ctx, method, b, false, false)
	err := herr
	switch {
	case err != nil:
	case c.isClosed():
		err = errConnClosing
	default:
		err = b.srv.invoke(ctx, b, method, args, reply, traced)
		applyCallOptions(opts, b)
	}
	c.end(ctx, traced, begin, err)
	if err != nil {
		return errcode.FromStatus(err)
	}
	return nil
}

// applyCallOptions fills the call options that report on a call: the peer
// (the server's verified identity) and empty header and trailer (direct
// unary handlers have no transport stream to set them on).
func applyCallOptions(opts []grpc.CallOption, b *binding) {
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.PeerCallOption:
			*o.PeerAddr = *b.clientPeer
		case grpc.HeaderCallOption:
			*o.HeaderAddr = metadata.MD{}
		case grpc.TrailerCallOption:
			*o.TrailerAddr = metadata.MD{}
		}
	}
}

// NewStream opens a stream: directly when a role of this process serves
// the target, else over mTLS.
func (c *linkConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	b, herr := c.bind()
	if b == nil && herr == nil {
		tc, err := c.tcpConn()
		if err != nil {
			return nil, errcode.FromStatus(err)
		}
		return tc.NewStream(ctx, desc, method, opts...)
	}
	ctx, begin, traced := c.begin(ctx, method, b, desc.ClientStreams, desc.ServerStreams)
	fail := func(err error) (grpc.ClientStream, error) {
		c.end(ctx, traced, begin, err)
		return nil, errcode.FromStatus(err)
	}
	if herr != nil {
		return fail(herr)
	}
	if err := ctx.Err(); err != nil {
		return fail(status.FromContextError(err).Err())
	}
	if c.isClosed() {
		return fail(errConnClosing)
	}
	st, err := b.srv.startStream(ctx, b, method, traced)
	if err != nil {
		return fail(err)
	}
	cs := &clientStream{st: st, ctx: ctx, conn: c, begin: begin, traced: traced, clientStreams: desc.ClientStreams}
	cs.watch(context.AfterFunc(ctx, cs.callerDone))
	c.mu.Lock()
	closed := c.closed
	if !closed {
		c.streams[cs] = struct{}{}
	}
	c.mu.Unlock()
	if closed {
		cs.fail(errConnClosing)
	}
	applyCallOptions(opts, b)
	return cs, nil
}

func (c *linkConn) forget(cs *clientStream) {
	c.mu.Lock()
	delete(c.streams, cs)
	c.mu.Unlock()
}

// Close ends the connection's streams (their callers get cancelled, as
// gRPC's do) and closes its mTLS connection, if any.
func (c *linkConn) Close() error {
	c.mu.Lock()
	c.closed = true
	streams := make([]*clientStream, 0, len(c.streams))
	for cs := range c.streams {
		streams = append(streams, cs)
	}
	tc := c.tcp
	c.mu.Unlock()
	for _, cs := range streams {
		cs.fail(errConnClosing)
	}
	if tc != nil {
		return tc.Close()
	}
	return nil
}

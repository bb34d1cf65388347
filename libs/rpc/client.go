package rpc

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/keepalive"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pki"
)

// ClientOptions configures Dial.
type ClientOptions struct {
	// Source supplies the client certificate and the CA verifying servers.
	Source *pki.Source
	// ServerRoles restricts the identities the server may present (any role
	// when empty).
	ServerRoles []pki.Role
	Logger      *slog.Logger
	Telemetry   Telemetry
	// Links, when set, calls roles of this process directly (see Links);
	// other targets still use mTLS over TCP.
	Links *Links
}

// Conn is a client connection to one internal address: what generated
// clients take (grpc.ClientConnInterface) and Close. Dial returns a
// *grpc.ClientConn over mTLS, or with Links a connection that calls roles of
// this process directly and other addresses over mTLS.
type Conn interface {
	grpc.ClientConnInterface
	Close() error
}

// Dial creates a client connection to target (host:port) with mTLS, tracing
// and typed-error conversion: errors returned by calls and stream
// operations are *errcode.Error values. The connection is lazy; the first
// call connects. With o.Links, calls to a role of this process that
// registered target go to it directly (see Links).
func Dial(target string, o ClientOptions) (Conn, error) {
	if o.Source == nil {
		return nil, errors.New("rpc: client needs a certificate source")
	}
	if o.Links != nil {
		return newLinkConn(target, o), nil
	}
	return dialTCP(target, o)
}

func dialTCP(target string, o ClientOptions) (*grpc.ClientConn, error) {
	if !strings.Contains(target, "://") {
		// passthrough: the dialer resolves the name on every connection
		// attempt. gRPC's dns resolver caches the last answer, and when a
		// container restarts, Docker's DNS answers NXDOMAIN meanwhile; the
		// resolver takes that as zero addresses and backs off up to 120 s,
		// so fail-fast calls answered "produced zero addresses" long after
		// the peer was back. Every target here is one node, so there is
		// nothing for the resolver to balance.
		target = "passthrough:///" + target
	}
	return grpc.NewClient(target,
		grpc.WithConnectParams(connectParams),
		grpc.WithTransportCredentials(batchedTLS{credentials.NewTLS(o.Source.ClientConfig(o.ServerRoles...))}),
		grpc.WithStatsHandler(otelgrpc.NewClientHandler(o.Telemetry.options()...)),
		grpc.WithChainUnaryInterceptor(typedUnary),
		grpc.WithChainStreamInterceptor(typedStream),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageSize), grpc.MaxCallSendMsgSize(MaxMessageSize), grpc.ForceCodecV2(codec{})),
		grpc.WithInitialWindowSize(StreamWindow),
		grpc.WithInitialConnWindowSize(ConnWindow),
		grpc.WithWriteBufferSize(WriteBufferSize),
		grpc.WithReadBufferSize(ReadBufferSize),
		grpc.WithSharedWriteBuffer(true),
		experimental.WithBufferPool(transportPool),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 20 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}),
	)
}

// connectParams bound the reconnect backoff to a peer. gRPC's default grows
// to 120 s, which would keep a restarted node unreachable for minutes; peers
// inside a cluster come back in seconds (Kafka caps its reconnect backoff at
// 1 s for the same reason).
var connectParams = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
	MinConnectTimeout: 5 * time.Second,
}

func typedUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
		return errcode.FromStatus(err)
	}
	return nil
}

func typedStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, errcode.FromStatus(err)
	}
	return typedClientStream{s}, nil
}

type typedClientStream struct{ grpc.ClientStream }

func (s typedClientStream) SendMsg(m any) error { return typed(s.ClientStream.SendMsg(m)) }
func (s typedClientStream) RecvMsg(m any) error { return typed(s.ClientStream.RecvMsg(m)) }

// typed keeps io.EOF (normal stream end) and converts everything else.
func typed(err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return err
	}
	return errcode.FromStatus(err)
}

// Pool caches one client connection per target address, for callers that
// talk to many peers (gateway → partitiond nodes).
type Pool struct {
	opts ClientOptions

	mu     sync.Mutex
	conns  map[string]Conn
	closed bool
}

// NewPool returns an empty pool dialing with opts.
func NewPool(opts ClientOptions) *Pool {
	return &Pool{opts: opts, conns: map[string]Conn{}}
}

// Get returns the cached connection to target, dialing it on first use.
func (p *Pool) Get(target string) (Conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errcode.RouterNotAvailable.New("connection pool closed")
	}
	if c, ok := p.conns[target]; ok {
		return c, nil
	}
	c, err := Dial(target, p.opts)
	if err != nil {
		return nil, err
	}
	p.conns[target] = c
	return c, nil
}

// Close closes every cached connection.
func (p *Pool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	var errs []error
	for k, c := range p.conns {
		errs = append(errs, c.Close())
		delete(p.conns, k)
	}
	return errors.Join(errs...)
}

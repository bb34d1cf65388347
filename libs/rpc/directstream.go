package rpc

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

var (
	errSendAfterClose = status.Error(codes.Internal, "SendMsg called after CloseSend")
	// errHandlerDone is what a client's SendMsg meets once the handler
	// returned: gRPC's io.EOF, with the status left to RecvMsg.
	errHandlerDone = errors.New("rpc: stream handler returned")
)

// dstream is one in-process stream: two bounded queues (client to server,
// server to client), the handler's goroutine, and the client's view.
//
// Ends, as over gRPC: the client's CloseSend ends the handler's RecvMsg
// with io.EOF once it took every message; the handler's return ends the
// client's RecvMsg with io.EOF (nil error) or the handler's status after
// the messages it sent, and makes the client's SendMsg return io.EOF; the
// client's context ending (cancel, deadline) or the client connection
// closing fails both directions at once (the handler's context is
// cancelled, its RecvMsg and SendMsg fail, the client gets the context's
// status); Stop fails both with unavailable.
type dstream struct {
	c2s, s2c *queue
	call     *call

	// header: what the handler set with SetHeader/SendHeader, sent at its
	// first SendMsg or SendHeader or when it returns.
	hmu        sync.Mutex
	header     metadata.MD
	trailer    metadata.MD
	headerSent chan struct{}
	headerOnce sync.Once
}

func (st *dstream) sendHeader() {
	st.headerOnce.Do(func() { close(st.headerSent) })
}

// abort fails both directions at once.
func (st *dstream) abort(clientErr, serverErr error) {
	st.s2c.fail(clientErr, serverErr)
	st.c2s.fail(serverErr, io.EOF)
	st.sendHeader()
}

// startStream admits a stream call from ctx over b and starts its handler.
func (d *direct) startStream(ctx context.Context, b *binding, method string, traced bool) (*dstream, error) {
	base, cancel := callContext(ctx)
	st := &dstream{c2s: newQueue(), s2c: newQueue(), headerSent: make(chan struct{})}
	st.call = &call{cancel: cancel, stream: st}
	if err := d.enter(ctx, st.call); err != nil {
		cancel()
		return nil, err
	}
	m := d.methods[method]
	if m == nil || m.stream == nil {
		// gRPC opens the stream and answers its first RecvMsg.
		d.leave(st.call)
		cancel()
		st.c2s.fail(errHandlerDone, errHandlerDone)
		st.s2c.close(d.unknown(method))
		st.sendHeader()
		return st, nil
	}
	traced = traced || !d.quiet
	begin := time.Now()
	sctx := context.WithValue(d.serverContext(base, ctx, b, method, traced), ownedKey{}, true)
	ss := &serverStream{st: st, ctx: sctx}
	go func() {
		err := d.in.stream(m.impl, ss, m.info, m.stream.Handler)
		st.sendHeader()
		// Sends fail before the client can see the end: a client that
		// read the end and sends again gets io.EOF, as over gRPC.
		st.c2s.fail(errHandlerDone, errHandlerDone)
		st.s2c.close(err)
		cancel()
		if traced {
			d.stats.HandleRPC(sctx, &stats.End{BeginTime: begin, EndTime: time.Now(), Error: err})
		}
		d.leave(st.call)
	}()
	return st, nil
}

// serverStream is the grpc.ServerStream a direct stream's handler gets.
type serverStream struct {
	st  *dstream
	ctx context.Context
}

func (s *serverStream) Context() context.Context { return s.ctx }

func (s *serverStream) SetHeader(md metadata.MD) error {
	s.st.hmu.Lock()
	defer s.st.hmu.Unlock()
	select {
	case <-s.st.headerSent:
		return status.Error(codes.Internal, "transport: the stream is done or WriteHeader was already called")
	default:
	}
	s.st.header = metadata.Join(s.st.header, md)
	return nil
}

func (s *serverStream) SendHeader(md metadata.MD) error {
	if err := s.SetHeader(md); err != nil {
		return err
	}
	s.st.sendHeader()
	return nil
}

func (s *serverStream) SetTrailer(md metadata.MD) {
	s.st.hmu.Lock()
	s.st.trailer = metadata.Join(s.st.trailer, md)
	s.st.hmu.Unlock()
}

// SendMsg hands a copy of m to the client: the handler may reuse m.
func (s *serverStream) SendMsg(m any) error {
	s.st.sendHeader()
	c := proto.Clone(m.(proto.Message))
	return s.st.s2c.push(c, proto.Size(c))
}

func (s *serverStream) RecvMsg(m any) error {
	got, err := s.st.c2s.pop()
	if err != nil {
		return err
	}
	move(m.(proto.Message), got)
	return nil
}

// clientStream is the grpc.ClientStream of a direct stream. Its errors are
// typed as typedClientStream's.
type clientStream struct {
	st     *dstream
	ctx    context.Context // the caller's, with its client span
	conn   *linkConn
	begin  time.Time
	traced bool // the stats handlers see this call (linkConn.begin)
	// clientStreams is false for a server-streaming call, whose one
	// request SendMsg never fails (gRPC's rule, which the generated code
	// relies on: RecvMsg reports the stream's end).
	clientStreams bool

	mu      sync.Mutex
	end     error       // the final RecvMsg error, once finished
	unwatch func() bool // unhooks the caller's context
}

// watch keeps the unhook of the caller's context (context.AfterFunc),
// calling it at once when the stream already finished.
func (c *clientStream) watch(stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.end != nil {
		stop()
		return
	}
	c.unwatch = stop
}

func (c *clientStream) Context() context.Context { return c.ctx }

func (c *clientStream) Header() (metadata.MD, error) {
	<-c.st.headerSent
	c.st.hmu.Lock()
	defer c.st.hmu.Unlock()
	return c.st.header.Copy(), nil
}

func (c *clientStream) Trailer() metadata.MD {
	c.st.hmu.Lock()
	defer c.st.hmu.Unlock()
	return c.st.trailer.Copy()
}

func (c *clientStream) CloseSend() error {
	c.st.c2s.close(nil)
	return nil
}

// SendMsg hands a copy of m to the handler (cloneSent): the caller may reuse
// m (the gateway's AppendRequest.Records slice its client's frame buffer). Once the
// stream ended it returns io.EOF (nil for a server-streaming call), as
// gRPC does; RecvMsg then tells why.
func (c *clientStream) SendMsg(m any) error {
	cl := cloneSent(m.(proto.Message))
	err := c.st.c2s.push(cl, proto.Size(cl))
	if !c.clientStreams {
		c.st.c2s.close(nil) // the one request is the last, as gRPC sends it
	}
	if err == errSendAfterClose {
		return typed(err)
	}
	switch {
	case err == nil, !c.clientStreams:
		return nil
	}
	return io.EOF
}

func (c *clientStream) RecvMsg(m any) error {
	c.mu.Lock()
	end := c.end
	c.mu.Unlock()
	if end != nil {
		return typed(end)
	}
	got, err := c.st.s2c.pop()
	if err != nil {
		c.finish(err)
		return typed(err)
	}
	move(m.(proto.Message), got)
	return nil
}

// finish ends the client's side once: err is the stream's end (io.EOF when
// it succeeded).
func (c *clientStream) finish(err error) {
	c.mu.Lock()
	if c.end != nil {
		c.mu.Unlock()
		return
	}
	c.end = err
	unwatch := c.unwatch
	c.mu.Unlock()
	if unwatch != nil {
		unwatch()
	}
	c.conn.forget(c)
	var e error
	if err != io.EOF {
		e = err
	}
	c.conn.end(c.ctx, c.traced, c.begin, e)
}

// fail ends the stream from the client's side when its connection
// closed: both directions fail at once and the handler's context is
// cancelled.
func (c *clientStream) fail(err error) {
	c.st.abort(err, err)
	c.st.call.cancel()
	c.finish(err)
}

// callerDone ends the stream when the caller's context ended. The handler's
// context ends by itself with the same error (deadline or cancel): it is a
// child of the caller's (detached).
func (c *clientStream) callerDone() {
	err := status.FromContextError(c.ctx.Err()).Err()
	c.st.abort(err, err)
	c.finish(err)
}

var _ grpc.ClientStream = (*clientStream)(nil)
var _ grpc.ServerStream = (*serverStream)(nil)

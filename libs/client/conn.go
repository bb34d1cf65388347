package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// frame is one received frame with a payload the connection no longer owns.
type frame struct {
	h       wire.Header
	payload []byte
}

// call is one request waiting for its response frames.
type call struct {
	cmd    uint16
	frames chan frame
	stream bool
}

// conn is one negotiated Wire v2 connection. Requests are pipelined: any
// number may be in flight, each matched to its responses by request id by the
// single reader goroutine, so a slow command does not block a fast one.
type conn struct {
	nc           net.Conn
	codec        wire.Codec
	writeTimeout time.Duration

	nextID atomic.Uint64
	wmu    sync.Mutex

	mu      sync.Mutex
	pending map[uint64]*call
	err     error
	done    chan struct{}
	readerW sync.WaitGroup

	replies *replyPool // reply buffers to read into (Client.Recycle)
}

var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// dialConn connects, negotiates and starts the reader.
func dialConn(ctx context.Context, addr string, o *Options, replies *replyPool) (*conn, error) {
	// TCP keepalive finds a server that vanished without closing the
	// connection (host down, network cut) within about 25 s of silence,
	// where the operating system's default would take minutes; the next
	// call then redials.
	d := net.Dialer{Timeout: o.DialTimeout, KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 10 * time.Second, Interval: 5 * time.Second, Count: 3}}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, connLost("dial", err)
	}
	if o.TLS != nil {
		cfg := o.TLS.Clone()
		if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
			if host, _, err := net.SplitHostPort(addr); err == nil {
				cfg.ServerName = host
			}
		}
		tc := tls.Client(nc, cfg)
		hctx, cancel := context.WithTimeout(ctx, o.DialTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			_ = nc.Close()
			return nil, connLost("tls_handshake", err)
		}
		nc = tc
	}
	c := &conn{
		nc:           nc,
		codec:        wire.Codec{Table: wire.TableA, Limits: wire.PublicLimits},
		writeTimeout: o.WriteTimeout,
		pending:      map[uint64]*call{},
		done:         make(chan struct{}),
		replies:      replies,
	}
	br := bufio.NewReaderSize(nc, 64<<10)
	fr := wire.NewFrameReader(br)
	if err := c.negotiate(ctx, fr, o); err != nil {
		_ = nc.Close()
		return nil, err
	}
	c.readerW.Add(1)
	go c.readLoop(fr)
	if o.Principal != "" {
		r := wire.Request{}
		r.Add("principal", o.Principal)
		r.Add("token", o.Token)
		if _, err := c.roundTrip(ctx, o, wire.CmdAuth, &r, nil, 1); err != nil {
			c.close(err)
			return nil, err
		}
	}
	return c, nil
}

// negotiate runs the handshake synchronously, before the reader starts: the
// negotiation frame is never compressed and the answer decides the codec.
func (c *conn) negotiate(ctx context.Context, fr *wire.FrameReader, o *Options) error {
	deadline := time.Now().Add(o.DialTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.nc.SetDeadline(deadline)
	defer c.nc.SetDeadline(time.Time{})
	req := wire.NegotiationRequest{MinVersion: 2, MaxVersion: 2, Compressions: o.Compressions}
	payload, err := req.AppendTo(nil)
	if err != nil {
		return err
	}
	negID := c.codec.Table.NegotiateID()
	// Clients send request id 0 on negotiation (Java even requires 0 back).
	buf, err := c.codec.AppendFrame(nil, wire.Header{Kind: wire.KindNegotiationRequest, Command: negID}, payload)
	if err != nil {
		return err
	}
	if _, err := c.nc.Write(buf); err != nil {
		return connLost("negotiate_write", err)
	}
	nc := wire.Codec{Table: wire.TableA, Limits: wire.NegotiationLimits}
	f, err := fr.ReadFrame(&nc)
	if err != nil {
		if _, typed := errcode.As(err); typed {
			return err
		}
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return connLost("negotiate_read", err)
		}
		// The Go broker answers a failed negotiation by dropping the connection.
		return errcode.NegotiationFailed.New("server closed the connection during negotiation", "reason", "no_response", "cause", err.Error())
	}
	if f.Header.Kind != wire.KindNegotiationResponse || f.Header.Command != negID || f.Header.Status != wire.StatusOK {
		return errcode.NegotiationFailed.New("unexpected negotiation response", "reason", "bad_response", "kind", f.Header.Kind.String())
	}
	resp, err := wire.DecodeNegotiationResponse(f.Payload)
	if err != nil {
		return err
	}
	offered := false
	for _, p := range o.Compressions {
		if p == resp.Compression {
			offered = true
		}
	}
	if !offered {
		return errcode.NegotiationFailed.New("server chose a compression the client did not offer", "reason", "compression_not_offered", "compression", resp.Compression.String())
	}
	c.codec.Compression = resp.Compression
	return nil
}

// Compression returns the negotiated compression.
func (c *conn) compression() wire.Compression { return c.codec.Compression }

func (c *conn) readLoop(fr *wire.FrameReader) {
	defer c.readerW.Done()
	for {
		// The payload is handed to the caller (a CONSUME reply becomes the
		// Batch's records), so it is read into a buffer of its own: one the
		// caller recycled, or a new one.
		f, err := fr.ReadFrameOwnedInto(&c.codec, c.replies.get)
		if err != nil {
			c.close(connLost("read", err))
			return
		}
		c.mu.Lock()
		cl := c.pending[f.Header.RequestID]
		c.mu.Unlock()
		if cl == nil {
			// A late answer to a request that timed out, or an acks=0
			// publish answered anyway: nobody waits for it.
			continue
		}
		if f.Header.Command != cl.cmd || (f.Header.Kind != wire.KindResponse && f.Header.Kind != wire.KindStream) {
			c.close(errcode.InvalidFrame.New("response does not match its request", "reason", "mismatched_response"))
			return
		}
		out := frame{h: f.Header, payload: f.Payload}
		if cl.stream {
			// A stream owns its connection, so waiting for its reader here
			// delays nobody else (backpressure to the server instead).
			select {
			case cl.frames <- out:
			case <-c.done:
				return
			}
			continue
		}
		select {
		case cl.frames <- out:
		default:
			// More frames than the command's reply shape allows.
		}
	}
}

// close marks the connection broken with err (the first error wins), closes
// the socket and wakes every waiter.
func (c *conn) close(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	close(c.done)
	c.mu.Unlock()
	_ = c.nc.Close()
}

// shutdown closes the connection and waits for its reader to exit.
func (c *conn) shutdown(err error) {
	c.close(err)
	c.readerW.Wait()
}

func (c *conn) broken() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// send writes one request frame; id 0 allocates a new request id.
func (c *conn) send(cmd wire.Command, id uint64, payload []byte) error {
	wid, ok := c.codec.Table.ID(cmd)
	if !ok {
		return errcode.UnknownCommand.New("command has no wire id", "command", cmd.String())
	}
	h := wire.Header{Kind: wire.KindRequest, Command: wid, RequestID: id}
	if _, plain := c.nc.(*net.TCPConn); plain && c.codec.Compression == wire.CompressionNone && len(payload) >= writevMin {
		// A large uncompressed payload (a PUBLISH batch) goes out next to
		// its header in one writev instead of being copied into a frame
		// buffer first. Over TLS each Write is its own record, so the copy
		// stays.
		var hb [wire.HeaderSize]byte
		hdr, err := c.codec.AppendHeader(hb[:0], h, payload, len(payload))
		if err != nil {
			return err
		}
		bufs := net.Buffers{hdr, payload}
		return c.write(&bufs)
	}
	bp := framePool.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 4<<20 {
			framePool.Put(bp)
		}
	}()
	buf, err := c.codec.AppendFrame((*bp)[:0], h, payload)
	*bp = buf[:0]
	if err != nil {
		return err
	}
	bufs := net.Buffers{buf}
	return c.write(&bufs)
}

// writevMin is the payload size from which send writes header and payload
// with one writev rather than copying the payload behind the header.
const writevMin = 16 << 10

// write writes a whole frame under the write lock; a failed write breaks the
// connection.
func (c *conn) write(bufs *net.Buffers) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.broken(); err != nil {
		return err
	}
	if c.writeTimeout > 0 {
		_ = c.nc.SetWriteDeadline(time.Now().Add(c.writeTimeout))
	}
	if _, err := bufs.WriteTo(c.nc); err != nil {
		e := connLost("write", err)
		c.close(e)
		return e
	}
	return nil
}

// register allocates a request id and a waiter for it.
func (c *conn) register(cmd wire.Command, stream bool, buffer int) (uint64, *call, error) {
	wid, ok := c.codec.Table.ID(cmd)
	if !ok {
		return 0, nil, errcode.UnknownCommand.New("command has no wire id", "command", cmd.String())
	}
	id := c.nextID.Add(1)
	cl := &call{cmd: wid, frames: make(chan frame, buffer), stream: stream}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, nil, c.err
	}
	c.pending[id] = cl
	return id, cl, nil
}

func (c *conn) unregister(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// roundTrip sends cmd with a CRQ2 request (or raw payload when req is nil)
// and waits for up to maxFrames response frames; it stops early on an error
// or stream-end frame. The error of an ERROR frame is the server's typed
// error.
func (c *conn) roundTrip(ctx context.Context, o *Options, cmd wire.Command, req *wire.Request, raw []byte, maxFrames int) ([]frame, error) {
	payload := raw
	if req != nil {
		var err error
		if payload, err = req.AppendTo(nil); err != nil {
			return nil, err
		}
	}
	id, cl, err := c.register(cmd, false, maxFrames)
	if err != nil {
		return nil, err
	}
	defer c.unregister(id)
	if err := c.send(cmd, id, payload); err != nil {
		return nil, err
	}
	ctx, cancel := withRequestTimeout(ctx, o)
	defer cancel()
	var out []frame
	for len(out) < maxFrames {
		select {
		case f := <-cl.frames:
			out = append(out, f)
			if f.h.Status == wire.StatusError {
				return out, decodeErrorFrame(f)
			}
			if f.h.Status == wire.StatusStreamEnd {
				return out, nil
			}
			// A two-frame command answers an early failure with one JSON
			// frame whose status is ERROR (WIRE-V2 9.3).
			if maxFrames > 1 && len(out) == 1 && looksLikeJSONError(f.payload) {
				return out, nil
			}
		case <-c.done:
			// Frames delivered before the failure still count.
			select {
			case f := <-cl.frames:
				out = append(out, f)
				if f.h.Status == wire.StatusError {
					return out, decodeErrorFrame(f)
				}
				continue
			default:
			}
			return out, c.broken()
		case <-ctx.Done():
			return out, ctxError(ctx, cmd)
		}
	}
	return out, nil
}

func looksLikeJSONError(p []byte) bool {
	for i, b := range p {
		if b == ' ' || b == '\n' || b == '\t' || b == '\r' {
			continue
		}
		if b != '{' {
			return false
		}
		rest := p[i:]
		return len(rest) < 4096 && containsStatusError(rest)
	}
	return false
}

func containsStatusError(p []byte) bool {
	return bytes.Contains(p, []byte(`"status":"ERROR"`)) || bytes.Contains(p, []byte(`"status": "ERROR"`))
}

func decodeErrorFrame(f frame) error {
	e, err := wire.DecodeError(f.payload)
	if err != nil {
		return err
	}
	return e
}

func withRequestTimeout(ctx context.Context, o *Options) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok || o.RequestTimeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, o.RequestTimeout)
}

// ctxError maps a finished context to the catalogue's typed errors: a
// deadline is request_timeout, a cancellation request_cancelled (both
// retryable availability errors: the server may or may not have acted).
func ctxError(ctx context.Context, cmd wire.Command) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return errcode.RequestTimeout.New("no response before the deadline", "command", cmd.String())
	}
	return errcode.RequestCancelled.New("request cancelled by the caller", "command", cmd.String())
}

// connLost wraps a transport failure as a retryable typed error. Requests in
// flight on a lost connection may or may not have been applied.
func connLost(op string, err error) *errcode.Error {
	if e, ok := errcode.As(err); ok {
		return e
	}
	reason := err.Error()
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		reason = "connection closed by peer"
	}
	e := &errcode.Error{Code: CodeConnectionLost, Class: errcode.ClassAvailability, Retryable: true, Message: reason}
	return e.With("op", op)
}

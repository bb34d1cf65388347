package gateway

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"go.opentelemetry.io/otel/codes"

	"github.com/strataio/strata/gateway/internal/auth"
	"github.com/strataio/strata/gateway/internal/command"
	"github.com/strataio/strata/gateway/internal/records"
	"github.com/strataio/strata/libs/certprincipal"
	"github.com/strataio/strata/libs/clienttls"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// conn is one client connection. One goroutine (serve) reads frames and runs
// commands one at a time, as the protocol serialises one request lifecycle
// per connection; an active STREAM pushes from its own goroutine, so writes
// are serialised by wmu.
type conn struct {
	g     *Role
	nc    net.Conn
	br    *bufio.Reader
	fr    *wire.FrameReader
	codec wire.Codec

	wmu  sync.Mutex
	wbuf []byte
	hbuf []byte // header of a vectored write (WriteFrame)
	// out is the reply payload scratch of the serve goroutine, reused
	// between commands.
	out  []byte
	req  wire.Request
	call command.Call // the request a handler sees, reused like req

	closing chan struct{}
	once    sync.Once

	// certPrincipal is the principal mapped from the client's verified TLS
	// certificate ("" without TLS, without a certificate or when the rule
	// maps it to nothing); set before the first frame is read.
	certPrincipal string

	stream *streamRun // the active STREAM, nil when none

	// sess is the connection's authentication state; until it
	// authenticates (with enable_sasl on) frames are bounded by
	// wire.PreAuthLimits.
	sess *auth.Session
}

func newConn(g *Role, nc net.Conn) *conn {
	br := bufio.NewReaderSize(nc, 16<<10)
	return &conn{g: g, nc: nc, br: br, fr: wire.NewFrameReader(br), closing: make(chan struct{}),
		sess: auth.NewSession(nc.RemoteAddr().String())}
}

// shutdown ends the connection from outside (gateway stop).
func (c *conn) shutdown() {
	c.once.Do(func() { close(c.closing) })
	// Wake a blocked read; serve notices closing and ends the stream with a
	// CLOSE frame before closing the socket.
	c.nc.SetReadDeadline(time.Now())
}

func (c *conn) stopping() bool {
	select {
	case <-c.closing:
		return true
	default:
		return false
	}
}

// protocolFailure counts a rejected frame under a bounded reason.
func (c *conn) protocolFailure(err error) {
	reason := "io"
	if e, ok := errcode.As(err); ok {
		switch e.Code {
		case errcode.InvalidFrame.Name():
			reason = e.Field("reason")
		case errcode.InvalidCompressedPayload.Name(), errcode.DecompressedSizeExceeded.Name():
			reason = e.Code
			r := e.Field("reason")
			if r == "" {
				r = e.Code
			}
			c.g.m.decompRejected.WithLabelValues(r).Inc()
		default:
			reason = e.Code
		}
	} else if errors.Is(err, io.ErrUnexpectedEOF) {
		reason = "truncated_frame"
	} else if isTimeout(err) {
		reason = "timeout"
	}
	if reason == "io" {
		return // a reset or closed socket is the peer leaving, not a bad frame
	}
	if reason == "" {
		reason = "invalid_frame"
	}
	c.g.m.protoFailures.WithLabelValues(reason).Inc()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

func (c *conn) serve() {
	defer c.nc.Close()
	defer c.stopStream(wire.CloseStopped)
	if !c.handshake() {
		return
	}
	for {
		h, err := c.nextHeader()
		if err != nil {
			if !errors.Is(err, io.EOF) && !c.stopping() {
				c.protocolFailure(err)
			}
			return
		}
		if h.Kind != wire.KindRequest {
			// A second negotiation or a response/stream frame from a client
			// breaks the connection sequence (spec 4.3).
			c.protocolFailure(errcode.InvalidFrame.New("unexpected frame kind from client", "reason", "unexpected_kind"))
			return
		}
		f, err := c.fr.ReadPayload(&c.codec, h)
		c.nc.SetReadDeadline(time.Time{})
		if err != nil {
			if _, typed := errcode.As(err); !typed {
				c.protocolFailure(err)
				return
			}
			// CRC or decompression failure: the stream is still aligned, so
			// the request is answered and the connection goes on.
			c.protocolFailure(err)
			cmd, _ := c.codec.Table.ByID(h.Command)
			c.g.m.errors.WithLabelValues(cmd.String(), errcode.From(err).Code).Inc()
			if !c.writeError(h, err) {
				return
			}
			continue
		}
		// A new request ends an active stream (one request lifecycle at a
		// time per connection).
		c.stopStream(wire.CloseStopped)
		if !c.dispatch(f) {
			return
		}
	}
}

// handshake reads the negotiation request and answers it. A first frame that
// is not a negotiation request (raw text, a topic envelope, a request) is
// counted and the connection is dropped without an answer, as is a failed
// negotiation (the reference broker's behaviour).
func (c *conn) handshake() bool {
	c.nc.SetReadDeadline(time.Now().Add(c.g.cfg.HandshakeTimeout))
	if tc, ok := c.nc.(*tls.Conn); ok && !c.tlsHandshake(tc) {
		return false
	}
	f, table, err := c.fr.ReadFirstFrame(wire.NegotiationLimits)
	if err != nil {
		if !errors.Is(err, io.EOF) && !c.stopping() {
			c.protocolFailure(err)
		}
		return false
	}
	req, err := wire.DecodeNegotiationRequest(f.Payload)
	if err == nil {
		var resp wire.NegotiationResponse
		resp, err = wire.Negotiate(req, wire.AllCompressions)
		if err == nil {
			c.codec = wire.Codec{Table: table, Limits: wire.NegotiationLimits}
			frame, ferr := c.codec.AppendFrame(c.wbuf[:0], wire.Header{Kind: wire.KindNegotiationResponse, Command: f.Header.Command,
				Status: wire.StatusOK, RequestID: f.Header.RequestID}, resp.AppendTo(nil))
			if ferr != nil {
				return false
			}
			c.wbuf = frame
			c.nc.SetWriteDeadline(time.Now().Add(c.g.cfg.WriteTimeout))
			if _, werr := c.nc.Write(frame); werr != nil {
				return false
			}
			c.codec = wire.Codec{Table: table, Compression: resp.Compression, Limits: c.g.frameLimits(c.sess)}
			return true
		}
	}
	c.protocolFailure(err)
	return false
}

// tlsHandshake completes the TLS handshake within handshake_timeout and
// maps a verified client certificate to a principal. With
// tls_client_auth=require a certificate that maps to no valid principal
// closes the connection (fail closed); with request the client continues
// unidentified. The mapped name is logged (audit) and exposed by
// CertPrincipal for the authentication layer.
func (c *conn) tlsHandshake(tc *tls.Conn) bool {
	ctx, cancel := context.WithTimeout(context.Background(), c.g.cfg.HandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		if !c.stopping() {
			c.g.m.protoFailures.WithLabelValues("tls_handshake").Inc()
			c.g.log.Debug("client TLS handshake failed", "remote", c.nc.RemoteAddr().String(), "err", err)
		}
		return false
	}
	st := tc.ConnectionState()
	if len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return true // no client certificate (none asked, or request mode)
	}
	leaf := st.PeerCertificates[0]
	name, err := c.g.principalRule.Map(certprincipal.Of(leaf))
	if err != nil {
		c.g.log.Warn("client certificate maps to no principal", "remote", c.nc.RemoteAddr().String(),
			"subject", leaf.Subject.String(), "rule", c.g.principalRule.String(), "err", err)
		if c.g.tls.ClientAuth() == clienttls.AuthRequire {
			c.g.m.protoFailures.WithLabelValues("tls_principal").Inc()
			return false
		}
		return true
	}
	c.certPrincipal = name
	c.g.log.Info("client certificate authenticated", "audit", true, "principal", name,
		"subject", leaf.Subject.String(), "remote", c.nc.RemoteAddr().String(), "tls_version", tls.VersionName(st.Version))
	if c.g.auth.Enabled() {
		// With enable_sasl the certificate's principal authenticates the
		// connection as AUTH would (its permissions come from
		// sasl_principals); a name not configured there leaves the
		// connection unauthenticated, so it may still AUTH.
		p, err := c.g.auth.Certificate(name)
		if err != nil {
			c.g.log.Warn("client certificate principal is not a configured principal", "audit", true, "principal", name,
				"remote", c.nc.RemoteAddr().String(), "err", err)
			return true
		}
		c.sess.Attach(p)
	}
	return true
}

// CertPrincipal is the principal mapped from the client's verified TLS
// certificate, "" when there is none (command.CertPrincipal reads it).
func (c *conn) CertPrincipal() string { return c.certPrincipal }

// nextHeader waits for the next frame. While the connection is idle it reads
// with IdleTimeout and simply reads again when it expires (spec 8: no
// disconnect); once a frame's first byte arrived, the whole frame must follow
// within FrameTimeout.
func (c *conn) nextHeader() (wire.Header, error) {
	for {
		if c.stopping() {
			return wire.Header{}, io.EOF
		}
		c.nc.SetReadDeadline(time.Now().Add(c.g.cfg.IdleTimeout))
		_, err := c.br.Peek(1)
		if err != nil {
			if isTimeout(err) {
				continue
			}
			return wire.Header{}, err
		}
		c.nc.SetReadDeadline(time.Now().Add(c.g.cfg.FrameTimeout))
		return c.fr.ReadHeader(&c.codec)
	}
}

// vectoredWriteMin is the payload size from which WriteFrame writes header
// and payload with writev: below it one copy is cheaper than the extra iovec.
const vectoredWriteMin = 64 << 10

// Table implements command.Conn: the connection's command numbering.
func (c *conn) Table() *wire.CommandTable { return c.codec.Table }

// WriteFrame implements command.Conn: it writes one frame built from h and
// payload; false when the connection broke.
func (c *conn) WriteFrame(h wire.Header, payload []byte) bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if len(payload) >= vectoredWriteMin && (c.codec.Compression == wire.CompressionNone || h.Kind.IsNegotiation()) {
		// A large uncompressed payload (a CONSUME batch) goes out next to
		// its header with one writev instead of being copied into the
		// frame buffer first (a megabyte copy per batch in consume
		// profiles).
		if hdr, err := c.codec.AppendHeader(c.hbuf[:0], h, payload, len(payload)); err == nil {
			c.hbuf = hdr[:0]
			c.nc.SetWriteDeadline(time.Now().Add(c.g.cfg.WriteTimeout))
			bufs := net.Buffers{hdr, payload}
			_, err = bufs.WriteTo(c.nc)
			return err == nil
		}
		// The codec refused the frame: the copying path below answers
		// with the error.
	}
	frame, err := c.codec.AppendFrame(c.wbuf[:0], h, payload)
	if err != nil {
		// Our own payload broke a frame rule (too large): answer that
		// instead, so the client is not left waiting.
		c.g.log.Warn("reply frame refused by codec", "err", err)
		h.Status = wire.StatusError
		p, _ := wire.AppendError(nil, errcode.From(err))
		if frame, err = c.codec.AppendFrame(c.wbuf[:0], h, p); err != nil {
			return false
		}
	}
	if cap(frame) <= 4<<20 {
		c.wbuf = frame[:0]
	} else {
		c.wbuf = nil // do not pin a huge buffer on an idle connection
	}
	c.nc.SetWriteDeadline(time.Now().Add(c.g.cfg.WriteTimeout))
	_, err = c.nc.Write(frame)
	return err == nil
}

func (c *conn) writeReply(req wire.Header, kind wire.Kind, status wire.Status, payload []byte) bool {
	return c.WriteFrame(wire.Header{Kind: kind, Command: req.Command, Status: status, RequestID: req.RequestID}, payload)
}

func (c *conn) writeError(req wire.Header, err error) bool {
	p, _ := wire.AppendError(c.out[:0], errcode.From(err))
	c.out = p[:0]
	return c.writeReply(req, wire.KindResponse, wire.StatusError, p)
}

// dispatch runs one request and answers it; it reports whether the
// connection goes on.
func (c *conn) dispatch(f wire.Frame) bool {
	h := f.Header
	cmd, ok := c.codec.Table.ByID(h.Command)
	if !ok {
		// CheckHeader already refused unknown ids; keep the guard.
		return c.writeError(h, errcode.UnknownCommand.New("unknown command id"))
	}
	start := time.Now()
	name := cmd.String()
	r := &c.req
	r.Reset()
	var batch []byte
	var perr error
	switch {
	case wire.IsBatch(f.Payload):
		if cmd != wire.CmdPublish {
			perr = errcode.DecodeFailed.New("a batch payload is accepted only with PUBLISH", "payload", "cbv2", "reason", "batch_not_publish")
		}
		batch = f.Payload
	default:
		perr = r.Decode(f.Payload)
	}
	timeout := c.g.cfg.RequestTimeout
	if cmd == wire.CmdConsume {
		timeout += records.MaxFetchWait // the long poll comes on top
	}
	// A request read before the stop began finishes while the gateway
	// drains; a long-poll CONSUME is cut at once (request_cancelled,
	// retryable): a read is safe to repeat, and its wait would hold the
	// stop.
	base := c.g.drainCtx
	if cmd == wire.CmdConsume {
		base = c.g.ctx
	}
	ctx, cancel := context.WithTimeout(base, timeout)
	defer cancel()
	spanName, spanOpts := commandSpan(cmd, r)
	ctx, span := c.g.tracer.Start(ctx, spanName, spanOpts...)
	var payload []byte
	err := perr
	if err == nil {
		c.call = command.Call{Command: cmd, Header: h, Req: r, Batch: batch, Out: c.out[:0], Conn: c, Session: c.sess}
		payload, err = c.g.commands.Dispatch(ctx, &c.call)
		c.call = command.Call{} // keep no request bytes alive between requests
		c.codec.Limits = c.g.frameLimits(c.sess)
	}
	if err != nil && !errors.Is(err, command.ErrNoReply) {
		span.SetStatus(codes.Error, errcode.From(err).Code)
	}
	span.End()
	c.g.m.duration.WithLabelValues(name).Observe(time.Since(start).Seconds())
	switch {
	case errors.Is(err, command.ErrNoReply):
		c.g.m.commands.WithLabelValues(name, "ok").Inc()
		return cmd != wire.CmdExit
	case err != nil:
		e := errcode.From(err)
		c.g.m.commands.WithLabelValues(name, "error").Inc()
		c.g.m.errors.WithLabelValues(name, e.Code).Inc()
		kind := wire.KindResponse
		if cmd == wire.CmdStream {
			kind = wire.KindStream
		}
		p, _ := wire.AppendError(c.out[:0], e)
		c.out = p[:0]
		return c.writeReply(h, kind, wire.StatusError, p)
	default:
		c.g.m.commands.WithLabelValues(name, "ok").Inc()
		ok := c.writeReply(h, wire.KindResponse, wire.StatusOK, payload)
		if cap(payload) <= 4<<20 {
			c.out = payload[:0]
		} else {
			c.out = nil
		}
		return ok && cmd != wire.CmdExit
	}
}

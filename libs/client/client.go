package client

import (
	"context"
	"crypto/tls"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/strataio/strata/libs/clienttls"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// Codes of the client's own failures. They are typed like the server's errors
// (errcode.Error with class and retryable flag) so callers handle both alike.
const (
	// CodeConnectionLost: the connection broke (or could not be opened);
	// requests in flight may or may not have been applied. Retryable.
	CodeConnectionLost = "connection_lost"
	// CodeClientClosed: the Client was closed by its owner. Not retryable.
	CodeClientClosed = "client_closed"
)

// ErrClientClosed is returned by every call on a closed Client; errors.Is
// matches it by code.
var ErrClientClosed = &errcode.Error{Code: CodeClientClosed, Class: errcode.ClassAvailability, Message: "client closed"}

// Options configures a Client. The zero value is usable.
type Options struct {
	// Compressions lists the compressions to offer, in preference order; the
	// server picks the first it supports. Default [none]. The client always
	// appends none when missing, as the published SDKs do, so a server
	// without the preferred codec still negotiates.
	Compressions []wire.Compression
	// ClientID names this client: the default prefix of producer ids and
	// group member ids. Wire v2 has no client-id field of its own.
	ClientID string
	// DialTimeout bounds connect + TLS + negotiation. Default 5 s.
	DialTimeout time.Duration
	// RequestTimeout bounds a request whose context has no deadline.
	// Default 30 s; negative disables.
	RequestTimeout time.Duration
	// WriteTimeout bounds writing one frame. Default 10 s.
	WriteTimeout time.Duration
	// TLS, when set, wraps the connection (TLS 1.2+ as the spec requires).
	TLS *tls.Config
	// TLSFiles, when TLS is nil and any file is named, builds the TLS
	// configuration from PEM files at Dial (TLSFilesFromEnv reads them
	// from the environment).
	TLSFiles TLSFiles
	// Principal and Token, when Principal is set, are sent with AUTH right
	// after negotiation.
	Principal, Token string
	// ReconnectBackoff is the first wait before redialing after a failed dial;
	// it doubles up to MaxReconnectBackoff. Defaults 50 ms and 2 s.
	ReconnectBackoff, MaxReconnectBackoff time.Duration
	// Logger receives connection events; default slog.Default().
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if len(o.Compressions) == 0 {
		o.Compressions = []wire.Compression{wire.CompressionNone}
	} else {
		has := false
		for _, c := range o.Compressions {
			has = has || c == wire.CompressionNone
		}
		if !has && len(o.Compressions) < 4 {
			o.Compressions = append(append([]wire.Compression(nil), o.Compressions...), wire.CompressionNone)
		}
	}
	if o.ClientID == "" {
		o.ClientID = "strata-go"
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.ReconnectBackoff <= 0 {
		o.ReconnectBackoff = 50 * time.Millisecond
	}
	if o.MaxReconnectBackoff <= 0 {
		o.MaxReconnectBackoff = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Client is a Wire v2 client over one pipelined connection. It is safe for
// concurrent use: requests from many goroutines share the connection and are
// matched to their answers by request id. When the connection breaks, calls
// in flight fail with connection_lost (retryable) and the next call redials,
// with exponential backoff between failed dials. The client never repeats a
// request on its own (most commands are not idempotent); the Producer and
// Consumer helpers retry what is safe to retry.
type Client struct {
	addr string
	opts Options

	mu        sync.Mutex
	cur       *conn
	closed    bool
	failures  int
	lastFail  time.Time
	lastError error

	// replies holds reply buffers given back by Recycle, shared by the
	// client's connections.
	replies *replyPool
}

// Dial connects to addr (host:port), negotiates Wire v2 and returns the
// Client. A negotiation failure is a typed negotiation_failed error.
func Dial(ctx context.Context, addr string, opts Options) (*Client, error) {
	if opts.TLS == nil && opts.TLSFiles.Enabled() {
		cfg, err := clienttls.ClientConfig(opts.TLSFiles)
		if err != nil {
			return nil, errcode.InvalidParameter.New("client TLS: "+err.Error(), "param", "tls")
		}
		opts.TLS = cfg
	}
	c := &Client{addr: addr, opts: opts.withDefaults(), replies: &replyPool{}}
	if _, err := c.conn(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Addr returns the server address.
func (c *Client) Addr() string { return c.addr }

// Options returns the effective options (defaults applied).
func (c *Client) Options() Options { return c.opts }

// Compression returns the compression negotiated on the current connection.
func (c *Client) Compression() wire.Compression {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil {
		return wire.CompressionNone
	}
	return c.cur.compression()
}

// conn returns the live connection, redialing a broken one. After failed
// dials it waits out the backoff first, without holding the client's lock:
// every caller waits at the same time (and gives up on its own context)
// rather than one after the other. A caller waits once: when another
// caller's dial failed meanwhile, it returns that failure instead of
// waiting for the next, longer backoff.
func (c *Client) conn(ctx context.Context) (*conn, error) {
	waited := false
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrClientClosed
		}
		if c.cur != nil {
			if c.cur.broken() == nil {
				cn := c.cur
				c.mu.Unlock()
				return cn, nil
			}
			old := c.cur
			c.cur = nil
			old.shutdown(old.broken())
		}
		var rest time.Duration
		if c.failures > 0 {
			wait := min(c.opts.ReconnectBackoff<<min(c.failures-1, 16), c.opts.MaxReconnectBackoff)
			rest = time.Until(c.lastFail.Add(wait))
		}
		if rest > 0 && waited {
			err := c.lastError
			c.mu.Unlock()
			return nil, err
		}
		if rest <= 0 {
			// Dial under the lock: one attempt at a time, and the callers
			// queued behind it take its connection.
			defer c.mu.Unlock()
			return c.dialLocked(ctx)
		}
		c.mu.Unlock()
		waited = true
		t := time.NewTimer(rest)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctxError(ctx, wire.CmdNegotiate)
		}
	}
}

// dialLocked dials a new current connection; c.mu is held.
func (c *Client) dialLocked(ctx context.Context) (*conn, error) {
	cn, err := dialConn(ctx, c.addr, &c.opts, c.replies)
	if err != nil {
		c.failures++
		c.lastFail = time.Now()
		c.lastError = err
		return nil, err
	}
	if c.failures > 0 {
		c.opts.Logger.Debug("wire client reconnected", "addr", c.addr, "failures", c.failures)
	}
	c.failures = 0
	c.cur = cn
	return cn, nil
}

// Close closes the connection; calls in flight fail with client_closed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	cur := c.cur
	c.cur = nil
	c.mu.Unlock()
	if cur != nil {
		cur.shutdown(ErrClientClosed)
	}
	return nil
}

// roundTrip runs one request on the current connection.
func (c *Client) roundTrip(ctx context.Context, cmd wire.Command, req *wire.Request, raw []byte, maxFrames int) ([]frame, error) {
	cn, err := c.conn(ctx)
	if err != nil {
		return nil, err
	}
	return cn.roundTrip(ctx, &c.opts, cmd, req, raw, maxFrames)
}

// sendOnly writes a request that gets no answer (PUBLISH with acks 0).
func (c *Client) sendOnly(ctx context.Context, cmd wire.Command, payload []byte) error {
	cn, err := c.conn(ctx)
	if err != nil {
		return err
	}
	id := cn.nextID.Add(1)
	return cn.send(cmd, id, payload)
}

// text runs a one-frame command and returns its text answer.
func (c *Client) text(ctx context.Context, cmd wire.Command, req *wire.Request) (string, error) {
	fs, err := c.roundTrip(ctx, cmd, req, nil, 1)
	if err != nil {
		return "", err
	}
	if len(fs) == 0 {
		return "", errcode.DecodeFailed.New("empty reply", "command", cmd.String())
	}
	return string(fs[0].payload), nil
}

// answer runs a one-frame command and returns its text. Some handlers
// answer an ERROR text in an OK frame (legacy paths); the readable form
// still maps to a typed error.
func (c *Client) answer(ctx context.Context, cmd wire.Command, req *wire.Request) (string, error) {
	s, err := c.text(ctx, cmd, req)
	if err != nil {
		return "", err
	}
	if strings.HasPrefix(s, "ERROR") {
		if e, ok := errcode.ParseText(s); ok {
			return "", e
		}
	}
	return s, nil
}

// ok runs a one-frame command whose answer is "OK key=value ...".
func (c *Client) ok(ctx context.Context, cmd wire.Command, req *wire.Request) (Reply, error) {
	s, err := c.answer(ctx, cmd, req)
	if err != nil {
		return Reply{}, err
	}
	r, err := wire.ParseOK(s)
	if err != nil {
		return Reply{}, err
	}
	return Reply{OKReply: r, Text: s}, nil
}

// Response is the raw answer of Do.
type Response struct {
	// Command is the command sent.
	Command wire.Command
	// Frames holds the payload of every response frame (two for
	// READ_STREAM, BROWSE_MESSAGES and READ_STREAM_HISTORY).
	Frames [][]byte
}

// Text returns the first frame as text.
func (r Response) Text() string {
	if len(r.Frames) == 0 {
		return ""
	}
	return string(r.Frames[0])
}

// Do sends any client command in the SDK text form ("CREATE topic=t
// partitions=3", "PUBLISH topic=t acks=1 producerId=p message=hello world")
// and returns the raw reply. The text is turned into a CRQ2 payload exactly as
// the public SDKs do. STREAM is refused here (use Stream), and internal
// commands are refused. A PUBLISH with acks=0 returns without waiting.
func (c *Client) Do(ctx context.Context, command string) (Response, error) {
	cmd, req, err := wire.ParseText(command)
	if err != nil {
		return Response{}, err
	}
	if cmd.IsInternal() || cmd == wire.CmdNegotiate {
		return Response{}, errcode.InternalCommandUnauthorized.New("internal command not sent by the client", "command", cmd.String())
	}
	if cmd == wire.CmdStream {
		return Response{}, errcode.MalformedInput.New("use Client.Stream for STREAM", "command", cmd.String())
	}
	if cmd == wire.CmdPublish && isAcksZero(req.Value("acks")) {
		payload, err := req.AppendTo(nil)
		if err != nil {
			return Response{}, err
		}
		return Response{Command: cmd}, c.sendOnly(ctx, cmd, payload)
	}
	n := 1
	if cmd.Reply() == wire.ReplyTwoFrames {
		n = 2
	}
	fs, err := c.roundTrip(ctx, cmd, &req, nil, n)
	resp := Response{Command: cmd}
	for _, f := range fs {
		if f.h.Status != wire.StatusError {
			resp.Frames = append(resp.Frames, f.payload)
		}
	}
	return resp, err
}

func isAcksZero(a string) bool { return a == "0" || a == "none" }

// params builds a CRQ2 request from key, value pairs, skipping empty values
// (an absent parameter takes the server's default).
func params(kv ...string) *wire.Request {
	r := &wire.Request{Fields: make([]wire.Field, 0, len(kv)/2)}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			r.Fields = append(r.Fields, wire.Field{Key: kv[i], Value: kv[i+1]})
		}
	}
	return r
}

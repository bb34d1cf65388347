// Package transport carries metad's Raft RPCs over mutual TLS: a
// raft.StreamLayer on its own TCP listener whose every connection, in both
// directions, is TLS 1.3 with the cluster CA and a peer certificate carrying
// the metad role. Any other role (a gateway, a partitiond, an operator tool)
// is refused during the handshake, before raft reads a byte.
package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/strataio/strata/libs/pki"
)

// DefaultHandshakeTimeout bounds the TLS handshake of an accepted connection,
// so a peer that connects and stays silent cannot hold a slot.
const DefaultHandshakeTimeout = 10 * time.Second

// Options configures Listen.
type Options struct {
	// Listen is the bind address (host:port; port 0 picks one).
	Listen string
	// Advertise is the address peers dial; empty means the bound address.
	Advertise string
	// Source supplies this node's certificate and the cluster CA.
	Source *pki.Source
	Logger *slog.Logger
	// HandshakeTimeout defaults to DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
}

// StreamLayer is a raft.StreamLayer over mTLS restricted to metad peers.
type StreamLayer struct {
	ln        net.Listener
	advertise advertised
	server    *tls.Config
	client    *tls.Config
	log       *slog.Logger
	hsTimeout time.Duration

	accepted chan net.Conn
	done     chan struct{}
	once     sync.Once
	wg       sync.WaitGroup

	mu      sync.Mutex
	pending map[net.Conn]struct{} // connections still in their handshake
	live    map[*conn]struct{}    // connections handed to raft
	closed  bool

	rejected atomic.Uint64
	// busy counts inbound connections whose raft handler is between
	// reading a request and asking for the next one (see conn.Read).
	busy atomic.Int64
}

// Listen binds the Raft listener and starts accepting connections.
func Listen(o Options) (*StreamLayer, error) {
	if o.Source == nil {
		return nil, errors.New("transport: a certificate source is required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("transport: bind raft %s: %w", o.Listen, err)
	}
	adv := o.Advertise
	if adv == "" {
		adv = ln.Addr().String()
	}
	s := &StreamLayer{
		ln:        ln,
		advertise: advertised(adv),
		server:    o.Source.ServerConfig(pki.RoleMetad),
		client:    o.Source.ClientConfig(pki.RoleMetad),
		log:       o.Logger,
		hsTimeout: o.HandshakeTimeout,
		accepted:  make(chan net.Conn),
		done:      make(chan struct{}),
		pending:   map[net.Conn]struct{}{},
		live:      map[*conn]struct{}{},
	}
	s.wg.Add(1)
	go s.acceptLoop()
	return s, nil
}

// acceptLoop accepts TCP connections and handshakes each in its own
// goroutine, so one slow or hostile peer does not delay the others.
func (s *StreamLayer) acceptLoop() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.done:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			s.log.Error("raft listener failed", "err", err)
			s.Close()
			return
		}
		if !s.track(c) {
			_ = c.Close()
			return
		}
		s.wg.Add(1)
		go s.handshake(c)
	}
}

func (s *StreamLayer) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.pending[c] = struct{}{}
	return true
}

func (s *StreamLayer) untrack(c net.Conn) {
	s.mu.Lock()
	delete(s.pending, c)
	s.mu.Unlock()
}

func (s *StreamLayer) handshake(raw net.Conn) {
	defer s.wg.Done()
	defer s.untrack(raw)
	tc := tls.Server(raw, s.server)
	ctx, cancel := context.WithTimeout(context.Background(), s.hsTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err == nil {
		// ServerConfig already enforces the role; checking the verified
		// identity again keeps the rule visible where raft gets its bytes.
		var id pki.Identity
		id, err = pki.PeerIdentity(tc.ConnectionState())
		if err == nil && id.Role != pki.RoleMetad {
			err = fmt.Errorf("peer %s is not a metad", id)
		}
	}
	if err != nil {
		s.rejected.Add(1)
		s.log.Warn("raft connection refused", "remote", raw.RemoteAddr().String(), "err", err)
		_ = tc.Close()
		return
	}
	c, ok := s.adopt(tc, true)
	if !ok {
		return
	}
	select {
	case s.accepted <- c:
	case <-s.done:
		_ = c.Close()
	}
}

// adopt tracks a connection handed to raft. raft's NetworkTransport closes
// neither its pooled outbound connections nor the inbound ones it serves when
// it shuts down, so the layer does: a stopped node must not leave peers'
// handlers (or its own) blocked on a read.
func (s *StreamLayer) adopt(tc net.Conn, inbound bool) (net.Conn, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		_ = tc.Close()
		return nil, false
	}
	c := &conn{Conn: tc, owner: s, inbound: inbound}
	s.live[c] = struct{}{}
	return c, true
}

// conn removes itself from the layer's set when raft closes it and, for an
// inbound connection, tracks whether raft's handler is processing a request.
type conn struct {
	net.Conn
	owner   *StreamLayer
	inbound bool
	once    sync.Once
	busy    atomic.Bool
}

// Read marks the handler idle while it waits for bytes and busy once it has
// some: raft serves heartbeats on the handler goroutine itself, straight
// into the Raft state and its store, even while the node shuts down. Close
// waits for busy handlers so the store is closed only after them (a
// heartbeat writing the term into a closed store panics raft).
func (c *conn) Read(p []byte) (int, error) {
	c.idle()
	n, err := c.Conn.Read(p)
	if n > 0 && c.inbound && c.busy.CompareAndSwap(false, true) {
		c.owner.busy.Add(1)
	}
	return n, err
}

func (c *conn) idle() {
	if c.busy.CompareAndSwap(true, false) {
		c.owner.busy.Add(-1)
	}
}

func (c *conn) Close() error {
	c.idle()
	c.once.Do(func() {
		c.owner.mu.Lock()
		delete(c.owner.live, c)
		c.owner.mu.Unlock()
	})
	return c.Conn.Close()
}

// Accept returns the next connection from a verified metad peer.
func (s *StreamLayer) Accept() (net.Conn, error) {
	select {
	case c := <-s.accepted:
		return c, nil
	case <-s.done:
		return nil, net.ErrClosed
	}
}

// Close stops accepting, aborts handshakes in progress, closes every
// connection handed to raft, waits for inbound handlers to finish the
// request they are processing, and waits for the accept goroutines.
func (s *StreamLayer) Close() error {
	var err error
	s.once.Do(func() {
		close(s.done)
		err = s.ln.Close()
		s.mu.Lock()
		s.closed = true
		for c := range s.pending {
			_ = c.Close()
		}
		live := s.live
		s.live = map[*conn]struct{}{}
		s.mu.Unlock()
		for c := range live {
			_ = c.Conn.Close()
		}
		// Handlers in the middle of a request finish it (their next read
		// or write fails on the closed connection); bounded so a stuck
		// handler cannot hang shutdown.
		deadline := time.Now().Add(5 * time.Second)
		for s.busy.Load() > 0 && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
		s.wg.Wait()
	})
	return err
}

// Addr is the advertised address: what raft records as this server's
// address and what peers dial.
func (s *StreamLayer) Addr() net.Addr { return s.advertise }

// BoundAddr is the address the listener is bound to.
func (s *StreamLayer) BoundAddr() net.Addr { return s.ln.Addr() }

// Rejected counts inbound connections refused in the handshake.
func (s *StreamLayer) Rejected() uint64 { return s.rejected.Load() }

// Dial connects to a peer and completes the TLS handshake; the server must
// present a metad certificate of the cluster CA.
func (s *StreamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	raw, err := d.DialContext(ctx, "tcp", string(address))
	if err != nil {
		return nil, err
	}
	tc := tls.Client(raw, s.client)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = raw.Close()
		return nil, fmt.Errorf("transport: tls handshake with %s: %w", address, err)
	}
	c, ok := s.adopt(tc, false)
	if !ok {
		return nil, net.ErrClosed
	}
	return c, nil
}

// NewTransport wraps the stream layer in raft's network transport (which
// owns it from then on: closing the transport closes the layer).
func NewTransport(s *StreamLayer, log hclog.Logger, timeout time.Duration) *raft.NetworkTransport {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  s,
		MaxPool: 3,
		Timeout: timeout,
		Logger:  log,
	})
}

type advertised string

func (a advertised) Network() string { return "tcp" }
func (a advertised) String() string  { return string(a) }

package rpc

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"sync"

	"google.golang.org/grpc/credentials"

	"github.com/strataio/strata/libs/pki"
)

// Links connects the roles of one process (the all-in-one) to each other
// without TLS or sockets. A role's server also accepts in-process
// connections on the address it listens on; a client of the same process
// dialing that address gets an in-memory pipe instead of a TCP connection.
//
// What stays the same: gRPC itself (HTTP/2 framing, flow control, the
// interceptors, the role policy, the trace propagation and the typed
// errors) and the identities. Instead of a TLS handshake both ends hand
// each other their certificate chains over the link and verify them as the
// handshake would (CA, key usage, allowed roles, validity), so the policy
// sees the same verified certificate. What is skipped is what only protects
// bytes on a network: encryption and proof of key possession. Only code in
// this process can reach a link, and it holds the keys anyway.
//
// Connections to other processes (metad peers of a split deployment, CLI
// tools) still use mTLS over TCP.
type Links struct {
	mu        sync.Mutex
	listeners map[string]*linkListener
}

// NewLinks returns an empty registry.
func NewLinks() *Links { return &Links{listeners: map[string]*linkListener{}} }

// Listen returns a listener accepting in-process connections to addr (the
// address the role advertises). Close it with the server.
func (ls *Links) Listen(addr string) (net.Listener, error) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if _, ok := ls.listeners[addr]; ok {
		return nil, fmt.Errorf("rpc: in-process address %s already listening", addr)
	}
	l := &linkListener{links: ls, addr: addr, conns: make(chan *pipeConn), done: make(chan struct{})}
	ls.listeners[addr] = l
	return l, nil
}

// dial connects to the in-process listener of addr; ok is false when no
// role of this process listens there.
func (ls *Links) dial(ctx context.Context, addr string) (conn net.Conn, ok bool, err error) {
	ls.mu.Lock()
	l := ls.listeners[addr]
	ls.mu.Unlock()
	if l == nil {
		return nil, false, nil
	}
	c, s := newConnPair(addr)
	select {
	case l.conns <- s:
		return c, true, nil
	case <-l.done:
		return nil, true, fmt.Errorf("rpc: in-process listener %s closed", addr)
	case <-ctx.Done():
		return nil, true, ctx.Err()
	}
}

// dialer returns a gRPC context dialer: in-process for addresses of this
// process, TCP otherwise.
func (ls *Links) dialer() func(context.Context, string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, addr string) (net.Conn, error) {
		if c, ok, err := ls.dial(ctx, addr); ok {
			return c, err
		}
		return d.DialContext(ctx, "tcp", addr)
	}
}

type linkListener struct {
	links     *Links
	addr      string
	conns     chan *pipeConn
	done      chan struct{}
	closeOnce sync.Once
}

func (l *linkListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *linkListener) Close() error {
	l.closeOnce.Do(func() {
		close(l.done)
		l.links.mu.Lock()
		if l.links.listeners[l.addr] == l {
			delete(l.links.listeners, l.addr)
		}
		l.links.mu.Unlock()
	})
	return nil
}

func (l *linkListener) Addr() net.Addr { return pipeAddr(l.addr) }

// link is the identity exchange of one in-process connection: each end
// publishes its certificate chain once and waits for the other's.
type link struct {
	client, server chan [][]byte // cap 1
	aborted        chan struct{}
	abortOnce      sync.Once
}

func newLink() *link {
	return &link{client: make(chan [][]byte, 1), server: make(chan [][]byte, 1), aborted: make(chan struct{})}
}

func (l *link) abort() { l.abortOnce.Do(func() { close(l.aborted) }) }

func (l *link) await(ctx context.Context, c chan [][]byte) ([][]byte, error) {
	select {
	case chain := <-c:
		return chain, nil
	case <-l.aborted:
		return nil, errors.New("rpc: in-process connection closed during the identity exchange")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// linkCreds are the transport credentials of a server or client that may
// use in-process links: a pipe connection exchanges verified certificates,
// any other connection does the TLS handshake of tls.
type linkCreds struct {
	credentials.TransportCredentials // TLS, for everything but pipes
	src                              *pki.Source
	serverRoles                      []pki.Role // client side: who the server may be
}

func (c linkCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	pc, ok := raw.(*pipeConn)
	if !ok {
		return c.TransportCredentials.ClientHandshake(ctx, authority, raw)
	}
	pc.link.client <- c.src.Certificate().Certificate
	chain, err := pc.link.await(ctx, pc.link.server)
	if err != nil {
		return nil, nil, err
	}
	certs, _, err := c.src.VerifyPeer(chain, x509.ExtKeyUsageServerAuth, c.serverRoles)
	if err != nil {
		return nil, nil, err
	}
	return raw, linkInfo(certs), nil
}

func (c linkCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	pc, ok := raw.(*pipeConn)
	if !ok {
		return c.TransportCredentials.ServerHandshake(raw)
	}
	pc.link.server <- c.src.Certificate().Certificate
	chain, err := pc.link.await(context.Background(), pc.link.client)
	if err != nil {
		return nil, nil, err
	}
	certs, _, err := c.src.VerifyPeer(chain, x509.ExtKeyUsageClientAuth, nil)
	if err != nil {
		return nil, nil, err
	}
	return raw, linkInfo(certs), nil
}

func (c linkCreds) Clone() credentials.TransportCredentials {
	return linkCreds{TransportCredentials: c.TransportCredentials.Clone(), src: c.src, serverRoles: c.serverRoles}
}

// linkInfo is the AuthInfo of a pipe: the TLSInfo shape the role policy
// and PeerIdentity read, with the verified peer chain.
func linkInfo(certs []*x509.Certificate) credentials.TLSInfo {
	return credentials.TLSInfo{
		State: tls.ConnectionState{Version: tls.VersionTLS13, HandshakeComplete: true, NegotiatedProtocol: "h2",
			PeerCertificates: certs, VerifiedChains: [][]*x509.Certificate{certs}},
		CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity},
	}
}

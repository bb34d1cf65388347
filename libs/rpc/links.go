package rpc

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Links connects the roles of one process (the all-in-one) to each other
// directly: a call from a client of this process to the address a role of
// this process advertises goes straight to the registered handler as Go
// values, on the caller's goroutine for a unary call — no marshaling, no
// HTTP/2, no socket or pipe (see direct.go for the call path and
// docs/decisions.md for the decision).
//
// What stays the same as over mTLS: the service interfaces (generated
// clients over a Conn), the identities (each end's certificate chain is
// verified by the other end's pki.Source as the TLS handshake verifies it:
// CA, key usage, the allowed server roles, validity), the role policy,
// panic recovery, the RPC metrics, the typed errors (errcode.ToStatus on
// the server side, errcode.FromStatus on the client side), the OpenTelemetry
// client and server spans (the same otelgrpc stats handlers, fed the events
// gRPC would feed them), deadlines, cancellation and metadata. What is
// skipped protects bytes on a network: encryption and proof of key
// possession. Only code in this process can reach a link, and it holds the
// keys anyway.
//
// Connections to addresses no role of this process registered (metad peers
// of a split deployment, CLI tools) still use mTLS over TCP.
type Links struct {
	mu      sync.Mutex
	servers map[string]*Server
}

// NewLinks returns an empty registry.
func NewLinks() *Links { return &Links{servers: map[string]*Server{}} }

// Register makes srv reachable in process at addr (the address the role
// advertises), until Unregister. Calls wait until srv serves (Serve) and
// fail as unavailable once it stopped.
func (ls *Links) Register(addr string, srv *Server) error {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if _, ok := ls.servers[addr]; ok {
		return fmt.Errorf("rpc: in-process address %s already registered", addr)
	}
	ls.servers[addr] = srv
	srv.addr = linkAddr(addr)
	return nil
}

// Unregister removes srv from addr; later calls to addr go over TCP.
func (ls *Links) Unregister(addr string, srv *Server) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.servers[addr] == srv {
		delete(ls.servers, addr)
	}
}

func (ls *Links) lookup(addr string) *Server {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.servers[addr]
}

// linkAddr is the address of an in-process endpoint: the TCP address the
// role advertises, on network "inprocess".
type linkAddr string

func (a linkAddr) Network() string { return "inprocess" }
func (a linkAddr) String() string  { return string(a) }

// linkClientAddr is what a server sees as the address of an in-process
// caller.
const linkClientAddr = linkAddr("inprocess-client")

// binding is the verified pairing of one client connection with one
// in-process server: what a TLS connection is over TCP. Like a TLS
// connection it is verified once and lives until the server stops (a
// certificate rotated meanwhile applies from the next binding on, as it
// applies to new TLS connections).
type binding struct {
	srv *Server
	// serverPeer is what the server's handlers see (peer.FromContext): the
	// caller's verified chain. clientPeer is what grpc.Peer reports to the
	// caller: the server's verified chain.
	serverPeer, clientPeer *peer.Peer
}

// handshake verifies the client's and the server's current certificates
// as the TLS handshake does: the client checks the server's chain against
// its CA for server auth and the allowed server roles, the server the
// client's chain for client auth. A failure is the unavailable error a
// failed handshake gives over TCP.
func handshake(c *linkConn, srv *Server) (*binding, error) {
	fail := func(err error) error {
		return status.Errorf(codes.Unavailable, "connection error: desc = \"transport: authentication handshake failed: %v\"", err)
	}
	srvCerts, _, err := c.opts.Source.VerifyPeer(srv.src.Certificate().Certificate, x509.ExtKeyUsageServerAuth, c.opts.ServerRoles)
	if err != nil {
		return nil, fail(err)
	}
	cliCerts, _, err := srv.src.VerifyPeer(c.opts.Source.Certificate().Certificate, x509.ExtKeyUsageClientAuth, nil)
	if err != nil {
		return nil, fail(err)
	}
	return &binding{
		srv:        srv,
		serverPeer: &peer.Peer{Addr: linkClientAddr, LocalAddr: srv.addr, AuthInfo: linkInfo(cliCerts)},
		clientPeer: &peer.Peer{Addr: srv.addr, LocalAddr: linkClientAddr, AuthInfo: linkInfo(srvCerts)},
	}, nil
}

// linkInfo is the AuthInfo of an in-process binding: the TLSInfo shape the
// role policy and PeerIdentity read, with the verified peer chain.
func linkInfo(certs []*x509.Certificate) credentials.TLSInfo {
	return credentials.TLSInfo{
		State: tls.ConnectionState{Version: tls.VersionTLS13, HandshakeComplete: true, NegotiatedProtocol: "h2",
			PeerCertificates: certs, VerifiedChains: [][]*x509.Certificate{certs}},
		CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity},
	}
}

package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// Files names the PEM files a node uses: the cluster CA bundle and its own
// certificate and key.
type Files struct {
	CA, Cert, Key string
}

// Validate reports missing settings.
func (f Files) Validate() error {
	if f.CA == "" || f.Cert == "" || f.Key == "" {
		return errors.New("pki: tls ca, cert and key files are all required")
	}
	return nil
}

// Source loads a node's certificate and CA pool from Files and reloads them
// when a file's modification time or size changes. It is safe for
// concurrent use; handshakes call it, so rotation needs no restart.
type Source struct {
	files Files
	now   func() time.Time

	mu       sync.Mutex
	stamp    [3]fileStamp
	cert     *tls.Certificate
	pool     *x509.CertPool
	identity Identity
	checked  time.Time
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// NewSource loads files once (failing on any problem) and returns a Source.
func NewSource(files Files) (*Source, error) {
	if err := files.Validate(); err != nil {
		return nil, err
	}
	s := &Source{files: files, now: time.Now}
	if err := s.reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Identity returns the identity in the node's own certificate.
func (s *Source) Identity() Identity {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.identity
}

// current returns the certificate and pool, reloading at most once per
// 100ms when the files changed. A failed reload keeps the previous material
// (a half-rotated directory must not take the node down).
func (s *Source) current() (*tls.Certificate, *x509.CertPool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := s.now(); now.Sub(s.checked) >= 100*time.Millisecond {
		s.checked = now
		if stamps, err := statAll(s.files); err == nil && stamps != s.stamp {
			_ = s.reloadLocked()
		}
	}
	return s.cert, s.pool
}

func statAll(f Files) ([3]fileStamp, error) {
	var out [3]fileStamp
	for i, p := range []string{f.CA, f.Cert, f.Key} {
		st, err := os.Stat(p)
		if err != nil {
			return out, err
		}
		out[i] = fileStamp{mod: st.ModTime(), size: st.Size()}
	}
	return out, nil
}

func (s *Source) reload() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reloadLocked()
}

func (s *Source) reloadLocked() error {
	stamps, err := statAll(s.files)
	if err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(s.files.Cert, s.files.Key)
	if err != nil {
		return fmt.Errorf("pki: load key pair: %w", err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return fmt.Errorf("pki: parse certificate: %w", err)
	}
	cert.Leaf = leaf
	id, err := IdentityFromCert(leaf)
	if err != nil {
		return err
	}
	caPEM, err := os.ReadFile(s.files.CA)
	if err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("pki: no certificates in %s", s.files.CA)
	}
	s.cert, s.pool, s.identity, s.stamp = &cert, pool, id, stamps
	return nil
}

// Certificate returns the node's current certificate (reloaded as for a
// TLS handshake). The in-process links of libs/rpc present it instead of a
// TLS handshake.
func (s *Source) Certificate() *tls.Certificate {
	cert, _ := s.current()
	return cert
}

// VerifyPeer verifies a peer's DER chain as a TLS handshake does: against
// the current CA pool, for usage, with the role restricted to allowed when
// non-empty. It returns the parsed chain and the peer identity (the
// in-process links of libs/rpc call it instead of a handshake).
func (s *Source) VerifyPeer(rawCerts [][]byte, usage x509.ExtKeyUsage, allowed []Role) ([]*x509.Certificate, Identity, error) {
	if len(rawCerts) == 0 {
		return nil, Identity{}, errors.New("pki: peer presented no certificate")
	}
	_, pool := s.current()
	certs := make([]*x509.Certificate, len(rawCerts))
	for i, raw := range rawCerts {
		c, err := x509.ParseCertificate(raw)
		if err != nil {
			return nil, Identity{}, fmt.Errorf("pki: parse peer certificate: %w", err)
		}
		certs[i] = c
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}, CurrentTime: s.now()}); err != nil {
		return nil, Identity{}, fmt.Errorf("pki: verify peer: %w", err)
	}
	id, err := IdentityFromCert(certs[0])
	if err != nil {
		return nil, Identity{}, err
	}
	if len(allowed) > 0 && !roleIn(id.Role, allowed) {
		return nil, Identity{}, fmt.Errorf("pki: peer role %q not allowed (want one of %v)", id.Role, allowed)
	}
	return certs, id, nil
}

func roleIn(r Role, set []Role) bool {
	for _, x := range set {
		if x == r {
			return true
		}
	}
	return false
}

// ServerConfig returns a TLS 1.3 server configuration that requires a client
// certificate issued by the cluster CA (re-read on handshake). allowedRoles,
// when non-empty, restricts which roles may connect at all; per-method role
// checks happen in the gRPC layer.
func (s *Source) ServerConfig(allowedRoles ...Role) *tls.Config {
	base := &tls.Config{MinVersion: tls.VersionTLS13}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		cert, pool := s.current()
		c := &tls.Config{
			MinVersion:   tls.VersionTLS13,
			Certificates: []tls.Certificate{*cert},
			ClientAuth:   tls.RequireAndVerifyClientCert,
			ClientCAs:    pool,
			NextProtos:   []string{"h2"},
		}
		c.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
			_, _, err := s.VerifyPeer(raw, x509.ExtKeyUsageClientAuth, allowedRoles)
			return err
		}
		return c, nil
	}
	return base
}

// ClientConfig returns a TLS 1.3 client configuration presenting the node's
// certificate and verifying the server against the current CA pool. The
// server's identity must carry one of serverRoles (any role when empty);
// host names are not used for identity, the URI SAN is.
func (s *Source) ClientConfig(serverRoles ...Role) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, _ := s.current()
			return cert, nil
		},
		// Verification is done in VerifyPeerCertificate against the reloadable
		// pool and the URI SAN identity; the stdlib hostname check is replaced,
		// not skipped.
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			_, _, err := s.VerifyPeer(raw, x509.ExtKeyUsageServerAuth, serverRoles)
			return err
		},
		NextProtos: []string{"h2"},
	}
}

// PeerIdentity extracts the identity of a verified peer from a TLS state.
func PeerIdentity(cs tls.ConnectionState) (Identity, error) {
	if len(cs.PeerCertificates) == 0 {
		return Identity{}, errors.New("pki: no peer certificate")
	}
	return IdentityFromCert(cs.PeerCertificates[0])
}

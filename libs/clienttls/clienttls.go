// Package clienttls is TLS on the Wire v2 client listener (spec 5.7:
// optional, TLS 1.2 or newer): a server configuration whose certificate,
// key and client CA files are re-read when they change, so rotating them
// needs no restart, and the client-side configuration the CLI and the Go
// client build from PEM files.
//
// It is separate from libs/pki on purpose: the internal side is TLS 1.3
// with SPIFFE identities and a role policy; the client side speaks to
// ordinary TLS clients (SDKs in other languages, TLS 1.2) and identifies
// a client certificate by its subject (libs/certprincipal).
package clienttls

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// ClientAuth says whether the listener asks for client certificates.
type ClientAuth string

const (
	// AuthNone asks for no client certificate.
	AuthNone ClientAuth = "none"
	// AuthRequest asks for one and verifies it when given; a client
	// without one still connects (and is not identified by certificate).
	AuthRequest ClientAuth = "request"
	// AuthRequire refuses the handshake without a valid client certificate.
	AuthRequire ClientAuth = "require"
)

func (a ClientAuth) tls() tls.ClientAuthType {
	switch a {
	case AuthRequest:
		return tls.VerifyClientCertIfGiven
	case AuthRequire:
		return tls.RequireAndVerifyClientCert
	}
	return tls.NoClientCert
}

// ServerFiles are the client listener's TLS settings.
type ServerFiles struct {
	// Cert and Key are the listener's certificate chain and key (PEM).
	Cert, Key string
	// ClientCA verifies client certificates (PEM bundle); required when
	// ClientAuth is request or require.
	ClientCA string
	// ClientAuth defaults to none.
	ClientAuth ClientAuth
}

// Enabled reports whether TLS is configured at all.
func (f ServerFiles) Enabled() bool { return f.Cert != "" || f.Key != "" }

// Validate checks the combination of settings (not the files).
func (f ServerFiles) Validate() error {
	switch f.ClientAuth {
	case "", AuthNone, AuthRequest, AuthRequire:
	default:
		return fmt.Errorf("tls_client_auth %q: want none, request or require", f.ClientAuth)
	}
	if !f.Enabled() {
		if f.ClientCA != "" || (f.ClientAuth != "" && f.ClientAuth != AuthNone) {
			return errors.New("tls_client_ca and tls_client_auth need tls_cert and tls_key")
		}
		return nil
	}
	switch {
	case f.Cert == "" || f.Key == "":
		return errors.New("tls_cert and tls_key are both required for TLS")
	case f.ClientCA == "" && (f.ClientAuth == AuthRequest || f.ClientAuth == AuthRequire):
		return fmt.Errorf("tls_client_auth %s needs tls_client_ca", f.ClientAuth)
	case f.ClientCA != "" && (f.ClientAuth == "" || f.ClientAuth == AuthNone):
		// A CA that is never used is a misconfiguration, not a choice.
		return errors.New("tls_client_ca is set but tls_client_auth is none: set request or require")
	}
	return nil
}

// reloadEvery bounds how often a handshake looks at the files.
const reloadEvery = 100 * time.Millisecond

// Server holds the listener's current TLS material and reloads it when a
// file's modification time or size changes (checked on handshake, at most
// every 100 ms). A failed reload (a half-written rotation) keeps the
// previous material and is logged; the next change is tried again.
type Server struct {
	files ServerFiles
	log   *slog.Logger
	now   func() time.Time

	mu      sync.Mutex
	stamps  []stamp
	cert    *tls.Certificate
	pool    *x509.CertPool
	checked time.Time
	failed  []stamp // stamps of the last failed reload, logged once
}

type stamp struct {
	mod  time.Time
	size int64
}

// NewServer validates files and loads them once, failing on any problem
// (a listener that cannot serve TLS must not start as plaintext).
func NewServer(files ServerFiles, log *slog.Logger) (*Server, error) {
	if err := files.Validate(); err != nil {
		return nil, err
	}
	if !files.Enabled() {
		return nil, errors.New("clienttls: TLS is not configured")
	}
	if files.ClientAuth == "" {
		files.ClientAuth = AuthNone
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{files: files, log: log, now: time.Now}
	st, err := s.stat()
	if err != nil {
		return nil, err
	}
	if err := s.load(st); err != nil {
		return nil, err
	}
	return s, nil
}

// ClientAuth is the configured client certificate mode.
func (s *Server) ClientAuth() ClientAuth { return s.files.ClientAuth }

func (s *Server) paths() []string {
	p := []string{s.files.Cert, s.files.Key}
	if s.files.ClientCA != "" {
		p = append(p, s.files.ClientCA)
	}
	return p
}

func (s *Server) stat() ([]stamp, error) {
	paths := s.paths()
	out := make([]stamp, len(paths))
	for i, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("clienttls: %w", err)
		}
		out[i] = stamp{mod: st.ModTime(), size: st.Size()}
	}
	return out, nil
}

func (s *Server) load(st []stamp) error {
	cert, err := tls.LoadX509KeyPair(s.files.Cert, s.files.Key)
	if err != nil {
		return fmt.Errorf("clienttls: load %s / %s: %w", s.files.Cert, s.files.Key, err)
	}
	if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
		return fmt.Errorf("clienttls: parse %s: %w", s.files.Cert, err)
	}
	var pool *x509.CertPool
	if s.files.ClientCA != "" {
		pem, err := os.ReadFile(s.files.ClientCA)
		if err != nil {
			return fmt.Errorf("clienttls: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("clienttls: no PEM certificates in %s", s.files.ClientCA)
		}
	}
	s.cert, s.pool, s.stamps = &cert, pool, st
	return nil
}

func sameStamps(a, b []stamp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].mod.Equal(b[i].mod) || a[i].size != b[i].size {
			return false
		}
	}
	return true
}

// current returns the material, reloading it first when the files changed.
func (s *Server) current() (*tls.Certificate, *x509.CertPool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now := s.now(); now.Sub(s.checked) >= reloadEvery {
		s.checked = now
		st, err := s.stat()
		if err == nil && !sameStamps(st, s.stamps) {
			if err := s.load(st); err != nil {
				if !sameStamps(st, s.failed) {
					s.log.Warn("client TLS reload failed; serving the previous certificate", "err", err)
					s.failed = st
				}
			} else {
				s.log.Info("client TLS certificate reloaded", "cert", s.files.Cert, "subject", s.cert.Leaf.Subject.String(), "not_after", s.cert.Leaf.NotAfter)
			}
		}
	}
	return s.cert, s.pool
}

// Certificate returns the certificate currently served (tests, logs).
func (s *Server) Certificate() *x509.Certificate {
	c, _ := s.current()
	return c.Leaf
}

// Config returns the listener's TLS configuration: TLS 1.2 or newer, the
// current certificate and client CA on every handshake.
func (s *Server) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := s.current()
			return &tls.Config{
				MinVersion:   tls.VersionTLS12,
				Certificates: []tls.Certificate{*cert},
				ClientAuth:   s.files.ClientAuth.tls(),
				ClientCAs:    pool,
			}, nil
		},
	}
}

// ClientFiles are a client's TLS settings (the CLI's --tls-* flags).
type ClientFiles struct {
	// CA verifies the server (system roots when empty).
	CA string
	// Cert and Key are the client certificate, for listeners that ask.
	Cert, Key string
	// ServerName overrides the name verified (default: the dialed host).
	ServerName string
	// Insecure skips server verification (testing only).
	Insecure bool
}

// Enabled reports whether any setting asks for TLS.
func (f ClientFiles) Enabled() bool {
	return f.CA != "" || f.Cert != "" || f.Key != "" || f.Insecure
}

// ClientConfig builds a TLS 1.2+ client configuration from f; nil when f
// asks for no TLS.
func ClientConfig(f ClientFiles) (*tls.Config, error) {
	if !f.Enabled() {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: f.ServerName, InsecureSkipVerify: f.Insecure}
	if f.CA != "" {
		pem, err := os.ReadFile(f.CA)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no PEM certificates", f.CA)
		}
		cfg.RootCAs = pool
	}
	if f.Cert != "" || f.Key != "" {
		if f.Cert == "" || f.Key == "" {
			return nil, errors.New("a client certificate needs both --tls-cert and --tls-key")
		}
		cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

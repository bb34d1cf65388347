package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pki"
)

// tlsFiles is a small PKI for the client listener: a CA, the listener's
// certificate (127.0.0.1), client certificates and a foreign CA.
type tlsFiles struct {
	dir                string
	ca, other          *pki.CA
	server             pki.Files // server cert/key signed by ca
	alice, stranger    pki.Files // client certs: ca / other
	expiredClient      pki.Files
	expiredServerCert  []byte
	expiredServerKey   []byte
	serverCert, srvKey []byte
}

func newTLSFiles(t *testing.T) *tlsFiles {
	t.Helper()
	f := &tlsFiles{dir: t.TempDir()}
	var err error
	if f.ca, err = pki.NewCA("client-ca", 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	if f.other, err = pki.NewCA("other-ca", 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "ca.crt"), f.ca.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.dir, "other.crt"), f.other.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	issue := func(ca *pki.CA, name string, spec pki.NodeSpec) pki.Files {
		fs, err := ca.IssueToDir(f.dir, name, spec)
		if err != nil {
			t.Fatal(err)
		}
		return fs
	}
	lo := []net.IP{net.ParseIP("127.0.0.1")}
	f.server = issue(f.ca, "server", pki.NodeSpec{Identity: pki.Identity{Role: pki.RoleGateway, NodeID: "g1"}, IPs: lo})
	f.alice = issue(f.ca, "alice", pki.NodeSpec{Identity: pki.Identity{Role: pki.RoleAdmin, NodeID: "alice"}})
	f.stranger = issue(f.other, "stranger", pki.NodeSpec{Identity: pki.Identity{Role: pki.RoleAdmin, NodeID: "mallory"}})
	old := time.Now().Add(-48 * time.Hour)
	f.expiredClient = issue(f.ca, "expired-client", pki.NodeSpec{Identity: pki.Identity{Role: pki.RoleAdmin, NodeID: "bob"}, NotBefore: old, Validity: time.Hour})
	if f.expiredServerCert, f.expiredServerKey, err = f.ca.Issue(pki.NodeSpec{Identity: pki.Identity{Role: pki.RoleGateway, NodeID: "g1"}, IPs: lo, NotBefore: old, Validity: time.Hour}); err != nil {
		t.Fatal(err)
	}
	f.serverCert, _ = os.ReadFile(f.server.Cert)
	f.srvKey, _ = os.ReadFile(f.server.Key)
	return f
}

func (f *tlsFiles) path(name string) string { return filepath.Join(f.dir, name) }

// replaceServerCert rotates the listener's files the way strata certs does
// (write then rename), and moves their modification time forward so the
// reload notices even within the file system's time granularity.
func (f *tlsFiles) replaceServerCert(t *testing.T, cert, key []byte) {
	t.Helper()
	for _, p := range []struct {
		path string
		data []byte
	}{{f.server.Cert, cert}, {f.server.Key, key}} {
		tmp := p.path + ".tmp"
		if err := os.WriteFile(tmp, p.data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, p.path); err != nil {
			t.Fatal(err)
		}
		later := time.Now().Add(time.Duration(len(p.data)) * time.Millisecond)
		if err := os.Chtimes(p.path, later, later); err != nil {
			t.Fatal(err)
		}
	}
}

func (f *tlsFiles) clientConfig(t *testing.T, caFile string, cert *pki.Files) *tls.Config {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if cert != nil {
		kp, err := tls.LoadX509KeyPair(cert.Cert, cert.Key)
		if err != nil {
			t.Fatal(err)
		}
		// Present it whatever CAs the server names, as a misconfigured or
		// hostile client would (crypto/tls otherwise holds back a
		// certificate the server's CA list does not cover).
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &kp, nil }
	}
	return cfg
}

// dialList connects with cfg (nil: plaintext), negotiates and runs LIST.
func dialList(addr string, cfg *tls.Config) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, err := client.Dial(ctx, addr, client.Options{TLS: cfg, DialTimeout: 5 * time.Second, Logger: discardLogger()})
	if err != nil {
		return err
	}
	defer cl.Close()
	_, err = cl.Do(ctx, "LIST")
	return err
}

// connPrincipals returns the certificate principals of the gateway's open
// client connections.
func connPrincipals(g *Role) []string {
	g.connMu.Lock()
	defer g.connMu.Unlock()
	var out []string
	for c := range g.conns {
		out = append(out, c.CertPrincipal())
	}
	return out
}

// TestClientTLSMatrix runs the client listener with TLS (client
// certificates requested) through the matrix: no TLS, TLS, TLS 1.2, a
// client certificate mapped to its principal, the wrong CA on either side,
// expired certificates on either side (the server's by rotating its files,
// which also shows reload without restart), and TLS 1.1 refused.
func TestClientTLSMatrix(t *testing.T) {
	f := newTLSFiles(t)
	c := startCluster(t, func(cfg *Config) {
		cfg.TLSCert, cfg.TLSKey = f.server.Cert, f.server.Key
		cfg.TLSClientCA, cfg.TLSClientAuth = f.path("ca.crt"), "request"
	})
	good := f.path("ca.crt")
	tls11 := f.clientConfig(t, good, nil)
	tls11.MinVersion, tls11.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
	tls12 := f.clientConfig(t, good, nil)
	tls12.MaxVersion = tls.VersionTLS12
	cases := []struct {
		name    string
		cfg     *tls.Config
		wantErr string // "" = LIST succeeds; "*" = any error
	}{
		{"no TLS", nil, "negotiation"},
		{"TLS, no client certificate", f.clientConfig(t, good, nil), ""},
		{"TLS 1.2", tls12, ""},
		{"client certificate", f.clientConfig(t, good, &f.alice), ""},
		{"client trusts the wrong CA", f.clientConfig(t, f.path("other.crt"), nil), "certificate signed by unknown authority"},
		{"client certificate from the wrong CA", f.clientConfig(t, good, &f.stranger), "*"},
		{"expired client certificate", f.clientConfig(t, good, &f.expiredClient), "*"},
		{"TLS 1.1 refused", tls11, "protocol version"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := dialList(c.addr, tc.cfg)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("want success, got %v", err)
			case tc.wantErr == "*" && err == nil:
				t.Fatal("want an error, got success")
			case tc.wantErr != "" && tc.wantErr != "*" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("want an error containing %q, got %v", tc.wantErr, err)
			}
		})
	}

	t.Run("principal mapped from the certificate", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cl := dialTLS(t, ctx, c.addr, f.clientConfig(t, good, &f.alice))
		if _, err := cl.Do(ctx, "LIST"); err != nil {
			t.Fatal(err)
		}
		// Connections of earlier cases may still be closing: alice's is
		// the only one with a principal.
		if got := connPrincipals(c.gw); !onlyPrincipal(got, "alice") {
			t.Fatalf("connection principals %q, want alice's", got)
		}
	})

	t.Run("expired server certificate, then rotated back without restart", func(t *testing.T) {
		f.replaceServerCert(t, f.expiredServerCert, f.expiredServerKey)
		waitServed(t, c.gw, func(leaf *x509.Certificate) bool { return time.Now().After(leaf.NotAfter) })
		if err := dialList(c.addr, f.clientConfig(t, good, nil)); err == nil || !strings.Contains(err.Error(), "expired") {
			t.Fatalf("expired server certificate: %v", err)
		}
		f.replaceServerCert(t, f.serverCert, f.srvKey)
		waitServed(t, c.gw, func(leaf *x509.Certificate) bool { return time.Now().Before(leaf.NotAfter) })
		if err := dialList(c.addr, f.clientConfig(t, good, nil)); err != nil {
			t.Fatalf("after rotating back: %v", err)
		}
	})
}

// waitServed waits (10 s at most) until the listener serves a certificate
// satisfying ok: the reload is checked at most every 100 ms.
func waitServed(t *testing.T, g *Role, ok func(*x509.Certificate) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok(g.tls.Certificate()) {
		if time.Now().After(deadline) {
			t.Fatal("the listener never reloaded its certificate")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClientTLSRequire: with tls_client_auth=require a client without a
// certificate, or one whose certificate maps to no principal, is refused.
func TestClientTLSRequire(t *testing.T) {
	f := newTLSFiles(t)
	c := startCluster(t, func(cfg *Config) {
		cfg.TLSCert, cfg.TLSKey = f.server.Cert, f.server.Key
		cfg.TLSClientCA, cfg.TLSClientAuth = f.path("ca.crt"), "require"
		cfg.TLSPrincipalRule = `regex:^CN=([a-z]+),OU=admin,O=Strata$/user:$1`
	})
	good := f.path("ca.crt")
	if err := dialList(c.addr, f.clientConfig(t, good, nil)); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	if err := dialList(c.addr, f.clientConfig(t, good, &f.alice)); err != nil {
		t.Fatalf("alice: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dialTLS(t, ctx, c.addr, f.clientConfig(t, good, &f.alice)) // open while the principals are read
	if got := connPrincipals(c.gw); !onlyPrincipal(got, "user:alice") {
		t.Fatalf("connection principals %q, want user:alice's", got)
	}
}

func TestClientTLSConfigRefused(t *testing.T) {
	base := DefaultConfig()
	base.MetadAddrs = []string{"127.0.0.1:1"}
	for _, tc := range []struct {
		name string
		edit func(*Config)
	}{
		{"cert without key", func(c *Config) { c.TLSCert = "x.crt" }},
		{"client auth without CA", func(c *Config) { c.TLSCert, c.TLSKey, c.TLSClientAuth = "x.crt", "x.key", "require" }},
		{"CA with client auth none", func(c *Config) { c.TLSCert, c.TLSKey, c.TLSClientCA = "x.crt", "x.key", "ca.crt" }},
		{"unknown client auth", func(c *Config) { c.TLSCert, c.TLSKey, c.TLSClientAuth = "x.crt", "x.key", "maybe" }},
		{"client CA without TLS", func(c *Config) { c.TLSClientCA, c.TLSClientAuth = "ca.crt", "require" }},
		{"bad principal rule", func(c *Config) { c.TLSPrincipalRule = "regex:(/x" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.edit(&cfg)
			if err := cfg.validate(); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// dialTLS connects a client over TLS with cfg, closed when the test ends.
func dialTLS(t *testing.T, ctx context.Context, addr string, cfg *tls.Config) *client.Client {
	t.Helper()
	cl, err := client.Dial(ctx, addr, client.Options{TLS: cfg, Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// onlyPrincipal says whether want is among the connections' principals and
// no other principal is (connections without one are "").
func onlyPrincipal(got []string, want string) bool {
	return slices.Contains(got, want) && !slices.ContainsFunc(got, func(p string) bool { return p != "" && p != want })
}

// TestClientCertificateAuthenticates: with enable_sasl, a client
// certificate whose mapped principal is configured authenticates the
// connection as AUTH would (with that principal's permissions); one whose
// principal is not configured stays unauthenticated and may still AUTH.
func TestClientCertificateAuthenticates(t *testing.T) {
	f := newTLSFiles(t)
	c := startAuthCluster(t, func(cfg *Config) {
		cfg.TLSCert, cfg.TLSKey = f.server.Cert, f.server.Key
		cfg.TLSClientCA, cfg.TLSClientAuth = f.path("ca.crt"), "request"
		// alice's certificate maps to the configured principal "app".
		cfg.TLSPrincipalRule = `regex:^CN=alice,.*$/app`
	})
	good := f.path("ca.crt")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	cl := dialTLS(t, ctx, c.addr, f.clientConfig(t, good, &f.alice))
	if _, err := cl.Do(ctx, "LIST"); err != nil {
		t.Fatalf("LIST as the certificate's principal (topic.read): %v", err)
	}
	if _, err := cl.Do(ctx, "CREATE topic=by-cert"); errcode.CodeOf(err) != errcode.NotAuthorizedForOperation.Name() {
		t.Fatalf("CREATE needs admin, which app lacks: %v", err)
	}

	anon := dialTLS(t, ctx, c.addr, f.clientConfig(t, good, nil))
	if _, err := anon.Do(ctx, "LIST"); errcode.CodeOf(err) != errcode.AuthenticationRequired.Name() {
		t.Fatalf("LIST without a certificate or AUTH: %v", err)
	}
}

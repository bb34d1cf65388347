package clienttls

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/strataio/strata/libs/pki"
)

func issue(t *testing.T, ca *pki.CA, dir, name, id string) pki.Files {
	t.Helper()
	f, err := ca.IssueToDir(dir, name, pki.NodeSpec{Identity: pki.Identity{Role: pki.RoleGateway, NodeID: id}, IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestServerReloads: a changed certificate is served from the next
// handshake on; a broken file keeps the previous material.
func TestServerReloads(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA("ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	first := issue(t, ca, dir, "first", "one")
	second := issue(t, ca, dir, "second", "two")
	live := pki.Files{Cert: filepath.Join(dir, "live.crt"), Key: filepath.Join(dir, "live.key")}
	cp := func(from pki.Files, bump time.Duration) {
		for _, p := range [][2]string{{from.Cert, live.Cert}, {from.Key, live.Key}} {
			b, err := os.ReadFile(p[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p[1], b, 0o600); err != nil {
				t.Fatal(err)
			}
			at := time.Now().Add(bump)
			os.Chtimes(p[1], at, at)
		}
	}
	cp(first, 0)
	s, err := NewServer(ServerFiles{Cert: live.Cert, Key: live.Key}, nil)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Now()
	s.now = func() time.Time { return clock }
	if cn := s.Certificate().Subject.CommonName; cn != "one" {
		t.Fatalf("serving %q", cn)
	}
	cp(second, time.Second)
	clock = clock.Add(reloadEvery)
	if cn := s.Certificate().Subject.CommonName; cn != "two" {
		t.Fatalf("after rotation serving %q, want two", cn)
	}
	// A half-written rotation: the key no longer matches; keep "two".
	b, _ := os.ReadFile(first.Key)
	os.WriteFile(live.Key, b, 0o600)
	at := time.Now().Add(2 * time.Second)
	os.Chtimes(live.Key, at, at)
	clock = clock.Add(reloadEvery)
	if cn := s.Certificate().Subject.CommonName; cn != "two" {
		t.Fatalf("after a broken rotation serving %q, want two", cn)
	}
	cfg, err := s.Config().GetConfigForClient(&tls.ClientHelloInfo{})
	if err != nil || cfg.MinVersion != tls.VersionTLS12 || cfg.ClientAuth != tls.NoClientCert {
		t.Fatalf("config %+v, %v", cfg, err)
	}
}

func TestNewServerFailsOnBadFiles(t *testing.T) {
	dir := t.TempDir()
	ca, _ := pki.NewCA("ca", time.Hour)
	f := issue(t, ca, dir, "s", "s")
	bad := filepath.Join(dir, "bad.pem")
	os.WriteFile(bad, []byte("not pem"), 0o600)
	for _, files := range []ServerFiles{
		{Cert: f.Cert, Key: filepath.Join(dir, "missing.key")},
		{Cert: bad, Key: f.Key},
		{Cert: f.Cert, Key: f.Key, ClientCA: bad, ClientAuth: AuthRequire},
		{Cert: f.Cert, Key: f.Key, ClientAuth: AuthRequest},
		{},
	} {
		if _, err := NewServer(files, nil); err == nil {
			t.Errorf("%+v accepted", files)
		}
	}
	if _, err := NewServer(ServerFiles{Cert: f.Cert, Key: f.Key, ClientCA: f.CA, ClientAuth: AuthRequire}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestClientConfig(t *testing.T) {
	if cfg, err := ClientConfig(ClientFiles{}); cfg != nil || err != nil {
		t.Fatalf("no settings: %v, %v", cfg, err)
	}
	dir := t.TempDir()
	ca, _ := pki.NewCA("ca", time.Hour)
	f := issue(t, ca, dir, "c", "c")
	cfg, err := ClientConfig(ClientFiles{CA: f.CA, Cert: f.Cert, Key: f.Key, ServerName: "gw"})
	if err != nil || cfg.MinVersion != tls.VersionTLS12 || cfg.RootCAs == nil || len(cfg.Certificates) != 1 || cfg.ServerName != "gw" {
		t.Fatalf("%+v, %v", cfg, err)
	}
	if _, err := ClientConfig(ClientFiles{Cert: f.Cert}); err == nil {
		t.Fatal("certificate without key accepted")
	}
}

// Package pkitest builds throwaway cluster PKIs for tests: a CA in a temp
// directory and certificates per role and node id, generated at run time.
package pkitest

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/strataio/strata/libs/pki"
)

// PKI is a test CA with a directory of issued certificates.
type PKI struct {
	CA  *pki.CA
	Dir string

	mu     sync.Mutex
	issued map[string]pki.Files
}

// New creates a CA in t.TempDir().
func New(t testing.TB) *PKI {
	t.Helper()
	ca, err := pki.NewCA("strata-test-ca", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := ca.Save(dir); err != nil {
		t.Fatal(err)
	}
	return &PKI{CA: ca, Dir: dir, issued: map[string]pki.Files{}}
}

// Files issues (once) a loopback certificate for role/nodeID and returns its files.
func (p *PKI) Files(t testing.TB, role pki.Role, nodeID string) pki.Files {
	t.Helper()
	name := string(role) + "-" + nodeID
	p.mu.Lock()
	defer p.mu.Unlock()
	if f, ok := p.issued[name]; ok {
		return f
	}
	f, err := p.CA.IssueToDir(p.Dir, name, pki.NodeSpec{
		Identity: pki.Identity{Role: role, NodeID: nodeID},
		DNSNames: []string{"localhost"},
		IPs:      []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	})
	if err != nil {
		t.Fatal(err)
	}
	p.issued[name] = f
	return f
}

// Source issues (once) and loads a certificate source for role/nodeID.
func (p *PKI) Source(t testing.TB, role pki.Role, nodeID string) *pki.Source {
	t.Helper()
	s, err := pki.NewSource(p.Files(t, role, nodeID))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Path returns a path inside the PKI directory.
func (p *PKI) Path(name string) string { return filepath.Join(p.Dir, name) }

// ReadCert reads the first certificate of a PEM file.
func ReadCert(t testing.TB, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

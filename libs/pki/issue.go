package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// CA is a cluster certificate authority able to issue node certificates.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// CertPEM is the CA certificate in PEM form, as distributed to nodes.
	CertPEM []byte
}

// NewCA creates a self-signed ECDSA P-256 CA valid from now-1h for validity.
func NewCA(commonName string, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"Strata"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: pemBlock("CERTIFICATE", der)}, nil
}

// NodeSpec describes a node certificate to issue.
type NodeSpec struct {
	Identity Identity
	// DNSNames and IPs are added as SANs (compose service names, Kubernetes
	// DNS names, localhost, 127.0.0.1).
	DNSNames []string
	IPs      []net.IP
	// Validity defaults to one year. NotBefore, when set, overrides now-1h
	// (tests use it to build expired certificates).
	Validity  time.Duration
	NotBefore time.Time
}

// Issue creates an ECDSA P-256 certificate for spec signed by the CA, usable
// as both TLS server and client certificate. It returns PEM cert and key.
func (ca *CA) Issue(spec NodeSpec) (certPEM, keyPEM []byte, err error) {
	if _, err := ParseIdentity(spec.Identity.URI()); err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, nil, err
	}
	validity := spec.Validity
	if validity == 0 {
		validity = 365 * 24 * time.Hour
	}
	notBefore := spec.NotBefore
	if notBefore.IsZero() {
		notBefore = time.Now().Add(-time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject: pkix.Name{
			CommonName:         spec.Identity.NodeID,
			OrganizationalUnit: []string{string(spec.Identity.Role)},
			Organization:       []string{"Strata"},
		},
		NotBefore:   notBefore,
		NotAfter:    notBefore.Add(validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:        []*url.URL{spec.Identity.URI()},
		DNSNames:    spec.DNSNames,
		IPAddresses: spec.IPs,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pemBlock("CERTIFICATE", der), pemBlock("EC PRIVATE KEY", keyDER), nil
}

func randomSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// File names inside a certificate directory.
const (
	CACertFile = "ca.crt"
	CAKeyFile  = "ca.key"
)

// CertFile and KeyFile name a node's files inside a certificate directory.
func CertFile(name string) string { return name + ".crt" }

// KeyFile names a node's private key file inside a certificate directory.
func KeyFile(name string) string { return name + ".key" }

// SaveCA writes ca.crt and ca.key into dir (0700 dir, 0600 key).
func (ca *CA) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(ca.Key)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, CAKeyFile), pemBlock("EC PRIVATE KEY", keyDER), 0o600); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, CACertFile), ca.CertPEM, 0o644)
}

// LoadCA reads ca.crt and ca.key from dir.
func LoadCA(dir string) (*CA, error) {
	certPEM, err := os.ReadFile(filepath.Join(dir, CACertFile))
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, errors.New("pki: CA files are not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, CertPEM: certPEM}, nil
}

// IssueToDir issues spec and writes <name>.crt and <name>.key into dir.
func (ca *CA) IssueToDir(dir, name string, spec NodeSpec) (Files, error) {
	certPEM, keyPEM, err := ca.Issue(spec)
	if err != nil {
		return Files{}, err
	}
	f := Files{CA: filepath.Join(dir, CACertFile), Cert: filepath.Join(dir, CertFile(name)), Key: filepath.Join(dir, KeyFile(name))}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Files{}, err
	}
	if err := writeFileAtomic(f.Key, keyPEM, 0o600); err != nil {
		return Files{}, err
	}
	if err := writeFileAtomic(f.Cert, certPEM, 0o644); err != nil {
		return Files{}, err
	}
	if _, err := os.Stat(f.CA); errors.Is(err, os.ErrNotExist) {
		if err := writeFileAtomic(f.CA, ca.CertPEM, 0o644); err != nil {
			return Files{}, err
		}
	}
	return f, nil
}

// writeFileAtomic writes via a temp file and rename so a reloading reader
// never sees a half-written certificate.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("pki: install %s: %w", path, err)
	}
	return nil
}

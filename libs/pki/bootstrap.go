package pki

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"
)

// EnsureLocal makes dir hold a CA and one loopback certificate per identity,
// creating what is missing and renewing certificates that expire within 30
// days. The all-in-one calls it on every start with the data directory's
// certs folder, so a laptop run needs no PKI setup. It returns the files
// per identity.
func EnsureLocal(dir string, ids []Identity) (map[Identity]Files, error) {
	ca, err := LoadCA(dir)
	if errors.Is(err, os.ErrNotExist) {
		ca, err = NewCA("strata-local-ca", 10*365*24*time.Hour)
		if err == nil {
			err = ca.Save(dir)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("pki: local CA in %s: %w", dir, err)
	}
	out := map[Identity]Files{}
	for _, id := range ids {
		name := string(id.Role) + "-" + id.NodeID
		f := Files{CA: filepath.Join(dir, CACertFile), Cert: filepath.Join(dir, CertFile(name)), Key: filepath.Join(dir, KeyFile(name))}
		if !validFor(f, id, ca, 30*24*time.Hour) {
			f, err = ca.IssueToDir(dir, name, NodeSpec{
				Identity: id,
				DNSNames: []string{"localhost"},
				IPs:      []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
			})
			if err != nil {
				return nil, err
			}
		}
		out[id] = f
	}
	return out, nil
}

// validFor reports whether f holds a certificate for id, signed by ca, valid
// for at least margin more.
func validFor(f Files, id Identity, ca *CA, margin time.Duration) bool {
	data, err := os.ReadFile(f.Cert)
	if err != nil {
		return false
	}
	if _, err := os.Stat(f.Key); err != nil {
		return false
	}
	b, _ := pem.Decode(data)
	if b == nil {
		return false
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil || time.Until(c.NotAfter) < margin || c.CheckSignatureFrom(ca.Cert) != nil {
		return false
	}
	got, err := IdentityFromCert(c)
	return err == nil && got == id
}

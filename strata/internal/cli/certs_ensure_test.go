package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
)

func TestCertsEnsureCreatesThenKeeps(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	args := []string{"certs", "ensure", "--dir", dir, "--node", "metad/metad-1", "--node", "gateway/gateway-1", "--dns", "strata.local"}
	out := mustRun(t, args...)
	if !strings.Contains(out, "CA created") || strings.Count(out, "issued ") != 2 {
		t.Fatalf("first run: %s", out)
	}
	ca, err := pki.LoadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	leaf := pkitest.ReadCert(t, filepath.Join(dir, "metad-metad-1.crt"))
	if err := leaf.CheckSignatureFrom(ca.Cert); err != nil {
		t.Fatal(err)
	}
	if id, err := pki.IdentityFromCert(leaf); err != nil || id != (pki.Identity{Role: pki.RoleMetad, NodeID: "metad-1"}) {
		t.Fatalf("identity %v %v", id, err)
	}
	for _, d := range []string{"metad-1", "localhost", "strata.local"} {
		if !slices.Contains(leaf.DNSNames, d) {
			t.Fatalf("DNS SANs %v lack %s", leaf.DNSNames, d)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, "gateway-gateway-1.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}

	// A second run changes nothing: same CA, same certificate bytes.
	before, _ := os.ReadFile(filepath.Join(dir, "metad-metad-1.crt"))
	out = mustRun(t, args...)
	if strings.Contains(out, "CA created") || strings.Contains(out, "issued") || strings.Count(out, "kept ") != 2 {
		t.Fatalf("second run: %s", out)
	}
	after, _ := os.ReadFile(filepath.Join(dir, "metad-metad-1.crt"))
	if string(before) != string(after) {
		t.Fatal("valid certificate was rewritten")
	}

	// Adding a node issues only that one.
	out = mustRun(t, append(args, "--node", "partitiond/partitiond-1")...)
	if strings.Count(out, "issued ") != 1 || strings.Count(out, "kept ") != 2 {
		t.Fatalf("third run: %s", out)
	}
}

func TestCertsEnsureReissuesBadCertificates(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, "certs", "ensure", "--dir", dir, "--node", "metad/m1", "--node", "partitiond/p1", "--node", "coordinatord/c1")
	// m1: signed by another CA; p1: expiring soon; c1: key does not match.
	other := t.TempDir()
	mustRun(t, "certs", "init", "--dir", other)
	mustRun(t, "certs", "issue", "--dir", other, "--role", "metad", "--node-id", "m1", "--out", dir)
	mustRun(t, "certs", "issue", "--dir", dir, "--role", "partitiond", "--node-id", "p1", "--dns", "p1,localhost", "--validity", "24h")
	key, err := os.ReadFile(filepath.Join(dir, "metad-m1.key"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "coordinatord-c1.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, "certs", "ensure", "--dir", dir, "--node", "metad/m1", "--node", "partitiond/p1", "--node", "coordinatord/c1")
	for _, want := range []string{"not signed by the current CA", "expires ", "key mismatch"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "issued ") != 3 {
		t.Fatalf("want 3 reissued:\n%s", out)
	}
	if leaf := pkitest.ReadCert(t, filepath.Join(dir, "partitiond-p1.crt")); time.Until(leaf.NotAfter) < 300*24*time.Hour {
		t.Fatalf("p1 not renewed: %v", leaf.NotAfter)
	}
	// Now everything is valid again.
	out = mustRun(t, "certs", "ensure", "--dir", dir, "--node", "metad/m1", "--node", "partitiond/p1", "--node", "coordinatord/c1")
	if strings.Count(out, "kept ") != 3 {
		t.Fatalf("not stable:\n%s", out)
	}
}

func TestCertsEnsureErrors(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"certs", "ensure", "--dir", dir},
		{"certs", "ensure", "--node", "metad/m1"},
		{"certs", "ensure", "--dir", dir, "--node", "metad"},
		{"certs", "ensure", "--dir", dir, "--node", "wizard/w1"},
		{"certs", "ensure", "--dir", dir, "--node", "metad/bad id"},
		{"certs", "ensure", "--dir", dir, "--node", "metad/m1", "--ip", "300.1.1.1"},
	} {
		if code, _, _ := run(t, args...); code != 2 {
			t.Fatalf("%v: exit %d, want 2", args, code)
		}
	}
	// A lone CA certificate (key lost) is an error, never silently replaced.
	mustRun(t, "certs", "init", "--dir", dir)
	if err := os.Remove(filepath.Join(dir, pki.CAKeyFile)); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := run(t, "certs", "ensure", "--dir", dir, "--node", "metad/m1"); code != 1 || !strings.Contains(errs, "unusable") {
		t.Fatalf("lone ca.crt: exit %d %s", code, errs)
	}
}

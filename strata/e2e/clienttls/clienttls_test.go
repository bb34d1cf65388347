package clienttls

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/strata/e2e/framework"
	"github.com/strataio/strata/strata/internal/allinone"
	"github.com/strataio/strata/strata/internal/cli"
)

func TestMain(m *testing.M) { framework.Main(m) }

func strata(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	code := cli.MainContext(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

func mustStrata(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errs := strata(t, args...)
	if code != 0 {
		t.Fatalf("strata %s: exit %d: %s", strings.Join(args, " "), code, errs)
	}
	return out
}

// TestCLIOverClientTLS: the gateway requires a client certificate
// (tls_client_auth=require); the CLI connects with --tls-ca/--tls-cert/
// --tls-key and with the STRATA_CLIENT_TLS_* environment, bench runs over
// TLS, and a client without a certificate or without TLS is refused.
func TestCLIOverClientTLS(t *testing.T) {
	dir := t.TempDir()
	mustStrata(t, "certs", "init", "--dir", dir)
	mustStrata(t, "certs", "issue", "--dir", dir, "--role", "gateway", "--node-id", "client-listener", "--ip", "127.0.0.1")
	mustStrata(t, "certs", "issue", "--dir", dir, "--role", "admin", "--node-id", "alice")
	ca := filepath.Join(dir, "ca.crt")
	a := framework.StartAllInOne(t, func(c *allinone.Config) {
		c.Gateway.TLSCert = filepath.Join(dir, "gateway-client-listener.crt")
		c.Gateway.TLSKey = filepath.Join(dir, "gateway-client-listener.key")
		c.Gateway.TLSClientCA = ca
		c.Gateway.TLSClientAuth = "require"
	})
	addr := "--addr=" + a.Server().ClientAddr()
	cert, key := filepath.Join(dir, "admin-alice.crt"), filepath.Join(dir, "admin-alice.key")

	mustStrata(t, "topic", "create", "tls-t", "--partitions", "1", addr, "--tls-ca", ca, "--tls-cert", cert, "--tls-key", key)
	if out := mustStrata(t, "bench", "produce", addr, "--tls-ca", ca, "--tls-cert", cert, "--tls-key", key,
		"--topic", "tls-t", "--count", "200", "--conns", "1", "--acks", "all"); !strings.Contains(out, "200 records") {
		t.Fatalf("bench over TLS:\n%s", out)
	}

	// Refused: no TLS at all, TLS without a client certificate.
	if code, _, errs := strata(t, "topic", "list", addr); code == 0 {
		t.Fatal("plaintext client served by a TLS listener")
	} else {
		t.Logf("plaintext: %s", strings.TrimSpace(errs))
	}
	if code, _, _ := strata(t, "topic", "list", addr, "--tls-ca", ca); code == 0 {
		t.Fatal("client without a certificate served with tls_client_auth=require")
	}

	// The same files from the environment.
	t.Setenv(client.EnvTLSCA, ca)
	t.Setenv(client.EnvTLSCert, cert)
	t.Setenv(client.EnvTLSKey, key)
	if out := mustStrata(t, "topic", "list", addr); !strings.Contains(out, "tls-t") {
		t.Fatalf("topic list over TLS from the environment: %q", out)
	}
}

package cli

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/strataio/strata/libs/client/fakebroker"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// run executes the CLI and returns exit code, stdout and stderr.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := MainContext(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errs := run(t, args...)
	if code != 0 {
		t.Fatalf("%v: exit %d\nstdout: %s\nstderr: %s", args, code, out, errs)
	}
	return out
}

func TestCommandsAndUsage(t *testing.T) {
	want := []string{"auth", "bench", "browse", "certs", "cluster", "completion", "consume", "group", "produce", "stream", "topic", "txn", "version"}
	if got := Commands(); !slices.Equal(got, want) {
		t.Fatalf("Commands() = %v", got)
	}
	if code, _, errs := run(t, "nope"); code != 2 || !strings.Contains(errs, "unknown command") {
		t.Fatalf("unknown command: %d %s", code, errs)
	}
	if code, _, _ := run(t); code != 2 {
		t.Fatal("no command")
	}
	if code, _, errs := run(t, "topic", "create"); code != 2 || !strings.Contains(errs, "usage") {
		t.Fatalf("missing topic name: %d %s", code, errs)
	}
	if code, _, _ := run(t, "topic", "list", "-h"); code != 0 {
		t.Fatal("-h is not an error")
	}
}

func TestCertsInitAndIssue(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, "certs", "init", "--dir", dir, "--cn", "test-ca")
	if code, _, errs := run(t, "certs", "init", "--dir", dir); code != 1 || !strings.Contains(errs, "--force") {
		t.Fatalf("re-init without --force: %d %s", code, errs)
	}
	out := filepath.Join(dir, "nodes")
	mustRun(t, "certs", "issue", "--dir", dir, "--role", "gateway", "--node-id", "gw-1",
		"--dns", "gw.strata.local,localhost", "--ip", "10.1.2.3,::1", "--out", out)
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := os.ReadFile(filepath.Join(out, "gateway-gw-1.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("bad CA PEM")
	}
	blk, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Fatalf("certificate does not verify against the CA for %v: %v", usage, err)
		}
	}
	if len(cert.URIs) != 1 || cert.URIs[0].String() != "spiffe://strata/gateway/gw-1" {
		t.Fatalf("URI SANs %v", cert.URIs)
	}
	if !slices.Contains(cert.DNSNames, "gw.strata.local") || len(cert.IPAddresses) != 2 || cert.IPAddresses[0].String() != "10.1.2.3" {
		t.Fatalf("SANs dns=%v ip=%v", cert.DNSNames, cert.IPAddresses)
	}
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		t.Fatalf("key %T, want ECDSA P-256", cert.PublicKey)
	}
	st, err := os.Stat(filepath.Join(out, "gateway-gw-1.key"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v %v", st.Mode(), err)
	}
	// A certificate from another CA does not verify (the test can fail).
	other := t.TempDir()
	mustRun(t, "certs", "init", "--dir", other)
	otherPEM, _ := os.ReadFile(filepath.Join(other, "ca.crt"))
	otherPool := x509.NewCertPool()
	otherPool.AppendCertsFromPEM(otherPEM)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: otherPool}); err == nil {
		t.Fatal("verified against a foreign CA")
	}
	for _, bad := range [][]string{
		{"certs", "issue", "--dir", dir, "--role", "wizard", "--node-id", "x"},
		{"certs", "issue", "--dir", dir, "--role", "metad", "--node-id", "bad/id"},
		{"certs", "issue", "--dir", dir, "--role", "metad", "--node-id", "m1", "--ip", "300.1.1.1"},
		{"certs", "issue", "--dir", dir, "--role", "metad"},
	} {
		if code, _, _ := run(t, bad...); code != 2 {
			t.Fatalf("%v: exit %d, want 2", bad, code)
		}
	}
	if code, _, _ := run(t, "certs", "issue", "--dir", t.TempDir(), "--role", "metad", "--node-id", "m1"); code != 1 {
		t.Fatal("issue without a CA succeeded")
	}
}

func startBroker(t *testing.T) *fakebroker.Broker {
	b, err := fakebroker.Start(fakebroker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

func TestTopicCommands(t *testing.T) {
	b := startBroker(t)
	a := b.Addr()
	out := mustRun(t, "topic", "create", "orders", "--addr", a, "--partitions", "3")
	if !strings.Contains(out, "partitions:") || !strings.Contains(out, "3") {
		t.Fatalf("create output:\n%s", out)
	}
	mustRun(t, "topic", "create", "--addr", a, "audit")
	if out := mustRun(t, "topic", "list", "--addr", a); out != "audit\norders\n" {
		t.Fatalf("list output %q", out)
	}
	out = mustRun(t, "topic", "describe", "orders", "--addr", a)
	if !strings.Contains(out, "partitions 3") || strings.Count(out, b.Addr()) != 3 {
		t.Fatalf("describe output:\n%s", out)
	}
	out = mustRun(t, "topic", "describe", "orders", "--addr", a, "--json")
	var js map[string]any
	if err := json.Unmarshal([]byte(out), &js); err != nil || js["topic"] != "orders" {
		t.Fatalf("describe --json: %v\n%s", err, out)
	}
	code, _, errs := run(t, "topic", "describe", "missing", "--addr", a)
	if code != 1 || !strings.Contains(errs, "ERROR: topic_not_found class=not_found retryable=false") {
		t.Fatalf("typed error output: %d %s", code, errs)
	}
	mustRun(t, "topic", "delete", "audit", "--addr", a)
	if out := mustRun(t, "topic", "delete", "audit", "--if-exists", "--addr", a); !strings.Contains(out, "did not exist") {
		t.Fatalf("delete --if-exists: %s", out)
	}
	out = mustRun(t, "cluster", "status", "--addr", a, "--output", "json")
	if err := json.Unmarshal([]byte(out), &js); err != nil || js["fake"] != true {
		t.Fatalf("cluster status --output json: %v\n%s", err, out)
	}
	out = mustRun(t, "cluster", "status", "--addr", a)
	for _, want := range []string{"raft:        leader fake-0", "gateway  1/1 live  fake-0", "topics:      ", "0 leaderless, 0 under-replicated"} {
		if !strings.Contains(out, want) {
			t.Fatalf("cluster status lacks %q:\n%s", want, out)
		}
	}
	out = mustRun(t, "cluster", "list", "--addr", a)
	if !strings.Contains(out, "fake-0  gateway  true") {
		t.Fatalf("cluster list:\n%s", out)
	}
	// Nothing listening: a typed, readable connection error.
	b.Close()
	if code, _, errs := run(t, "topic", "list", "--addr", a, "--timeout", "1s"); code != 1 || !strings.Contains(errs, "connection_lost") {
		t.Fatalf("no server: %d %s", code, errs)
	}
}

func TestProduceAndConsume(t *testing.T) {
	b := startBroker(t)
	a := b.Addr()
	mustRun(t, "topic", "create", "logs", "--addr", a, "--partitions", "2")
	stdin = strings.NewReader("k1:first line\nk2:second line\nk1:third line\n")
	defer func() { stdin = os.Stdin }()
	out := mustRun(t, "produce", "logs", "--addr", a, "--key-separator", ":", "--compression", "snappy")
	if !strings.Contains(out, "produced 3 records") {
		t.Fatalf("produce output %q", out)
	}
	out = mustRun(t, "consume", "logs", "--addr", a, "--wait", "10ms")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("consume printed:\n%s", out)
	}
	// Same key, same partition, in order.
	var k1 []string
	for _, l := range lines {
		if strings.Contains(l, "key=k1") {
			k1 = append(k1, l)
		}
	}
	if len(k1) != 2 || !strings.HasSuffix(k1[0], "first line") || !strings.HasSuffix(k1[1], "third line") {
		t.Fatalf("key order: %v", k1)
	}
	if out := mustRun(t, "consume", "logs", "--addr", a, "--from", "latest", "--wait", "10ms"); out != "" {
		t.Fatalf("--from latest printed %q", out)
	}
	out = mustRun(t, "consume", "logs", "--addr", a, "--format", "json", "--max", "1", "--wait", "10ms")
	var rec map[string]any
	if err := json.Unmarshal([]byte(out), &rec); err != nil || rec["value"] == nil {
		t.Fatalf("json record %v %q", err, out)
	}

	// Synthetic records through a group: the second run finds everything
	// committed and prints nothing.
	mustRun(t, "topic", "create", "bulk", "--addr", a, "--partitions", "4")
	if out := mustRun(t, "produce", "bulk", "--addr", a, "--count", "500", "--size", "16", "--acks", "all", "--idempotent"); !strings.Contains(out, "produced 500") {
		t.Fatalf("produce --count: %s", out)
	}
	out = mustRun(t, "consume", "bulk", "--addr", a, "--group", "readers", "--wait", "10ms")
	if n := strings.Count(out, "\n"); n != 500 {
		t.Fatalf("group consume printed %d records", n)
	}
	for p := range int32(4) {
		if v, ok := b.Committed("bulk", "readers", p); !ok || v != 125 {
			t.Fatalf("partition %d committed %d %v", p, v, ok)
		}
	}
	if out := mustRun(t, "consume", "bulk", "--addr", a, "--group", "readers", "--wait", "10ms"); out != "" {
		t.Fatalf("second group run printed %d lines", strings.Count(out, "\n"))
	}
	if out := mustRun(t, "group", "list", "--addr", a); out != "readers\n" {
		t.Fatalf("group list %q", out)
	}
	out = mustRun(t, "group", "status", "readers", "--addr", a)
	if !strings.Contains(out, "group readers topic bulk") || !strings.Contains(out, "members 0") {
		t.Fatalf("group status:\n%s", out)
	}
	if code, _, _ := run(t, "consume", "bulk", "--addr", a, "--group", "g", "--from", "5"); code != 2 {
		t.Fatal("--from OFFSET with --group accepted")
	}
	if code, _, errs := run(t, "produce", "missing", "--addr", a, "--count", "1", "--partition", "0"); code != 1 || !strings.Contains(errs, "topic_not_found") {
		t.Fatalf("produce to missing topic: %d %s", code, errs)
	}
}

// consume --group --max N commits exactly the N records it printed (it used
// to commit the whole fetched batch, skipping the rest for the group).
func TestGroupConsumeMaxCommitsOnlyWhatItPrinted(t *testing.T) {
	b := startBroker(t)
	a := b.Addr()
	mustRun(t, "topic", "create", "t2", "--addr", a, "--partitions", "1")
	mustRun(t, "produce", "t2", "--addr", a, "--count", "100", "--size", "8")
	out := mustRun(t, "consume", "t2", "--addr", a, "--group", "g2", "--max", "5", "--wait", "10ms")
	if n := strings.Count(out, "\n"); n != 5 || !strings.Contains(out, "offset=4 ") || strings.Contains(out, "offset=5 ") {
		t.Fatalf("--max 5 printed:\n%s", out)
	}
	if v, ok := b.Committed("t2", "g2", 0); !ok || v != 5 {
		t.Fatalf("committed %d (found %v), want 5: the records printed", v, ok)
	}
	// The next run starts where the first stopped.
	out = mustRun(t, "consume", "t2", "--addr", a, "--group", "g2", "--max", "10", "--wait", "10ms")
	if !strings.HasPrefix(out, "partition=0 offset=5 ") || strings.Count(out, "\n") != 10 {
		t.Fatalf("second run printed:\n%s", out)
	}
	if v, _ := b.Committed("t2", "g2", 0); v != 15 {
		t.Fatalf("committed %d after the second run, want 15", v)
	}
}

func TestBenchThroughCLI(t *testing.T) {
	b := startBroker(t)
	out := mustRun(t, "bench", "produce", "--addr", b.Addr(), "--count", "1000", "--batch", "50", "--conns", "2")
	if !strings.Contains(out, "1000 records") || !strings.Contains(out, "p999") {
		t.Fatalf("bench output:\n%s", out)
	}
}

func TestTLSWithIssuedCertificates(t *testing.T) {
	dir := t.TempDir()
	mustRun(t, "certs", "init", "--dir", dir)
	mustRun(t, "certs", "issue", "--dir", dir, "--role", "gateway", "--node-id", "gw-1")
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "gateway-gw-1.crt"), filepath.Join(dir, "gateway-gw-1.key"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := fakebroker.Start(fakebroker.Options{TLS: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	mustRun(t, "topic", "create", "secure", "--addr", b.Addr(), "--tls-ca", filepath.Join(dir, "ca.crt"))
	if out := mustRun(t, "topic", "list", "--addr", b.Addr(), "--tls-ca", filepath.Join(dir, "ca.crt")); out != "secure\n" {
		t.Fatalf("list over TLS %q", out)
	}
	out := mustRun(t, "bench", "produce", "--addr", b.Addr(), "--tls-ca", filepath.Join(dir, "ca.crt"), "--topic", "secure", "--count", "100", "--conns", "1")
	if !strings.Contains(out, "100 records") {
		t.Fatalf("bench over TLS:\n%s", out)
	}
	// Another CA's bundle does not verify the server.
	other := t.TempDir()
	mustRun(t, "certs", "init", "--dir", other)
	if code, _, errs := run(t, "topic", "list", "--addr", b.Addr(), "--tls-ca", filepath.Join(other, "ca.crt")); code != 1 || !strings.Contains(errs, "connection_lost") {
		t.Fatalf("foreign CA: %d %s", code, errs)
	}
}

// TestFollowingConsumerReportsAnOutageAndResumes: a consume --follow (plain
// and as a group member) that meets retryable failures says so once on
// stderr, keeps retrying with a backoff, says when it resumed, and prints
// every record; without --follow the failure ends the command.
func TestFollowingConsumerReportsAnOutageAndResumes(t *testing.T) {
	b := startBroker(t)
	a := b.Addr()
	mustRun(t, "topic", "create", "t3", "--addr", a, "--partitions", "1")
	mustRun(t, "produce", "t3", "--addr", a, "--count", "5", "--size", "8")
	outage := errcode.RouterNotAvailable.New("partition server unreachable")
	for _, args := range [][]string{
		{"consume", "t3", "--addr", a, "--follow", "--max", "5", "--wait", "10ms"},
		{"consume", "t3", "--addr", a, "--group", "g3", "--follow", "--max", "5", "--wait", "10ms"},
	} {
		b.Inject(wire.CmdConsume, outage, 3)
		code, out, errs := run(t, args...)
		if code != 0 || strings.Count(out, "\n") != 5 {
			t.Fatalf("%v: exit %d, printed:\n%s\nstderr:\n%s", args, code, out, errs)
		}
		if strings.Count(errs, "retrying") != 1 || !strings.Contains(errs, "router_not_available") || !strings.Contains(errs, "resumed after") {
			t.Fatalf("%v: stderr must report the outage once and the recovery:\n%s", args, errs)
		}
	}
	b.Inject(wire.CmdConsume, outage, 1)
	if code, _, errs := run(t, "consume", "t3", "--addr", a, "--wait", "10ms"); code != 1 || !strings.Contains(errs, "router_not_available") {
		t.Fatalf("without --follow: exit %d, stderr %s", code, errs)
	}
}

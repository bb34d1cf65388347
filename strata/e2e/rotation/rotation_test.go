package rotation

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/clienttls"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	"github.com/strataio/strata/libs/rpc"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
	"github.com/strataio/strata/strata/e2e/framework"
	"github.com/strataio/strata/strata/internal/allinone"
	"github.com/strataio/strata/strata/internal/load"
)

func TestMain(m *testing.M) { framework.Main(m) }

// envDuration reads a duration knob (the make target sets the full size).
func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a positive duration", name, v)
	}
	return d
}

// roles are the all-in-one's certificate holders; every one is rotated.
var roles = []pki.Role{pki.RoleMetad, pki.RolePartitiond, pki.RoleCoordinatord, pki.RoleGateway, pki.RoleAdmin}

// TestRotationUnderLoad re-issues every role's certificate (new key, new
// serial, same identity) and the client listener's TLS certificate every
// STRATA_ROTATION_EVERY (default 2s) for STRATA_ROTATION_FOR (default 12s)
// while `strata bench e2e` (acks=all, produce and consume, over client
// TLS) runs against the all-in-one's gateway. After each
// rotation it waits until every role's server presents the new
// certificate on a fresh handshake. Meanwhile a prober opens a fresh mTLS
// connection to every role every 100 ms with the (also rotated) admin
// identity and calls a read method, so handshakes on both sides happen
// across every rotation, not only on connections opened before it.
// Passing: 0 failed bench requests, 0 failed probes, every rotation
// observed on every server.
func TestRotationUnderLoad(t *testing.T) {
	every := envDuration(t, "STRATA_ROTATION_EVERY", 2*time.Second)
	total := envDuration(t, "STRATA_ROTATION_FOR", 12*time.Second)
	// The client listener speaks TLS too, with its own certificate (from
	// the same local CA), rotated with the others.
	dataDir := t.TempDir()
	certs := filepath.Join(dataDir, "certs")
	listenerID := pki.Identity{Role: pki.RoleGateway, NodeID: "client-listener"}
	listener, err := pki.EnsureLocal(certs, []pki.Identity{listenerID})
	if err != nil {
		t.Fatal(err)
	}
	a := framework.StartAllInOne(t, func(c *allinone.Config) {
		c.DataDir = dataDir
		c.Gateway.TLSCert, c.Gateway.TLSKey = listener[listenerID].Cert, listener[listenerID].Key
	})
	srv := a.Server()
	ids := make([]pki.Identity, len(roles))
	for i, r := range roles {
		ids[i] = pki.Identity{Role: r, NodeID: "local-" + string(r)}
	}
	files, err := pki.EnsureLocal(certs, ids) // the files the all-in-one uses (nothing re-issued)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := pki.LoadCA(certs)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := pki.NewSource(files[ids[len(ids)-1]])
	if err != nil {
		t.Fatal(err)
	}

	clientTLS, err := clienttls.ClientConfig(clienttls.ClientFiles{CA: listener[listenerID].CA})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), total+2*time.Minute)
	defer cancel()
	cl, err := client.Dial(ctx, srv.ClientAddr(), client.Options{TLS: clientTLS})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const topic = "rotation"
	if _, err := cl.CreateTopic(ctx, client.TopicConfig{Name: topic, Partitions: 3}); err != nil {
		t.Fatal(err)
	}

	// The load: strata bench e2e for the whole rotation window.
	var res *load.Result
	var loadErr error
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		res, loadErr = load.Run(ctx, load.Config{Mode: load.ModeE2E, Addr: srv.ClientAddr(), Topic: topic, Partitions: 3,
			Conns: 2, Inflight: 2, RecordSize: 100, BatchSize: 20, Acks: "all", Duration: total + every, Rate: 4000,
			Client: client.Options{RequestTimeout: 30 * time.Second, TLS: clientTLS}})
	}()

	// The prober: fresh connections to every role, every 100 ms.
	var probes, probeFailures atomic.Int64
	var firstProbeErr atomic.Value
	stopProbe := make(chan struct{})
	var probing sync.WaitGroup
	probing.Go(func() {
		for {
			select {
			case <-stopProbe:
				return
			case <-time.After(100 * time.Millisecond):
			}
			for _, r := range []pki.Role{pki.RoleMetad, pki.RolePartitiond, pki.RoleCoordinatord} {
				probes.Add(1)
				if err := probe(ctx, srv.RPCAddr(r), r, admin, topic); err != nil {
					probeFailures.Add(1)
					firstProbeErr.CompareAndSwap(nil, fmt.Errorf("%s: %w", r, err))
				}
			}
		}
	})

	rotations := 0
	deadline := time.Now().Add(total)
	for time.Now().Before(deadline) {
		time.Sleep(every)
		for _, id := range ids {
			name := string(id.Role) + "-" + id.NodeID
			f, err := ca.IssueToDir(certs, name, pki.NodeSpec{Identity: id, DNSNames: []string{"localhost"},
				IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}})
			if err != nil {
				t.Fatal(err)
			}
			if id.Role == pki.RoleAdmin {
				continue // no server; the prober presents it
			}
			want := serialOf(t, f.Cert)
			waitServes(t, srv.RPCAddr(id.Role), id.Role, admin, want)
		}
		f, err := ca.IssueToDir(certs, string(listenerID.Role)+"-"+listenerID.NodeID, pki.NodeSpec{Identity: listenerID,
			IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
		if err != nil {
			t.Fatal(err)
		}
		waitClientListenerServes(t, srv.ClientAddr(), clientTLS, serialOf(t, f.Cert))
		rotations++
	}
	close(stopProbe)
	probing.Wait()
	<-loadDone
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	t.Logf("%d rotations of %d internal certificates and the client listener's every %v; bench (over TLS): produced %d records (%d errors), consumed %d (%d errors); %d probes",
		rotations, len(ids), every, res.Produce.Records, res.Produce.Errors, res.Consume.Records, res.Consume.Errors, probes.Load())
	if n := res.Failures(); n != 0 {
		t.Fatalf("%d bench requests failed across certificate rotations", n)
	}
	if n := probeFailures.Load(); n != 0 {
		t.Fatalf("%d of %d probes failed; first: %v", n, probes.Load(), firstProbeErr.Load())
	}
	if rotations < 2 || res.Produce.Records == 0 || res.Consume.Records == 0 {
		t.Fatalf("too little happened: %d rotations, %d produced, %d consumed", rotations, res.Produce.Records, res.Consume.Records)
	}
}

// probe opens a new mTLS connection to a role as admin and calls one read
// method on it.
func probe(ctx context.Context, addr string, r pki.Role, admin *pki.Source, topic string) error {
	conn, err := rpc.Dial(addr, rpc.ClientOptions{Source: admin, ServerRoles: []pki.Role{r}})
	if err != nil {
		return err
	}
	defer conn.Close()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	switch r {
	case pki.RoleMetad:
		_, err = metav1.NewMetadataServiceClient(conn).ListNodes(cctx, &metav1.ListNodesRequest{})
	case pki.RolePartitiond:
		_, err = partitionv1.NewPartitionServiceClient(conn).ListOffsets(cctx, &partitionv1.ListOffsetsRequest{Topic: topic})
	case pki.RoleCoordinatord:
		_, err = coordinatorv1.NewCoordinatorServiceClient(conn).ListGroups(cctx, &coordinatorv1.ListGroupsRequest{})
	}
	return err
}

func serialOf(t *testing.T, certFile string) string {
	t.Helper()
	return pkitest.ReadCert(t, certFile).SerialNumber.String()
}

// waitServes handshakes with the role's server (10 s at most) until it
// presents the certificate with serial want: reloads are checked on
// handshake, at most every 100 ms.
func waitServes(t *testing.T, addr string, r pki.Role, admin *pki.Source, want string) {
	t.Helper()
	if got, ok := waitServedSerial(addr, admin.ClientConfig(r), want); !ok {
		t.Fatalf("%s still serves certificate %s, want the rotated %s", r, got, want)
	}
}

// waitClientListenerServes is waitServes for the client listener.
func waitClientListenerServes(t *testing.T, addr string, cfg *tls.Config, want string) {
	t.Helper()
	c := cfg.Clone()
	c.ServerName = "127.0.0.1"
	if got, ok := waitServedSerial(addr, c, want); !ok {
		t.Fatalf("the client listener still serves certificate %s, want the rotated %s", got, want)
	}
}

// waitServedSerial handshakes with addr using cfg (10 s at most) until the
// server presents the certificate with serial want; it returns the last
// serial seen and whether it was want.
func waitServedSerial(addr string, cfg *tls.Config, want string) (string, bool) {
	deadline := time.Now().Add(10 * time.Second)
	var got string
	for time.Now().Before(deadline) {
		d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 2 * time.Second}, Config: cfg}
		nc, err := d.Dial("tcp", addr)
		if err == nil {
			got = nc.(*tls.Conn).ConnectionState().PeerCertificates[0].SerialNumber.String()
			nc.Close()
			if got == want {
				return got, true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return got, false
}

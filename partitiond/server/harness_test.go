package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/node"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	"github.com/strataio/strata/libs/rpc"
	"github.com/strataio/strata/libs/telemetry"
	"github.com/strataio/strata/libs/wire"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"

	"github.com/strataio/strata/partitiond/internal/metadtest"
	"github.com/strataio/strata/partitiond/internal/record"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// cluster is one partitiond (node "p1") in a test process with a fake metad.
type cluster struct {
	ca      *pkitest.PKI
	metad   *metadtest.Fake
	proc    *node.Process
	env     *node.RoleEnv
	role    *Role
	dataDir string
	conn    *grpc.ClientConn
	client  partitionv1.PartitionServiceClient
	stop    func()
}

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1 << 20
	cfg.HwmCheckpointInterval = 50 * time.Millisecond
	cfg.ReconcileRetry = 50 * time.Millisecond
	cfg.RetentionCheckInterval = time.Hour
	return cfg
}

// startCluster runs partitiond with its data in dataDir ("" = fresh).
func startCluster(t testing.TB, ca *pkitest.PKI, md *metadtest.Fake, dataDir string, mod ...func(*Config)) *cluster {
	t.Helper()
	return startClusterTraced(t, nil, ca, md, dataDir, mod...)
}

// startClusterTraced is startCluster with the process tracing (nil: off).
func startClusterTraced(t testing.TB, tracing *telemetry.Tracing, ca *pkitest.PKI, md *metadtest.Fake, dataDir string, mod ...func(*Config)) *cluster {
	t.Helper()
	if ca == nil {
		ca = pkitest.New(t)
	}
	if md == nil {
		md = metadtest.Start(t, ca)
	}
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	c := &cluster{ca: ca, metad: md, dataDir: dataDir}
	c.proc = node.NewProcess(nil, tracing)
	c.proc.HealthAddr = "127.0.0.1:0"
	env, err := c.proc.NewRoleEnv(node.RoleOptions{Role: pki.RolePartitiond, NodeID: "p1",
		TLSFiles: ca.Files(t, pki.RolePartitiond, "p1"), Listen: "127.0.0.1:0", DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	c.env = env
	cfg := testConfig()
	cfg.MetadAddrs = []string{md.Addr}
	for _, m := range mod {
		m(&cfg)
	}
	role, err := newRole(env, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.role = role
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan struct{})
	go func() { done <- c.proc.Run(ctx, []node.Role{role}, 10*time.Second, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("partitiond did not start")
	}
	c.conn = c.dial(t, pki.RoleGateway, "g1")
	c.client = partitionv1.NewPartitionServiceClient(c.conn)
	var once bool
	c.stop = func() {
		if once {
			return
		}
		once = true
		c.conn.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("partitiond stopped with %v", err)
		}
	}
	t.Cleanup(c.stop)
	return c
}

func (c *cluster) dial(t testing.TB, role pki.Role, id string) *grpc.ClientConn {
	t.Helper()
	conn, err := rpc.Dial(c.env.AdvertiseRPC, rpc.ClientOptions{Source: c.ca.Source(t, role, id), ServerRoles: []pki.Role{pki.RolePartitiond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// waitFor polls cond until it holds (bounded).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitServing waits until partition id of topic answers ListOffsets.
func (c *cluster) waitServing(t testing.TB, topic string, id int32) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s/%d served", topic, id), func() bool {
		resp, err := c.client.ListOffsets(ctx(t), &partitionv1.ListOffsetsRequest{Topic: topic, Partitions: []int32{id}})
		return err == nil && len(resp.GetPartitions()) == 1 && resp.GetPartitions()[0].GetError() == nil
	})
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// recordSet encodes payloads as a Wire v2 record set.
func recordSet(t testing.TB, topic string, payloads ...string) []byte {
	t.Helper()
	var set []byte
	for _, p := range payloads {
		r := wire.Record{Topic: topic, Payload: []byte(p)}
		b, err := r.AppendTo(nil)
		if err != nil {
			t.Fatal(err)
		}
		set = binary.BigEndian.AppendUint32(set, uint32(len(b)))
		set = append(set, b...)
	}
	return set
}

type fetched struct {
	offset  uint64
	payload string
}

func decodeSet(t testing.TB, set []byte) []fetched {
	t.Helper()
	var out []fetched
	for len(set) > 0 {
		r, rest, ok, bad := record.Next(set)
		if !ok || bad {
			t.Fatal("malformed record set")
		}
		v, err := wire.ParseRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fetched{v.Offset(), string(v.Payload())})
		set = rest
	}
	return out
}

func (c *cluster) fetchAll(t testing.TB, topic string, id int32) []fetched {
	t.Helper()
	var out []fetched
	var from uint64
	for {
		resp, err := c.client.Fetch(ctx(t), &partitionv1.FetchRequest{Topic: topic, Partition: id, Offset: from})
		if err != nil {
			t.Fatalf("fetch %d: %v", from, err)
		}
		out = append(out, decodeSet(t, resp.GetRecords())...)
		if resp.GetNextOffset() == from {
			return out
		}
		from = resp.GetNextOffset()
	}
}

func wantCode(t testing.TB, err error, code errcode.Code) *errcode.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("got nil error, want %s", code.Name())
	}
	var e *errcode.Error
	if !errors.As(err, &e) || e.Code != code.Name() {
		t.Fatalf("got %v, want %s", err, code.Name())
	}
	return e
}

package partitiond

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/fake/metadfake"
	"github.com/strataio/strata/libs/looptest"
	"github.com/strataio/strata/libs/node"
	"github.com/strataio/strata/libs/node/nodetest"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	"github.com/strataio/strata/libs/rpc"
	"github.com/strataio/strata/libs/telemetry"
	"github.com/strataio/strata/libs/wire"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"

	"github.com/strataio/strata/partitiond/internal/recordtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// cluster is one partitiond (node "p1") in a test process with a fake metad.
type cluster struct {
	ca      *pkitest.PKI
	metad   *metadfake.Server
	proc    *node.Process
	env     *node.RoleEnv
	role    *Role
	dataDir string
	conn    rpc.Conn
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
func startCluster(t testing.TB, ca *pkitest.PKI, md *metadfake.Server, dataDir string, mod ...func(*Config)) *cluster {
	t.Helper()
	return startClusterTraced(t, nil, ca, md, dataDir, mod...)
}

// startClusterTraced is startCluster with the process tracing (nil: off).
func startClusterTraced(t testing.TB, tracing *telemetry.Tracing, ca *pkitest.PKI, md *metadfake.Server, dataDir string, mod ...func(*Config)) *cluster {
	t.Helper()
	return startNode(t, tracing, "p1", ca, md, dataDir, mod...)
}

// startNode runs partitiond as node id (startCluster's is "p1"); nodes
// sharing md form a cluster.
func startNode(t testing.TB, tracing *telemetry.Tracing, id string, ca *pkitest.PKI, md *metadfake.Server, dataDir string, mod ...func(*Config)) *cluster {
	t.Helper()
	if ca == nil {
		ca = pkitest.New(t)
	}
	if md == nil {
		md = metadfake.Start(t, ca, metadfake.Options{})
	}
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	c := &cluster{ca: ca, metad: md, dataDir: dataDir}
	c.proc = node.NewProcess(nil, tracing)
	c.proc.HealthAddr = "127.0.0.1:0"
	env, err := c.proc.NewRoleEnv(node.RoleOptions{Role: pki.RolePartitiond, NodeID: id,
		TLSFiles: ca.Files(t, pki.RolePartitiond, id), Listen: "127.0.0.1:0", DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	c.env = env
	cfg := testConfig()
	cfg.MetadAddrs = []string{md.Addr}
	for _, m := range mod {
		m(&cfg)
	}
	role, err := New(env, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.role = role
	run := nodetest.Start(t, "partitiond", c.proc, 10*time.Second, role)
	c.conn = c.dial(t, pki.RoleGateway, "g1")
	c.client = partitionv1.NewPartitionServiceClient(c.conn)
	c.stop = func() {
		c.conn.Close()
		run.Stop()
	}
	return c
}

func (c *cluster) dial(t testing.TB, role pki.Role, id string) rpc.Conn {
	t.Helper()
	conn, err := rpc.Dial(c.env.AdvertiseRPC, rpc.ClientOptions{Source: c.ca.Source(t, role, id), ServerRoles: []pki.Role{pki.RolePartitiond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// retain runs one maintenance pass on c's node; every partition's must
// delete a segment (the tests' topics keep retention_bytes 1).
func (c *cluster) retain(t testing.TB) {
	t.Helper()
	st, err := c.role.storage()
	if err != nil {
		t.Fatal(err)
	}
	for _, rep := range st.Maintain(ctx(t)) {
		if rep.Err != nil || rep.DeletedSegments == 0 {
			t.Fatalf("maintenance %+v", rep)
		}
	}
}

// waitServing waits until partition id of topic answers ListOffsets.
func (c *cluster) waitServing(t testing.TB, topic string, id int32) {
	t.Helper()
	looptest.Eventually(t, fmt.Sprintf("%s/%d served", topic, id), func() bool {
		resp, err := c.client.ListOffsets(ctx(t), &partitionv1.ListOffsetsRequest{Topic: topic, Partitions: []int32{id}})
		return err == nil && len(resp.GetPartitions()) == 1 && resp.GetPartitions()[0].GetError() == nil
	})
}

func ctx(t testing.TB) context.Context { return looptest.Context(t, 10*time.Second) }

// recordSet encodes payloads as a Wire v2 record set.
func recordSet(t testing.TB, topic string, payloads ...string) []byte {
	t.Helper()
	recs := make([]wire.Record, len(payloads))
	for i, p := range payloads {
		recs[i] = wire.Record{Topic: topic, Payload: []byte(p)}
	}
	return recordtest.Set(t, recs...)
}

type fetched struct {
	offset  uint64
	payload string
}

func decodeSet(t testing.TB, set []byte) []fetched {
	t.Helper()
	var out []fetched
	for _, v := range recordtest.Records(t, set) {
		out = append(out, fetched{v.Offset(), string(v.Payload())})
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

package metad

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strataio/strata/libs/metaclient"
	"github.com/strataio/strata/libs/node"
	"github.com/strataio/strata/libs/node/nodetest"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	"github.com/strataio/strata/libs/rpc"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

func testLogger() *slog.Logger {
	if os.Getenv("STRATA_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// fastConfig shortens Raft and lease timings so elections and expiries
// happen within a test's budget.
func fastConfig() Config {
	c := DefaultConfig()
	c.RaftListen = "127.0.0.1:0"
	c.NodeLeaseTimeout = 2 * time.Second
	c.RaftHeartbeatTimeout = 200 * time.Millisecond
	c.RaftElectionTimeout = 200 * time.Millisecond
	c.RaftLeaderLeaseTimeout = 100 * time.Millisecond
	c.CoordinatorCheckTimeout = time.Second
	return c
}

// instance is one metad process: a node.Process hosting the metad role.
type instance struct {
	t    *testing.T
	id   string
	dir  string
	proc *node.Process
	srv  *Role
	rpc  string
	run  *nodetest.Run // nil while stopped
}

// build creates the process and the role without running it; voters, when
// set, replace the bootstrap list (tests learn Raft ports only after bind).
func build(t *testing.T, ca *pkitest.PKI, id, dir string, cfg Config) *instance {
	t.Helper()
	proc := node.NewProcess(testLogger().With("metad", id), nil)
	proc.HealthAddr = "127.0.0.1:0"
	env, err := proc.NewRoleEnv(node.RoleOptions{Role: pki.RoleMetad, NodeID: id, TLSFiles: ca.Files(t, pki.RoleMetad, id), Listen: "127.0.0.1:0", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(env, cfg)
	if err != nil {
		proc.Close()
		t.Fatal(err)
	}
	return &instance{t: t, id: id, dir: dir, proc: proc, srv: srv, rpc: env.AdvertiseRPC}
}

func (in *instance) start() {
	in.t.Helper()
	in.run = nodetest.Start(in.t, "metad "+in.id, in.proc, 5*time.Second, in.srv)
}

// stop shuts the process down (idempotent).
func (in *instance) stop() {
	if in.run != nil {
		in.run.Stop()
		in.run = nil
	}
}

func (in *instance) isLeader() bool {
	n := in.srv.node.Load()
	return n != nil && n.IsLeader()
}

// startSingle runs a single-voter metad.
func startSingle(t *testing.T, ca *pkitest.PKI, dir string) *instance {
	return runSingle(t, ca, dir, fastConfig())
}

// startSingleStable runs a single-voter metad whose node leases outlast
// any test, so no expiry changes the state behind a test's back.
func startSingleStable(t *testing.T, ca *pkitest.PKI, dir string) *instance {
	cfg := fastConfig()
	cfg.NodeLeaseTimeout = time.Minute
	return runSingle(t, ca, dir, cfg)
}

// runSingle runs metad "m1" as the single voter with cfg, stopped when t
// ends.
func runSingle(t *testing.T, ca *pkitest.PKI, dir string, cfg Config) *instance {
	cfg.SingleVoter()
	in := build(t, ca, "m1", dir, cfg)
	in.start()
	return in
}

// startCluster runs n voters bootstrapped from one list.
func startCluster(t *testing.T, ca *pkitest.PKI, n int) []*instance {
	t.Helper()
	var ins []*instance
	var voters []raft.Server
	for i := 1; i <= n; i++ {
		cfg := fastConfig()
		cfg.Bootstrap = false // the list is set below, once ports are bound
		id := "m" + string(rune('0'+i))
		in := build(t, ca, id, t.TempDir(), cfg)
		ins = append(ins, in)
		voters = append(voters, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(in.srv.RaftAddr())})
	}
	for _, in := range ins {
		in.srv.voters = voters
		in.start()
	}
	return ins
}

// restart runs a stopped instance again on the same directory and Raft
// address (peers know it by that address).
func (in *instance) restart(ca *pkitest.PKI) *instance {
	in.t.Helper()
	cfg := fastConfig()
	cfg.Bootstrap = false
	cfg.RaftListen = in.srv.RaftAddr()
	again := build(in.t, ca, in.id, in.dir, cfg)
	again.start()
	return again
}

func waitLeader(t *testing.T, ins []*instance) *instance {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, in := range ins {
			if in.run != nil && in.isLeader() {
				return in
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no leader elected")
	return nil
}

// client is a metaclient with the given role's certificate.
func client(t *testing.T, ca *pkitest.PKI, role pki.Role, addrs ...string) *metaclient.Client {
	t.Helper()
	pool := rpc.NewPool(rpc.ClientOptions{Source: ca.Source(t, role, "c-"+string(role)), ServerRoles: []pki.Role{pki.RoleMetad}})
	t.Cleanup(func() { pool.Close() })
	return metaclient.New(metaclient.Options{Addrs: addrs, Dial: pool.Get, CallTimeout: 3 * time.Second})
}

// svc is the MetadataService client interface: call tables name an RPC by
// its method expression (svc.CreateTopic) for callWith.
type svc = metav1.MetadataServiceClient

// callWith returns one call of a MetadataService method with req through c
// (following leader redirects), keeping only its error.
func callWith[Req, Resp any](ctx context.Context, c *metaclient.Client,
	method metaclient.Method[Req, Resp], req Req) func() error {
	return func() error {
		_, err := metaclient.Invoke(ctx, c, method, req)
		return err
	}
}

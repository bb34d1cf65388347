// Package clustertest starts a real Strata cluster of role processes on
// loopback for tests: it builds the binaries once, issues a PKI at run time,
// gives every process its own data directory and ports, waits on /ready, lets
// a test kill -9 and restart any process, and always cleans up (t.Cleanup
// kills every process it started). The processes are libs/proctest
// processes; their logs are printed when the test fails.
package clustertest

import (
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strataio/strata/libs/looptest"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/proctest"
)

// Binaries are the role binaries the harness builds.
var Binaries = []string{"metad", "partitiond", "coordinatord", "gateway", "strata"}

// Build compiles every binary once per test process into a temporary
// directory and returns it. The directory is removed by RemoveBuilds (call it
// from TestMain).
func Build(t testing.TB) string {
	t.Helper()
	var pkgs []string
	for _, b := range Binaries {
		pkgs = append(pkgs, "github.com/strataio/strata/"+b+"/cmd/"+b)
	}
	return proctest.Build(t, pkgs...)
}

// RemoveBuilds deletes the binaries built by Build.
func RemoveBuilds() { proctest.RemoveBuilds() }

// Spec sizes a cluster.
type Spec struct {
	Metad, Partitiond, Coordinatord, Gateways int
	// Env adds environment settings per role (e.g. shorter leases for
	// failover tests).
	Env map[pki.Role][]string
}

// FullSpec is the split deployment of the issue: 3 metad, 3 partitiond,
// 2 coordinatord and 2 gateways.
var FullSpec = Spec{Metad: 3, Partitiond: 3, Coordinatord: 2, Gateways: 2}

// Proc is one role process of the cluster.
type Proc struct {
	Name       string // e.g. "partitiond-2"
	Role       pki.Role
	NodeID     string
	DataDir    string
	RPCAddr    string
	HealthAddr string
	// MetricsAddr serves /metrics (every process enables the exporter).
	MetricsAddr string
	ClientAddr  string // gateways only
	RaftAddr    string // metad only

	c    *Cluster
	bin  string
	args []string
	env  []string
	proc *proctest.Proc // made at the first Start, once args and env are final
}

// Cluster is a running process cluster.
type Cluster struct {
	t     testing.TB
	Dir   string
	Procs []*Proc
	ca    *pki.CA
}

// AdminSource returns a certificate source of the admin role, issued by
// the cluster's CA: for tests that call a role's internal gRPC API (for
// example a replica read of every copy of a partition).
func (c *Cluster) AdminSource() *pki.Source {
	c.t.Helper()
	files, err := c.ca.IssueToDir(filepath.Join(c.Dir, "certs"), "admin-test", pki.NodeSpec{
		Identity: pki.Identity{Role: pki.RoleAdmin, NodeID: "admin-test"},
		DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
	})
	if err != nil {
		c.t.Fatal(err)
	}
	src, err := pki.NewSource(files)
	if err != nil {
		c.t.Fatal(err)
	}
	return src
}

// Start builds the binaries, issues certificates, starts spec's processes in
// dependency order and waits until every /ready answers 200.
func Start(t testing.TB, spec Spec) *Cluster {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("process cluster tests need linux")
	}
	bins := Build(t)
	c := &Cluster{t: t, Dir: t.TempDir()}
	ca, err := pki.NewCA("strata clustertest CA", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c.ca = ca
	certs := filepath.Join(c.Dir, "certs")
	if err := ca.Save(certs); err != nil {
		t.Fatal(err)
	}
	add := func(role pki.Role, i int) *Proc {
		id := fmt.Sprintf("%s-%d", role, i)
		files, err := ca.IssueToDir(certs, id, pki.NodeSpec{
			Identity: pki.Identity{Role: role, NodeID: id},
			DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
		})
		if err != nil {
			t.Fatal(err)
		}
		p := &Proc{Name: id, Role: role, NodeID: id, c: c,
			bin: filepath.Join(bins, string(role)), DataDir: filepath.Join(c.Dir, id),
			RPCAddr: looptest.FreeAddr(t), HealthAddr: looptest.FreeAddr(t), MetricsAddr: looptest.FreeAddr(t)}
		p.env = []string{
			"STRATA_NODE_ID=" + id,
			"STRATA_DATA_DIR=" + p.DataDir,
			"STRATA_RPC_LISTEN=" + p.RPCAddr,
			"STRATA_TLS_CA=" + files.CA,
			"STRATA_TLS_CERT=" + files.Cert,
			"STRATA_TLS_KEY=" + files.Key,
			"STRATA_OPS_HOST=127.0.0.1",
			"HEALTH_CHECK_PORT=" + looptest.Port(p.HealthAddr),
			"ENABLE_EXPORTER=true",
			"EXPORTER_PORT=" + looptest.Port(p.MetricsAddr),
			"STRATA_LOG_LEVEL=debug",
		}
		c.Procs = append(c.Procs, p)
		return p
	}
	var metads []*Proc
	for i := 1; i <= spec.Metad; i++ {
		p := add(pki.RoleMetad, i)
		p.RaftAddr = looptest.FreeAddr(t)
		metads = append(metads, p)
	}
	var rpcAddrs, voters []string
	for _, m := range metads {
		rpcAddrs = append(rpcAddrs, m.RPCAddr)
		voters = append(voters, m.NodeID+"="+m.RaftAddr)
	}
	for _, m := range metads {
		m.env = append(m.env, metadEnv(m, voters)...)
	}
	for i := 1; i <= spec.Partitiond; i++ {
		add(pki.RolePartitiond, i)
	}
	for i := 1; i <= spec.Coordinatord; i++ {
		add(pki.RoleCoordinatord, i)
	}
	for i := 1; i <= spec.Gateways; i++ {
		p := add(pki.RoleGateway, i)
		p.ClientAddr = looptest.FreeAddr(t)
		p.env = append(p.env, gatewayEnv(p)...)
	}
	for _, p := range c.Procs {
		if p.Role != pki.RoleMetad {
			p.env = append(p.env, "STRATA_METAD_ADDRS="+strings.Join(rpcAddrs, ","))
		}
		if spec.Partitiond >= 3 {
			p.env = append(p.env, replicatedDefaults[p.Role]...)
		}
		p.env = append(p.env, spec.Env[p.Role]...)
	}
	c.StartAll()
	return c
}

// StartAll starts every process (again, after KillAll) in dependency order:
// the metad voters together (they elect a leader among themselves), then
// each other role once the roles before it are ready.
func (c *Cluster) StartAll() {
	c.t.Helper()
	for _, role := range []pki.Role{pki.RoleMetad, pki.RolePartitiond, pki.RoleCoordinatord, pki.RoleGateway} {
		StartAndWait(c.ByRole(role)...)
	}
}

// StartAndWait starts every one of procs, then waits until each answers
// /ready (60 s at most each): processes that need each other, such as the
// metad voters, come up together.
func StartAndWait(procs ...*Proc) {
	for _, p := range procs {
		p.c.t.Helper()
		p.Start()
	}
	for _, p := range procs {
		p.WaitReady(60 * time.Second)
	}
}

// ByRole returns the processes of one role in start order.
func (c *Cluster) ByRole(r pki.Role) []*Proc {
	var out []*Proc
	for _, p := range c.Procs {
		if p.Role == r {
			out = append(out, p)
		}
	}
	return out
}

// GatewayAddrs returns the client addresses of every gateway.
func (c *Cluster) GatewayAddrs() []string {
	var out []string
	for _, p := range c.ByRole(pki.RoleGateway) {
		out = append(out, p.ClientAddr)
	}
	return out
}

// StopAll stops every process cleanly (SIGTERM) in reverse dependency
// order, the way an orchestrator drains a deployment: gateways first, metad
// last. Each role's processes stop together. A process that does not exit
// by itself with status 0 fails the test.
func (c *Cluster) StopAll() {
	for _, role := range []pki.Role{pki.RoleGateway, pki.RoleCoordinatord, pki.RolePartitiond, pki.RoleMetad} {
		var wg sync.WaitGroup
		for _, p := range c.ByRole(role) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := p.Stop(); err != nil {
					c.t.Errorf("graceful stop: %v", err)
				}
			}()
		}
		wg.Wait()
	}
}

// KillAll kills every running process (the harness's cleanup does it too).
func (c *Cluster) KillAll() {
	for _, p := range c.Procs {
		p.Kill()
	}
}

// Start launches the process (again, after Kill) with its log appended to
// <data dir>.log.
func (p *Proc) Start() {
	p.c.t.Helper()
	if p.proc == nil {
		p.proc = proctest.New(p.c.t, proctest.Spec{Name: p.Name, Path: p.bin, Args: p.args, Env: p.env,
			HealthAddr: p.HealthAddr, LogPath: p.DataDir + ".log"})
	}
	p.proc.Start()
}

// Pid returns the OS process id of the current run (0 before the first
// Start).
func (p *Proc) Pid() int {
	if p.proc == nil {
		return 0
	}
	return p.proc.Pid()
}

// Kill sends SIGKILL (kill -9) and waits for the process to exit.
func (p *Proc) Kill() {
	if p.proc != nil {
		p.proc.Kill()
	}
}

// Stop sends SIGTERM (a clean stop) and waits for the process to exit,
// killing it after 30 s; the error says when it did not exit by itself
// with status 0.
func (p *Proc) Stop() error {
	if p.proc == nil {
		return nil
	}
	return p.proc.Stop(30 * time.Second)
}

// Pause stops the process with SIGSTOP (a hung node: its connections stay
// open); Resume continues it.
func (p *Proc) Pause() {
	if p.proc != nil {
		p.proc.Pause()
	}
}

// Resume sends SIGCONT.
func (p *Proc) Resume() {
	if p.proc != nil {
		p.proc.Resume()
	}
}

// Restart kills the process and starts it again on the same data and ports.
func (p *Proc) Restart() {
	p.c.t.Helper()
	p.Kill()
	p.Start()
}

// WaitReady polls /ready until it answers 200 or the timeout passes; on
// timeout, or when the process exits first, the test fails with the
// process log's tail.
func (p *Proc) WaitReady(timeout time.Duration) {
	p.c.t.Helper()
	p.proc.WaitReady(timeout)
}

// LogPath returns the file the process's stdout and stderr go to
// (appended across restarts); it is known once the process started.
func (p *Proc) LogPath() string { return p.proc.LogPath() }

// LogTail returns the last n bytes of the process log.
func (p *Proc) LogTail(n int) string {
	if p.proc == nil {
		return "(never started)"
	}
	return p.proc.LogTail(n)
}

// replicatedDefaults are the settings of a cluster with at least three
// partition servers (as in compose and Kubernetes): replication factor 3,
// __consumer_offsets included, and min ISR 2.
var replicatedDefaults = map[pki.Role][]string{
	pki.RoleMetad:        {"STRATA_METAD_DEFAULT_REPLICATION_FACTOR=3", "STRATA_METAD_MIN_INSYNC_REPLICAS=2"},
	pki.RolePartitiond:   {"STRATA_PARTITIOND_MIN_INSYNC_REPLICAS=2"},
	pki.RoleCoordinatord: {"STRATA_COORDINATORD_OFFSETS_REPLICATION_FACTOR=3"},
}

// metadEnv configures a metad voter of the static bootstrap.
func metadEnv(p *Proc, voters []string) []string {
	return []string{
		"STRATA_METAD_RAFT_LISTEN=" + p.RaftAddr,
		"STRATA_METAD_VOTERS=" + strings.Join(voters, ","),
		"STRATA_METAD_BOOTSTRAP=true",
	}
}

// gatewayEnv configures a gateway's client listener.
func gatewayEnv(p *Proc) []string {
	return []string{"STRATA_GATEWAY_CLIENT_LISTEN=" + p.ClientAddr}
}

// Package clustertest starts a real Strata cluster of role processes on
// loopback for tests: it builds the binaries once, issues a PKI at run time,
// gives every process its own data directory and ports, waits on /ready, lets
// a test kill -9, SIGSTOP/SIGCONT and restart any process, and always cleans
// up (t.Cleanup kills every process it started).
package clustertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strataio/strata/libs/pki"
)

// Binaries are the role binaries the harness builds.
var Binaries = []string{"metad", "partitiond", "coordinatord", "gateway", "strata"}

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// Build compiles every binary once per test process into a temporary
// directory and returns it. The directory is removed by RemoveBuilds (call it
// from TestMain).
func Build(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "strata-clustertest-bin-")
		if buildErr != nil {
			return
		}
		pkgs := []string{}
		for _, b := range Binaries {
			pkgs = append(pkgs, "github.com/strataio/strata/"+b+"/cmd/"+b)
		}
		args := append([]string{"build", "-o", buildDir + string(os.PathSeparator)}, pkgs...)
		cmd := exec.Command("go", args...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=local")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildDir
}

// RemoveBuilds deletes the binaries built by Build.
func RemoveBuilds() {
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
}

// Spec sizes a cluster.
type Spec struct {
	Metad, Partitiond, Coordinatord, Gateways int
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

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// Cluster is a running process cluster.
type Cluster struct {
	t     testing.TB
	Dir   string
	Procs []*Proc
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
	t.Cleanup(c.KillAll)
	ca, err := pki.NewCA("strata clustertest CA", 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
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
			RPCAddr: freeAddr(t), HealthAddr: freeAddr(t), MetricsAddr: freeAddr(t)}
		p.env = []string{
			"STRATA_NODE_ID=" + id,
			"STRATA_DATA_DIR=" + p.DataDir,
			"STRATA_RPC_LISTEN=" + p.RPCAddr,
			"STRATA_TLS_CA=" + files.CA,
			"STRATA_TLS_CERT=" + files.Cert,
			"STRATA_TLS_KEY=" + files.Key,
			"STRATA_OPS_HOST=127.0.0.1",
			"HEALTH_CHECK_PORT=" + port(p.HealthAddr),
			"ENABLE_EXPORTER=true",
			"EXPORTER_PORT=" + port(p.MetricsAddr),
			"STRATA_LOG_LEVEL=debug",
		}
		c.Procs = append(c.Procs, p)
		return p
	}
	var metads []*Proc
	for i := 1; i <= spec.Metad; i++ {
		p := add(pki.RoleMetad, i)
		p.RaftAddr = freeAddr(t)
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
		p.ClientAddr = freeAddr(t)
		p.env = append(p.env, gatewayEnv(p)...)
	}
	for _, p := range c.Procs {
		if p.Role != pki.RoleMetad {
			p.env = append(p.env, "STRATA_METAD_ADDRS="+strings.Join(rpcAddrs, ","))
		}
	}
	// metad voters start together (they elect a leader among themselves);
	// the other roles start once metad is ready.
	for _, role := range []pki.Role{pki.RoleMetad, pki.RolePartitiond, pki.RoleCoordinatord, pki.RoleGateway} {
		for _, p := range c.ByRole(role) {
			p.Start()
		}
		for _, p := range c.ByRole(role) {
			p.WaitReady(60 * time.Second)
		}
	}
	return c
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

// KillAll kills every running process (the harness's cleanup).
func (c *Cluster) KillAll() {
	for _, p := range c.Procs {
		p.Kill()
	}
}

// Start launches the process (again, after Kill) with its log appended to
// <data dir>.log.
func (p *Proc) Start() {
	t := p.c.t
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		t.Fatalf("%s already running", p.Name)
	}
	logf, err := os.OpenFile(p.DataDir+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group, and die with the test binary if it is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	p.cmd, p.done, p.log = cmd, done, logf
}

// Kill sends SIGKILL (kill -9) and waits for the process to exit.
func (p *Proc) Kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGCONT) // a stopped process must be able to die
	cmd.Process.Kill()
	<-done
}

// Restart kills the process and starts it again on the same data and ports.
func (p *Proc) Restart() {
	p.Kill()
	p.Start()
}

// Pause sends SIGSTOP; Resume sends SIGCONT.
func (p *Proc) Pause()  { p.signal(syscall.SIGSTOP) }
func (p *Proc) Resume() { p.signal(syscall.SIGCONT) }

func (p *Proc) signal(s syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		p.cmd.Process.Signal(s)
	}
}

// WaitReady polls /ready until it answers 200 or the timeout passes; on
// timeout the test fails with the process log's tail.
func (p *Proc) WaitReady(timeout time.Duration) {
	t := p.c.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	url := "http://" + p.HealthAddr + "/ready"
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		p.mu.Lock()
		exited := p.cmd == nil
		if !exited {
			select {
			case <-p.done:
				exited = true
			default:
			}
		}
		p.mu.Unlock()
		if exited || ctx.Err() != nil {
			t.Fatalf("%s not ready (exited=%v): %v\n--- log tail ---\n%s", p.Name, exited, err, p.LogTail(4000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// LogTail returns the last n bytes of the process log.
func (p *Proc) LogTail(n int) string {
	b, err := os.ReadFile(p.DataDir + ".log")
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// freeAddr picks a free loopback port below the kernel's ephemeral range
// (32768 and up here): port-0 binds and outgoing connections of other tests
// take ephemeral ports, so they cannot grab the port between this check and
// the process binding it. A port is handed out at most once per test
// process: a cluster picks some 40 ports before any process binds them, and
// random picks would otherwise collide (about 7 % of clusters).
func freeAddr(t testing.TB) string {
	portsMu.Lock()
	defer portsMu.Unlock()
	for i := 0; i < 500; i++ {
		p := 20000 + rand.IntN(12000)
		if portsGiven[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		l.Close()
		portsGiven[p] = true
		return l.Addr().String()
	}
	t.Fatal("no free loopback port in 20000-31999")
	return ""
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

func port(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	if _, err := strconv.Atoi(p); err != nil {
		panic(addr)
	}
	return p
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

package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/metaclient"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	"github.com/strataio/strata/libs/rpc"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// freePort reserves a loopback port number for a child process (the
// processes need fixed addresses: the voter list names them up front).
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

type proc struct {
	id         string
	args       []string
	rpc        string
	health     string
	cmd        *exec.Cmd
	exited     chan struct{}
	logs       *os.File
	binaryPath string
}

func (p *proc) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(p.binaryPath, p.args...)
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.cmd = cmd
	p.exited = make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
}

func (p *proc) signal(sig syscall.Signal) {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	p.cmd = nil
}

func waitReady(t *testing.T, ps []*proc) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, p := range ps {
		for {
			resp, err := http.Get("http://" + p.health + "/ready")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never became ready (%v)", p.id, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// Three metad processes on loopback: kill -9 the Raft leader, write through
// the survivors, restart every process, and every committed topic is there.
func TestThreeProcessesSurviveKillOfTheLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the metad binary")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "metad")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	ca := pkitest.New(t)
	var ps []*proc
	var voters []string
	raftPorts := map[string]int{}
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("m%d", i)
		raftPorts[id] = freePort(t)
		voters = append(voters, fmt.Sprintf("%s=127.0.0.1:%d", id, raftPorts[id]))
	}
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("m%d", i)
		files := ca.Files(t, pki.RoleMetad, id)
		rpcAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
		healthPort := freePort(t)
		logs, err := os.Create(filepath.Join(dir, id+".log"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { logs.Close() })
		p := &proc{id: id, rpc: rpcAddr, health: fmt.Sprintf("127.0.0.1:%d", healthPort), logs: logs, binaryPath: bin, args: []string{
			"--node-id", id, "--data-dir", filepath.Join(dir, id), "--rpc-listen", rpcAddr,
			"--tls.ca", files.CA, "--tls.cert", files.Cert, "--tls.key", files.Key,
			"--ops-host", "127.0.0.1", "--health-check-port", fmt.Sprint(healthPort), "--enable-exporter=false",
			"--log.level", "warn", "--shutdown-timeout", "5s",
			"--metad.raft-listen", fmt.Sprintf("127.0.0.1:%d", raftPorts[id]),
			"--metad.voters", strings.Join(voters, ","),
			"--metad.raft-heartbeat-timeout", "300ms", "--metad.raft-election-timeout", "300ms",
			"--metad.raft-leader-lease-timeout", "150ms", "--metad.node-lease-timeout", "3s",
		}}
		ps = append(ps, p)
	}
	for _, p := range ps {
		p.start(t)
		t.Cleanup(func() { p.signal(syscall.SIGKILL) })
	}
	waitReady(t, ps)

	pool := rpc.NewPool(rpc.ClientOptions{Source: ca.Source(t, pki.RoleAdmin, "admin"), ServerRoles: []pki.Role{pki.RoleMetad}})
	defer pool.Close()
	addrs := []string{ps[0].rpc, ps[1].rpc, ps[2].rpc}
	c := metaclient.New(metaclient.Options{Addrs: addrs, Dial: pool.Get, CallTimeout: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := c.Register(ctx, &metav1.Node{Id: "p1", Role: metav1.NodeRole_NODE_ROLE_PARTITIOND, RpcAddress: "127.0.0.1:1", Incarnation: 1}); err != nil {
		t.Fatal(err)
	}
	create := func(name string) {
		t.Helper()
		if _, err := c.CreateTopic(ctx, &metav1.CreateTopicRequest{Name: name, Partitions: proto.Int32(2), ReplicationFactor: proto.Int32(1)}); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	create("before")
	st, err := c.ClusterStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var leader *proc
	for _, p := range ps {
		if p.id == st.GetRaftLeaderId() {
			leader = p
		}
	}
	if leader == nil {
		t.Fatalf("leader %q unknown", st.GetRaftLeaderId())
	}
	killed := time.Now()
	leader.signal(syscall.SIGKILL)
	create("after")
	t.Logf("write committed %v after kill -9 of leader %s", time.Since(killed), leader.id)

	// Restart everything (the killed node included) and read back.
	for _, p := range ps {
		p.signal(syscall.SIGTERM)
	}
	for _, p := range ps {
		p.start(t)
	}
	waitReady(t, ps)
	for _, name := range []string{"before", "after"} {
		got, err := c.GetTopic(ctx, name)
		if err != nil || len(got.GetTopic().GetPartitions()) != 2 {
			t.Fatalf("%s after restart: %v %v", name, got, err)
		}
	}
}

package node

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	"github.com/strataio/strata/libs/rpc"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fakeRole struct {
	name    string
	log     *[]string
	mu      *sync.Mutex
	failErr error
}

func (r fakeRole) Name() string { return r.name }
func (r fakeRole) Start(context.Context) error {
	r.mu.Lock()
	*r.log = append(*r.log, "start "+r.name)
	r.mu.Unlock()
	return r.failErr
}
func (r fakeRole) Stop(context.Context) error {
	r.mu.Lock()
	*r.log = append(*r.log, "stop "+r.name)
	r.mu.Unlock()
	return nil
}

func newEnv(t *testing.T, p *Process, ca *pkitest.PKI, role pki.Role, id string) *RoleEnv {
	t.Helper()
	env, err := p.NewRoleEnv(RoleOptions{Role: role, NodeID: id, TLSFiles: ca.Files(t, role, id), Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	healthpb.RegisterHealthServer(env.GRPC, health.NewServer())
	for _, m := range []string{"Check", "Watch", "List"} {
		env.Policy["/grpc.health.v1.Health/"+m] = []pki.Role{pki.RoleGateway, pki.RolePartitiond}
	}
	return env
}

func TestRunStartsInOrderPublishesReadinessAndStopsInReverse(t *testing.T) {
	ca := pkitest.New(t)
	p := NewProcess(nil, nil)
	p.HealthAddr = "127.0.0.1:0"
	a := newEnv(t, p, ca, pki.RolePartitiond, "p1")
	newEnv(t, p, ca, pki.RoleGateway, "g1")
	var mu sync.Mutex
	var log []string
	roles := []Service{fakeRole{name: "a", log: &log, mu: &mu}, fakeRole{name: "b", log: &log, mu: &mu}}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan struct{})
	go func() { done <- p.Run(ctx, roles, 5*time.Second, func() { close(ready) }) }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + p.HealthListenAddr() + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/ready = %d", resp.StatusCode)
	}
	// The role's gRPC server answers over mTLS with the role policy.
	gw := ca.Source(t, pki.RoleGateway, "g1")
	conn, err := rpc.Dial(a.AdvertiseRPC, rpc.ClientOptions{Source: gw, ServerRoles: []pki.Role{pki.RolePartitiond}})
	if err != nil {
		t.Fatal(err)
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err = healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{})
	ccancel()
	conn.Close()
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := "start a,start b,stop b,stop a"
	if got := strings.Join(log, ","); got != want {
		t.Fatalf("lifecycle %q, want %q", got, want)
	}
}

func TestFailedStartStopsStartedRoles(t *testing.T) {
	ca := pkitest.New(t)
	p := NewProcess(nil, nil)
	p.HealthAddr = "127.0.0.1:0"
	newEnv(t, p, ca, pki.RolePartitiond, "p1")
	var mu sync.Mutex
	var log []string
	boom := errors.New("boom")
	roles := []Service{fakeRole{name: "a", log: &log, mu: &mu}, fakeRole{name: "b", log: &log, mu: &mu, failErr: boom}}
	if err := p.Run(context.Background(), roles, time.Second, nil); !errors.Is(err, boom) {
		t.Fatalf("want boom, got %v", err)
	}
	if got := strings.Join(log, ","); got != "start a,start b,stop b,stop a" {
		t.Fatalf("lifecycle %q", got)
	}
}

func TestHealthBindFailureFailsStartup(t *testing.T) {
	ca := pkitest.New(t)
	p1 := NewProcess(nil, nil)
	p1.HealthAddr = "127.0.0.1:0"
	if err := p1.listen(); err != nil {
		t.Fatal(err)
	}
	defer p1.shutdownListeners(time.Second)
	p2 := NewProcess(nil, nil)
	p2.HealthAddr = p1.HealthListenAddr()
	newEnv(t, p2, ca, pki.RolePartitiond, "p1")
	err := p2.Run(context.Background(), nil, time.Second, nil)
	if err == nil || !strings.Contains(err.Error(), "bind") {
		t.Fatalf("want bind error, got %v", err)
	}
}

func TestRoleEnvRejectsMismatchedCertificate(t *testing.T) {
	ca := pkitest.New(t)
	p := NewProcess(nil, nil)
	_, err := p.NewRoleEnv(RoleOptions{Role: pki.RoleMetad, NodeID: "m1", TLSFiles: ca.Files(t, pki.RoleGateway, "m1"), Listen: "127.0.0.1:0"})
	if err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("want identity mismatch, got %v", err)
	}
}

// TestProcessReadyGauge: every process exports strata_process_ready, 0
// until started and while a check fails, 1 when /ready would answer 200.
func TestProcessReadyGauge(t *testing.T) {
	p := NewProcess(nil, nil)
	ready := func() float64 {
		t.Helper()
		fams, err := p.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fams {
			if f.GetName() == "strata_process_ready" {
				return f.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("strata_process_ready not exported")
		return -1
	}
	var failing atomic.Bool
	p.Health.Register("storage", func(context.Context) error {
		if failing.Load() {
			return errors.New("disk gone")
		}
		return nil
	})
	if v := ready(); v != 0 {
		t.Fatalf("before start: %v", v)
	}
	p.Health.SetStarted(true)
	if v := ready(); v != 1 {
		t.Fatalf("started, checks pass: %v", v)
	}
	failing.Store(true)
	if v := ready(); v != 0 {
		t.Fatalf("a check fails: %v", v)
	}
}

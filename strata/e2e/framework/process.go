package framework

import (
	"testing"
	"time"

	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/strata/clustertest"
)

// readyTimeout bounds the wait for a restarted process's /ready.
const readyTimeout = 60 * time.Second

// ProcessCluster is a cluster of role binaries on loopback
// (strata/clustertest): every role a process of its own, each with its own
// data directory and ports.
type ProcessCluster struct {
	c *clustertest.Cluster
}

// StartProcessCluster builds the binaries (once per test process), starts
// spec's processes and waits until every one is ready; they are killed at
// cleanup. Skipped with -short.
func StartProcessCluster(t testing.TB, spec clustertest.Spec) *ProcessCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("process cluster: skipped with -short")
	}
	start := time.Now()
	c := clustertest.Start(t, spec)
	t.Logf("process cluster %+v ready in %v", spec, time.Since(start).Round(time.Millisecond))
	return &ProcessCluster{c: c}
}

// ByRole returns the processes of one role in start order, for tests that
// kill, pause or restart single roles.
func (p *ProcessCluster) ByRole(r pki.Role) []*clustertest.Proc { return p.c.ByRole(r) }

// Name implements Cluster.
func (p *ProcessCluster) Name() string { return "the process cluster" }

// Gateways implements Cluster: every gateway process.
func (p *ProcessCluster) Gateways() []Gateway {
	var out []Gateway
	for _, g := range p.c.ByRole(pki.RoleGateway) {
		out = append(out, Gateway{ClientAddr: g.ClientAddr, HealthAddr: g.HealthAddr, MetricsAddr: g.MetricsAddr})
	}
	return out
}

// Kill implements Killable.
func (p *ProcessCluster) Kill() { p.c.KillAll() }

// Stop implements Killable: SIGTERM in reverse dependency order.
func (p *ProcessCluster) Stop() { p.c.StopAll() }

// Start implements Killable, in the dependency order clustertest starts a
// cluster in (Cluster.StartAll).
func (p *ProcessCluster) Start() { p.c.StartAll() }

// RestartRole kills every process of one role with SIGKILL at once, then
// starts them again on their data and ports and waits until each is ready.
func (p *ProcessCluster) RestartRole(r pki.Role) {
	procs := p.c.ByRole(r)
	for _, proc := range procs {
		proc.Kill()
	}
	clustertest.StartAndWait(procs...)
}

// AllInOneBinary is the `strata run` binary (every role in one process) run
// as a process on loopback ports.
type AllInOneBinary struct {
	t testing.TB
	p *clustertest.Proc
}

// StartAllInOneBinary builds the binaries (once per test process), starts
// `strata run` on a fresh data directory and waits until it is ready; it is
// killed at cleanup. Skipped with -short.
func StartAllInOneBinary(t testing.TB) *AllInOneBinary {
	t.Helper()
	if testing.Short() {
		t.Skip("process test: skipped with -short")
	}
	return &AllInOneBinary{t: t, p: clustertest.StartAllInOne(t)}
}

// Name implements Cluster.
func (b *AllInOneBinary) Name() string { return "the all-in-one binary" }

// Gateways implements Cluster: the process's one gateway.
func (b *AllInOneBinary) Gateways() []Gateway {
	return []Gateway{{ClientAddr: b.p.ClientAddr, HealthAddr: b.p.HealthAddr, MetricsAddr: b.p.MetricsAddr}}
}

// Kill implements Killable.
func (b *AllInOneBinary) Kill() { b.p.Kill() }

// Stop implements Killable; a process that does not exit by itself with
// status 0 fails the test.
func (b *AllInOneBinary) Stop() {
	if err := b.p.Stop(); err != nil {
		b.t.Errorf("graceful stop: %v", err)
	}
}

// Start implements Killable.
func (b *AllInOneBinary) Start() {
	b.p.Start()
	b.p.WaitReady(readyTimeout)
}

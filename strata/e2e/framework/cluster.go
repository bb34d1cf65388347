package framework

import (
	"os"
	"slices"
	"testing"

	"github.com/strataio/strata/strata/clustertest"
)

// Gateway is one gateway's listeners as a client and an operator see them.
type Gateway struct {
	ClientAddr string // Wire v2 client listener
	// HealthAddr serves /live and /ready, MetricsAddr /metrics; both are ""
	// when the runner does not know them (External).
	HealthAddr  string
	MetricsAddr string
}

// Cluster is a running deployment: everything a scenario may use of it.
type Cluster interface {
	// Name names the runner in logs and failure messages.
	Name() string
	// Gateways lists every gateway, in a fixed order; there is at least one.
	Gateways() []Gateway
}

// Killable is a deployment of real processes a scenario can kill -9 as a
// whole and start again on the same data.
type Killable interface {
	Cluster
	// Kill sends SIGKILL to every process and waits until each has exited.
	Kill()
	// Stop sends SIGTERM (a graceful stop) to every process, gateways
	// first, and waits until each has exited.
	Stop()
	// Start starts every process again on its data directory and ports, in
	// dependency order, and waits until each answers /ready with 200.
	Start()
}

// ClientAddrs returns the client address of every gateway of c.
func ClientAddrs(c Cluster) []string {
	var out []string
	for _, g := range c.Gateways() {
		out = append(out, g.ClientAddr)
	}
	return out
}

// Scenario is one test body, written once and run against every runner of
// its suite.
type Scenario[C Cluster] struct {
	Name string
	Run  func(t *testing.T, c C)
}

// RunSuite runs every scenario of suite as a subtest of t against the one
// deployment c. Scenarios share it, one after the other: each uses topic and
// group names of its own, and a pattern it selects topics with matches only
// its own topics.
func RunSuite[C Cluster](t *testing.T, c C, suite []Scenario[C]) {
	t.Helper()
	t.Logf("%d scenarios against %s (gateways %v)", len(suite), c.Name(), ClientAddrs(c))
	for _, s := range suite {
		t.Run(s.Name, func(t *testing.T) { s.Run(t, c) })
	}
}

// Main is the TestMain of a package that uses the process runners: it runs
// the tests, then removes the binaries clustertest built for them (once per
// test process).
func Main(m *testing.M) {
	code := m.Run()
	clustertest.RemoveBuilds()
	os.Exit(code)
}

// IsGateway reports whether addr is the client address of one of c's
// gateways: what a reply naming "the broker to talk to" (a METADATA or
// PUBLISH leader, FIND_COORDINATOR's host:port) may point at in a
// deployment with several gateways.
func IsGateway(c Cluster, addr string) bool {
	return slices.Contains(ClientAddrs(c), addr)
}

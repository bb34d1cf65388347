package framework

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/strataio/strata/strata/internal/allinone"
)

// AllInOne is the all-in-one server (the `strata run` code, every role) run
// in the test process on loopback ports: the fast runner, under -race.
type AllInOne struct {
	t    testing.TB
	cfg  allinone.Config
	srv  *allinone.Server
	stop func()
}

// AllInOneOption edits the all-in-one's configuration before it is built.
type AllInOneOption func(*allinone.Config)

// StartAllInOne starts the all-in-one on a fresh data directory and waits
// until /ready answers 200: a client that follows the spec waits for
// readiness before sending traffic. It is stopped at cleanup.
func StartAllInOne(t testing.TB, opts ...AllInOneOption) *AllInOne {
	t.Helper()
	cfg := allinone.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.OpsHost = "127.0.0.1"
	cfg.HealthCheckPort = 0
	cfg.ExporterPort = 0
	cfg.EnableExporter = true
	cfg.Gateway.ClientListen = "127.0.0.1:0"
	for _, o := range opts {
		o(&cfg)
	}
	a := &AllInOne{t: t, cfg: cfg}
	a.Start()
	a.WaitReady()
	return a
}

// Start runs the server on its data directory (again, after Stop) and
// returns once its listeners are up, without waiting for /ready: a restart
// over a bad state may never become ready, and a test may want to see that.
// Every start binds new ports.
func (a *AllInOne) Start() {
	t := a.t
	t.Helper()
	if a.srv != nil {
		t.Fatal("all-in-one already running")
	}
	srv, err := allinone.New(a.cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, func() { close(started) }) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("all-in-one stopped with: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	a.srv, a.stop = srv, stop
	select {
	case <-started:
	case err := <-done:
		done <- err // for stop
		t.Fatalf("all-in-one failed to start: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("all-in-one not started after 60s")
	}
}

// Configure edits the configuration the next Start uses (a restart in
// another mode over the same data directory).
func (a *AllInOne) Configure(o AllInOneOption) { o(&a.cfg) }

// Stop shuts the server down (gracefully: it runs in the test process) and
// waits until it has.
func (a *AllInOne) Stop() {
	if a.srv != nil {
		a.stop()
		a.srv, a.stop = nil, nil
	}
}

// WaitReady waits until /ready answers 200 (60 s at most).
func (a *AllInOne) WaitReady() {
	a.t.Helper()
	WaitReady(a.t, a.srv.HealthAddr(), 60*time.Second)
}

// Server is the running server, for what only the in-process runner offers
// (the roles' internal RPC addresses).
func (a *AllInOne) Server() *allinone.Server { return a.srv }

// DataDir is the server's data directory (certificates under certs/, one
// folder per role).
func (a *AllInOne) DataDir() string { return a.cfg.DataDir }

// Name implements Cluster.
func (a *AllInOne) Name() string { return "the in-process all-in-one" }

// Gateways implements Cluster: the one gateway of the running server.
func (a *AllInOne) Gateways() []Gateway {
	return []Gateway{{ClientAddr: a.srv.ClientAddr(), HealthAddr: a.srv.HealthAddr(), MetricsAddr: a.srv.MetricsAddr()}}
}

package e2e

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/strataio/strata/strata/clustertest"
	"github.com/strataio/strata/strata/internal/allinone"
)

// startAllInOne runs the all-in-one server in this test process on loopback
// ports and stops it at cleanup.
func startAllInOne(t *testing.T) *allinone.Server {
	t.Helper()
	srv, _ := runAllInOne(t, t.TempDir())
	// started means listeners and roles are up; clients wait for /ready
	// (every role registered, metadata synced) as a probe would.
	waitReady(t, "http://"+srv.HealthAddr()+"/ready", 60*time.Second)
	return srv
}

// runAllInOne starts the all-in-one on dataDir and returns once its
// listeners are up (not waiting for /ready); stop (also run at cleanup,
// idempotent) shuts it down.
func runAllInOne(t *testing.T, dataDir string) (srv *allinone.Server, stop func()) {
	t.Helper()
	cfg := allinone.DefaultConfig()
	cfg.DataDir = dataDir
	cfg.OpsHost = "127.0.0.1"
	cfg.HealthCheckPort = 0
	cfg.ExporterPort = 0
	cfg.EnableExporter = true
	cfg.Gateway.ClientListen = "127.0.0.1:0"
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := allinone.New(cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, func() { close(ready) }) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("all-in-one stopped with: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case <-ready:
	case err := <-done:
		done <- err // for stop
		t.Fatalf("all-in-one failed to start: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("all-in-one not ready after 60s")
	}
	return srv, stop
}

func waitReady(t *testing.T, url string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not 200 after %v (last error %v)", url, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestScenarioAllInOne(t *testing.T) {
	srv := startAllInOne(t)
	scenario(t, []string{srv.ClientAddr()})
}

func TestScenarioProcessCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("process cluster: skipped with -short")
	}
	c := clustertest.Start(t, clustertest.FullSpec)
	scenario(t, c.GatewayAddrs())
}

package gateway

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestLeaderProbeToleratesFailuresWithinTheGrace(t *testing.T) {
	var p probeCache
	fail := func() error { return errors.New("deadline exceeded") }
	ok := func() error { return nil }
	if err := p.get(fail); err == nil {
		t.Fatal("a probe that never succeeded must fail the check")
	}
	p.at = time.Time{}
	if err := p.get(ok); err != nil {
		t.Fatal(err)
	}
	// One slow probe right after a success: still ready.
	p.at = time.Time{}
	if err := p.get(fail); err != nil {
		t.Fatalf("failure within the grace: %v", err)
	}
	// Cached for a second: no new probe runs.
	if err := p.get(func() error { t.Fatal("probed again within a second"); return nil }); err != nil {
		t.Fatal(err)
	}
	// Failing for longer than the grace: not ready.
	p.at, p.lastOK = time.Time{}, time.Now().Add(-probeGrace-time.Millisecond)
	if err := p.get(fail); err == nil {
		t.Fatal("failures beyond the grace must fail the check")
	}
	p.at = time.Time{}
	if err := p.get(ok); err != nil {
		t.Fatal(err)
	}
}

// TestDiagnosticsOnly: in diagnostics-only mode (spec 4.1) the client
// listener is never opened, /ready fails with the diagnostics_only check
// next to the other checks, /live passes and the gateway does not register
// with metad.
func TestDiagnosticsOnly(t *testing.T) {
	c := startCluster(t, func(cfg *Config) { cfg.DiagnosticsOnly = true })
	if c.addr != "" {
		t.Fatalf("client listener bound at %q", c.addr)
	}
	res, ok := c.gw.env.Process.Health.Evaluate(context.Background())
	if ok {
		t.Fatalf("ready in diagnostics-only mode: %+v", res)
	}
	if !strings.Contains(res.Checks[CheckDiagnosticsOnly], "client listener is not opened") || res.Checks["topic_metadata"] != "ok" {
		t.Fatalf("checks %v", res.Checks)
	}
	if _, ok := c.gw.meta.Cache().View().Node("g1"); ok {
		t.Fatal("a diagnostics-only gateway registered with metad")
	}
}

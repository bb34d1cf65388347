package server

import (
	"errors"
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

package node

import (
	"io"
	"log/slog"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"
)

func TestPprofListener(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	t.Setenv(PprofEnv, "")
	stop, err := startPprof(log)
	if err != nil {
		t.Fatalf("off by default: %v", err)
	}
	stop()
	for _, bad := range []string{"0.0.0.0:0", "[::]:0", "localhost:0", "10.0.0.1:0", "nonsense"} {
		t.Setenv(PprofEnv, bad)
		if stop, err := startPprof(log); err == nil {
			stop()
			t.Fatalf("%s=%q accepted; only loopback IPs may serve profiles", PprofEnv, bad)
		}
	}
	t.Setenv(PprofEnv, "127.0.0.1:0")
	stop, err = startPprof(log)
	if err != nil {
		t.Fatalf("loopback refused: %v", err)
	}
	stop()
}

// TestPprofContention: STRATA_PPROF_CONTENTION=1 turns on block and mutex
// sampling for as long as the listener runs, and only then.
func TestPprofContention(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	t.Setenv(PprofEnv, "127.0.0.1:0")
	t.Setenv(PprofContentionEnv, "")
	stop, err := startPprof(log)
	if err != nil {
		t.Fatal(err)
	}
	if f := runtime.SetMutexProfileFraction(-1); f != 0 {
		t.Fatalf("mutex sampling %d without %s", f, PprofContentionEnv)
	}
	stop()

	t.Setenv(PprofContentionEnv, "1")
	stop, err = startPprof(log)
	if err != nil {
		t.Fatal(err)
	}
	if f := runtime.SetMutexProfileFraction(-1); f != mutexProfileFrac {
		t.Fatalf("mutex sampling %d, want %d", f, mutexProfileFrac)
	}
	before := pprof.Lookup("block").Count()
	ch := make(chan struct{})
	go func() { time.Sleep(20 * time.Millisecond); close(ch) }()
	<-ch // a 20 ms block is above the sampling rate: always recorded
	if after := pprof.Lookup("block").Count(); after <= before {
		t.Fatalf("block profile did not record a 20 ms channel wait (%d -> %d)", before, after)
	}
	stop()
	if f := runtime.SetMutexProfileFraction(-1); f != 0 {
		t.Fatalf("mutex sampling %d after stop", f)
	}
}

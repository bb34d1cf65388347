package node

import (
	"io"
	"log/slog"
	"testing"
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

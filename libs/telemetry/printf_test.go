package telemetry

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func newPrintfLogger(buf *bytes.Buffer) PrintfLogger {
	return PrintfLogger{Logger: slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), Component: "pebble"}
}

func TestPrintfLoggerLevelsAndComponent(t *testing.T) {
	var buf bytes.Buffer
	p := newPrintfLogger(&buf)
	p.Infof("flushed %d tables", 3)
	p.Errorf("disk %s", "slow")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("logged %q, want two lines", buf.String())
	}
	for i, want := range []string{`level=DEBUG msg="flushed 3 tables" component=pebble`, `level=ERROR msg="disk slow" component=pebble`} {
		if !strings.Contains(lines[i], want) {
			t.Fatalf("line %d = %q, want it to contain %q", i, lines[i], want)
		}
	}
}

// Fatalf must not return: the engine's state is undefined after it.
func TestPrintfLoggerFatalfLogsThenPanics(t *testing.T) {
	var buf bytes.Buffer
	p := newPrintfLogger(&buf)
	defer func() {
		if r := recover(); r != "pebble: corrupt manifest 7" {
			t.Fatalf("panic value %v, want %q", r, "pebble: corrupt manifest 7")
		}
		if !strings.Contains(buf.String(), `level=ERROR msg="corrupt manifest 7" component=pebble fatal=true`) {
			t.Fatalf("logged %q", buf.String())
		}
	}()
	p.Fatalf("corrupt manifest %d", 7)
	t.Fatal("Fatalf returned")
}

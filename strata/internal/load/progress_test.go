package load

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestProgressLines drives the progress printer with explicit ticks: each
// line has the interval's records/s and MB/s, the p99 so far, the totals.
func TestProgressLines(t *testing.T) {
	prod := &side{live: &liveHist{}}
	tick := make(chan time.Time)
	// Each tick is followed by a wait for its line: the printer reads the
	// counters after it receives the tick, so the next interval's records
	// must not be added before the line is written.
	out := &lineWriter{wrote: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	start := time.Unix(1000, 0)
	go func() {
		defer wg.Done()
		reportProgress(ctx, out, tick, start, []namedSide{{"produce", prod}})
	}()
	// First second: 1,000 records of 100 bytes, 99 fast requests, 1 slow.
	prod.records.Add(1000)
	prod.bytes.Add(100_000)
	for range 99 {
		prod.live.record(time.Millisecond)
	}
	prod.live.record(200 * time.Millisecond)
	tick <- start.Add(time.Second)
	<-out.wrote
	// Second second: 3,000 more records, one error.
	prod.records.Add(3000)
	prod.bytes.Add(300_000)
	prod.errors.Add(1)
	tick <- start.Add(2 * time.Second)
	<-out.wrote
	cancel()
	wg.Wait()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines:\n%s", out.String())
	}
	for i, want := range [][]string{
		{"1.0s produce", " 1000 records/s", " 0.10 MB/s", "p99    1.0", "records 1000 errors 0"},
		{"2.0s produce", " 3000 records/s", " 0.30 MB/s", "p99    1.0", "records 4000 errors 1"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d %q lacks %q", i, lines[i], w)
			}
		}
	}
	// p99 moves with the slow tail: 2 of 101 slow is above the 99th.
	prod.live.record(200 * time.Millisecond)
	if q := prod.live.quantile(0.99); q < 199*time.Millisecond || q > 203*time.Millisecond {
		t.Fatalf("p99 %v", q)
	}
}

// lineWriter collects the printer's output and signals each write.
type lineWriter struct {
	bytes.Buffer
	wrote chan struct{}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	n, err := w.Buffer.Write(p)
	w.wrote <- struct{}{}
	return n, err
}

// A run whose stderr is not a terminal prints no progress (auto), and one
// told --progress never neither; a bad value is a usage error.
func TestProgressQuietOffTerminal(t *testing.T) {
	if isTerminal(&bytes.Buffer{}) {
		t.Fatal("a buffer is a terminal")
	}
	if f, err := os.CreateTemp(t.TempDir(), "x"); err == nil {
		defer f.Close()
		if isTerminal(f) {
			t.Fatal("a file is a terminal")
		}
	}
	b, ctx := startBroker(t)
	for _, p := range []string{"auto", "never"} {
		var out, errb bytes.Buffer
		code := Main(ctx, []string{"produce", "--addr", b.Addr(), "--count", "200", "--conns", "1", "--progress", p}, &out, &errb)
		if code != 0 || strings.Contains(errb.String(), "records/s") {
			t.Fatalf("--progress %s: exit %d, stderr %q", p, code, errb.String())
		}
	}
	var errb bytes.Buffer
	if code := Main(context.Background(), []string{"produce", "--progress", "sometimes"}, &bytes.Buffer{}, &errb); code != 2 {
		t.Fatalf("bad --progress: exit %d", code)
	}
}

package load

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/client/fakebroker"
	"github.com/strataio/strata/libs/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestHistogramQuantilesWithinPrecision(t *testing.T) {
	var h Histogram
	vals := make([]int64, 100_000)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range vals {
		// Log-uniform from 1 µs to 1 s, like latencies.
		vals[i] = int64(1000 * math.Pow(10, r.Float64()*6))
		h.Record(time.Duration(vals[i]))
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		exact := vals[int(q*float64(len(vals)))-1]
		got := int64(h.Quantile(q))
		if got < exact || float64(got-exact) > float64(exact)/64+1 {
			t.Fatalf("q%.3f: got %d, exact %d (more than 1/64 off)", q, got, exact)
		}
	}
	if h.Max() != time.Duration(vals[len(vals)-1]) || h.Min() != time.Duration(vals[0]) {
		t.Fatal("min/max")
	}
	var m Histogram
	m.Merge(&h)
	m.Merge(&h)
	if m.Count() != 2*h.Count() || m.Quantile(0.5) != h.Quantile(0.5) {
		t.Fatal("merge")
	}
	var small Histogram
	small.Record(5)
	small.Record(100)
	if small.Quantile(0.5) != 5 || small.Quantile(1) != 100 {
		t.Fatalf("exact small values: %v %v", small.Quantile(0.5), small.Quantile(1))
	}
}

// startBroker starts a fake broker, closed at cleanup, and returns it with
// the context that bounds the test's run against it (20 s).
func startBroker(t *testing.T) (*fakebroker.Broker, context.Context) {
	b, err := fakebroker.Start(fakebroker.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return b, ctx
}

// mainJSON runs Main with args and --json, fails the test unless it exits
// 0, and returns the report and its JSON text.
func mainJSON(t *testing.T, ctx context.Context, args ...string) (Result, string) {
	t.Helper()
	return mainJSONExit(t, ctx, 0, args...)
}

// mainJSONExit is mainJSON for a run that must exit with code (1: some
// requests failed).
func mainJSONExit(t *testing.T, ctx context.Context, code int, args ...string) (Result, string) {
	t.Helper()
	var out, errb bytes.Buffer
	if got := Main(ctx, append(args, "--json"), &out, &errb); got != code {
		t.Fatalf("exit %d, want %d: %s", got, code, errb.String())
	}
	var res Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("json: %v\n%s", err, out.String())
	}
	return res, out.String()
}

func TestProduceConsumeAgainstFakeBroker(t *testing.T) {
	b, ctx := startBroker(t)
	res, err := Run(ctx, Config{Mode: ModeProduce, Addr: b.Addr(), Topic: "bench", Partitions: 3, Conns: 2, Inflight: 2,
		RecordSize: 64, BatchSize: 50, Acks: "1", Count: 2030, Client: client.Options{Compressions: []wire.Compression{wire.CompressionLZ4}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Produce.Records != 2030 || b.Published.Load() != 2030 || res.Produce.Errors != 0 {
		t.Fatalf("produced %d, broker stored %d, errors %d", res.Produce.Records, b.Published.Load(), res.Produce.Errors)
	}
	if res.Compression != "lz4" || res.Produce.Latency.Count == 0 || res.Produce.Latency.P50 <= 0 || res.Produce.Bytes != 2030*64 {
		t.Fatalf("report %+v", res.Produce)
	}
	res, err = Run(ctx, Config{Mode: ModeConsume, Addr: b.Addr(), Topic: "bench", Conns: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Consume.Records != 2030 {
		t.Fatalf("consumed %d", res.Consume.Records)
	}
	var out bytes.Buffer
	WriteText(&out, res)
	if !strings.Contains(out.String(), "records/s") || !strings.Contains(out.String(), "p999") {
		t.Fatalf("text report:\n%s", out.String())
	}
}

func TestE2EAndRateLimitViaMain(t *testing.T) {
	b, ctx := startBroker(t)
	res, _ := mainJSON(t, ctx, "e2e", "--addr", b.Addr(), "--duration", "400ms", "--rate", "5000", "--batch", "10", "--conns", "2")
	p, c := res.Produce.Records, res.Consume.Records
	// 5000/s for 0.4 s is 2000 records; allow scheduling slack but no burst.
	if p == 0 || p > 2600 {
		t.Fatalf("rate limit: produced %d in 400ms at 5000/s", p)
	}
	if c != p || res.EndToEnd == nil || res.EndToEnd.Count != uint64(p) {
		t.Fatalf("e2e consumed %d of %d, latency %+v", c, p, res.EndToEnd)
	}
	var out, errb bytes.Buffer
	if code := Main(ctx, []string{"sideways", "--addr", b.Addr()}, &out, &errb); code != 2 {
		t.Fatalf("bad mode exit %d", code)
	}
	if code := Main(ctx, []string{"produce", "--acks", "7", "--addr", b.Addr(), "--count", "10"}, &out, &errb); code != 1 {
		t.Fatalf("bad acks exit %d", code)
	}
}

// TestFailedRequestsMakeANonZeroExit: a run whose requests fail (the broker
// goes away mid-run) exits 1 and says why, and Failures counts every kind
// of failure the report holds.
func TestFailedRequestsMakeANonZeroExit(t *testing.T) {
	b, ctx := startBroker(t)
	var out, errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"produce", "--addr", b.Addr(), "--duration", "2s", "--conns", "1"}, &out, &errb)
	}()
	time.Sleep(300 * time.Millisecond)
	b.Close()
	if code := <-done; code != 1 {
		t.Fatalf("exit %d after the broker went away\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(errb.String(), "strata bench:") {
		t.Fatalf("no reason on stderr: %q", errb.String())
	}

	r := Result{Produce: &Side{Errors: 2}, Consume: &Side{Errors: 3},
		Groups: &GroupsReport{Commands: []Command{{Errors: 4}}, OffsetMismatches: 5}}
	if n := r.Failures(); n != 14 {
		t.Fatalf("Failures() = %d, want 14", n)
	}
}

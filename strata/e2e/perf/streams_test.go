package perf

import (
	"context"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/strata/e2e/framework"
)

// TestStreamThroughput measures event sourcing on the in-process all-in-one
// (one partitiond, real fdatasync): APPEND_STREAM latency and rate on one
// aggregate (one appender: each version follows the last) and on 1,000
// aggregates (16 appenders), and READ_STREAM of a 10,000-event aggregate
// with and without a snapshot. Set STRATA_BENCH=1 to run it (make
// bench-streams); the figures are logged, nothing is asserted on time.
func TestStreamThroughput(t *testing.T) {
	if os.Getenv("STRATA_BENCH") == "" {
		t.Skip("benchmark: set STRATA_BENCH=1 (make bench-streams)")
	}
	a := framework.StartAllInOne(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	addr := a.Gateways()[0].ClientAddr
	cl := framework.Dial(t, ctx, addr)
	framework.CreateTopics(t, ctx, cl, "topic=bench-one partitions=1 event_sourcing=true", "topic=bench-many partitions=4 event_sourcing=true")
	payload := make([]byte, 256)

	// One aggregate, 10,000 versions by one appender.
	const n = 10_000
	lat := make([]time.Duration, 0, n)
	start := time.Now()
	for v := uint64(1); v <= n; v++ {
		t0 := time.Now()
		if _, err := cl.AppendStream(ctx, client.Event{Topic: "bench-one", Key: "agg", Version: v, EventType: "Tick", Payload: payload}); err != nil {
			t.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	report(t, "APPEND_STREAM, 1 aggregate, 1 appender, 256 B", lat, time.Since(start))

	// 1,000 aggregates, 16 appenders, 20 versions each.
	const aggs, appenders, per = 1000, 16, 20
	var mu sync.Mutex
	lat = lat[:0]
	var wg sync.WaitGroup
	start = time.Now()
	for w := range appenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wc := framework.Dial(t, ctx, addr)
			local := make([]time.Duration, 0, aggs/appenders*per)
			for v := uint64(1); v <= per; v++ {
				for k := w; k < aggs; k += appenders {
					t0 := time.Now()
					if _, err := wc.AppendStream(ctx, client.Event{Topic: "bench-many", Key: fmt.Sprintf("agg-%d", k), Version: v, Payload: payload}); err != nil {
						t.Error(err)
						return
					}
					local = append(local, time.Since(t0))
				}
			}
			mu.Lock()
			lat = append(lat, local...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	report(t, "APPEND_STREAM, 1,000 aggregates, 16 appenders, 256 B", lat, time.Since(start))

	read := func(name string) {
		var ds []time.Duration
		var count int
		for range 20 {
			t0 := time.Now()
			r, err := cl.ReadStream(ctx, "bench-one", "agg", 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			ds = append(ds, time.Since(t0))
			count = len(r.Events)
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		t.Logf("%s: %d events per read, p50 %v p99 %v", name, count, ds[len(ds)/2], ds[len(ds)*99/100])
	}
	read("READ_STREAM of 10,000 events, no snapshot")
	if err := cl.SaveSnapshot(ctx, "bench-one", "agg", 9000, []byte(`{"state":"at 9000"}`)); err != nil {
		t.Fatal(err)
	}
	read("READ_STREAM of 10,000 events, snapshot at 9,000")
}

func report(t *testing.T, name string, lat []time.Duration, took time.Duration) {
	t.Helper()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("%s: %d appends in %v = %.0f appends/s, p50 %v p99 %v", name, len(lat), took.Round(time.Millisecond),
		float64(len(lat))/took.Seconds(), lat[len(lat)/2], lat[len(lat)*99/100])
}

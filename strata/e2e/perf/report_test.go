package perf

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strataio/strata/strata/clustertest"
	"github.com/strataio/strata/strata/internal/load"
)

// reportRow is one workload of the performance table (issue 17): its load
// figures and the server's cost, read from /proc of the all-in-one process,
// and the load generator's, read from /proc of this one.
type reportRow struct {
	name   string
	res    *load.Side
	cpuSec float64 // server user+system CPU seconds during the measured run
	// clientCPUSec is the load generator's: load.Run runs in this test
	// process, so its user+system CPU seconds during the run (the server
	// is a child process, not counted).
	clientCPUSec float64
	peakRSS      int64 // server VmHWM during the measured run, bytes
	extraLat     bool  // print request latency percentiles
}

// TestBenchReport runs the performance table of docs/performance.md against
// a fresh all-in-one binary per workload (so each starts from an empty data
// directory and its own peak RSS): publish 100 B and 1 KiB in batches of
// 1,000 (acks=1, 4 connections × 4 in flight), one durable publish in
// flight, and consuming 1M records of 100 B and of 1 KiB to completion. It
// reports records/s, MB/s, server and client (load generator) CPU per
// record and peak RSS, plus the idle RSS. Set STRATA_BENCH=1 (make
// bench-report); STRATA_BENCH_DURATION bounds the timed publish runs
// (default 8 s) and STRATA_BENCH_RECORDS the consume size (default
// 1,000,000).
func TestBenchReport(t *testing.T) {
	if os.Getenv("STRATA_BENCH") == "" {
		t.Skip("benchmark: set STRATA_BENCH=1 (make bench-report)")
	}
	d := 8 * time.Second
	if v, err := time.ParseDuration(os.Getenv("STRATA_BENCH_DURATION")); err == nil {
		d = v
	}
	n := int64(1_000_000)
	if v, err := strconv.ParseInt(os.Getenv("STRATA_BENCH_RECORDS"), 10, 64); err == nil && v > 0 {
		n = v
	}
	publish := func(size, batch, conns, inflight int) load.Config {
		return load.Config{Mode: load.ModeProduce, Topic: "bench", Partitions: 4, Conns: conns, Inflight: inflight,
			RecordSize: size, BatchSize: batch, Acks: "1", Duration: d}
	}
	var rows []reportRow
	var idleRSS int64
	measure := func(name string, cfg load.Config, prepare *load.Config) reportRow {
		srv := clustertest.StartAllInOne(t)
		defer srv.Kill()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if idleRSS == 0 {
			time.Sleep(2 * time.Second) // let start-up garbage go
			idleRSS = procStatus(t, srv.Pid(), "VmRSS")
		}
		if prepare != nil {
			prepare.Addr = srv.ClientAddr
			if _, err := load.Run(ctx, *prepare); err != nil {
				t.Fatalf("%s: preparing: %v", name, err)
			}
		}
		resetPeakRSS(t, srv.Pid())
		cpu0, clientCPU0 := procCPU(t, srv.Pid()), procCPU(t, os.Getpid())
		cfg.Addr = srv.ClientAddr
		res, err := load.Run(ctx, cfg)
		clientCPU := procCPU(t, os.Getpid()) - clientCPU0
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		side := res.Produce
		if cfg.Mode == load.ModeConsume {
			side = res.Consume
		}
		if side.Errors > 0 {
			t.Errorf("%s: %d errors, first: %s", name, side.Errors, side.FirstError)
		}
		return reportRow{name: name, res: side, cpuSec: procCPU(t, srv.Pid()) - cpu0, clientCPUSec: clientCPU,
			peakRSS: procStatus(t, srv.Pid(), "VmHWM")}
	}
	rows = append(rows,
		measure("publish 100 B × 1,000", publish(100, 1000, 4, 4), nil),
		measure("publish 1 KiB × 1,000", publish(1024, 1000, 4, 4), nil))
	single := measure("single publish, one in flight", publish(100, 1, 1, 1), nil)
	single.extraLat = true
	rows = append(rows, single)
	for _, size := range []int{100, 1024} {
		prep := load.Config{Mode: load.ModeProduce, Topic: "bench", Partitions: 4, Conns: 4, Inflight: 4,
			RecordSize: size, BatchSize: 1000, Acks: "1", Count: n}
		cons := load.Config{Mode: load.ModeConsume, Topic: "bench", Conns: 4, Count: n, Duration: 5 * time.Minute}
		rows = append(rows, measure(fmt.Sprintf("consume %d × %s", n, sizeName(size)), cons, &prep))
	}

	var b strings.Builder
	fmt.Fprintf(&b, "\nall-in-one binary, fresh per workload; idle RSS %.1f MB\n\n", float64(idleRSS)/1e6)
	b.WriteString("| workload | records/s | MB/s | request p50 / p99 | server CPU µs/record | client CPU µs/record | peak RSS |\n|---|---:|---:|---|---:|---:|---:|\n")
	for _, r := range rows {
		lat := ""
		if r.extraLat {
			lat = fmt.Sprintf("%.3f / %.3f ms", r.res.Latency.P50, r.res.Latency.P99)
		} else {
			lat = fmt.Sprintf("%.2f / %.2f ms", r.res.Latency.P50, r.res.Latency.P99)
		}
		perRecord := func(sec float64) float64 { return 1e6 * sec / max(float64(r.res.Records), 1) }
		fmt.Fprintf(&b, "| %s | %.0f | %.1f | %s | %.2f | %.2f | %.0f MB |\n", r.name, r.res.RecordsPerSec, r.res.MBPerSec, lat,
			perRecord(r.cpuSec), perRecord(r.clientCPUSec), float64(r.peakRSS)/1e6)
	}
	t.Log(b.String())
}

func sizeName(n int) string {
	if n == 1024 {
		return "1 KiB"
	}
	return fmt.Sprintf("%d B", n)
}

// procCPU returns the process's user+system CPU seconds (/proc/PID/stat
// fields 14 and 15, in clock ticks of 100 Hz on Linux).
func procCPU(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// The command name (field 2) may hold spaces; fields after it start
	// past the last ')'.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100
}

// procStatus returns a kB field of /proc/PID/status in bytes.
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// resetPeakRSS sets VmHWM back to the current RSS (proc(5), clear_refs 5),
// so the peak read after a run is that run's.
func resetPeakRSS(t *testing.T, pid int) {
	t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Logf("peak RSS not reset (%v): the figure includes the preparation", err)
	}
}

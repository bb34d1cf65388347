package perf

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strataio/strata/libs/looptest"
	"github.com/strataio/strata/libs/node"
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
// 1,000,000). STRATA_BENCH_PROFILE=<dir> also saves the server's profiles
// of each measured run there (CPU, allocations, blocking, mutex contention,
// and the heap at the end), with contention sampling on: the figures of a
// profiled report are then a little lower than an unprofiled one's.
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
	profileDir := os.Getenv("STRATA_BENCH_PROFILE")
	if profileDir != "" {
		if err := os.MkdirAll(profileDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var rows []reportRow
	var idleRSS int64
	measure := func(name string, cfg load.Config, prepare *load.Config) reportRow {
		var pprofAddr string
		if profileDir != "" {
			pprofAddr = looptest.FreeAddr(t)
			t.Setenv(node.PprofEnv, pprofAddr) // the server inherits the test's environment
			t.Setenv(node.PprofContentionEnv, "1")
		}
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
		var profiled func()
		if profileDir != "" {
			profiled = captureProfiles(t, pprofAddr, filepath.Join(profileDir, slug(name)), profileWindow(cfg))
		}
		res, err := load.Run(ctx, cfg)
		clientCPU := procCPU(t, os.Getpid()) - clientCPU0
		if profiled != nil {
			profiled()
		}
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
	if profileDir != "" {
		fmt.Fprintf(&b, "\nprofiles in %s: go tool pprof -top <strata binary> <file> (the binary: clustertest's build, or make build's .bin/strata of the same tree)\n", profileDir)
	}
	t.Log(b.String())
}

// profileWindow is how long a run's window profiles cover: the timed runs
// but their first and last second, and the first second of the consume
// runs (which are over in a few seconds).
func profileWindow(cfg load.Config) time.Duration {
	if cfg.Mode == load.ModeConsume || cfg.Duration < 4*time.Second {
		return time.Second
	}
	return cfg.Duration - 2*time.Second
}

// captureProfiles starts the server's window profiles (CPU, and the deltas
// of allocations, blocking and mutex contention over the same window) one
// second into the run unless the window is the first second; the returned
// function waits for them and then saves the heap profile. Files are
// <prefix>.<kind>.pb.gz.
func captureProfiles(t *testing.T, addr, prefix string, window time.Duration) func() {
	t.Helper()
	delay := time.Second
	if window <= time.Second {
		delay = 0
	}
	secs := strconv.Itoa(int(window.Seconds()))
	var wg sync.WaitGroup
	for kind, path := range map[string]string{"cpu": "profile", "allocs": "allocs", "block": "block", "mutex": "mutex"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(delay)
			saveProfile(t, fmt.Sprintf("http://%s/debug/pprof/%s?seconds=%s", addr, path, secs), prefix+"."+kind+".pb.gz")
		}()
	}
	return func() {
		wg.Wait()
		saveProfile(t, "http://"+addr+"/debug/pprof/heap", prefix+".heap.pb.gz")
	}
}

// saveProfile writes one pprof answer to file; a failure is reported, not
// fatal (the figures of the run stand without it).
func saveProfile(t *testing.T, url, file string) {
	c := http.Client{Timeout: 2 * time.Minute}
	resp, err := c.Get(url)
	if err != nil {
		t.Errorf("profile %s: %v", url, err)
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	if err == nil {
		err = os.WriteFile(file, b, 0o644)
	}
	if err != nil {
		t.Errorf("profile %s: %v", url, err)
	}
}

// slug turns a workload name into a file name ("publish 1 KiB × 1,000" ->
// "publish-1-kib-x-1000").
func slug(name string) string {
	name = strings.NewReplacer("×", "x", ",", "").Replace(strings.ToLower(name))
	return strings.Join(strings.Fields(name), "-")
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

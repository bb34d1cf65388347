package perf

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/strata/clustertest"
	"github.com/strataio/strata/strata/e2e/framework"
	"github.com/strataio/strata/strata/internal/load"
)

func TestMain(m *testing.M) { framework.Main(m) }

// workload is one bench run of the load tool.
type workload struct {
	name       string
	recordSize int
	batch      int
	acks       string
	// inflight is the batches in flight per connection (4 connections;
	// default 4).
	inflight int
}

func run(t *testing.T, addr, topic string, w workload, d time.Duration) *load.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d+time.Minute)
	defer cancel()
	res, err := load.Run(ctx, load.Config{Mode: load.ModeProduce, Addr: addr, Topic: topic, Partitions: 4,
		Conns: 4, Inflight: cmp.Or(w.inflight, 4), RecordSize: w.recordSize, BatchSize: w.batch, Acks: w.acks, Duration: d})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestReplicationThroughput compares RF 3 acks=all through three partitiond
// processes with the all-in-one's acks=1 on the same machine (issue 12's
// performance target: at least half), with RF 1 and RF 3 acks=1 on the same
// cluster beside it and the servers' CPU per record for each, and samples
// the followers' lag (strata_cluster_replication_lag_seconds) during the
// acks=all runs. It prints a table (docs/performance.md reads it); set
// STRATA_BENCH=1 to run it (make bench-replication).
func TestReplicationThroughput(t *testing.T) {
	if os.Getenv("STRATA_BENCH") == "" {
		t.Skip("benchmark: set STRATA_BENCH=1 (make bench-replication)")
	}
	d := 8 * time.Second
	if v, err := time.ParseDuration(os.Getenv("STRATA_BENCH_DURATION")); err == nil {
		d = v
	}
	// STRATA_BENCH_PROFILE=DIR writes a CPU profile of every partitiond and
	// gateway process during each RF 3 acks=all run into DIR (pprof through
	// STRATA_PPROF_ADDR=127.0.0.1:0); STRATA_BENCH_ONLY=rf3 runs only those
	// (no all-in-one, no RF 1 or acks=1 rows): for profiling rounds.
	profDir := os.Getenv("STRATA_BENCH_PROFILE")
	rf3Only := os.Getenv("STRATA_BENCH_ONLY") == "rf3"
	workloads := []workload{
		{"100 B × 1,000", 100, 1000, "", 0},
		{"1 KiB × 1,000", 1024, 1000, "", 0},
		// One batch in flight per connection: the time an acks=all
		// answer waits for the followers, with the machine not saturated.
		{"100 B × 1,000, 1 in flight per conn", 100, 1000, "", 1},
	}
	type row struct {
		w                     workload
		aio, rf1, rf3one, rf3 measured
		lagP50, lagP99        float64
		lagSamples            int
	}
	rows := make([]row, len(workloads))

	for i, w := range workloads {
		rows[i].w = w
	}
	if !rf3Only {
		aio := framework.StartAllInOneBinary(t)
		addr := aio.Gateways()[0].ClientAddr
		for i, w := range workloads {
			w.acks = "1"
			rows[i].aio = measure(t, addr, fmt.Sprintf("aio-%d", i), w, d)
		}
		aio.Kill()
	}

	spec := clustertest.Spec{Metad: 3, Partitiond: 3, Coordinatord: 1, Gateways: 1}
	if profDir != "" {
		spec.Env = map[pki.Role][]string{}
		for _, r := range []pki.Role{pki.RolePartitiond, pki.RoleGateway} {
			spec.Env[r] = []string{"STRATA_PPROF_ADDR=127.0.0.1:0"}
		}
	}
	c := clustertest.Start(t, spec)
	addr := c.GatewayAddrs()[0]
	cl, err := client.Dial(context.Background(), addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i, w := range workloads {
		// On the same cluster: RF 1 acks=1 (what the split deployment
		// costs against the all-in-one), RF 3 acks=1 (plus the followers'
		// copies), RF 3 acks=all (plus the wait for them).
		if !rf3Only {
			w.acks = "1"
			topic := fmt.Sprintf("rf1-%d", i)
			if _, err := cl.CreateTopic(context.Background(), client.TopicConfig{Name: topic, Partitions: 4, ReplicationFactor: 1}); err != nil {
				t.Fatal(err)
			}
			rows[i].rf1 = measure(t, addr, topic, w, d)

			topic = fmt.Sprintf("rf3-one-%d", i)
			if _, err := cl.CreateTopic(context.Background(), client.TopicConfig{Name: topic, Partitions: 4}); err != nil {
				t.Fatal(err)
			}
			rows[i].rf3one = measure(t, addr, topic, w, d)
		}

		w.acks = "all"
		topic := fmt.Sprintf("rf3-%d", i)
		if _, err := cl.CreateTopic(context.Background(), client.TopicConfig{Name: topic, Partitions: 4}); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		var lags []float64
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			lags = sampleLag(c, topic, stop)
		}()
		if profDir != "" {
			wg.Add(1)
			go func() {
				defer wg.Done()
				profile(t, c, profDir, fmt.Sprintf("rf3-%d", i), d)
			}()
		}
		rows[i].rf3 = measure(t, addr, topic, w, d)
		close(stop)
		wg.Wait()
		sort.Float64s(lags)
		rows[i].lagSamples = len(lags)
		if len(lags) > 0 {
			rows[i].lagP50 = lags[len(lags)/2]
			rows[i].lagP99 = lags[min(len(lags)-1, len(lags)*99/100)]
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "\n| workload | all-in-one acks=1 | 3 partitiond: RF 1 acks=1 | RF 3 acks=1 | RF 3 acks=all | ratio | RF 3 acks=all p50 / p99 | follower lag p50 / p99 (%d samples) |\n|---|---:|---:|---:|---:|---:|---|---|\n", rows[0].lagSamples)
	for _, r := range rows {
		a, one, o, p := r.aio, r.rf1, r.rf3one, r.rf3
		ratio := "—" // not measured (STRATA_BENCH_ONLY)
		if a.Result != nil {
			ratio = fmt.Sprintf("%.0f %%", 100*p.Produce.RecordsPerSec/max(a.Produce.RecordsPerSec, 1))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %.2f / %.2f ms | %.3f / %.3f s |\n",
			r.w.name, a, one, o, p, ratio, p.Produce.Latency.P50, p.Produce.Latency.P99, r.lagP50, r.lagP99)
		for _, m := range []measured{a, one, o, p} {
			if m.Result != nil && m.Produce.Errors > 0 {
				fmt.Fprintf(&b, "|   errors | %d (%s) |\n", m.Produce.Errors, m.Produce.FirstError)
			}
		}
	}
	b.WriteString("\nCPU: user+system time of every server process (children of this test) per record, the bench client excluded.\n")
	t.Log(b.String())
}

// measured is one bench run and the servers' CPU time during it.
type measured struct {
	*load.Result
	cpu time.Duration
}

func (m measured) String() string {
	if m.Result == nil {
		return "—"
	}
	p := m.Produce
	return fmt.Sprintf("%.0f rec/s, %.1f MB/s, %.1f µs CPU/rec", p.RecordsPerSec, p.MBPerSec,
		float64(m.cpu.Microseconds())/max(float64(p.Records), 1))
}

func measure(t *testing.T, addr, topic string, w workload, d time.Duration) measured {
	t.Helper()
	before := serverCPU()
	res := run(t, addr, topic, w, d)
	return measured{Result: res, cpu: serverCPU() - before}
}

// serverCPU sums utime+stime of this process's children (the server
// processes the test started), from /proc (Linux; 0 elsewhere).
func serverCPU() time.Duration {
	self := strconv.Itoa(os.Getpid())
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var ticks int64
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// Fields after the command name (which may hold spaces): state is
		// field 3, ppid 4, utime 14, stime 15.
		f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
		if len(f) < 13 || f[1] != self {
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + s
	}
	return time.Duration(ticks) * (time.Second / 100) // USER_HZ is 100 on Linux
}

// sampleLag scrapes every partitiond's strata_cluster_replication_lag_seconds
// for topic every 250 ms until stop, returning every sample (uncompressed:
// the scrapes should cost the servers as little as possible).
func sampleLag(c *clustertest.Cluster, topic string, stop <-chan struct{}) []float64 {
	var out []float64
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	hc := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-stop:
			return out
		case <-tick.C:
		}
		for _, p := range c.ByRole(pki.RolePartitiond) {
			req, err := http.NewRequest(http.MethodGet, "http://"+p.MetricsAddr+"/metrics", nil)
			if err != nil {
				continue
			}
			req.Header.Set("Accept-Encoding", "identity")
			resp, err := hc.Do(req)
			if err != nil {
				continue
			}
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				line := sc.Text()
				if !strings.HasPrefix(line, "strata_cluster_replication_lag_seconds{") || !strings.Contains(line, `topic="`+topic+`"`) {
					continue
				}
				if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
					out = append(out, v)
				}
			}
			resp.Body.Close()
		}
	}
}

// profile writes a CPU profile of every partitiond and gateway of c, taken
// over most of a run of length d, into dir as NAME-PROC.pb.gz.
func profile(t *testing.T, c *clustertest.Cluster, dir, name string, d time.Duration) {
	secs := max(int((d-time.Second)/time.Second), 1)
	hc := &http.Client{Timeout: d + 30*time.Second}
	var wg sync.WaitGroup
	for _, p := range append(c.ByRole(pki.RolePartitiond), c.ByRole(pki.RoleGateway)...) {
		wg.Go(func() {
			addr, err := pprofAddr(p.LogPath())
			if err != nil {
				t.Errorf("%s: %v", p.Name, err)
				return
			}
			resp, err := hc.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, secs))
			if err != nil {
				t.Errorf("%s: profile: %v", p.Name, err)
				return
			}
			defer resp.Body.Close()
			raw, err := io.ReadAll(resp.Body)
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, name+"-"+p.Name+".pb.gz"), raw, 0o644)
			}
			if err != nil {
				t.Errorf("%s: profile: %v", p.Name, err)
			}
		})
	}
	wg.Wait()
}

// pprofAddr finds the address a process logged as "pprof listening" (text
// or JSON log lines).
func pprofAddr(logPath string) (string, error) {
	raw, err := os.ReadFile(logPath)
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(raw)) {
		if !strings.Contains(line, "pprof listening") {
			continue
		}
		if m := pprofAddrRE.FindStringSubmatch(line); m != nil {
			return cmp.Or(m[1], m[2]), nil
		}
	}
	return "", fmt.Errorf("no pprof address in %s", logPath)
}

var pprofAddrRE = regexp.MustCompile(`addr=(\S+)|"addr":"([^"]+)"`)

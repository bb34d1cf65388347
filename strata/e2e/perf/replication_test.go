package perf

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
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
}

func run(t *testing.T, addr, topic string, w workload, d time.Duration) *load.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d+time.Minute)
	defer cancel()
	res, err := load.Run(ctx, load.Config{Mode: load.ModeProduce, Addr: addr, Topic: topic, Partitions: 4,
		Conns: 4, Inflight: 4, RecordSize: w.recordSize, BatchSize: w.batch, Acks: w.acks, Duration: d})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestReplicationThroughput compares RF 3 acks=all through three partitiond
// processes with the all-in-one's acks=1 on the same machine (issue 12's
// performance target: at least half), and samples the followers' lag
// (strata_cluster_replication_lag_seconds) during the RF 3 runs. It prints a
// table; set STRATA_BENCH=1 to run it (make bench-replication).
func TestReplicationThroughput(t *testing.T) {
	if os.Getenv("STRATA_BENCH") == "" {
		t.Skip("benchmark: set STRATA_BENCH=1 (make bench-replication)")
	}
	d := 8 * time.Second
	if v, err := time.ParseDuration(os.Getenv("STRATA_BENCH_DURATION")); err == nil {
		d = v
	}
	workloads := []workload{
		{"100 B × 1,000", 100, 1000, ""},
		{"1 KiB × 1,000", 1024, 1000, ""},
	}
	type row struct {
		w              workload
		aio, rf3       *load.Result
		lagP50, lagP99 float64
		lagSamples     int
	}
	rows := make([]row, len(workloads))

	aio := framework.StartAllInOneBinary(t)
	addr := aio.Gateways()[0].ClientAddr
	for i, w := range workloads {
		w.acks = "1"
		rows[i].w = w
		rows[i].aio = run(t, addr, fmt.Sprintf("aio-%d", i), w, d)
	}
	aio.Kill()

	c := clustertest.Start(t, clustertest.Spec{Metad: 3, Partitiond: 3, Coordinatord: 1, Gateways: 1})
	addr = c.GatewayAddrs()[0]
	cl, err := client.Dial(context.Background(), addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i, w := range workloads {
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
		rows[i].rf3 = run(t, addr, topic, w, d)
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
	fmt.Fprintf(&b, "\n| workload | all-in-one acks=1 | RF 3 acks=all (3 partitiond) | ratio | RF 3 publish p50 / p99 | follower lag p50 / p99 (%d samples) |\n|---|---:|---:|---:|---|---|\n", rows[0].lagSamples)
	for _, r := range rows {
		a, p := r.aio.Produce, r.rf3.Produce
		fmt.Fprintf(&b, "| %s | %.0f rec/s, %.1f MB/s | %.0f rec/s, %.1f MB/s | %.0f %% | %.2f / %.2f ms | %.3f / %.3f s |\n",
			r.w.name, a.RecordsPerSec, a.MBPerSec, p.RecordsPerSec, p.MBPerSec, 100*p.RecordsPerSec/max(a.RecordsPerSec, 1),
			p.Latency.P50, p.Latency.P99, r.lagP50, r.lagP99)
		if a.Errors > 0 || p.Errors > 0 {
			fmt.Fprintf(&b, "|   errors | %d (%s) | %d (%s) | | | |\n", a.Errors, a.FirstError, p.Errors, p.FirstError)
		}
	}
	t.Log(b.String())
}

// sampleLag scrapes every partitiond's strata_cluster_replication_lag_seconds
// for topic every 100 ms until stop, returning every sample.
func sampleLag(c *clustertest.Cluster, topic string, stop <-chan struct{}) []float64 {
	var out []float64
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	hc := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-stop:
			return out
		case <-tick.C:
		}
		for _, p := range c.ByRole(pki.RolePartitiond) {
			resp, err := hc.Get("http://" + p.MetricsAddr + "/metrics")
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

package replica

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/strataio/strata/partitiond/internal/partition"
)

// BenchmarkReplicateAcksAll appends acks=all batches of 1,000 records to
// the leader of a three-replica partition, four in flight, through the real
// replication path (mTLS gRPC over loopback, follower fetch sessions, the
// HWM wake-up, pwrite and fdatasync on disk under the test's temporary
// directory). It reports the process's CPU time (user+system) per record:
// the CPU of three copies of every record, one process standing for the
// three partition servers. Compare back-to-back runs, not ns/op, on a
// shared machine; run it with a bounded count (e.g. -benchtime=300x).
func BenchmarkReplicateAcksAll(b *testing.B) {
	for _, size := range []int{100, 1024} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			c := newCluster(b, clusterOpts{ids: []string{"p1", "p2", "p3"}, minISR: 2, diskDir: b.TempDir(),
				defaults: partition.Defaults{SegmentBytes: 64 << 20}})
			ps := make([]string, 1000)
			for i := range ps {
				ps[i] = strings.Repeat("x", size)
			}
			set := recordSet(b, ps...)
			leader := c.part("p1")
			waitFor(b, "every follower fetching", func() bool {
				isr, _, ok := c.mgr("p1").Leading(topic, partID)
				return ok && isr == 3
			})
			isr, minISR, _ := c.mgr("p1").Leading(topic, partID)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var wg sync.WaitGroup
			sem := make(chan struct{}, 4)
			var failed sync.Once
			before := cpuTime(b)
			b.ResetTimer()
			for range b.N {
				sem <- struct{}{}
				pa, err := leader.AppendAsync(ctx, &partition.AppendRequest{LifecycleEpoch: lifecycle, Acks: partition.AcksAll,
					Records: set, RecordCount: uint32(len(ps)), ISRSize: isr, MinISR: minISR})
				if err != nil {
					b.Fatal(err)
				}
				wg.Go(func() {
					defer func() { <-sem }()
					if err := pa.Wait(ctx); err != nil {
						failed.Do(func() { b.Error(err) })
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			cpu := cpuTime(b) - before
			recs := float64(b.N * len(ps))
			b.ReportMetric(float64(cpu.Nanoseconds())/recs, "cpu-ns/record")
			b.ReportMetric(recs/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// cpuTime returns the process's user+system CPU time.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

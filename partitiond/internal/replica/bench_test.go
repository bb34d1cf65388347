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
// the leader of a partition, four in flight, through the real replication
// path (mTLS gRPC over loopback, follower fetch sessions, the HWM wake-up,
// pwrite and fdatasync on disk under the test's temporary directory). It
// reports the process's CPU time (user+system) per record, one process
// standing for every partition server: compare back-to-back runs, not
// ns/op, on a shared machine; run it with a bounded count (e.g.
// -benchtime=300x).
//
// replicas=1 is the same append on a partition without followers: the
// leader's own share, so (replicas=3 − replicas=1) / 2 is what one follower
// copy costs (serving, TLS both ways, the follower's append and fdatasync).
func BenchmarkReplicateAcksAll(b *testing.B) {
	for _, replicas := range []int{3, 1} {
		for _, size := range []int{100, 1024} {
			b.Run(fmt.Sprintf("replicas=%d/size=%d", replicas, size), func(b *testing.B) {
				benchmarkAppend(b, []string{"p1", "p2", "p3"}[:replicas], size)
			})
		}
	}
}

func benchmarkAppend(b *testing.B, ids []string, size int) {
	c := newCluster(b, clusterOpts{ids: ids, minISR: min(2, len(ids)), diskDir: b.TempDir(),
		defaults: partition.Defaults{SegmentBytes: 64 << 20}})
	ps := make([]string, 1000)
	for i := range ps {
		ps[i] = strings.Repeat("x", size)
	}
	set := recordSet(b, ps...)
	leader := c.part("p1")
	waitFor(b, "every follower in sync", func() bool {
		isr, _, ok := c.mgr("p1").Leading(topic, partID)
		return ok && isr == len(ids)
	})
	isr, minISR, _ := c.mgr("p1").Leading(topic, partID)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	var failed sync.Once
	userBefore, sysBefore := cpuTime(b)
	served := c.member("p1").metrics.FetchesServed.Load()
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
	user, sys := cpuTime(b)
	user, sys = user-userBefore, sys-sysBefore
	recs := float64(b.N * len(ps))
	b.ReportMetric(float64((user+sys).Nanoseconds())/recs, "cpu-ns/record")
	// User time is this code's (copies, CRCs, TLS, gRPC, GC); system time
	// is mostly the kernel's copies into the page cache and the sockets and
	// fdatasync, which vary with the machine's other load.
	b.ReportMetric(float64(user.Nanoseconds())/recs, "user-ns/record")
	b.ReportMetric(float64(sys.Nanoseconds())/recs, "sys-ns/record")
	b.ReportMetric(recs/b.Elapsed().Seconds(), "records/s")
	// Fetch rounds the leader answered per appended batch (both followers
	// together): each costs a follower an fdatasync and both sides a
	// wake-up, so fewer rounds for the same batches is less CPU.
	b.ReportMetric(float64(c.member("p1").metrics.FetchesServed.Load()-served)/float64(b.N), "fetches/batch")
}

// cpuTime returns the process's user and system CPU time.
func cpuTime(tb testing.TB) (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

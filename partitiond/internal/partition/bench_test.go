//go:build linux

package partition

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/partitiond/internal/recordtest"
)

// Storage-layer benchmarks on the real disk (b.TempDir()), with the
// physical baseline in the same run. Figures and commands: docs/partitiond.md.

const (
	benchProducers = 8
	benchBatch     = 1000
)

var benchSizes = []struct {
	name string
	size int
}{{"100B", 100}, {"1KiB", 1024}}

func benchRecordSet(b *testing.B, topic string, n, size int) []byte {
	b.Helper()
	return recordtest.Repeat(b, wire.Record{Topic: topic, Payload: bytes.Repeat([]byte{'p'}, size), Timestamp: 1}, n)
}

func benchNode(b *testing.B) *Node {
	b.Helper()
	n, err := Open(context.Background(), NodeConfig{Dir: b.TempDir(), FS: vfs.Default,
		Defaults: Defaults{SegmentBytes: 256 << 20}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.Close() })
	return n
}

// BenchmarkBaselineFile writes the bytes of 8 producer batches (8 × 1,000
// records) to a plain file and fdatasyncs once per such group: the physical
// limit the group commit is measured against.
func BenchmarkBaselineFile(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			set := benchRecordSet(b, "t", benchBatch, sz.size)
			f, err := os.Create(filepath.Join(b.TempDir(), "baseline"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			b.SetBytes(int64(len(set)))
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if _, err := f.Write(set); err != nil {
					b.Fatal(err)
				}
				if (i+1)%benchProducers == 0 || i == b.N-1 {
					if err := fdatasync(f); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.N*benchBatch)/time.Since(start).Seconds(), "records/s")
		})
	}
}

// BenchmarkAppend is 8 concurrent producers appending 1,000-record batches
// to one partition with acks=1 (each acknowledged after the group-commit
// fdatasync covering it).
func BenchmarkAppend(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			n := benchNode(b)
			p, err := n.CreatePartition(context.Background(), PartitionSpec{Topic: "t", Partition: 0, LifecycleEpoch: 1})
			if err != nil {
				b.Fatal(err)
			}
			proto := benchRecordSet(b, "t", benchBatch, sz.size)
			b.SetBytes(int64(len(proto)))
			var next sync.Mutex
			i := 0
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for w := 0; w < benchProducers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					set := append([]byte(nil), proto...)
					for {
						next.Lock()
						if i >= b.N {
							next.Unlock()
							return
						}
						i++
						next.Unlock()
						if _, err := p.Append(context.Background(), &AppendRequest{LifecycleEpoch: 1, Acks: AcksLeader, Records: set, RecordCount: benchBatch}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(b.N*benchBatch)/time.Since(start).Seconds(), "records/s")
		})
	}
}

// BenchmarkFetchPageCache reads 1 KiB records 1 MiB at a time from a 64 MiB
// log that is in the page cache.
func BenchmarkFetchPageCache(b *testing.B) {
	n := benchNode(b)
	p, err := n.CreatePartition(context.Background(), PartitionSpec{Topic: "t", Partition: 0, LifecycleEpoch: 1})
	if err != nil {
		b.Fatal(err)
	}
	set := benchRecordSet(b, "t", benchBatch, 1024)
	var total uint64
	for i := 0; i < 64; i++ {
		if _, err := p.Append(context.Background(), &AppendRequest{LifecycleEpoch: 1, Acks: AcksLeader, Records: set, RecordCount: benchBatch}); err != nil {
			b.Fatal(err)
		}
		total += benchBatch
	}
	var off uint64
	var read int64
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		r, err := p.Fetch(context.Background(), &FetchRequest{LifecycleEpoch: 1, Offset: off, MaxBytes: 1 << 20, MaxRecords: 100_000})
		if err != nil {
			b.Fatal(err)
		}
		read += int64(len(r.Records))
		if off = r.NextOffset; off >= total {
			off = 0
		}
	}
	b.ReportMetric(float64(read)/time.Since(start).Seconds()/1e6, "MB/s")
}

// BenchmarkAppendLatency compares a single-record acks=1 append with a bare
// write + fdatasync of the same bytes; it reports both p50s.
func BenchmarkAppendLatency(b *testing.B) {
	n := benchNode(b)
	p, err := n.CreatePartition(context.Background(), PartitionSpec{Topic: "t", Partition: 0, LifecycleEpoch: 1})
	if err != nil {
		b.Fatal(err)
	}
	set := benchRecordSet(b, "t", 1, 100)
	f, err := os.Create(filepath.Join(b.TempDir(), "bare"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	bare := make([]time.Duration, 0, b.N)
	app := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := f.Write(set); err != nil {
			b.Fatal(err)
		}
		if err := fdatasync(f); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := p.Append(context.Background(), &AppendRequest{LifecycleEpoch: 1, Acks: AcksLeader, Records: set, RecordCount: 1}); err != nil {
			b.Fatal(err)
		}
		bare = append(bare, t1.Sub(t0))
		app = append(app, time.Since(t1))
	}
	b.StopTimer()
	p50 := func(d []time.Duration) float64 {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return float64(d[len(d)/2].Microseconds())
	}
	b.ReportMetric(p50(bare), "bare-p50-µs")
	b.ReportMetric(p50(app), "append-p50-µs")
}

// fdatasync is what the log's group commit issues (data, not metadata).
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }

// BenchmarkPrepare is the CPU of checking a 1,000-record set and building
// its log batch (prepare), without the write: ns/op is per batch.
func BenchmarkPrepare(b *testing.B) {
	for _, sz := range benchSizes {
		b.Run(sz.name, func(b *testing.B) {
			n := benchNode(b)
			p, err := n.CreatePartition(context.Background(), PartitionSpec{Topic: "t", Partition: 0, LifecycleEpoch: 1})
			if err != nil {
				b.Fatal(err)
			}
			req := &AppendRequest{LifecycleEpoch: 1, Acks: AcksLeader, Records: benchRecordSet(b, "t", benchBatch, sz.size), RecordCount: benchBatch}
			b.SetBytes(int64(len(req.Records)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.prepare(req, p.meta.Load()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

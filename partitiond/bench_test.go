package partitiond

import (
	"bytes"
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strataio/strata/libs/fake/metadfake"
	"github.com/strataio/strata/libs/wire"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"

	"github.com/strataio/strata/partitiond/internal/recordtest"
)

// benchSet encodes n records with payloads of size bytes.
func benchSet(b *testing.B, topic string, n, size int) []byte {
	b.Helper()
	return recordtest.Repeat(b, wire.Record{Topic: topic, Payload: bytes.Repeat([]byte{'p'}, size), Timestamp: time.Now().UnixMilli()}, n)
}

// BenchmarkProduceStream measures appends through one gRPC Produce stream
// over mTLS with acks=1 (every acknowledgement after the group-commit
// fdatasync covering it), batches of 1,000 records spread over 4
// partitions, up to 32 requests in flight.
func BenchmarkProduceStream(b *testing.B) {
	for _, size := range []int{100, 1024} {
		b.Run(map[int]string{100: "100B", 1024: "1KiB"}[size], func(b *testing.B) { benchProduce(b, size) })
	}
}

func benchProduce(b *testing.B, size int) {
	const perBatch, parts, window = 1000, 4, 32
	c := startCluster(b, nil, nil, "", func(c *Config) { c.SegmentBytes = 128 << 20 })
	c.metad.PutTopic(metadfake.NewTopic("bench", parts, 1, "p1", "p1"))
	for p := int32(0); p < parts; p++ {
		c.waitServing(b, "bench", p)
	}
	set := benchSet(b, "bench", perBatch, size)
	stream, err := c.client.Produce(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	slots := make(chan struct{}, window)
	var failed atomic.Int64
	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
		for {
			r, err := stream.Recv()
			if err == io.EOF || err != nil {
				return
			}
			if r.GetAppend().GetError() != nil {
				failed.Add(1)
			}
			<-slots
		}
	}()
	b.SetBytes(int64(len(set)))
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		slots <- struct{}{}
		if err := stream.Send(&partitionv1.ProduceRequest{CorrelationId: uint64(i), Append: &partitionv1.AppendRequest{
			Topic: "bench", Partition: int32(i % parts), LifecycleEpoch: 1, Acks: 1, Records: set, RecordCount: perBatch}}); err != nil {
			b.Fatal(err)
		}
	}
	stream.CloseSend()
	<-recvDone
	elapsed := time.Since(start)
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d appends failed", n)
	}
	b.ReportMetric(float64(b.N*perBatch)/elapsed.Seconds(), "records/s")
}

// BenchmarkFetch measures Fetch throughput over mTLS from the page cache:
// 1 KiB records, 1 MiB per fetch, cycling over a 32 MiB log.
func BenchmarkFetch(b *testing.B) {
	const size, perBatch = 1024, 1000
	c := startCluster(b, nil, nil, "", func(c *Config) { c.SegmentBytes = 128 << 20 })
	c.metad.PutTopic(metadfake.NewTopic("fb", 1, 1, "p1", "p1"))
	c.waitServing(b, "fb", 0)
	set := benchSet(b, "fb", perBatch, size)
	total := uint64(0)
	for i := 0; i < 32; i++ {
		if _, err := c.client.Append(context.Background(), &partitionv1.AppendRequest{Topic: "fb", Partition: 0, LifecycleEpoch: 1,
			Acks: 1, Records: set, RecordCount: perBatch}); err != nil {
			b.Fatal(err)
		}
		total += perBatch
	}
	var bytesRead, records int64
	var off uint64
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		resp, err := c.client.Fetch(context.Background(), &partitionv1.FetchRequest{Topic: "fb", Partition: 0, Offset: off, MaxBytes: 1 << 20})
		if err != nil {
			b.Fatal(err)
		}
		bytesRead += int64(len(resp.GetRecords()))
		records += int64(resp.GetRecordCount())
		off = resp.GetNextOffset()
		if off >= total {
			off = 0
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(bytesRead)/elapsed.Seconds()/1e6, "MB/s")
	b.ReportMetric(float64(records)/elapsed.Seconds(), "records/s")
}

package gateway

import (
	"fmt"
	"testing"

	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/libs/wire/wiretest"
)

// BenchmarkPublishBatch measures the gateway hop of a batch publish: frame
// read and check, batch validation, routing, the produce stream to a
// (discarding) partitiond over loopback mTLS gRPC, and the ack frame.
// allocs/op include the in-process fake partitiond and the client.
func BenchmarkPublishBatch(b *testing.B) {
	// records=1 is the single-publish latency without storage (ns/op is
	// the round trip: one request in flight).
	for _, tc := range []struct{ records, size int }{{1, 100}, {1000, 100}, {1000, 1024}} {
		records, size := tc.records, tc.size
		b.Run(fmt.Sprintf("records=%d/size=%d", records, size), func(b *testing.B) {
			c := startClusterWith(b, clusterOptions{discard: true})
			cl := wiretest.Negotiate(b, c.addr, wire.CompressionNone)
			cl.OK("CREATE topic=bench partitions=1")
			var bb wire.BatchBuilder
			bb.Reset(nil, wire.BatchHeader{Topic: "bench", Partition: 0, Acks: "1"})
			payload := make([]byte, size)
			for i := 0; i < records; i++ {
				if err := bb.Add(&wire.Record{Topic: "bench", Partition: 0, Payload: payload, Key: "k", Timestamp: 1}); err != nil {
					b.Fatal(err)
				}
			}
			batch, _ := bb.Bytes()
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cl.Send(wire.CmdPublish, batch)
				if f := cl.MustRead(); f.Header.Status != wire.StatusOK {
					b.Fatalf("publish failed: %q", f.Payload)
				}
			}
		})
	}
}

package fsm

import (
	"fmt"
	"testing"

	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// BenchmarkApply measures the FSM alone (decode, handler, commit, watch
// publish) for the commands metad sees most: heartbeats, HWM checkpoints and
// topic patches, on a state of 100 topics x 8 partitions.
func BenchmarkApply(b *testing.B) {
	setup := func(b *testing.B) *h {
		x := newH(b)
		x.partitionds(3)
		for i := range 100 {
			x.ok(create(fmt.Sprintf("t%03d", i), func(r *metav1.CreateTopicRequest) { r.Partitions = ptr[int32](8) }))
		}
		return x
	}
	b.Run("heartbeat", func(b *testing.B) {
		x := setup(b)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			x.idx++
			x.f.ApplyCommand(x.idx, MustEncode(&metav1.NodeHeartbeatCommand{NodeId: "p1", Incarnation: 1, NowUnixMs: x.now + int64(i)}))
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cmds/s")
	})
	b.Run("checkpoint_hwm", func(b *testing.B) {
		x := setup(b)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			x.idx++
			r := x.f.ApplyCommand(x.idx, MustEncode(&metav1.CheckpointHwmRequest{Topic: "t042", Partition: 3, LeaderEpoch: 1, LifecycleEpoch: 1, Hwm: uint64(i + 1)}))
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cmds/s")
	})
	b.Run("create_patch", func(b *testing.B) {
		x := setup(b)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			x.idx++
			r := x.f.ApplyCommand(x.idx, MustEncode(create("t007", func(r *metav1.CreateTopicRequest) { r.RetentionHours = ptr(int64(i)) })))
			if r.Err != nil {
				b.Fatal(r.Err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cmds/s")
	})
}

package fsm

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

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
	cmds := []struct {
		name string
		cmd  func(x *h, i int) proto.Message
	}{
		{"heartbeat", func(x *h, i int) proto.Message {
			return &metav1.NodeHeartbeatCommand{NodeId: "p1", Incarnation: 1, NowUnixMs: x.now + int64(i)}
		}},
		{"checkpoint_hwm", func(_ *h, i int) proto.Message {
			return &metav1.CheckpointHwmRequest{Topic: "t042", Partition: 3, LeaderEpoch: 1, LifecycleEpoch: 1, Hwm: uint64(i + 1)}
		}},
		{"create_patch", func(_ *h, i int) proto.Message {
			return create("t007", func(r *metav1.CreateTopicRequest) { r.RetentionHours = ptr(int64(i)) })
		}},
	}
	for _, c := range cmds {
		b.Run(c.name, func(b *testing.B) {
			x := setup(b)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				x.idx++
				if r := x.f.ApplyCommand(x.idx, MustEncode(c.cmd(x, i))); r.Err != nil {
					b.Fatal(r.Err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "cmds/s")
		})
	}
}

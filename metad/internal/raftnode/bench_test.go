package raftnode

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// BenchmarkProposeSingleVoter measures committed metadata writes per second
// through one voter on the real filesystem (each commit is an fsync'd log
// append), with 1 and 16 concurrent proposers (raft batches concurrent
// commands into one append).
func BenchmarkProposeSingleVoter(b *testing.B) {
	for _, conc := range []int{1, 16} {
		b.Run("proposers="+strconv.Itoa(conc), func(b *testing.B) {
			_, tr := raft.NewInmemTransport("m1")
			n, err := New(Config{ID: "m1", Address: "m1", Dir: b.TempDir(), Transport: tr,
				Voters: []raft.Server{{ID: "m1", Address: "m1"}}, Raft: fast})
			if err != nil {
				b.Fatal(err)
			}
			defer n.Shutdown()
			for !n.IsLeader() {
				time.Sleep(5 * time.Millisecond)
			}
			ctx := context.Background()
			if _, err := n.Propose(ctx, &metav1.RegisterNodeCommand{Node: pd("p1"), NowUnixMs: 1}); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			var wg sync.WaitGroup
			per := b.N/conc + 1
			for range conc {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range per {
						if _, err := n.Propose(ctx, &metav1.NodeHeartbeatCommand{NodeId: "p1", Incarnation: 1, NowUnixMs: int64(i + 2)}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			b.ReportMetric(float64(per*conc)/b.Elapsed().Seconds(), "commits/s")
		})
	}
}

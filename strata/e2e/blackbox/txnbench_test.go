package blackbox

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/strataio/strata/strata/e2e/framework"
)

// TestTxnCommitFigures measures transactional producing on the in-process
// all-in-one: one TxnProducer, sequential transactions of 1, 10 and 750
// messages (keyless, 3 partitions): transactions/s, messages/s and the
// END_TXN commit latency p50/p99. Off by default (a measurement, not a
// check): STRATA_TXN_FIGURES=1 go test ./strata/e2e/blackbox -run TestTxnCommitFigures -v
func TestTxnCommitFigures(t *testing.T) {
	if os.Getenv("STRATA_TXN_FIGURES") == "" {
		t.Skip("set STRATA_TXN_FIGURES=1 to measure")
	}
	c := framework.Cluster(framework.StartAllInOne(t))
	ctx, cl := framework.Connect(t, c, 5*time.Minute)
	framework.CreateTopics(t, ctx, cl, "topic=bench-out partitions=3")
	for _, size := range []int{1, 10, 750} {
		tp := cl.NewTxnProducer(fmt.Sprintf("bench-%d", size))
		rounds := map[int]int{1: 200, 10: 100, 750: 8}[size]
		var commits []time.Duration
		start := time.Now()
		for range rounds {
			if err := tp.Begin(ctx); err != nil {
				t.Fatal(err)
			}
			for range size {
				if _, err := tp.Send(ctx, "bench-out", -1, "", "x"); err != nil {
					t.Fatal(err)
				}
			}
			cs := time.Now()
			if err := tp.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			commits = append(commits, time.Since(cs))
		}
		el := time.Since(start)
		slices.Sort(commits)
		q := func(f float64) time.Duration { return commits[int(f*float64(len(commits)-1))] }
		t.Logf("messages/txn=%d transactions=%d txn/s=%.1f msgs/s=%.0f commit p50=%v p99=%v", size, rounds,
			float64(rounds)/el.Seconds(), float64(rounds*size)/el.Seconds(), q(0.5), q(0.99))
	}
}

package coordinatord

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/strataio/strata/coordinatord/internal/offsetlog"
	"github.com/strataio/strata/coordinatord/internal/txnlog"
	"github.com/strataio/strata/libs/fake/metadfake"
	"github.com/strataio/strata/libs/groups"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// inflight counts the log calls in progress across every offsets partition
// and transaction shard, and the most seen at once. Each call is slowed so
// takeovers that run together overlap.
type inflight struct {
	mu       sync.Mutex
	now, max int
}

func (f *inflight) call() func() {
	f.mu.Lock()
	f.now++
	f.max = max(f.max, f.now)
	f.mu.Unlock()
	time.Sleep(5 * time.Millisecond)
	return func() {
		f.mu.Lock()
		f.now--
		f.mu.Unlock()
	}
}

type countedLog struct {
	c leaderClient
	f *inflight
}

func (l countedLog) Append(ctx context.Context, req *partitionv1.AppendRequest) (*partitionv1.AppendResponse, error) {
	defer l.f.call()()
	return l.c.Append(ctx, req)
}

func (l countedLog) Fetch(ctx context.Context, req *partitionv1.FetchRequest) (*partitionv1.FetchResponse, error) {
	defer l.f.call()()
	return l.c.Fetch(ctx, req)
}

func (l countedLog) ListOffsets(ctx context.Context, req *partitionv1.ListOffsetsRequest) (*partitionv1.ListOffsetsResponse, error) {
	defer l.f.call()()
	return l.c.ListOffsets(ctx, req)
}

// TestStartupTakeoversAreBounded starts a coordinatord that owns all 16
// offsets partitions and all transaction shards at once: their takeovers
// (one log call in flight each at most) never run more than maxTakeovers
// at a time, and all of them complete.
func TestStartupTakeoversAreBounded(t *testing.T) {
	c := newCluster(t)
	c.meta.PutTopic(metadfake.NewTopic(groups.OffsetsTopic, groups.DefaultOffsetsPartitions, 0, "p1", "p1"))
	c.meta.PutTopic(metadfake.NewTopic(txnlog.Topic, metadfake.TxnShards, 0, "p1", "p1"))
	f := &inflight{}
	co := startCoordWith(t, c, "c1", testConfig(c), func(r *Role) {
		r.logClient = func(p int32) offsetlog.Client {
			return countedLog{c: leaderClient{r: r, topic: groups.OffsetsTopic, p: p}, f: f}
		}
		r.txnLogClient = func(p int32) txnlog.Client {
			return countedLog{c: leaderClient{r: r, topic: txnlog.Topic, p: p}, f: f}
		}
	})
	co.waitReady(t)
	ready := func() (n int) {
		co.r.mu.Lock()
		defer co.r.mu.Unlock()
		for _, s := range co.r.shards {
			s.mu.Lock()
			if s.state == shardReady {
				n++
			}
			s.mu.Unlock()
		}
		for _, s := range co.r.txnShardMap {
			s.mu.Lock()
			if s.state == shardReady {
				n++
			}
			s.mu.Unlock()
		}
		return n
	}
	deadline := time.Now().Add(20 * time.Second)
	for ready() < int(groups.DefaultOffsetsPartitions)+metadfake.TxnShards && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := ready(); n != int(groups.DefaultOffsetsPartitions)+metadfake.TxnShards {
		t.Fatalf("%d takeovers done, want %d", n, int(groups.DefaultOffsetsPartitions)+metadfake.TxnShards)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.max > maxTakeovers {
		t.Fatalf("%d log calls in flight at once, want at most %d (one per takeover)", f.max, maxTakeovers)
	}
	if f.max < 2 {
		t.Fatalf("at most %d log call in flight: the takeovers did not run side by side at all", f.max)
	}
}

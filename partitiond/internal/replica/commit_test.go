package replica

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strataio/strata/partitiond/internal/partition"
)

// hwmBelowFollowers samples, until stop is called, that the leader's HWM
// never passes the durable end of any listed follower: the HWM is read
// first, and durable ends only grow, so a sample above one is a commit of
// records that follower did not hold.
func hwmBelowFollowers(t *testing.T, leader *partition.Partition, followers ...*partition.Partition) (stop func()) {
	var bad atomic.Pointer[string]
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
			h := leader.HighWatermark()
			for i, f := range followers {
				if e := f.DurableEnd(); h > e {
					msg := fmt.Sprintf("leader HWM %d above follower %d's durable end %d", h, i, e)
					bad.CompareAndSwap(nil, &msg)
				}
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
		if m := bad.Load(); m != nil {
			t.Error(*m)
		}
	}
}

// An idempotent acks=all append on the leader completes only once both
// in-sync followers hold it durably (their fetch reported it); acks=1 does
// not wait for them. The leader's HWM is the minimum follower durable end,
// the followers' logs are the leader's batch for batch, and their HWM
// follows the leader's.
func TestAcksAllCompletesOnceEveryInSyncFollowerHoldsTheBatch(t *testing.T) {
	c := newCluster(t, clusterOpts{ids: []string{"p1", "p2", "p3"}, minISR: 2})
	leader, f2, f3 := c.part("p1"), c.part("p2"), c.part("p3")
	stopSampling := hwmBelowFollowers(t, leader, f2, f3)
	ctx := context.Background()

	// p3 is held after its current fetch: whatever it receives it cannot
	// report, so the batch is not committed.
	c.member("p3").gate.close()
	type result struct {
		res partition.AppendResult
		err error
	}
	first := make(chan result, 1)
	go func() {
		res, err := c.appendAll(ctx, "p1", 1, "a0", "a1")
		first <- result{res, err}
	}()
	waitFor(t, "p2 holding the first batch durably", func() bool { return f2.DurableEnd() >= 2 })
	select {
	case r := <-first:
		t.Fatalf("acks=all answered (%+v, %v) while p3 had not reported the batch", r.res, r.err)
	case <-time.After(3 * c.opts.fetchMaxWait):
	}
	if h := leader.HighWatermark(); h != 0 {
		t.Fatalf("leader HWM %d while p3 has reported nothing", h)
	}
	// acks=1: durable on the leader is enough.
	one := make(chan result, 1)
	go func() {
		res, err := leader.Append(ctx, &partition.AppendRequest{LifecycleEpoch: lifecycle, Acks: partition.AcksLeader,
			Records: recordSet(t, "b0"), RecordCount: 1})
		one <- result{res, err}
	}()
	select {
	case r := <-one:
		if r.err != nil || r.res.BaseOffset != 2 {
			t.Fatalf("acks=1 append: %+v %v, want offset 2", r.res, r.err)
		}
	case <-time.After(waitLimit):
		t.Fatal("acks=1 append waited for the followers")
	}
	c.member("p3").gate.open()
	select {
	case r := <-first:
		if r.err != nil || r.res.BaseOffset != 0 || r.res.LastOffset != 1 {
			t.Fatalf("acks=all append: %+v %v", r.res, r.err)
		}
	case <-time.After(waitLimit):
		t.Fatal("acks=all append not acknowledged after p3 came back")
	}
	if e2, e3 := f2.DurableEnd(), f3.DurableEnd(); e2 < 2 || e3 < 2 {
		t.Fatalf("acknowledged at 1 with follower durable ends %d and %d", e2, e3)
	}

	// A stream of acks=all batches, each held by both followers when it
	// is acknowledged; a retry answers with the original offsets.
	seq := uint64(3)
	var last partition.AppendResult
	for i := range 30 {
		res, err := c.appendAll(ctx, "p1", seq, fmt.Sprintf("c%d-0", i), fmt.Sprintf("c%d-1", i))
		if err != nil || res.Duplicate {
			t.Fatalf("append %d: %+v %v", i, res, err)
		}
		if e2, e3 := f2.DurableEnd(), f3.DurableEnd(); e2 <= res.LastOffset || e3 <= res.LastOffset {
			t.Fatalf("batch ending at %d acknowledged with follower durable ends %d and %d", res.LastOffset, e2, e3)
		}
		last = res
		seq += 2
	}
	retry, err := c.appendAll(ctx, "p1", seq-2, "c29-0", "c29-1")
	if err != nil || !retry.Duplicate || retry.BaseOffset != last.BaseOffset {
		t.Fatalf("retry of the last batch: %+v %v, want the original offsets %d", retry, err, last.BaseOffset)
	}
	stopSampling()

	end := leader.LogEndOffset()
	waitFor(t, "the HWM to reach the log end", func() bool { return leader.HighWatermark() == end })
	if h, e2, e3 := leader.HighWatermark(), f2.DurableEnd(), f3.DurableEnd(); h != min(e2, e3) {
		t.Fatalf("leader HWM %d, follower durable ends %d and %d", h, e2, e3)
	}
	for _, id := range []string{"p2", "p3"} {
		f := c.part(id)
		if d := sameLog(t, leader, f); d != "" {
			t.Fatalf("%s: %s", id, d)
		}
		waitFor(t, id+"'s HWM to follow the leader's", func() bool { return f.HighWatermark() == end })
	}
	if isr, minISR, ok := c.mgr("p1").Leading(topic, partID); !ok || isr != 3 || minISR != 2 {
		t.Fatalf("Leading = %d, %d, %v; want 3, 2, true", isr, minISR, ok)
	}
	if n := len(c.meta.alterCalls()); n != 0 {
		t.Fatalf("%d ISR changes with every follower in sync", n)
	}
}

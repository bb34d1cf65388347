package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/strataio/strata/libs/errcode"
)

// staleEpochRefusals returns the requested epochs of id's fetches the
// leader refused with STALE_LEADER_EPOCH.
func (c *cluster) staleEpochRefusals(id string) []string {
	var out []string
	for _, r := range c.member(id).logs.find("replica fetch of a partition failed") {
		var e *errcode.Error
		if errors.As(r.err(), &e) && errors.Is(e, errcode.StaleLeaderEpoch) {
			for _, f := range e.Fields {
				if f.Key == "requested" {
					out = append(out, f.Value)
				}
			}
		}
	}
	return out
}

// A follower fetching under another leader epoch than the leader's, older
// or newer, is refused with STALE_LEADER_EPOCH and gets nothing; once the
// view moves (its own or the leader's) it fetches again.
func TestFetchUnderAnotherLeaderEpochIsRefusedUntilTheViewMoves(t *testing.T) {
	c := newCluster(t, clusterOpts{ids: []string{"p1", "p2"}})
	leader, p2 := c.part("p1"), c.part("p2")
	c.appendOne("p1", "epoch1")
	waitFor(t, "p2 to replicate", func() bool { return p2.DurableEnd() == 1 })

	t.Run("Older", func(t *testing.T) {
		c.elect("p1", []string{"p1", "p2"}, "p1") // p2's view still says epoch 1
		c.appendOne("p1", "epoch2")
		waitFor(t, "a refusal of epoch 1", func() bool { return slices.Contains(c.staleEpochRefusals("p2"), "1") })
		time.Sleep(3 * c.opts.fetchMaxWait)
		if e := p2.LogEndOffset(); e != 1 {
			t.Fatalf("p2 replicated up to %d under a stale epoch", e)
		}
		c.publish("p2")
		waitFor(t, "p2 to replicate at epoch 2", func() bool { return sameLog(t, leader, p2) == "" })
	})
	t.Run("Newer", func(t *testing.T) {
		c.elect("p1", []string{"p1", "p2"}, "p2") // the leader has not applied epoch 3
		c.appendOne("p1", "still-epoch2")
		waitFor(t, "a refusal of epoch 3", func() bool { return slices.Contains(c.staleEpochRefusals("p2"), "3") })
		time.Sleep(3 * c.opts.fetchMaxWait)
		if e := p2.LogEndOffset(); e != 2 {
			t.Fatalf("p2 replicated up to %d ahead of the leader's epoch", e)
		}
		// The leader applies epoch 3: p2 retries with the same view.
		c.publish("p1")
		waitFor(t, "p2 to replicate at epoch 3", func() bool { return sameLog(t, leader, p2) == "" })
	})
	if n := c.member("p2").metrics.FetchErrors.Load(); n == 0 {
		t.Fatal("refused fetches not counted")
	}
}

// A leader deposed while an acks=all append waits for its followers fails
// the append with NOT_PARTITION_LEADER (retryable: the producer retries on
// the new leader, which answers the retry with the original offsets) and
// follows the new leader.
func TestDeposedLeaderFailsWaitingAcksAllAndFollowsTheNewLeader(t *testing.T) {
	c := newCluster(t, clusterOpts{ids: []string{"p1", "p2", "p3"}, minISR: 2})
	ctx := context.Background()
	c.commitAll("p1", 1, 2, "committed")

	c.member("p3").gate.close()
	waiting := c.appendAllAsync("p1", 3, "pending-0", "pending-1")
	waitFor(t, "p2 to hold the pending batch", func() bool { return c.part("p2").DurableEnd() == 4 })
	c.elect("p2", []string{"p1", "p2", "p3"})
	select {
	case err := <-waiting:
		wantCode(t, err, errcode.NotPartitionLeader)
	case <-time.After(waitLimit):
		t.Fatal("the waiting acks=all append was not failed by the leader change")
	}
	if _, _, ok := c.mgr("p1").Leading(topic, partID); ok {
		t.Fatal("p1 still reports leading")
	}
	if !c.part("p1").Follower() {
		t.Fatal("p1's partition is not a follower")
	}
	c.member("p3").gate.open()

	retry, err := c.appendAll(ctx, "p2", 3, "pending-0", "pending-1")
	if err != nil || !retry.Duplicate || retry.BaseOffset != 2 || retry.LastOffset != 3 {
		t.Fatalf("retry on the new leader: %+v %v; want the original offsets 2-3", retry, err)
	}
	for i := range 3 {
		if _, err := c.appendAll(ctx, "p2", uint64(5+i), fmt.Sprintf("epoch2-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	leader := c.part("p2")
	for _, id := range []string{"p1", "p3"} {
		p := c.part(id)
		waitFor(t, id+" to follow p2", func() bool { return sameLog(t, leader, p) == "" })
	}
}

// A long poll outlives the leadership it began under: the answer must not
// carry batches the node appended after it stopped leading. Here p1 loses
// leadership while p3's fetch (at offset 6, the end of p1's epoch 1 tail,
// which p3 holds and the new leader p2 never had) waits on p1. p1 then
// truncates that tail and replicates p2's epoch 2 batches at 4..8; had the
// waiting fetch been answered with them from 6, p3 would append epoch 2's
// 6..8 after its own epoch 1 tail 4..6, and its next fetch, from p2 with
// last epoch 2 at offset 8, would pass the divergence check: a silently
// diverged replica.
func TestLongPollOutlivingItsLeadershipCarriesNoBatches(t *testing.T) {
	c := newCluster(t, clusterOpts{ids: []string{"p1", "p2", "p3"}, minISR: 2, fetchMaxWait: 3 * time.Second})
	c.commitAll("p1", 1, 4, "committed")
	c.stop("p2")
	c.appendOne("p1", "tail-4")
	c.appendOne("p1", "tail-5")
	p3 := c.part("p3")
	waitFor(t, "p3 to hold p1's tail and wait on p1", func() bool {
		if p3.DurableEnd() != 6 {
			return false
		}
		st := c.mgr("p1").Stats()
		for _, f := range st[0].Followers {
			if f.ID == "p3" {
				return f.LagRecords == 0
			}
		}
		return false
	})

	c.restart("p2", false)
	c.elect("p2", []string{"p1", "p2", "p3"}, "p1", "p2") // p3's view is late
	for i := range 4 {
		c.appendOne("p2", fmt.Sprintf("epoch2-%d", i))
	}
	p1 := c.part("p1")
	waitFor(t, "p1 to replicate epoch 2", func() bool { return sameLog(t, c.part("p2"), p1) == "" })
	time.Sleep(200 * time.Millisecond) // for an answer from p1 to reach p3
	if e := p3.LogEndOffset(); e != 6 {
		t.Fatalf("p3's fetch on p1, which no longer leads, was answered with batches up to %d", e)
	}
	c.publish("p3")
	waitFor(t, "p3 to hold p2's log", func() bool { return sameLog(t, c.part("p2"), p3) == "" })
}

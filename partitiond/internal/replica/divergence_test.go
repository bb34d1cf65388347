package replica

import (
	"context"
	"fmt"
	"testing"
)

// commitAll appends n idempotent acks=all records on the leader (one batch
// each, sequences from seq) and fails unless each is acknowledged.
func (c *cluster) commitAll(leader string, seq uint64, n int, prefix string) {
	c.t.Helper()
	for i := range n {
		if _, err := c.appendAll(context.Background(), leader, seq+uint64(i), fmt.Sprintf("%s-%d", prefix, i)); err != nil {
			c.t.Fatalf("acks=all append %d on %s: %v", i, leader, err)
		}
	}
}

// truncationsAbove fails unless every divergence truncation id logged cut
// the log at or above floor (the HWM it had: committed records are never
// cut), and returns how many there were.
func (c *cluster) truncationsAbove(id string, floor uint64) int {
	c.t.Helper()
	recs := c.member(id).logs.find("follower log diverged from the leader's: truncated")
	for _, r := range recs {
		if to := r.uint("to"); to < floor {
			c.t.Fatalf("%s truncated to %d, below the committed offset %d", id, to, floor)
		}
	}
	return len(recs)
}

// A leader that wrote batches its followers never received, and then lost
// leadership, truncates them when it follows the new leader (whose epoch 2
// appended other batches at those offsets), keeps every committed record,
// and ends with the new leader's log.
func TestFollowerTruncatesTheTailItWroteAsAnOldLeader(t *testing.T) {
	c := newCluster(t, clusterOpts{ids: []string{"p1", "p2", "p3"}, minISR: 2})
	c.commitAll("p1", 1, 4, "committed")
	for _, id := range []string{"p2", "p3"} {
		waitFor(t, id+" to learn HWM 4", func() bool { return c.part(id).HighWatermark() == 4 })
	}
	committed := payloadsOf(t, c.part("p1"))

	// p1 writes a tail nobody receives, then dies.
	c.stop("p2")
	c.stop("p3")
	c.appendOne("p1", "lost-0", "lost-1")
	c.appendOne("p1", "lost-2")
	c.stop("p1")

	// p2 is elected at epoch 2 and appends other batches at 4.
	c.restart("p2", false)
	c.restart("p3", false)
	c.elect("p2", []string{"p2", "p3"})
	c.commitAll("p2", 5, 2, "epoch2")

	// p1 comes back (its storage reopened) and follows p2.
	c.restart("p1", true)
	leader, p1 := c.part("p2"), c.part("p1")
	waitFor(t, "p1 to hold p2's log", func() bool { return sameLog(t, leader, p1) == "" })
	if n := c.truncationsAbove("p1", 4); n == 0 {
		t.Fatal("p1 did not log its truncation")
	}
	got := payloadsOf(t, p1)
	for off, v := range committed {
		if got[off] != v {
			t.Fatalf("committed offset %d holds %q, want %q", off, got[off], v)
		}
	}
	for off, v := range got {
		if len(v) >= 4 && v[:4] == "lost" {
			t.Fatalf("p1 kept its divergent record %q at %d", v, off)
		}
	}
	if d := sameLog(t, leader, c.part("p3")); d != "" {
		t.Fatalf("p3: %s", d)
	}
	c.setISR("p1", "p2", "p3")
	c.commitAll("p2", 7, 1, "after")
	waitFor(t, "p1 to replicate after the truncation", func() bool { return sameLog(t, leader, p1) == "" })
}

// KIP-279: the divergence point lies two epoch boundaries back. p3 led
// epoch 3 without epoch 2's batches and wrote its own at the same offsets;
// the leader of epoch 4 (p2) has epoch 2 and never had epoch 3. p3 asks
// with its last epoch, 3: the leader answers with its largest epoch at or
// below it, 2, ending at 8. p3 has no epoch 2: its own largest epoch at or
// below 2 is 1, ending at 4, and it must truncate there (the smaller of the
// two ends) rather than at the leader's 8, which its log does not reach and
// which would leave epoch 3's batches in place.
func TestDivergenceAcrossTwoEpochBoundaries(t *testing.T) {
	c := newCluster(t, clusterOpts{ids: []string{"p1", "p2", "p3"}, minISR: 2})
	c.commitAll("p1", 1, 4, "committed")
	for _, id := range []string{"p2", "p3"} {
		waitFor(t, id+" to learn HWM 4", func() bool { return c.part(id).HighWatermark() == 4 })
	}
	committed := payloadsOf(t, c.part("p1"))

	// Epoch 2 (p1): [4, 8) reaches p2 only.
	c.stop("p3")
	c.elect("p1", []string{"p1", "p2", "p3"})
	for i := range 4 {
		c.appendOne("p1", fmt.Sprintf("epoch2-%d", i))
	}
	waitFor(t, "p2 to hold epoch 2", func() bool { return c.part("p2").DurableEnd() == 8 })
	c.stop("p1")
	c.stop("p2")

	// Epoch 3 (p3, still in the ISR): [4, 7) under epoch 3, on p3 only.
	c.restart("p3", false)
	c.elect("p3", []string{"p2", "p3"})
	for i := range 3 {
		c.appendOne("p3", fmt.Sprintf("epoch3-%d", i))
	}
	c.stop("p3")

	// Epoch 4 (p2): appends at 8.
	c.restart("p2", false)
	c.elect("p2", []string{"p1", "p2", "p3"})
	for i := range 3 {
		c.appendOne("p2", fmt.Sprintf("epoch4-%d", i))
	}
	c.restart("p1", true)
	c.restart("p3", true)

	leader := c.part("p2")
	for _, id := range []string{"p1", "p3"} {
		p := c.part(id)
		waitFor(t, id+" to hold p2's log", func() bool { return sameLog(t, leader, p) == "" })
	}
	if n := c.truncationsAbove("p3", 4); n == 0 {
		t.Fatal("p3 did not log its truncation")
	}
	if n := c.truncationsAbove("p1", 8); n != 0 {
		t.Fatalf("p1, a prefix of the leader's log, truncated %d times", n)
	}
	got := payloadsOf(t, c.part("p3"))
	for off, v := range committed {
		if got[off] != v {
			t.Fatalf("committed offset %d holds %q, want %q", off, got[off], v)
		}
	}
	waitFor(t, "the HWM to cover the whole log", func() bool { return leader.HighWatermark() == leader.LogEndOffset() })
	for _, id := range []string{"p1", "p3"} {
		p := c.part(id)
		waitFor(t, id+"'s HWM to follow", func() bool { return p.HighWatermark() == leader.HighWatermark() })
	}
}

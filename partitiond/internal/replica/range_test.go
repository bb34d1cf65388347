package replica

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/strataio/strata/partitiond/internal/partition"
)

// A follower whose log ends below the leader's log start (retention
// removed what it lacks) skips ahead to the leader's start and replicates
// from there: one with an old prefix (p2), and one with an empty log (p3).
func TestFollowerBelowTheLeaderLogStartSkipsAhead(t *testing.T) {
	c := newCluster(t, clusterOpts{ids: []string{"p1", "p2", "p3"}, minISR: 1, maxLag: 400 * time.Millisecond,
		fetchMaxWait: 50 * time.Millisecond, stopped: []string{"p3"},
		defaults:    partition.Defaults{SegmentBytes: 1024},
		topicConfig: partition.TopicConfig{RetentionBytes: 1}})
	leader := c.part("p1")
	c.commitAll("p1", 1, 3, "early")
	waitFor(t, "p2 to hold the early records", func() bool { return c.part("p2").DurableEnd() == 3 })
	c.stop("p2")
	c.setISR("p1") // metad's RECONCILE: p2 and p3 are down

	pad := strings.Repeat("x", 200)
	for i := range 40 {
		c.appendOne("p1", fmt.Sprintf("%s-%d", pad, i))
	}
	for _, r := range c.member("p1").node.Maintain(context.Background()) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	start := leader.LogStartOffset()
	if start <= 3 {
		t.Fatalf("retention left the leader's log starting at %d", start)
	}

	c.restart("p2", true)
	c.restart("p3", false)
	for id, from := range map[string]uint64{"p2": 3, "p3": 0} {
		p := c.part(id)
		waitFor(t, id+" to hold the leader's log", func() bool { return sameLog(t, leader, p) == "" })
		skips := c.member(id).logs.find("follower log ends below the leader's start: skipping ahead")
		if len(skips) != 1 || skips[0].uint("from") != from || skips[0].uint("to") != start {
			t.Fatalf("%s skipped %v, want once from %d to %d", id, skips, from, start)
		}
	}
	c.waitISR("p1", "p2", "p3")
	c.commitAll("p1", 4, 3, "after")
	for _, id := range []string{"p2", "p3"} {
		p := c.part(id)
		waitFor(t, id+" to replicate after the skip", func() bool { return sameLog(t, leader, p) == "" })
	}
	if s := c.part("p3").LogStartOffset(); s != start {
		t.Fatalf("p3's empty log now starts at %d, want %d", s, start)
	}
}

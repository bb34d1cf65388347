package coordinatord

import (
	"testing"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/fake/metadfake"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
)

// TestGroupOnATopicTheWatchHasNotDelivered: a client creates a topic through
// one gateway and joins a group through another; the coordinator's metadata
// watch has not delivered the topic yet. The join waits for the watch (metad
// already has the topic) instead of answering topic_not_found, which is
// final (CI: TestProcessClusterFaults "committed offsets survive kill -9").
// A topic metad does not have still answers topic_not_found.
func TestGroupOnATopicTheWatchHasNotDelivered(t *testing.T) {
	c, co := startSingle(t, "t", 1)
	ctx := ctxT(t)
	c.meta.PutTopicUnannounced(metadfake.NewTopic("fresh", 2, 0, "p1", "p1"))
	go func() {
		time.Sleep(300 * time.Millisecond)
		c.meta.Announce("fresh")
	}()
	resp, err := co.client.RegisterGroup(ctx, &coordinatorv1.RegisterGroupRequest{Group: "g-fresh", Topic: "fresh"})
	if err != nil {
		t.Fatalf("register on a topic metad has: %v", err)
	}
	if len(resp.GetPartitions()) != 2 {
		t.Fatalf("partitions %v", resp.GetPartitions())
	}

	_, err = co.client.RegisterGroup(ctx, &coordinatorv1.RegisterGroupRequest{Group: "g-none", Topic: "none"})
	if code(err) != errcode.TopicNotFound.Name() {
		t.Fatalf("register on a missing topic: %v", err)
	}
}

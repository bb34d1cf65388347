package faults

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/strata/clustertest"
	"github.com/strataio/strata/strata/e2e/framework"
)

// TestProcessClusterFaults runs the fault scenarios on one process cluster:
// acknowledged records survive kill -9 of every partition server, each metad
// voter can be killed in turn (so the Raft leader is killed at least once)
// while topics are still created, and a group's committed offsets survive
// kill -9 of every coordinator.
func TestProcessClusterFaults(t *testing.T) {
	c := framework.StartProcessCluster(t, clustertest.FullSpec)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	gw := framework.ClientAddrs(c)

	t.Run("acknowledged records survive kill -9 of every partitiond", func(t *testing.T) {
		cl := framework.Dial(t, ctx, gw[0])
		const topic, n = "durable", 200
		if _, err := cl.CreateTopic(ctx, client.TopicConfig{Name: topic, Partitions: 3}); err != nil {
			t.Fatal(err)
		}
		acked := framework.PublishAcked(t, ctx, cl, topic, n)
		c.RestartRole(pki.RolePartitiond)
		framework.CheckAcked(t, ctx, framework.Dial(t, ctx, gw[1]), topic, acked)
	})

	t.Run("metad voters killed in turn; topics still created", func(t *testing.T) {
		cl := framework.Dial(t, ctx, gw[0])
		for i, m := range c.ByRole(pki.RoleMetad) {
			m.Kill()
			name := fmt.Sprintf("after-kill-%d", i)
			framework.Retry(t, ctx, func() error {
				_, err := cl.CreateTopic(ctx, client.TopicConfig{Name: name, Partitions: 1})
				return err
			})
			m.Start()
			m.WaitReady(60 * time.Second)
		}
		topics, err := cl.ListTopics(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := range c.ByRole(pki.RoleMetad) {
			if !slices.Contains(topics, fmt.Sprintf("after-kill-%d", i)) {
				t.Fatalf("topic after-kill-%d missing from %v", i, topics)
			}
		}
	})

	t.Run("committed offsets survive kill -9 of every coordinatord", func(t *testing.T) {
		cl := framework.Dial(t, ctx, gw[1])
		const topic, group = "groups-durable", "g-durable"
		if _, err := cl.CreateTopic(ctx, client.TopicConfig{Name: topic, Partitions: 2}); err != nil {
			t.Fatal(err)
		}
		acked := framework.PublishAcked(t, ctx, cl, topic, 50)
		if got := framework.ConsumeGroup(t, ctx, cl, group, topic, 50); len(got) != 50 {
			t.Fatalf("group read %d, want 50", len(got))
		}
		c.RestartRole(pki.RoleCoordinatord)
		for part, want := range acked {
			framework.Retry(t, ctx, func() error {
				off, err := cl.FetchOffset(ctx, topic, part, group)
				if err == nil && off != uint64(len(want)) {
					return fmt.Errorf("committed p%d = %d, want %d", part, off, len(want))
				}
				return err
			})
		}
	})
}

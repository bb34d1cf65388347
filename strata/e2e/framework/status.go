package framework

import (
	"context"
	"fmt"
	"testing"

	"github.com/strataio/strata/libs/client"
	"github.com/strataio/strata/strata/clustertest"
)

// ClusterStatus is the CLUSTER_STATUS document.
type ClusterStatus = client.ClusterStatus

// Status runs CLUSTER_STATUS (an admin command) on cl.
func Status(ctx context.Context, cl *client.Client) (ClusterStatus, error) {
	raw, err := cl.ClusterStatus(ctx)
	if err != nil {
		return ClusterStatus{}, err
	}
	return client.DecodeClusterStatus(raw)
}

// ProcByID returns the process of a node id.
func ProcByID(t testing.TB, c *clustertest.Cluster, id string) *clustertest.Proc {
	t.Helper()
	for _, p := range c.Procs {
		if p.NodeID == id {
			return p
		}
	}
	t.Fatalf("no process is node %q", id)
	return nil
}

// LeaderOf returns the partition server process leading topic/part, waiting
// (within ctx) until the partition has a leader; cl must be an admin client.
func LeaderOf(t testing.TB, ctx context.Context, c *clustertest.Cluster, cl *client.Client, topic string, part int32) *clustertest.Proc {
	t.Helper()
	var leader string
	Retry(t, ctx, func() error {
		st, err := Status(ctx, cl)
		if err != nil {
			return err
		}
		for _, p := range st.Partitions {
			if p.Topic == topic && p.Partition == part {
				leader = p.Leader
			}
		}
		if leader == "" {
			return fmt.Errorf("partition %d has no leader", part)
		}
		return nil
	})
	return ProcByID(t, c, leader)
}

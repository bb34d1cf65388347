package coordinatord

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/looptest"
	"github.com/strataio/strata/libs/metrictest"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
)

// series returns the value of metric name with exactly the given labels.
func series(t *testing.T, co *coord, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	v, ok := metrictest.Series(t, co.env.Process.Registry)[metrictest.Key(name, labels)]
	return v, ok
}

func TestTopicChangesAndGroupMetrics(t *testing.T) {
	// Nothing here tests expiry: a session that outlives a loaded CI
	// machine's pauses keeps member m (and the stable state) in place
	// while the metrics are read.
	c := newCluster(t)
	c.putTopic("orders", 2, 0)
	cfg := testConfig(c)
	cfg.SessionTimeout = time.Minute
	co := startCoord(t, c, "c1", cfg)
	co.waitReady(t)
	ctx := ctxT(t)
	cl := co.client
	if _, err := cl.RegisterGroup(ctx, &coordinatorv1.RegisterGroupRequest{Group: "pg", Pattern: "ord*"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.RegisterGroup(ctx, &coordinatorv1.RegisterGroupRequest{Group: "bad", Topic: "a", Pattern: "b"}); code(err) != "invalid_parameter" {
		t.Fatalf("two selectors: %v", err)
	}
	j, err := cl.JoinGroup(ctx, &coordinatorv1.JoinGroupRequest{Group: "eg", Member: "m", Topic: "orders"})
	if err != nil || len(j.GetAssignments()) != 2 || j.GetMultiTopic() {
		t.Fatalf("join %v %v", j, err)
	}
	if _, err := cl.CommitOffset(ctx, &coordinatorv1.CommitOffsetRequest{Group: "eg", Topic: "orders", Partition: 0, Offset: 1,
		Member: j.GetMember(), Generation: u64(j.GetGeneration())}); err != nil {
		t.Fatal(err)
	}
	c.part.SetLog("orders", 0, 5)
	looptest.Eventually(t, "lag series", func() error {
		if v, ok := series(t, co, "strata_consumer_group_lag", map[string]string{"group": "eg", "topic": "orders", "partition": "0"}); !ok || v != 4 {
			return fmt.Errorf("lag %v %v", v, ok)
		}
		return nil
	})
	for _, want := range []struct {
		name   string
		labels map[string]string
		v      float64
	}{
		{"strata_consumer_group_coordinator_up", map[string]string{"group": "eg", "topic": "orders"}, 1},
		{"strata_consumer_group_members", map[string]string{"group": "eg", "topic": "orders"}, 1},
		{"strata_consumer_group_state", map[string]string{"group": "eg", "topic": "orders", "state": "stable"}, 1},
		{"strata_consumer_group_state", map[string]string{"group": "eg", "topic": "orders", "state": "empty"}, 0},
		{"strata_consumer_group_assigned_partitions", map[string]string{"group": "eg", "topic": "orders"}, 2},
		{"strata_consumer_group_committed_offset", map[string]string{"group": "eg", "topic": "orders", "partition": "0"}, 1},
		{"strata_consumer_group_lag", map[string]string{"group": "eg", "topic": "orders", "partition": "1"}, 0},
		{"strata_consumer_group_offset_out_of_range", map[string]string{"group": "eg", "topic": "orders", "partition": "0"}, 0},
		{"strata_consumer_metadata_recovery_ready", map[string]string{"phase": "replay"}, 1},
		{"strata_consumer_group_state", map[string]string{"group": "pg", "topic": "orders", "state": "empty"}, 1},
	} {
		if v, ok := series(t, co, want.name, want.labels); !ok || v != want.v {
			t.Fatalf("%s%v = %v (present %v), want %v", want.name, want.labels, v, ok, want.v)
		}
	}
	if _, ok := series(t, co, "strata_consumer_group_committed_offset", map[string]string{"group": "pg", "topic": "orders", "partition": "0"}); ok {
		t.Fatal("no committed series is invented for a pattern group")
	}

	// A new matching topic joins the pattern group's expansion.
	c.putTopic("orders2", 1, 0)
	looptest.Eventually(t, "pattern re-expansion", func() error {
		st, err := cl.GroupStatus(ctx, &coordinatorv1.GroupStatusRequest{Group: "pg"})
		if err != nil || st.GetPartitionCount() != 3 || len(st.GetTopics()) != 2 {
			return fmt.Errorf("status %v %v", st, err)
		}
		return nil
	})
	// Truncation (a higher lifecycle epoch) drops the committed offsets.
	c.putTopic("orders", 2, 1)
	looptest.Eventually(t, "offsets dropped on truncate", func() error {
		fo, err := cl.FetchOffset(ctx, &coordinatorv1.FetchOffsetRequest{Group: "eg", Topic: "orders", Partition: 0})
		if err != nil || fo.GetFound() {
			return fmt.Errorf("offset %v %v", fo, err)
		}
		return nil
	})
	// Deleting the topic of an inactive exact group deletes the group.
	if _, err := cl.LeaveGroup(ctx, &coordinatorv1.LeaveGroupRequest{Group: "eg", Member: j.GetMember(), Topic: "orders"}); err != nil {
		t.Fatal(err)
	}
	c.meta.RemoveTopic("orders")
	looptest.Eventually(t, "group tombstoned with its topic", func() error {
		_, err := cl.GroupStatus(ctx, &coordinatorv1.GroupStatusRequest{Group: "eg"})
		if code(err) != errcode.GroupNotFound.Name() {
			return fmt.Errorf("eg still there: %v", err)
		}
		return nil
	})
	if _, ok := series(t, co, "strata_consumer_group_members", map[string]string{"group": "eg", "topic": "orders"}); ok {
		t.Fatal("series of a departed group must disappear")
	}
	st, err := cl.GroupStatus(ctx, &coordinatorv1.GroupStatusRequest{Group: "pg"})
	if err != nil || st.GetPartitionCount() != 1 {
		t.Fatalf("pattern group after delete %v %v", st, err)
	}
	// The deletion survives a restart.
	co.stop()
	co2 := startCoord(t, c, "c1", cfg)
	co2.waitReady(t)
	if _, err := co2.client.GroupStatus(context.Background(), &coordinatorv1.GroupStatusRequest{Group: "eg"}); code(err) != "group_not_found" {
		t.Fatalf("deleted group after restart: %v", err)
	}
}

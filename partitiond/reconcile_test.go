package partitiond

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/fake/fakerpc"
	"github.com/strataio/strata/libs/fake/metadfake"
	"github.com/strataio/strata/libs/looptest"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"

	"github.com/strataio/strata/partitiond/internal/partition"
)

func (c *cluster) appendN(t *testing.T, topic string, id int32, epoch uint64, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := c.client.Append(ctx(t), &partitionv1.AppendRequest{Topic: topic, Partition: id, LifecycleEpoch: epoch, Acks: 1,
			Records: recordSet(t, topic, "r"), RecordCount: 1}); err != nil {
			t.Fatal(err)
		}
	}
}

func (c *cluster) hosted(topic string, id int32) bool {
	st, err := c.role.storage()
	if err != nil {
		return false
	}
	_, err = st.Partition(topic, id)
	return err == nil
}

func TestReconcileCreatesTruncatesAndDeletes(t *testing.T) {
	c := startCluster(t, nil, nil, "")
	// Only partitions whose replicas include this node are created.
	top := metadfake.NewTopic("life", 3, 1, "p1", "p1")
	top.Partitions[2].Replicas, top.Partitions[2].Leader, top.Partitions[2].Isr = []string{"p2"}, "p2", []string{"p2"}
	top.Config.RetentionHours = 5
	c.metad.PutTopic(top)
	c.waitServing(t, "life", 0)
	c.waitServing(t, "life", 1)
	if c.hosted("life", 2) {
		t.Fatal("partition of another node created locally")
	}
	st, _ := c.role.storage()
	p0, _ := st.Partition("life", 0)
	if p0.Config().RetentionHours != 5 || p0.LifecycleEpoch() != 1 || p0.LeaderEpoch() != 1 {
		t.Fatalf("partition config %+v epoch %d leader epoch %d", p0.Config(), p0.LifecycleEpoch(), p0.LeaderEpoch())
	}
	c.appendN(t, "life", 0, 1, 4)
	c.appendN(t, "life", 1, 1, 2)
	looptest.Eventually(t, "hwm checkpoint", func() bool {
		for _, h := range c.metad.HwmCheckpoints() {
			if h.GetTopic() == "life" && h.GetPartition() == 0 && h.GetHwm() == 4 && h.GetLifecycleEpoch() == 1 && h.GetLeaderEpoch() == 1 {
				return true
			}
		}
		return false
	})

	// TRUNCATE: lifecycle epoch 2, leader epoch +1, cleanup pending here.
	top, _ = c.metad.Topic("life")
	top.Config.LifecycleEpoch, top.Config.Revision = 2, 2
	for _, ps := range top.Partitions {
		ps.LeaderEpoch++
		ps.CommittedHwm = 0
	}
	top.CleanupPendingNodes = []string{"p1", "p2"}
	c.metad.PutTopic(top)
	looptest.Eventually(t, "truncate cleanup report", func() bool {
		for _, r := range c.metad.CleanupReports() {
			if r.GetTopic() == "life" && r.GetLifecycleEpoch() == 2 && r.GetNodeId() == "p1" {
				return true
			}
		}
		return false
	})
	for _, id := range []int32{0, 1} {
		lo, err := c.client.ListOffsets(ctx(t), &partitionv1.ListOffsetsRequest{Topic: "life", Partitions: []int32{id}})
		if err != nil || lo.GetPartitions()[0].GetError() != nil || lo.GetPartitions()[0].GetLeo() != 0 {
			t.Fatalf("after truncate %d: %v %v", id, lo, err)
		}
	}
	p0, _ = st.Partition("life", 0)
	if p0.LifecycleEpoch() != 2 || p0.LeaderEpoch() != 2 {
		t.Fatalf("after truncate: lifecycle %d leader %d", p0.LifecycleEpoch(), p0.LeaderEpoch())
	}
	// The old epoch is fenced; the new one works.
	_, err := c.client.Append(ctx(t), &partitionv1.AppendRequest{Topic: "life", Partition: 0, LifecycleEpoch: 1, Acks: 1,
		Records: recordSet(t, "life", "old"), RecordCount: 1})
	wantCode(t, err, errcode.StaleLifecycleEpoch)
	c.appendN(t, "life", 0, 2, 1)

	// DELETE: the topic turns DELETING; data goes, the report removes it.
	top, _ = c.metad.Topic("life")
	top.Config.State = metav1.TopicState_TOPIC_STATE_DELETING
	top.CleanupPendingNodes = []string{"p1"}
	// The first two reports fail: the reconciler retries until metad takes one.
	c.metad.On("ReportCleanup", 2, fakerpc.Fail(errcode.FSMNotAvailable.New("injected cleanup report failure")))
	c.metad.PutTopic(top)
	looptest.Eventually(t, "topic removed after cleanup", func() bool {
		_, ok := c.role.meta.Cache().View().Topic("life")
		return !ok
	})
	deletes := 0
	for _, r := range c.metad.CleanupReports() {
		if r.GetTopic() == "life" && r.GetLifecycleEpoch() == 2 {
			deletes++
		}
	}
	if deletes < 4 { // 1 truncate report + 3 delete attempts
		t.Fatalf("%d cleanup reports at epoch 2, want the failed delete reports retried", deletes)
	}
	if c.hosted("life", 0) || c.hosted("life", 1) {
		t.Fatal("deleted partitions still hosted")
	}
	entries, _ := os.ReadDir(filepath.Join(c.dataDir, "logs"))
	for _, e := range entries {
		if strings.Contains(e.Name(), "life") {
			t.Fatalf("data left behind: %s", e.Name())
		}
	}
	_, err = c.client.Fetch(ctx(t), &partitionv1.FetchRequest{Topic: "life", Partition: 0})
	wantCode(t, err, errcode.TopicNotFound)
	// A same-name topic can be created again.
	c.metad.PutTopic(metadfake.NewTopic("life", 1, 1, "p1", "p1"))
	c.waitServing(t, "life", 0)
	if got := c.fetchAll(t, "life", 0); len(got) != 0 {
		t.Fatalf("recreated topic holds %d records", len(got))
	}
}

func TestReadyChecksAndMetrics(t *testing.T) {
	c := startCluster(t, nil, nil, "")
	c.metad.PutTopic(metadfake.NewTopic("m", 1, 1, "p1", "p1"))
	c.waitServing(t, "m", 0)
	c.appendN(t, "m", 0, 1, 3)
	looptest.Eventually(t, "ready", func() bool {
		res, ok := c.proc.Health.Evaluate(context.Background())
		return ok && res.Checks[CheckStorage] == "ok" && res.Checks[CheckMetadata] == "ok"
	})
	self, ok := c.metad.Node("p1")
	if !ok || self.GetRole() != metav1.NodeRole_NODE_ROLE_PARTITIOND || self.GetRpcAddress() != c.env.AdvertiseRPC ||
		self.GetClientAddress() != "" || !slices.Equal(self.GetLifecycleVersions(), []uint32{1, 2}) || self.GetIncarnation() == 0 {
		t.Fatalf("registration %v", self)
	}
	n, err := testutil.GatherAndCount(c.proc.Registry, "strata_partition_log_end_offset", "strata_storage_handlers")
	if err != nil || n != 2 {
		t.Fatalf("storage metrics: %d series, %v", n, err)
	}
	// An assigned partition this node cannot open makes storage not ready.
	bad := metadfake.NewTopic("bad", 1, 1, "p1", "p1")
	bad.Config.CleanupPolicy = "bogus"
	c.metad.PutTopic(bad)
	looptest.Eventually(t, "not ready", func() bool {
		res, ok := c.proc.Health.Evaluate(context.Background())
		return !ok && res.Checks[CheckStorage] != "ok" && res.Checks[CheckMetadata] == "ok"
	})
}

// A topic missing from metad's view (e.g. a snapshot from a lagging metad
// after a restart) must not lose the local data.
func TestRestartWithTopicAbsentFromViewKeepsData(t *testing.T) {
	dir := t.TempDir()
	c := startCluster(t, nil, nil, dir)
	c.metad.PutTopic(metadfake.NewTopic("keep", 1, 1, "p1", "p1"))
	c.waitServing(t, "keep", 0)
	c.appendN(t, "keep", 0, 1, 5)
	c.stop()

	c2 := startCluster(t, nil, nil, dir)
	looptest.Eventually(t, "metadata synced", func() bool { return c2.role.meta.Cache().View().Ready() })
	// Let a few reconcile passes run against the view without the topic.
	c2.metad.PutTopic(metadfake.NewTopic("other", 1, 1, "p1", "p1"))
	c2.waitServing(t, "other", 0)
	if !c2.hosted("keep", 0) {
		t.Fatal("partition of a topic absent from the view was deleted")
	}
	c2.metad.PutTopic(metadfake.NewTopic("keep", 1, 1, "p1", "p1"))
	c2.waitServing(t, "keep", 0)
	if got := c2.fetchAll(t, "keep", 0); len(got) != 5 {
		t.Fatalf("after restart: %d records, want 5", len(got))
	}
}

func TestCompactionEligibility(t *testing.T) {
	c := startCluster(t, nil, nil, "")
	top := metadfake.NewTopic("cmp", 2, 3, "p1", "p1")
	top.Partitions[1].Replicas = []string{"p1", "p2"} // p2 not in the ISR
	c.metad.PutTopic(top)
	c.waitServing(t, "cmp", 0)
	cases := []struct {
		facts  partition.CompactionFacts
		ok     bool
		reason string
	}{
		{partition.CompactionFacts{Topic: "cmp", Partition: 0, LifecycleEpoch: 3, LEO: 5, HWM: 5}, true, ""},
		{partition.CompactionFacts{Topic: "cmp", Partition: 0, LifecycleEpoch: 2, LEO: 5, HWM: 5}, false, "lifecycle_epoch_mismatch"},
		{partition.CompactionFacts{Topic: "cmp", Partition: 0, LifecycleEpoch: 3, LEO: 6, HWM: 5}, false, "hwm_behind_leo"},
		{partition.CompactionFacts{Topic: "cmp", Partition: 1, LifecycleEpoch: 3, LEO: 5, HWM: 5}, false, "replicas_not_in_sync"},
		{partition.CompactionFacts{Topic: "gone", Partition: 0, LifecycleEpoch: 3}, false, "topic_not_active"},
	}
	for _, tc := range cases {
		ok, reason := c.role.compactionEligible(tc.facts)
		if ok != tc.ok || reason != tc.reason {
			t.Errorf("%+v: got %v %q, want %v %q", tc.facts, ok, reason, tc.ok, tc.reason)
		}
	}
}

package metad

import (
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/metrictest"
	"github.com/strataio/strata/metad/internal/fsm"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// stateOnly exposes the state part of the cluster collector for a
// hand-driven FSM.
type stateOnly struct {
	c *clusterCollector
	f *fsm.FSM
}

func (s stateOnly) Describe(ch chan<- *prometheus.Desc) { s.c.Describe(ch) }
func (s stateOnly) Collect(ch chan<- prometheus.Metric) { s.c.collectState(ch, s.f) }

// series gathers g: every sample keyed name{label=value,...}.
func series(t *testing.T, g prometheus.Gatherer) map[string]float64 {
	t.Helper()
	return metrictest.Series(t, g)
}

// The cluster gauges follow the replicated state: partition replicas, ISR,
// leader and epoch per partition, under-replicated and offline counts that
// agree with ClusterStatus, brokers and nodes by liveness; DELETING topics
// and former leaders have no series.
func TestClusterGaugesFollowState(t *testing.T) {
	f := fsm.New(fsm.Options{})
	idx := uint64(0)
	apply := func(p proto.Message) {
		t.Helper()
		idx++
		if r := f.ApplyCommand(idx, fsm.MustEncode(p)); r.Err != nil {
			t.Fatalf("%T: %v", p, r.Err)
		}
	}
	const t0, lease = int64(1_700_000_000_000), int64(10_000)
	apply(&metav1.InitClusterCommand{TransactionCoordinatorShards: 50, CreatedUnixMs: t0})
	for _, id := range []string{"p1", "p2"} {
		apply(&metav1.RegisterNodeCommand{NowUnixMs: t0, Node: &metav1.Node{Id: id, Role: metav1.NodeRole_NODE_ROLE_PARTITIOND,
			RpcAddress: "127.0.0.1:1", LifecycleVersions: []uint32{1, 2}, Incarnation: 1}})
	}
	apply(&metav1.RegisterNodeCommand{NowUnixMs: t0, Node: &metav1.Node{Id: "g1", Role: metav1.NodeRole_NODE_ROLE_GATEWAY, RpcAddress: "127.0.0.1:2", ClientAddress: "127.0.0.1:3", Incarnation: 1}})
	defaults := &metav1.TopicDefaults{ReplicationFactor: 2, CleanupPolicy: "delete"}
	apply(&metav1.CreateTopicCommand{Request: &metav1.CreateTopicRequest{Name: "a", Partitions: proto.Int32(2)}, Defaults: defaults})
	apply(&metav1.CreateTopicCommand{Request: &metav1.CreateTopicRequest{Name: "b", Partitions: proto.Int32(1), ReplicationFactor: proto.Int32(1)}, Defaults: defaults})
	apply(&metav1.CreateTopicCommand{Request: &metav1.CreateTopicRequest{Name: "gone", Partitions: proto.Int32(1)}, Defaults: defaults})
	apply(&metav1.DeleteTopicRequest{Name: "gone"})

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(stateOnly{c: newClusterCollector(&Role{}), f: f})

	check := func(stage string, want map[string]float64, absent ...string) {
		t.Helper()
		got := series(t, reg)
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("%s: %s = %v (present %v), want %v", stage, k, g, ok, v)
			}
		}
		for _, k := range absent {
			for s := range got {
				if strings.Contains(s, k) {
					t.Errorf("%s: unexpected series %s", stage, s)
				}
			}
		}
		var st *metav1.ClusterStatusResponse
		f.Read(func(s *fsm.State) { st = s.ClusterStatus() })
		if got["strata_cluster_offline_partitions{}"] != float64(st.GetOfflinePartitions()) ||
			got["strata_cluster_under_replicated_partitions{}"] != float64(st.GetUnderReplicatedPartitions()) {
			t.Errorf("%s: gauges disagree with ClusterStatus %d/%d: %v", stage, st.GetOfflinePartitions(), st.GetUnderReplicatedPartitions(), got)
		}
	}

	parts := func() map[string]*metav1.PartitionState {
		out := map[string]*metav1.PartitionState{}
		f.Read(func(s *fsm.State) {
			for _, tp := range s.Topics() {
				for _, p := range tp.GetPartitions() {
					out["partition="+strconv.Itoa(int(p.GetId()))+",topic="+tp.GetConfig().GetName()] = p
				}
			}
		})
		return out
	}
	before := parts()
	want := map[string]float64{
		"strata_cluster_brokers{}":                      2,
		"strata_metad_nodes{live=true,role=partitiond}": 2,
		"strata_metad_nodes{live=true,role=gateway}":    1,
		// New partitions start with every replica in the ISR (all logs are
		// empty).
		"strata_cluster_under_replicated_partitions{}": 0,
		"strata_cluster_offline_partitions{}":          0,
	}
	for k, p := range before {
		if strings.HasSuffix(k, "topic=gone") {
			continue
		}
		want["strata_cluster_partition_replicas{"+k+"}"] = float64(len(p.GetReplicas()))
		want["strata_cluster_partition_in_sync_replicas{"+k+"}"] = float64(len(p.GetReplicas()))
		want["strata_cluster_partition_leader_epoch{"+k+"}"] = float64(p.GetLeaderEpoch())
		want["strata_cluster_partition_leader{broker_id="+p.GetLeader()+","+k+"}"] = 1
	}
	check("created", want, "topic=gone")

	// Every lease runs out: all partitions go offline (epoch +1, ISR kept),
	// the leader series disappear, nodes are counted as not live.
	apply(&metav1.ReconcileCommand{NowUnixMs: t0 + lease + 1, LeaseTimeoutMs: lease})
	want = map[string]float64{
		"strata_cluster_brokers{}":                       2,
		"strata_metad_nodes{live=false,role=partitiond}": 2,
		"strata_cluster_offline_partitions{}":            3,
		"strata_cluster_under_replicated_partitions{}":   0,
	}
	for k, p := range before {
		if !strings.HasSuffix(k, "topic=gone") {
			want["strata_cluster_partition_leader_epoch{"+k+"}"] = float64(p.GetLeaderEpoch() + 1)
		}
	}
	check("expired", want, "strata_cluster_partition_leader{", "topic=gone", "live=true,role=partitiond")
}

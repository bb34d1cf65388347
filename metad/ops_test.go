package metad

import (
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/looptest"
	"github.com/strataio/strata/libs/metaclient"
	"github.com/strataio/strata/libs/metrictest"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/pki/pkitest"
	"github.com/strataio/strata/libs/rpc"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

func gather(t *testing.T, in *instance) map[string][]*dto.Metric {
	t.Helper()
	mfs, err := in.proc.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]*dto.Metric{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf.GetMetric()
	}
	return out
}

func value(m *dto.Metric) float64 { return metrictest.Value(m) }

// The partition server's calls (ISR, HWM, cleanup) and ElectLeader work
// end to end; /ready reports the raft check; the strata_metad_* series move.
func TestPartitionPathReadinessAndMetrics(t *testing.T) {
	ca := pkitest.New(t)
	m := startSingle(t, ca, t.TempDir())
	ctx := ctxT(t, 20*time.Second)
	gw := client(t, ca, pki.RoleGateway, m.rpc)
	pd := client(t, ca, pki.RolePartitiond, m.rpc)
	registerPartitionServers(t, ctx, pd, "p1", "p2")
	watchInBackground(t, pd)

	created, err := gw.CreateTopic(ctx, &metav1.CreateTopicRequest{Name: "t", Partitions: proto.Int32(1), ReplicationFactor: proto.Int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	p0 := created.GetTopic().GetPartitions()[0]
	leader, other := p0.GetReplicas()[0], p0.GetReplicas()[1]
	// A partition server changes an ISR as itself only (its certificate
	// names the requester), and the FSM checks the requester leads.
	if _, err := pd.AlterIsr(ctx, &metav1.AlterIsrRequest{Topic: "t", Partition: 0, LeaderEpoch: p0.GetLeaderEpoch(),
		Isr: []string{leader}, RequestedBy: leader}); errcode.CodeOf(err) != errcode.PeerRoleForbidden.Name() {
		t.Fatalf("ISR change in another node's name: %v", err)
	}
	asLeader := partitionClientAs(t, ca, leader, m.rpc)
	isr, err := asLeader.AlterIsr(ctx, &metav1.AlterIsrRequest{Topic: "t", Partition: 0, LeaderEpoch: p0.GetLeaderEpoch(), Isr: []string{leader}, RequestedBy: leader})
	if err != nil || len(isr.GetPartition().GetIsr()) != 1 {
		t.Fatalf("alter isr: %v %v", isr, err)
	}
	isr, err = asLeader.AlterIsr(ctx, &metav1.AlterIsrRequest{Topic: "t", Partition: 0, LeaderEpoch: p0.GetLeaderEpoch(), Isr: p0.GetReplicas(), RequestedBy: leader})
	if err != nil || len(isr.GetPartition().GetIsr()) != 2 {
		t.Fatalf("alter isr: %v %v", isr, err)
	}
	if _, err := asLeader.AlterIsr(ctx, &metav1.AlterIsrRequest{Topic: "t", Partition: 0, LeaderEpoch: p0.GetLeaderEpoch() + 5, Isr: []string{leader}, RequestedBy: leader}); errcode.CodeOf(err) != errcode.StaleLeaderEpoch.Name() {
		t.Fatalf("stale epoch: %v", err)
	}
	if err := pd.CheckpointHwm(ctx, &metav1.CheckpointHwmRequest{Topic: "t", Partition: 0, LeaderEpoch: p0.GetLeaderEpoch(), LifecycleEpoch: 1, Hwm: 42}); err != nil {
		t.Fatal(err)
	}
	el, err := gw.ElectLeader(ctx, &metav1.ElectLeaderRequest{Topic: "t", Partition: 0, BrokerId: other})
	if err != nil || !el.GetChanged() || el.GetLeader() != other || el.GetLeaderEpoch() != p0.GetLeaderEpoch()+1 {
		t.Fatalf("elect: %v %v", el, err)
	}
	got, err := gw.GetTopic(ctx, "t")
	if err != nil || got.GetTopic().GetPartitions()[0].GetCommittedHwm() != 42 || got.GetTopic().GetPartitions()[0].GetLeader() != other {
		t.Fatalf("state: %v %v", got, err)
	}
	if err := pd.ReportCleanup(ctx, &metav1.ReportCleanupRequest{NodeId: "p1", Topic: "t", LifecycleEpoch: 1}); err != nil {
		t.Fatalf("report cleanup (no-op): %v", err)
	}

	// /ready passes with the raft check.
	if code, checks := looptest.ReadyChecks(t, m.proc.HealthListenAddr()); code != http.StatusOK || checks["raft"] != "ok" || checks["cluster_leader"] != "ok" || checks["storage"] != "ok" {
		t.Fatalf("/ready %d %v", code, checks)
	}

	if _, err := pd.Cache().WaitFor(ctx, func(v *metaclient.View) bool { _, ok := v.Topic("t"); return ok }); err != nil {
		t.Fatal("watch not connected")
	}
	ms := gather(t, m)
	if v := value(ms["strata_cluster_is_leader"][0]); v != 1 {
		t.Fatalf("is_leader %v", v)
	}
	if v := value(ms["strata_metad_watch_streams"][0]); v != 1 {
		t.Fatalf("watch streams %v", v)
	}
	if v := value(ms["strata_metad_revision"][0]); v == 0 {
		t.Fatal("revision metric is 0")
	}
	// The spec's cluster gauges (strata_cluster_*) from the FSM.
	cs := series(t, m.proc.Registry)
	for k, want := range map[string]float64{
		"strata_cluster_has_leader{}":                                                  1,
		"strata_cluster_is_leader{}":                                                   1,
		"strata_cluster_brokers{}":                                                     2,
		"strata_cluster_offline_partitions{}":                                          0,
		"strata_cluster_under_replicated_partitions{}":                                 0,
		"strata_cluster_partition_replicas{partition=0,topic=t}":                       2,
		"strata_cluster_partition_in_sync_replicas{partition=0,topic=t}":               2,
		"strata_cluster_partition_leader_epoch{partition=0,topic=t}":                   float64(p0.GetLeaderEpoch() + 1),
		"strata_cluster_partition_leader{broker_id=" + other + ",partition=0,topic=t}": 1,
	} {
		if got, ok := cs[k]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", k, got, ok, want)
		}
	}
	if _, ok := cs["strata_cluster_partition_leader{broker_id="+leader+",partition=0,topic=t}"]; ok {
		t.Error("the former leader still has a leader series")
	}
	results := map[string]float64{}
	for _, mm := range ms["strata_metad_commands_total"] {
		var cmd, res string
		for _, l := range mm.GetLabel() {
			switch l.GetName() {
			case "command":
				cmd = l.GetValue()
			case "result":
				res = l.GetValue()
			}
		}
		results[cmd+"/"+res] += value(mm)
	}
	for _, k := range []string{"CREATE_TOPIC/ok", "ALTER_ISR/ok", "ALTER_ISR/STALE_LEADER_EPOCH", "ELECT_LEADER/ok", "INIT_CLUSTER/ok", "REGISTER_NODE/ok"} {
		if results[k] < 1 {
			t.Errorf("commands_total %s missing: %v", k, results)
		}
	}
}

// partitionClientAs is a metad client with the certificate of partition
// server id.
func partitionClientAs(t *testing.T, ca *pkitest.PKI, id string, addrs ...string) *metaclient.Client {
	t.Helper()
	pool := rpc.NewPool(rpc.ClientOptions{Source: ca.Source(t, pki.RolePartitiond, id), ServerRoles: []pki.Role{pki.RoleMetad}})
	t.Cleanup(func() { pool.Close() })
	return metaclient.New(metaclient.Options{Addrs: addrs, Dial: pool.Get, CallTimeout: 3 * time.Second})
}

package fsm

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/strataio/strata/libs/errcode"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

func TestPlaceReplicasSpreadsLeadersAndIsDeterministic(t *testing.T) {
	servers := []string{"a", "b", "c", "d", "e"}
	placed, err := PlaceReplicas("orders", 0, 10, 3, servers)
	if err != nil {
		t.Fatal(err)
	}
	leaders := map[string]int{}
	for p, replicas := range placed {
		if len(replicas) != 3 {
			t.Fatalf("partition %d: %v", p, replicas)
		}
		seen := map[string]bool{}
		for _, r := range replicas {
			if seen[r] {
				t.Fatalf("partition %d repeats %s: %v", p, r, replicas)
			}
			seen[r] = true
		}
		leaders[replicas[0]]++
	}
	for _, s := range servers {
		if leaders[s] != 2 {
			t.Fatalf("leaders = %v, want 2 each", leaders)
		}
	}
	again, _ := PlaceReplicas("orders", 0, 10, 3, servers)
	for p := range placed {
		if !slices.Equal(placed[p], again[p]) {
			t.Fatal("placement is not deterministic")
		}
	}
	// Placing a range later gives what placing everything at once gives.
	tail, _ := PlaceReplicas("orders", 6, 10, 3, servers)
	for i := range tail {
		if !slices.Equal(tail[i], placed[6+i]) {
			t.Fatalf("partition %d placed differently when added later", 6+i)
		}
	}
	// Different topics start on different servers (for these names).
	other, _ := PlaceReplicas("payments", 0, 1, 3, servers)
	first, _ := PlaceReplicas("orders", 0, 1, 3, servers)
	if other[0][0] == first[0][0] {
		t.Logf("note: orders and payments start on the same server %s", first[0][0])
	}
}

func TestPlaceReplicasRejectsTooFewServers(t *testing.T) {
	for _, n := range []int{0, 1, 2} {
		_, err := PlaceReplicas("t", 0, 1, 3, []string{"a", "b"}[:n])
		if e, ok := errcode.As(err); !ok || e.Code != errcode.InvalidReplicationFactor.Name() || !strings.Contains(e.Message, fmt.Sprintf("%d are live", n)) {
			t.Fatalf("n=%d: %v", n, err)
		}
	}
	if _, err := PlaceReplicas("t", 0, 1, 0, []string{"a"}); err == nil {
		t.Fatal("rf 0 accepted")
	}
}

// setupRF3 creates topic t with 1 partition over p1..p3 with every replica
// in the ISR, and returns its partition.
func setupRF3(x *h) *metav1.PartitionState {
	x.partitionds(3)
	x.ok(create("t", func(r *metav1.CreateTopicRequest) { r.Partitions = ptr[int32](1) }))
	p := x.topic("t").GetPartitions()[0]
	x.ok(&metav1.AlterIsrRequest{Topic: "t", Partition: 0, LeaderEpoch: p.GetLeaderEpoch(), Isr: p.GetReplicas(), RequestedBy: p.GetLeader()})
	return x.topic("t").GetPartitions()[0]
}

func TestElectLeaderMovesLeadershipOnceAndRetriesIdempotently(t *testing.T) {
	x := newH(t)
	p := setupRF3(x)
	target := p.GetReplicas()[2]
	r := x.ok(&metav1.ElectLeaderRequest{Topic: "t", Partition: 0, BrokerId: target}).(*metav1.ElectLeaderResponse)
	if !r.GetChanged() || r.GetLeader() != target || r.GetPreviousLeader() != p.GetLeader() || r.GetLeaderEpoch() != p.GetLeaderEpoch()+1 {
		t.Fatalf("elect = %v", r)
	}
	rev := x.f.Revision()
	r2 := x.ok(&metav1.ElectLeaderRequest{Topic: "t", Partition: 0, BrokerId: target}).(*metav1.ElectLeaderResponse)
	if r2.GetChanged() || r2.GetLeaderEpoch() != r.GetLeaderEpoch() || r2.GetLeader() != target || x.f.Revision() != rev {
		t.Fatalf("retry = %v (revision %d -> %d)", r2, rev, x.f.Revision())
	}
	np := x.topic("t").GetPartitions()[0]
	if !slices.Equal(np.GetReplicas(), p.GetReplicas()) || !slices.Equal(np.GetIsr(), p.GetIsr()) || np.GetCommittedHwm() != p.GetCommittedHwm() {
		t.Fatalf("election changed more than the leader: %v", np)
	}
}

func TestElectLeaderRejects(t *testing.T) {
	cases := []struct {
		name   string
		setup  func(x *h, p *metav1.PartitionState) *metav1.ElectLeaderRequest
		code   errcode.Code
		reason string
	}{
		{"MissingBroker", func(x *h, p *metav1.PartitionState) *metav1.ElectLeaderRequest {
			return &metav1.ElectLeaderRequest{Topic: "t"}
		}, errcode.MissingBroker, ""},
		{"UnknownBroker", func(x *h, p *metav1.PartitionState) *metav1.ElectLeaderRequest {
			return &metav1.ElectLeaderRequest{Topic: "t", BrokerId: "ghost"}
		}, errcode.LeaderElectionRejected, "unknown_broker"},
		{"UnknownTopic", func(x *h, p *metav1.PartitionState) *metav1.ElectLeaderRequest {
			return &metav1.ElectLeaderRequest{Topic: "nope", BrokerId: "p1"}
		}, errcode.TopicNotFound, ""},
		{"UnknownPartition", func(x *h, p *metav1.PartitionState) *metav1.ElectLeaderRequest {
			return &metav1.ElectLeaderRequest{Topic: "t", Partition: 1, BrokerId: "p1"}
		}, errcode.PartitionNotFound, ""},
		{"NegativePartition", func(x *h, p *metav1.PartitionState) *metav1.ElectLeaderRequest {
			return &metav1.ElectLeaderRequest{Topic: "t", Partition: -1, BrokerId: "p1"}
		}, errcode.PartitionNotFound, ""},
		{"NotAReplica", func(x *h, p *metav1.PartitionState) *metav1.ElectLeaderRequest {
			x.register(pnode("p4", 1))
			return &metav1.ElectLeaderRequest{Topic: "t", BrokerId: "p4"}
		}, errcode.LeaderElectionRejected, "not_a_replica"},
		{"OutOfSyncReplica", func(x *h, p *metav1.PartitionState) *metav1.ElectLeaderRequest {
			x.ok(&metav1.AlterIsrRequest{Topic: "t", LeaderEpoch: p.GetLeaderEpoch(), Isr: p.GetReplicas()[:2]})
			return &metav1.ElectLeaderRequest{Topic: "t", BrokerId: p.GetReplicas()[2]}
		}, errcode.LeaderElectionRejected, "not_in_isr"},
		{"DeadReplica", func(x *h, p *metav1.PartitionState) *metav1.ElectLeaderRequest {
			// Every ISR member expires at once, so the ISR is kept whole.
			x.now += lease
			x.reconcile()
			return &metav1.ElectLeaderRequest{Topic: "t", BrokerId: p.GetReplicas()[1]}
		}, errcode.LeaderElectionRejected, "not_live"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := newH(t)
			p := setupRF3(x)
			req := c.setup(x, p)
			e := x.fails(req, c.code)
			if c.reason != "" && e.Field("reason") != c.reason {
				t.Fatalf("reason = %q, want %q", e.Field("reason"), c.reason)
			}
		})
	}
}

func TestAlterIsrIsCompareAndSetOnTheLeaderEpoch(t *testing.T) {
	x := newH(t)
	x.partitionds(3)
	x.ok(create("t", func(r *metav1.CreateTopicRequest) { r.Partitions = ptr[int32](1) }))
	p := x.topic("t").GetPartitions()[0]
	// Members are stored in replica order whatever order they are sent in.
	rev := slices.Clone(p.GetReplicas())
	slices.Reverse(rev)
	r := x.ok(&metav1.AlterIsrRequest{Topic: "t", LeaderEpoch: p.GetLeaderEpoch(), Isr: rev, RequestedBy: p.GetLeader()}).(*metav1.AlterIsrResponse)
	if !slices.Equal(r.GetPartition().GetIsr(), p.GetReplicas()) || r.GetPartition().GetLeaderEpoch() != p.GetLeaderEpoch() {
		t.Fatalf("alter = %v", r.GetPartition())
	}
	revision := x.f.Revision()
	x.ok(&metav1.AlterIsrRequest{Topic: "t", LeaderEpoch: p.GetLeaderEpoch(), Isr: p.GetReplicas()})
	if x.f.Revision() != revision {
		t.Fatal("restating the ISR emitted a change")
	}
	x.ok(&metav1.ElectLeaderRequest{Topic: "t", BrokerId: p.GetReplicas()[1]})
	e := x.fails(&metav1.AlterIsrRequest{Topic: "t", LeaderEpoch: p.GetLeaderEpoch(), Isr: p.GetReplicas()[:1]}, errcode.StaleLeaderEpoch)
	if e.Field("current") != "2" || e.Field("requested") != "1" {
		t.Fatalf("fields = %v", e.Fields)
	}
}

func TestAlterIsrRejects(t *testing.T) {
	cases := []struct {
		name string
		mk   func(x *h, p *metav1.PartitionState) *metav1.AlterIsrRequest
		code errcode.Code
	}{
		{"StaleEpoch", func(x *h, p *metav1.PartitionState) *metav1.AlterIsrRequest {
			return &metav1.AlterIsrRequest{Topic: "t", LeaderEpoch: p.GetLeaderEpoch() - 1, Isr: p.GetReplicas()}
		}, errcode.StaleLeaderEpoch},
		{"FutureEpoch", func(x *h, p *metav1.PartitionState) *metav1.AlterIsrRequest {
			return &metav1.AlterIsrRequest{Topic: "t", LeaderEpoch: p.GetLeaderEpoch() + 1, Isr: p.GetReplicas()}
		}, errcode.StaleLeaderEpoch},
		{"NotTheLeader", func(x *h, p *metav1.PartitionState) *metav1.AlterIsrRequest {
			return &metav1.AlterIsrRequest{Topic: "t", LeaderEpoch: p.GetLeaderEpoch(), Isr: p.GetReplicas(), RequestedBy: p.GetReplicas()[1]}
		}, errcode.PartitionLeaderFenced},
		{"Empty", func(x *h, p *metav1.PartitionState) *metav1.AlterIsrRequest {
			return &metav1.AlterIsrRequest{Topic: "t", LeaderEpoch: p.GetLeaderEpoch()}
		}, errcode.InvalidParameter},
		{"WithoutLeader", func(x *h, p *metav1.PartitionState) *metav1.AlterIsrRequest {
			return &metav1.AlterIsrRequest{Topic: "t", LeaderEpoch: p.GetLeaderEpoch(), Isr: p.GetReplicas()[1:]}
		}, errcode.InvalidParameter},
		{"NotAReplica", func(x *h, p *metav1.PartitionState) *metav1.AlterIsrRequest {
			x.register(pnode("p4", 1))
			return &metav1.AlterIsrRequest{Topic: "t", LeaderEpoch: p.GetLeaderEpoch(), Isr: append(slices.Clone(p.GetReplicas()), "p4")}
		}, errcode.InvalidParameter},
		{"Duplicate", func(x *h, p *metav1.PartitionState) *metav1.AlterIsrRequest {
			return &metav1.AlterIsrRequest{Topic: "t", LeaderEpoch: p.GetLeaderEpoch(), Isr: []string{p.GetLeader(), p.GetLeader()}}
		}, errcode.InvalidParameter},
		{"DeadMember", func(x *h, p *metav1.PartitionState) *metav1.AlterIsrRequest {
			x.now += lease
			for _, id := range []string{p.GetReplicas()[0], p.GetReplicas()[1]} {
				x.heartbeat(id, 1)
			}
			x.reconcile() // replica 2 expires
			return &metav1.AlterIsrRequest{Topic: "t", LeaderEpoch: p.GetLeaderEpoch(), Isr: p.GetReplicas()}
		}, errcode.InvalidParameter},
		{"UnknownPartition", func(x *h, p *metav1.PartitionState) *metav1.AlterIsrRequest {
			return &metav1.AlterIsrRequest{Topic: "t", Partition: 3, LeaderEpoch: 1, Isr: p.GetReplicas()}
		}, errcode.PartitionNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := newH(t)
			x.partitionds(3)
			x.ok(create("t", func(r *metav1.CreateTopicRequest) { r.Partitions = ptr[int32](1) }))
			x.fails(c.mk(x, x.topic("t").GetPartitions()[0]), c.code)
		})
	}
}

func TestCheckpointHwmIsMonotonicAndFenced(t *testing.T) {
	x := newH(t)
	x.partitionds(3)
	x.ok(create("t", func(r *metav1.CreateTopicRequest) { r.Partitions = ptr[int32](1) }))
	ck := func(le, lc, hwm uint64) *metav1.CheckpointHwmRequest {
		return &metav1.CheckpointHwmRequest{Topic: "t", LeaderEpoch: le, LifecycleEpoch: lc, Hwm: hwm}
	}
	x.ok(ck(1, 1, 10))
	rev := x.f.Revision()
	x.ok(ck(1, 1, 10)) // repeat: no change
	if x.f.Revision() != rev {
		t.Fatal("repeated checkpoint emitted a change")
	}
	x.fails(ck(1, 1, 9), errcode.InvalidCommitWatermark)
	x.fails(ck(0, 1, 11), errcode.MissingLeaderFence)
	x.fails(ck(1, 0, 11), errcode.MissingLeaderFence)
	x.fails(ck(1, 2, 11), errcode.StaleLifecycleEpoch)
	x.fails(ck(2, 1, 11), errcode.StaleLeaderEpoch)
	x.fails(&metav1.CheckpointHwmRequest{Topic: "t", Partition: 1, LeaderEpoch: 1, LifecycleEpoch: 1, Hwm: 1}, errcode.PartitionNotFound)
	x.ok(ck(1, 1, 25))
	if got := x.topic("t").GetPartitions()[0].GetCommittedHwm(); got != 25 {
		t.Fatalf("committed hwm = %d", got)
	}
}

func TestReconcilePartitionRules(t *testing.T) {
	liveSet := func(ids ...string) func(string) bool {
		return func(id string) bool { return slices.Contains(ids, id) }
	}
	cases := []struct {
		name      string
		in        *metav1.PartitionState
		live      []string
		leader    string
		isr       []string
		epoch     uint64
		unchanged bool
	}{
		{"AllLive", &metav1.PartitionState{Replicas: []string{"a", "b", "c"}, Isr: []string{"a", "b"}, Leader: "a", LeaderEpoch: 3},
			[]string{"a", "b", "c"}, "a", []string{"a", "b"}, 3, true},
		{"DeadFollowerLeavesISR", &metav1.PartitionState{Replicas: []string{"a", "b", "c"}, Isr: []string{"a", "b"}, Leader: "a", LeaderEpoch: 3},
			[]string{"a", "c"}, "a", []string{"a"}, 3, false},
		{"DeadLeaderReplacedFromISR", &metav1.PartitionState{Replicas: []string{"a", "b", "c"}, Isr: []string{"a", "c"}, Leader: "a", LeaderEpoch: 3},
			[]string{"b", "c"}, "c", []string{"c"}, 4, false},
		{"OutOfSyncReplicaNeverElected", &metav1.PartitionState{Replicas: []string{"a", "b", "c"}, Isr: []string{"a"}, Leader: "a", LeaderEpoch: 3},
			[]string{"b", "c"}, "", []string{"a"}, 4, false},
		{"OfflineStaysOfflineWithoutISR", &metav1.PartitionState{Replicas: []string{"a", "b", "c"}, Isr: []string{"a"}, Leader: "", LeaderEpoch: 4},
			[]string{"b", "c"}, "", []string{"a"}, 4, true},
		{"ISRMemberReturnsAndLeads", &metav1.PartitionState{Replicas: []string{"a", "b", "c"}, Isr: []string{"a"}, Leader: "", LeaderEpoch: 4},
			[]string{"a", "b"}, "a", []string{"a"}, 5, false},
		{"PreferredOrderAmongISR", &metav1.PartitionState{Replicas: []string{"c", "a", "b"}, Isr: []string{"a", "b"}, Leader: "x", LeaderEpoch: 1},
			[]string{"a", "b", "c"}, "a", []string{"a", "b"}, 2, false},
		{"AllISRDeadKeepsLastISR", &metav1.PartitionState{Replicas: []string{"a", "b", "c"}, Isr: []string{"a", "b"}, Leader: "a", LeaderEpoch: 7},
			[]string{"c"}, "", []string{"a", "b"}, 8, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, _, _ := ReconcilePartition(c.in, liveSet(c.live...))
			if c.unchanged != (out == c.in) {
				t.Fatalf("unchanged = %v, want %v", out == c.in, c.unchanged)
			}
			if out.GetLeader() != c.leader || !slices.Equal(out.GetIsr(), c.isr) || out.GetLeaderEpoch() != c.epoch {
				t.Fatalf("got leader=%q isr=%v epoch=%d, want leader=%q isr=%v epoch=%d",
					out.GetLeader(), out.GetIsr(), out.GetLeaderEpoch(), c.leader, c.isr, c.epoch)
			}
			if !slices.Equal(out.GetReplicas(), c.in.GetReplicas()) {
				t.Fatal("replicas changed")
			}
		})
	}
}

func TestReconcileExpiresNodesAndElectsFromISR(t *testing.T) {
	x := newH(t)
	p := setupRF3(x)
	leader, next := p.GetReplicas()[0], p.GetReplicas()[1]
	// Everyone but the leader renews; the leader's lease runs out.
	x.now += lease
	for _, id := range p.GetReplicas()[1:] {
		x.heartbeat(id, 1)
	}
	res := x.reconcile()
	if !slices.Equal(res.ExpiredNodes, []string{leader}) || res.LeaderChanges != 1 || res.IsrShrinks != 1 {
		t.Fatalf("reconcile = %+v", res)
	}
	np := x.topic("t").GetPartitions()[0]
	if np.GetLeader() != next || np.GetLeaderEpoch() != p.GetLeaderEpoch()+1 || slices.Contains(np.GetIsr(), leader) {
		t.Fatalf("after leader loss = %v", np)
	}
	// Idempotent: the same decision again changes nothing.
	rev := x.f.Revision()
	if res := x.reconcile(); len(res.ExpiredNodes) != 0 || res.LeaderChanges != 0 || x.f.Revision() != rev {
		t.Fatalf("second reconcile = %+v", res)
	}
	// The old leader comes back: it is not in the ISR, so it stays a
	// follower until the leader adds it.
	x.register(pnode(leader, 2))
	x.reconcile()
	if got := x.topic("t").GetPartitions()[0]; got.GetLeader() != next || slices.Contains(got.GetIsr(), leader) {
		t.Fatalf("returning node took over: %v", got)
	}
	x.fails(&metav1.ReconcileCommand{NowUnixMs: x.now}, errcode.InvalidParameter)
}

func TestLeaderOnlyISRGoesOfflineAndReturns(t *testing.T) {
	x := newH(t)
	x.partitionds(3)
	x.ok(create("t", func(r *metav1.CreateTopicRequest) { r.Partitions = ptr[int32](1) }))
	p0 := x.topic("t").GetPartitions()[0]
	x.ok(&metav1.AlterIsrRequest{Topic: "t", LeaderEpoch: p0.GetLeaderEpoch(), Isr: []string{p0.GetLeader()}})
	p := x.topic("t").GetPartitions()[0] // ISR = [leader]
	x.now += lease
	for _, id := range p.GetReplicas()[1:] {
		x.heartbeat(id, 1)
	}
	x.reconcile()
	off := x.topic("t").GetPartitions()[0]
	if off.GetLeader() != "" || off.GetLeaderEpoch() != p.GetLeaderEpoch()+1 || !slices.Equal(off.GetIsr(), p.GetIsr()) {
		t.Fatalf("offline partition = %v", off)
	}
	if st := x.state().ClusterStatus(); st.GetOfflinePartitions() != 1 || st.GetUnderReplicatedPartitions() != 1 {
		t.Fatalf("status offline=%d under=%d", st.GetOfflinePartitions(), st.GetUnderReplicatedPartitions())
	}
	x.fails(&metav1.AlterIsrRequest{Topic: "t", LeaderEpoch: off.GetLeaderEpoch(), Isr: p.GetIsr()}, errcode.PartitionLeaderFenced)
	x.register(pnode(p.GetLeader(), 2))
	x.reconcile()
	back := x.topic("t").GetPartitions()[0]
	if back.GetLeader() != p.GetLeader() || back.GetLeaderEpoch() != off.GetLeaderEpoch()+1 {
		t.Fatalf("after return = %v", back)
	}
}

func TestClusterStatusCountsOfflineAndUnderReplicated(t *testing.T) {
	x := newH(t)
	x.partitionds(3)
	x.ok(create("a", func(r *metav1.CreateTopicRequest) { r.Partitions = ptr[int32](2) }))
	x.ok(create("b", func(r *metav1.CreateTopicRequest) { r.Partitions = ptr[int32](1); r.ReplicationFactor = ptr[int32](1) }))
	if st := x.state().ClusterStatus(); st.GetUnderReplicatedPartitions() != 0 {
		t.Fatalf("new partitions start fully in sync: %d under-replicated", st.GetUnderReplicatedPartitions())
	}
	for i := range int32(2) {
		p := x.topic("a").GetPartitions()[i]
		x.ok(&metav1.AlterIsrRequest{Topic: "a", Partition: i, LeaderEpoch: p.GetLeaderEpoch(), Isr: []string{p.GetLeader()}})
	}
	st := x.state().ClusterStatus()
	if st.GetOfflinePartitions() != 0 || st.GetUnderReplicatedPartitions() != 2 || len(st.GetTopics()) != 2 || len(st.GetNodes()) != 3 {
		t.Fatalf("status = offline %d under %d topics %d nodes %d", st.GetOfflinePartitions(), st.GetUnderReplicatedPartitions(), len(st.GetTopics()), len(st.GetNodes()))
	}
	for i := range int32(2) {
		p := x.topic("a").GetPartitions()[i]
		x.ok(&metav1.AlterIsrRequest{Topic: "a", Partition: i, LeaderEpoch: p.GetLeaderEpoch(), Isr: p.GetReplicas()})
	}
	if st := x.state().ClusterStatus(); st.GetUnderReplicatedPartitions() != 0 || st.GetRevision() != x.f.Revision() {
		t.Fatalf("under-replicated after full ISR = %d", st.GetUnderReplicatedPartitions())
	}
}

package fsm

import (
	"hash/fnv"
	"slices"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// FirstLeaderEpoch is the leader epoch of a new partition. 0 is never a valid
// epoch, so a request that omits it is recognisably unfenced.
const FirstLeaderEpoch = 1

// PlaceReplicas returns the replica lists of partitions [from, to) of topic
// over the live partition servers (sorted by id), rf replicas each. It is
// pure and deterministic: partition p starts at server (h + p) mod n, where h
// is the FNV-1a hash of the topic name, and takes the next rf servers in id
// order. Leaders (the first replica) therefore rotate over all servers, and
// different topics start at different servers.
func PlaceReplicas(topic string, from, to int32, rf int32, servers []string) ([][]string, error) {
	n := int32(len(servers))
	if rf < 1 {
		return nil, errcode.InvalidReplicationFactor.New("replication_factor must be at least 1", "topic", topic, "replication_factor", itoa(rf))
	}
	if rf > n {
		return nil, errcode.InvalidReplicationFactor.New(
			"replication_factor "+itoa(rf)+" needs "+itoa(rf)+" live partition servers, "+itoa(n)+" are live",
			"topic", topic, "replication_factor", itoa(rf), "live_partition_servers", itoa(n))
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(topic))
	start := int64(h.Sum32() % uint32(n))
	out := make([][]string, 0, to-from)
	for p := from; p < to; p++ {
		first := (start + int64(p)) % int64(n)
		replicas := make([]string, rf)
		for j := range rf {
			replicas[j] = servers[(first+int64(j))%int64(n)]
		}
		out = append(out, replicas)
	}
	return out, nil
}

// assignPartitions places and initialises partitions [from, to): the leader
// is the first replica (all are live), the epoch FirstLeaderEpoch and the ISR
// every replica: a new partition's logs are all empty, so every replica is
// in sync, and acks=all works as soon as the topic exists (a replica that
// falls behind later leaves the ISR through its leader's ALTER_ISR).
func assignPartitions(tx *txn, topic string, from, to, rf int32) ([]*metav1.PartitionState, error) {
	var servers []string
	for _, n := range tx.liveNodes(metav1.NodeRole_NODE_ROLE_PARTITIOND) {
		servers = append(servers, n.GetId())
	}
	placed, err := PlaceReplicas(topic, from, to, rf, servers)
	if err != nil {
		return nil, err
	}
	out := make([]*metav1.PartitionState, len(placed))
	for i, replicas := range placed {
		out[i] = &metav1.PartitionState{
			Id:          from + int32(i),
			Replicas:    replicas,
			Isr:         slices.Clone(replicas),
			Leader:      replicas[0],
			LeaderEpoch: FirstLeaderEpoch,
		}
	}
	return out, nil
}

// partitionOf returns the live topic and one of its partitions, or the typed
// not-found error.
func partitionOf(tx *txn, topic string, id int32) (*metav1.Topic, *metav1.PartitionState, error) {
	t, err := liveTopic(tx, topic)
	if err != nil {
		return nil, nil, err
	}
	if id < 0 || int(id) >= len(t.GetPartitions()) {
		return nil, nil, errcode.PartitionNotFound.New("", "topic", topic, "partition", itoa(id))
	}
	return t, t.GetPartitions()[id], nil
}

// withPartition returns a copy of t whose partition p.Id is replaced by p.
func withPartition(t *metav1.Topic, p *metav1.PartitionState) *metav1.Topic {
	parts := slices.Clone(t.GetPartitions())
	parts[p.GetId()] = p
	return &metav1.Topic{Config: t.GetConfig(), Partitions: parts, CleanupPendingNodes: t.GetCleanupPendingNodes()}
}

// applyElectLeader is ELECT_LEADER (spec 4.4): the target must be a live
// partition server in both the replica set and the ISR. The epoch rises by
// exactly one; replicas, ISR and committed HWM are kept. Electing the current
// leader again is an idempotent no-op with changed=false.
func applyElectLeader(tx *txn, req *metav1.ElectLeaderRequest) (*metav1.ElectLeaderResponse, error) {
	target := req.GetBrokerId()
	if target == "" {
		return nil, errcode.MissingBroker.New("ELECT_LEADER needs broker", "topic", req.GetTopic(), "partition", itoa(req.GetPartition()))
	}
	t, p, err := partitionOf(tx, req.GetTopic(), req.GetPartition())
	if err != nil {
		return nil, err
	}
	if p.GetLeader() == target {
		return &metav1.ElectLeaderResponse{PreviousLeader: target, Leader: target, LeaderEpoch: p.GetLeaderEpoch(), Changed: false}, nil
	}
	reject := func(reason string) error {
		return errcode.LeaderElectionRejected.New("the target must be a live broker in the partition's replicas and ISR",
			"topic", req.GetTopic(), "partition", itoa(req.GetPartition()), "broker", target, "reason", reason)
	}
	switch {
	case tx.node(target) == nil:
		// An unknown broker is not an active broker of the partition: the
		// election is rejected (missing_broker is for the absent parameter).
		return nil, reject("unknown_broker")
	case !slices.Contains(p.GetReplicas(), target):
		return nil, reject("not_a_replica")
	case !slices.Contains(p.GetIsr(), target):
		return nil, reject("not_in_isr")
	case !tx.isLivePartitiond(target):
		return nil, reject("not_live")
	}
	np := proto.CloneOf(p)
	np.Leader = target
	np.LeaderEpoch++
	tx.putTopic(withPartition(t, np))
	return &metav1.ElectLeaderResponse{PreviousLeader: p.GetLeader(), Leader: target, LeaderEpoch: np.GetLeaderEpoch(), Changed: true}, nil
}

// applyAlterIsr replaces a partition's ISR, compare-and-set on the leader
// epoch: the caller proves it is the current leader by its epoch. The new ISR
// must be a duplicate-free subset of the replicas containing the leader, and
// only live partition servers can be in sync.
func applyAlterIsr(tx *txn, req *metav1.AlterIsrRequest) (*metav1.AlterIsrResponse, error) {
	t, p, err := partitionOf(tx, req.GetTopic(), req.GetPartition())
	if err != nil {
		return nil, err
	}
	if req.GetLeaderEpoch() != p.GetLeaderEpoch() {
		return nil, errcode.StaleLeaderEpoch.New("ISR change with a stale leader epoch",
			"topic", req.GetTopic(), "partition", itoa(req.GetPartition()), "current", u64(p.GetLeaderEpoch()), "requested", u64(req.GetLeaderEpoch()))
	}
	if p.GetLeader() == "" || (req.GetRequestedBy() != "" && req.GetRequestedBy() != p.GetLeader()) {
		return nil, errcode.PartitionLeaderFenced.New("only the partition leader changes its ISR",
			"topic", req.GetTopic(), "partition", itoa(req.GetPartition()), "leader", p.GetLeader(), "requested_by", req.GetRequestedBy())
	}
	isr, err := normaliseISR(tx, p, req.GetIsr())
	if err != nil {
		return nil, errcode.InvalidParameter.New(err.Error(), "param", "isr", "topic", req.GetTopic(), "partition", itoa(req.GetPartition()))
	}
	if slices.Equal(isr, p.GetIsr()) {
		return &metav1.AlterIsrResponse{Partition: p}, nil
	}
	np := proto.CloneOf(p)
	np.Isr = isr
	tx.putTopic(withPartition(t, np))
	return &metav1.AlterIsrResponse{Partition: np}, nil
}

type isrError string

func (e isrError) Error() string { return string(e) }

// normaliseISR validates a requested ISR and returns it in replica order, the
// canonical order stored (so equal sets compare equal).
func normaliseISR(tx *txn, p *metav1.PartitionState, isr []string) ([]string, error) {
	if len(isr) == 0 {
		return nil, isrError("the ISR cannot be empty")
	}
	seen := map[string]bool{}
	for _, id := range isr {
		switch {
		case seen[id]:
			return nil, isrError("duplicate ISR member " + strconv.Quote(id))
		case !slices.Contains(p.GetReplicas(), id):
			return nil, isrError("ISR member " + strconv.Quote(id) + " is not a replica")
		case !tx.isLivePartitiond(id):
			return nil, isrError("ISR member " + strconv.Quote(id) + " is not a live partition server")
		}
		seen[id] = true
	}
	if !seen[p.GetLeader()] {
		return nil, isrError("the ISR must contain the leader " + strconv.Quote(p.GetLeader()))
	}
	out := make([]string, 0, len(isr))
	for _, r := range p.GetReplicas() {
		if seen[r] {
			out = append(out, r)
		}
	}
	return out, nil
}

// applyCheckpointHwm records a partition's committed high watermark. The
// checkpoint is fenced by the topic lifecycle epoch and the leader epoch, and
// monotonic within a lifecycle epoch (TRUNCATE resets it to 0 with a new
// epoch).
func applyCheckpointHwm(tx *txn, req *metav1.CheckpointHwmRequest) (*metav1.CheckpointHwmResponse, error) {
	t, p, err := partitionOf(tx, req.GetTopic(), req.GetPartition())
	if err != nil {
		return nil, err
	}
	where := []string{"topic", req.GetTopic(), "partition", itoa(req.GetPartition())}
	if req.GetLifecycleEpoch() == 0 || req.GetLeaderEpoch() == 0 {
		return nil, errcode.MissingLeaderFence.New("HWM checkpoint without lifecycle and leader epochs", append(where, "command", "CHECKPOINT_HWM")...)
	}
	if cur := t.GetConfig().GetLifecycleEpoch(); req.GetLifecycleEpoch() != cur {
		return nil, errcode.StaleLifecycleEpoch.New("HWM checkpoint for another lifecycle epoch", append(where, "current", u64(cur), "requested", u64(req.GetLifecycleEpoch()))...)
	}
	if cur := p.GetLeaderEpoch(); req.GetLeaderEpoch() != cur {
		return nil, errcode.StaleLeaderEpoch.New("HWM checkpoint with a stale leader epoch", append(where, "current", u64(cur), "requested", u64(req.GetLeaderEpoch()))...)
	}
	if req.GetHwm() < p.GetCommittedHwm() {
		return nil, errcode.InvalidCommitWatermark.New("committed HWM cannot move backwards within a lifecycle epoch",
			append(where, "reason", "regression", "current", u64(p.GetCommittedHwm()), "requested", u64(req.GetHwm()))...)
	}
	if req.GetHwm() == p.GetCommittedHwm() {
		return &metav1.CheckpointHwmResponse{}, nil
	}
	np := proto.CloneOf(p)
	np.CommittedHwm = req.GetHwm()
	tx.putTopic(withPartition(t, np))
	return &metav1.CheckpointHwmResponse{}, nil
}

// ReconcileResult reports what a RECONCILE changed.
type ReconcileResult struct {
	// ExpiredNodes are the nodes whose lease ran out, sorted.
	ExpiredNodes []string
	// LeaderChanges counts partitions that got a new leader or went offline.
	LeaderChanges int
	// IsrShrinks counts partitions whose ISR lost a dead member.
	IsrShrinks int
}

// applyReconcile is the controller's periodic decision, evaluated at the
// proposer's time: expire every live node whose lease ran out, then repair
// every partition (ReconcilePartition).
func applyReconcile(tx *txn, cmd *metav1.ReconcileCommand) (*ReconcileResult, error) {
	if cmd.GetLeaseTimeoutMs() <= 0 {
		return nil, errcode.InvalidParameter.New("RECONCILE needs a positive lease timeout", "param", "lease_timeout_ms")
	}
	res := &ReconcileResult{}
	for _, id := range tx.nodeIDs() {
		n := tx.node(id)
		if n.GetLive() && LeaseExpired(n, cmd.GetNowUnixMs(), cmd.GetLeaseTimeoutMs()) {
			nn := proto.CloneOf(n)
			nn.Live = false
			tx.putNode(nn)
			res.ExpiredNodes = append(res.ExpiredNodes, id)
		}
	}
	repairPartitions(tx, res)
	return res, nil
}

// applyShutdownNode is a controlled shutdown: the node's current
// incarnation stops being live now, and every partition is repaired at
// once (ReconcilePartition), so leadership leaves the node before its
// process does. Another incarnation, an unknown node or one already not
// live is a no-op.
func applyShutdownNode(tx *txn, req *metav1.ShutdownNodeRequest) (*metav1.ShutdownNodeResponse, error) {
	n := tx.node(req.GetNodeId())
	if n == nil || !n.GetLive() || n.GetIncarnation() != req.GetIncarnation() {
		return &metav1.ShutdownNodeResponse{}, nil
	}
	nn := proto.CloneOf(n)
	nn.Live = false
	tx.putNode(nn)
	res := &ReconcileResult{ExpiredNodes: []string{n.GetId()}}
	repairPartitions(tx, res)
	return &metav1.ShutdownNodeResponse{LeaderChanges: int32(res.LeaderChanges)}, nil
}

// repairPartitions applies ReconcilePartition to every partition of every
// live topic.
func repairPartitions(tx *txn, res *ReconcileResult) {
	tx.mapLivePartitions(func(p *metav1.PartitionState) *metav1.PartitionState {
		np, leader, shrunk := ReconcilePartition(p, tx.isLivePartitiond)
		if np == p {
			return p
		}
		if leader {
			res.LeaderChanges++
		}
		if shrunk {
			res.IsrShrinks++
		}
		return np
	})
}

// LeaseExpired reports whether n's lease ran out at now.
func LeaseExpired(n *metav1.Node, nowUnixMs, leaseTimeoutMs int64) bool {
	return n.GetLastHeartbeatUnixMs()+leaseTimeoutMs <= nowUnixMs
}

// ReconcilePartition is the controller's rule for one partition given which
// nodes are live partition servers. It returns p itself when nothing
// changes, else a new PartitionState, and whether the leader changed and
// whether the ISR shrank.
//
//   - Dead members leave the ISR, except that the ISR never becomes empty:
//     when every member is dead the last ISR is kept, because only those
//     replicas are known to hold every committed record, and the partition
//     waits (offline) for one of them to return.
//   - A dead or missing leader is replaced by the first replica (in replica
//     order, i.e. preferred leader first) that is live and in the ISR; an
//     out-of-sync replica is never elected. With none, the leader is ""
//     (offline).
//   - Every leader change, including to and from offline, raises the leader
//     epoch by exactly one, so a deposed leader is fenced even while the
//     partition is offline.
func ReconcilePartition(p *metav1.PartitionState, live func(string) bool) (*metav1.PartitionState, bool, bool) {
	isr := slices.DeleteFunc(slices.Clone(p.GetIsr()), func(id string) bool { return !live(id) })
	if len(isr) == 0 {
		isr = p.GetIsr()
	}
	leader := p.GetLeader()
	if leader == "" || !live(leader) || !slices.Contains(isr, leader) {
		leader = ""
		for _, r := range p.GetReplicas() {
			if live(r) && slices.Contains(isr, r) {
				leader = r
				break
			}
		}
	}
	leaderChanged := leader != p.GetLeader()
	shrunk := len(isr) < len(p.GetIsr())
	if !leaderChanged && !shrunk {
		return p, false, false
	}
	np := proto.CloneOf(p)
	np.Isr = slices.Clip(isr)
	if leaderChanged {
		np.Leader = leader
		np.LeaderEpoch++
	}
	return np, leaderChanged, shrunk
}

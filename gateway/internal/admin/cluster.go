package admin

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/strataio/strata/gateway/internal/command"
	"github.com/strataio/strata/gateway/internal/param"
	"github.com/strataio/strata/gateway/internal/route"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// clusterStatus is CLUSTER_STATUS [internal=true]: metad's view of nodes,
// Raft servers and partitions as `OK cluster=<json>`, with each partition's
// HWM from its leader.
func (a *Handlers) clusterStatus(ctx context.Context, c *command.Call) ([]byte, error) {
	p := param.Read(c.Req, c.Command)
	internal, _ := p.OptBool("internal", false)
	resp, err := toMetad(ctx, a.r, p.Err(), metav1.MetadataServiceClient.ClusterStatus, &metav1.ClusterStatusRequest{})
	if err != nil {
		return nil, err
	}
	cs := wire.ClusterStatus{Brokers: wire.ClusterBrokers{Active: []wire.ClusterNode{}, Inactive: []wire.ClusterNode{}}, RaftServers: []wire.ClusterRaftServer{},
		Partitions: []wire.ClusterPartition{}, RaftLeader: wire.ClusterRaftLeader{ID: resp.GetRaftLeaderId(), Address: resp.GetRaftLeaderAddress()},
		LeaderlessPartitions: resp.GetOfflinePartitions(), UnderReplicatedPartitions: resp.GetUnderReplicatedPartitions(),
		InternalShown: internal, Revision: resp.GetRevision()}
	for _, n := range resp.GetNodes() {
		cn := wire.ClusterNode{ID: n.GetId(), Role: roleName(n.GetRole()), RPCAddress: n.GetRpcAddress(), ClientAddress: n.GetClientAddress()}
		if n.GetLive() {
			cs.Brokers.Active = append(cs.Brokers.Active, cn)
		} else {
			cs.Brokers.Inactive = append(cs.Brokers.Inactive, cn)
		}
	}
	for _, s := range resp.GetRaftServers() {
		cs.RaftServers = append(cs.RaftServers, wire.ClusterRaftServer{ID: s.GetId(), Address: s.GetAddress(), Suffrage: s.GetSuffrage()})
	}
	var shown []*metav1.Topic
	for _, t := range resp.GetTopics() {
		if !route.Visible(t) {
			continue
		}
		if t.GetConfig().GetInternal() {
			cs.Topics.Internal++
			if !internal {
				continue
			}
		} else {
			cs.Topics.Application++
		}
		shown = append(shown, t)
	}
	offs := leaderOffsets(ctx, a.r, shown)
	for _, t := range shown {
		name := t.GetConfig().GetName()
		for _, p := range t.GetPartitions() {
			cp := wire.ClusterPartition{Topic: name, Partition: p.GetId(), Internal: t.GetConfig().GetInternal(), Leader: p.GetLeader(),
				LeaderEpoch: p.GetLeaderEpoch(), HWM: p.GetCommittedHwm(), HWMSource: wire.HWMSourceCheckpoint,
				Replicas: nonNil(p.GetReplicas()), ISR: nonNil(p.GetIsr())}
			if o, ok := offs[pkey{name, p.GetId()}]; ok {
				cp.HWM, cp.HWMSource = o.GetHwm(), wire.HWMSourceLeader
			}
			cs.Partitions = append(cs.Partitions, cp)
		}
	}
	b, err := json.Marshal(cs)
	if err != nil {
		return nil, errcode.MarshalClusterStatusFailed.New("cluster status", "reason", err.Error())
	}
	return append(wire.AppendOKField(wire.AppendOK(c.Out), "cluster", ""), b...), nil
}

type pkey struct {
	topic string
	part  int32
}

// clusterOffsetsParallel bounds the ListOffsets calls CLUSTER_STATUS has in
// flight at once (one per topic and leader).
const clusterOffsetsParallel = 16

// leaderOffsets asks every partition leader, in parallel and within
// clusterOffsetsWait in all, for the offsets of its partitions of topics:
// the HWM a leader reports is the one LIST_OFFSETS answers, while metad's
// committed_hwm is a checkpoint (taken every few seconds and at ISR
// changes) that lags right after a publish. A partition missing from the
// result (no leader, no answer in time, a per-partition error) keeps the
// checkpoint.
func leaderOffsets(ctx context.Context, r route.Router, topics []*metav1.Topic) map[pkey]*partitionv1.PartitionOffsets {
	type call struct {
		leader, topic string
		parts         []int32
	}
	var calls []call
	for _, t := range topics {
		idx := map[string]int{}
		for _, p := range t.GetPartitions() {
			l := p.GetLeader()
			if l == "" {
				continue
			}
			i, ok := idx[l]
			if !ok {
				i = len(calls)
				idx[l] = i
				calls = append(calls, call{leader: l, topic: t.GetConfig().GetName()})
			}
			calls[i].parts = append(calls[i].parts, p.GetId())
		}
	}
	octx, cancel := context.WithTimeout(ctx, clusterOffsetsWait)
	defer cancel()
	var (
		mu  sync.Mutex
		wg  sync.WaitGroup
		out = map[pkey]*partitionv1.PartitionOffsets{}
		sem = make(chan struct{}, clusterOffsetsParallel)
	)
	for _, c := range calls {
		select {
		case sem <- struct{}{}:
		case <-octx.Done():
		}
		if octx.Err() != nil {
			break // the bound is spent: the rest keep their checkpoints
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			pc, err := r.Partition(c.leader)
			if err != nil {
				return
			}
			resp, err := pc.ListOffsets(octx, &partitionv1.ListOffsetsRequest{Topic: c.topic, Partitions: c.parts})
			if err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, o := range resp.GetPartitions() {
				if o.GetError() == nil {
					out[pkey{c.topic, o.GetPartition()}] = o
				}
			}
		}()
	}
	wg.Wait()
	return out
}

// listCluster is LIST_CLUSTER: every registered node (brokers of every role)
// with its role, addresses and liveness as `OK count=<n> brokers=<json>`,
// from metad's leader.
func (a *Handlers) listCluster(ctx context.Context, c *command.Call) ([]byte, error) {
	resp, err := route.ToMetad(ctx, a.r, metav1.MetadataServiceClient.ClusterStatus, &metav1.ClusterStatusRequest{})
	if err != nil {
		return nil, err
	}
	type broker struct {
		ID            string `json:"id"`
		Role          string `json:"role"`
		RPCAddress    string `json:"rpc_address"`
		ClientAddress string `json:"client_address,omitempty"`
		Live          bool   `json:"live"`
	}
	list := make([]broker, 0, len(resp.GetNodes()))
	for _, n := range resp.GetNodes() {
		list = append(list, broker{ID: n.GetId(), Role: roleName(n.GetRole()), RPCAddress: n.GetRpcAddress(),
			ClientAddress: n.GetClientAddress(), Live: n.GetLive()})
	}
	slices.SortFunc(list, func(x, y broker) int { return cmp.Or(cmp.Compare(x.Role, y.Role), cmp.Compare(x.ID, y.ID)) })
	b, err := json.Marshal(list)
	if err != nil {
		return nil, errcode.MarshalClusterStatusFailed.New("cluster list", "reason", err.Error())
	}
	out := wire.AppendOKInt(wire.AppendOK(c.Out), "count", int64(len(list)))
	return append(wire.AppendOKField(out, "brokers", ""), b...), nil
}

// clusterOffsetsWait bounds CLUSTER_STATUS's queries of the partition
// leaders' offsets.
const clusterOffsetsWait = 2 * time.Second

func roleName(r metav1.NodeRole) string {
	return strings.ToLower(strings.TrimPrefix(r.String(), "NODE_ROLE_"))
}

// electLeader is ELECT_LEADER: ask metad to move a partition's leadership
// to broker.
func (a *Handlers) electLeader(ctx context.Context, c *command.Call) ([]byte, error) {
	p := param.Read(c.Req, c.Command)
	name, part, broker := p.Required(param.Topic), p.Partition(), p.RequiredNamingCommand(param.Broker)
	resp, err := toMetad(ctx, a.r, p.Err(), metav1.MetadataServiceClient.ElectLeader,
		&metav1.ElectLeaderRequest{Topic: name, Partition: part, BrokerId: broker})
	if err != nil {
		return nil, err
	}
	out := wire.AppendOKField(wire.AppendOK(c.Out), "topic", name)
	out = wire.AppendOKInt(out, "partition", int64(part))
	out = wire.AppendOKField(out, "previous_leader", resp.GetPreviousLeader())
	out = wire.AppendOKField(out, "leader", resp.GetLeader())
	out = wire.AppendOKUint(out, "leader_epoch", resp.GetLeaderEpoch())
	return wire.AppendOKBool(out, "changed", resp.GetChanged()), nil
}

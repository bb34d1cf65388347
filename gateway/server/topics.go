package server

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/metaclient"
	"github.com/strataio/strata/libs/wire"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// internalOffsetsTopic is the broker-owned group/offset topic (spec 2.1).
const internalOffsetsTopic = "__consumer_offsets"

// lookupTopic returns a visible topic: from the cache, or — when the cache
// does not know it yet (created through another gateway a moment ago) — from
// metad's leader (linearizable).
func (g *Role) lookupTopic(ctx context.Context, name string) (*metav1.Topic, error) {
	if t, ok := g.meta.Cache().View().Topic(name); ok && visible(t) {
		return t, nil
	}
	resp, err := g.meta.GetTopic(ctx, name)
	if err != nil {
		return nil, err
	}
	if !visible(resp.GetTopic()) {
		return nil, errcode.TopicNotFound.New("topic does not exist", "topic", name)
	}
	return resp.GetTopic(), nil
}

// waitTopic waits briefly until the cache reflects a change metad
// acknowledged, so the client's next command through this gateway sees it.
func (g *Role) waitTopic(ctx context.Context, cond func(*metaclient.View) bool) {
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	g.meta.Cache().WaitFor(wctx, cond)
}

func (g *Role) cmdCreate(ctx context.Context, out []byte, r *wire.Request) ([]byte, error) {
	name, err := required(r, "topic")
	if err != nil {
		return nil, err
	}
	if !validTopicName(name) {
		return nil, errcode.InvalidTopicName.New("topic name violates the portable name contract", "topic", clip(name))
	}
	req := &metav1.CreateTopicRequest{Name: name}
	if v, ok, err := optIntParam(r, "partitions", 1, 1<<20); err != nil {
		return nil, err
	} else if ok {
		n := int32(v)
		req.Partitions = &n
	}
	if v, ok, err := optIntParam(r, "replication_factor", 1, 64); err != nil {
		return nil, err
	} else if ok {
		n := int32(v)
		req.ReplicationFactor = &n
	}
	for _, p := range []struct {
		key string
		dst **bool
	}{{"idempotent", &req.Idempotent}, {"event_sourcing", &req.EventSourcing}, {"aggregate_replay", &req.AggregateReplay}} {
		b, ok, err := optBool(r, p.key, false)
		if err != nil {
			return nil, err
		}
		if ok {
			v := b
			*p.dst = &v
		}
	}
	for _, p := range []struct {
		key string
		dst **int64
	}{{"retention_hours", &req.RetentionHours}, {"retention_bytes", &req.RetentionBytes}} {
		v, ok, err := optIntParam(r, p.key, 0, 1<<62)
		if err != nil {
			return nil, err
		}
		if ok {
			n := v
			*p.dst = &n
		}
	}
	for _, p := range []struct {
		key string
		dst **string
	}{{"cleanup_policy", &req.CleanupPolicy}, {"partitioner", &req.Partitioner}, {"auth_policy", &req.AuthPolicy},
		{"read_acl", &req.ReadAcl}, {"write_acl", &req.WriteAcl}, {"min_in_sync_replicas", &req.MinInSyncReplicas}} {
		if v, ok := r.Get(p.key); ok {
			s := v
			*p.dst = &s
		}
	}
	if v := req.CleanupPolicy; v != nil {
		switch *v {
		case "delete", "compact", "delete,compact":
		default:
			return nil, errcode.InvalidTopicPolicy.New("cleanup_policy must be delete, compact or delete,compact", "topic", name, "cleanup_policy", clip(*v))
		}
	}
	if v := req.Partitioner; v != nil && *v != "hash_key" && *v != "round_robin" {
		return nil, invalid("partitioner", *v, "must be hash_key or round_robin")
	}
	if v := req.AuthPolicy; v != nil {
		switch *v {
		case "open", "deny_write", "deny_read", "acl":
		default:
			return nil, invalid("auth_policy", *v, "must be open, deny_write, deny_read or acl")
		}
	}
	if v := req.MinInSyncReplicas; v != nil && *v != "default" {
		if n, err := strconv.Atoi(*v); err != nil || n < 1 {
			return nil, invalid("min_in_sync_replicas", *v, "must be a positive number or default")
		}
	}
	resp, err := g.meta.CreateTopic(ctx, req)
	if err != nil {
		return nil, err
	}
	t := resp.GetTopic()
	rev := t.GetConfig().GetRevision()
	g.waitTopic(ctx, func(v *metaclient.View) bool {
		c, ok := v.Topic(name)
		return ok && c.GetConfig().GetRevision() >= rev
	})
	return appendTopicConfig(wire.AppendOK(out), t.GetConfig(), resp.GetEffectiveMinInSyncReplicas()), nil
}

// optIntParam parses an optional bounded integer and reports presence.
func optIntParam(r *wire.Request, key string, lo, hi int64) (int64, bool, error) {
	v, ok := r.Get(key)
	if !ok || v == "" {
		return 0, false, nil
	}
	n, err := optInt(r, key, 0, lo, hi)
	return n, err == nil, err
}

// appendTopicConfig writes the CREATE reply fields (WIRE-V2 9.4 order).
func appendTopicConfig(out []byte, c *metav1.TopicConfig, effMinISR int32) []byte {
	out = wire.AppendOKField(out, "topic", c.GetName())
	out = wire.AppendOKInt(out, "partitions", int64(c.GetPartitions()))
	out = wire.AppendOKField(out, "cleanup_policy", c.GetCleanupPolicy())
	out = wire.AppendOKField(out, "partitioner", c.GetPartitioner())
	out = wire.AppendOKField(out, "auth_policy", c.GetAuthPolicy())
	out = wire.AppendOKField(out, "read_acl", c.GetReadAcl())
	out = wire.AppendOKField(out, "write_acl", c.GetWriteAcl())
	out = wire.AppendOKInt(out, "retention_hours", c.GetRetentionHours())
	out = wire.AppendOKInt(out, "retention_bytes", c.GetRetentionBytes())
	out = wire.AppendOKUint(out, "revision", c.GetRevision())
	out = wire.AppendOKInt(out, "replication_factor", int64(c.GetReplicationFactor()))
	out = wire.AppendOKBool(out, "idempotent", c.GetIdempotent())
	out = wire.AppendOKBool(out, "event_sourcing", c.GetEventSourcing())
	out = wire.AppendOKUint(out, "lifecycle_epoch", c.GetLifecycleEpoch())
	out = appendMinISR(out, c)
	return wire.AppendOKInt(out, "effective_min_in_sync_replicas", int64(effMinISR))
}

func appendMinISR(out []byte, c *metav1.TopicConfig) []byte {
	if c.MinInSyncReplicas == nil {
		return wire.AppendOKField(out, "min_in_sync_replicas", "default")
	}
	return wire.AppendOKInt(out, "min_in_sync_replicas", int64(c.GetMinInSyncReplicas()))
}

func (g *Role) cmdAlterTopicConfig(ctx context.Context, out []byte, r *wire.Request) ([]byte, error) {
	name, err := required(r, "topic")
	if err != nil {
		return nil, err
	}
	v, err := required(r, "min_in_sync_replicas")
	if err != nil {
		return nil, err
	}
	if v != "default" {
		if n, err := strconv.Atoi(v); err != nil || n < 1 {
			return nil, invalid("min_in_sync_replicas", v, "must be a positive number or default")
		}
	}
	resp, err := g.meta.AlterTopicConfig(ctx, &metav1.AlterTopicConfigRequest{Name: name, MinInSyncReplicas: v})
	if err != nil {
		return nil, err
	}
	c := resp.GetTopic().GetConfig()
	rev := c.GetRevision()
	g.waitTopic(ctx, func(v *metaclient.View) bool {
		t, ok := v.Topic(name)
		return ok && t.GetConfig().GetRevision() >= rev
	})
	out = wire.AppendOKField(wire.AppendOK(out), "topic", name)
	out = appendMinISR(out, c)
	out = wire.AppendOKInt(out, "effective_min_in_sync_replicas", int64(resp.GetEffectiveMinInSyncReplicas()))
	return wire.AppendOKUint(out, "revision", rev), nil
}

func (g *Role) cmdDelete(ctx context.Context, out []byte, r *wire.Request) ([]byte, error) {
	name, err := required(r, "topic")
	if err != nil {
		return nil, err
	}
	ifExists := false
	if v, ok := r.Get("if_exists"); ok {
		b, err := strconv.ParseBool(strings.ToLower(v))
		if err != nil {
			return nil, errcode.InvalidIfExists.New("if_exists must be true or false", "value", clip(v))
		}
		ifExists = b
	}
	if name == internalOffsetsTopic {
		return nil, errcode.InternalTopicDeleteForbidden.New("the internal offsets topic cannot be deleted", "topic", name)
	}
	resp, err := g.meta.DeleteTopic(ctx, &metav1.DeleteTopicRequest{Name: name, IfExists: ifExists})
	if err != nil {
		return nil, err
	}
	pending := resp.GetCleanupPending()
	if resp.GetDeleted() || pending {
		g.waitTopic(ctx, func(v *metaclient.View) bool {
			t, ok := v.Topic(name)
			return !ok || !visible(t) && len(t.GetCleanupPendingNodes()) == 0
		})
		pending = g.cleanupPending(name, false)
	}
	out = wire.AppendOKField(wire.AppendOK(out), "topic", name)
	out = wire.AppendOKBool(out, "deleted", resp.GetDeleted())
	if pending {
		out = wire.AppendOKBool(out, "cleanup_pending", true)
	}
	return out, nil
}

func (g *Role) cmdTruncate(ctx context.Context, out []byte, r *wire.Request) ([]byte, error) {
	name, err := required(r, "topic")
	if err != nil {
		return nil, err
	}
	if _, err := required(r, "expected_revision"); err != nil {
		return nil, err
	}
	rev, _, err := optUint(r, "expected_revision", 0)
	if err != nil {
		return nil, err
	}
	if name == internalOffsetsTopic {
		return nil, errcode.InternalTopicDeleteForbidden.New("the internal offsets topic cannot be truncated", "topic", name)
	}
	resp, err := g.meta.TruncateTopic(ctx, &metav1.TruncateTopicRequest{Name: name, ExpectedRevision: rev})
	if err != nil {
		return nil, err
	}
	c := resp.GetTopic().GetConfig()
	newRev := c.GetRevision()
	g.waitTopic(ctx, func(v *metaclient.View) bool {
		t, ok := v.Topic(name)
		return ok && t.GetConfig().GetRevision() >= newRev
	})
	g.waitTruncated(ctx, name, len(resp.GetTopic().GetPartitions()), c.GetLifecycleEpoch())
	pending := resp.GetCleanupPending()
	if pending {
		g.waitTopic(ctx, func(v *metaclient.View) bool {
			t, ok := v.Topic(name)
			return !ok || t.GetConfig().GetLifecycleEpoch() != c.GetLifecycleEpoch() || len(t.GetCleanupPendingNodes()) == 0
		})
		pending = g.cleanupPending(name, true)
	}
	out = wire.AppendOKField(wire.AppendOK(out), "topic", name)
	out = wire.AppendOKBool(out, "truncated", true)
	out = wire.AppendOKUint(out, "revision", newRev)
	out = wire.AppendOKUint(out, "lifecycle_epoch", c.GetLifecycleEpoch())
	out = wire.AppendOKInt(out, "leo", 0)
	out = wire.AppendOKInt(out, "hwm", 0)
	if pending {
		out = wire.AppendOKBool(out, "cleanup_pending", true)
	}
	return out, nil
}

// cleanupPending reports whether node-local cleanup of topic name is still
// outstanding in the current view: a deleted topic still listed (DELETING)
// with nodes to report, or a live truncated one with nodes to report. DELETE
// and TRUNCATE wait briefly for the cleanup first (waitTopic), so the answer
// says cleanup_pending=true only when cleanup is really behind or must be
// retried (spec 3.1), not for the normal asynchronous cleanup of a healthy
// cluster.
func (g *Role) cleanupPending(name string, live bool) bool {
	t, ok := g.meta.Cache().View().Topic(name)
	return ok && visible(t) == live && len(t.GetCleanupPendingNodes()) > 0
}

// waitTruncated waits briefly until every partition leader serves the
// topic's new lifecycle epoch, so that "leo=0 hwm=0" in the TRUNCATE answer
// holds for the client's next LIST_OFFSETS or CONSUME: partition servers
// apply a truncate asynchronously from metad's watch. A fetch at the new
// epoch answers lifecycle_epoch_pending (or another reroutable error) until
// the leader replaced its log. Like waitTopic it gives up after a few
// seconds and answers anyway: the truncate is committed in metad, and reads
// stay fenced by the lifecycle epoch.
func (g *Role) waitTruncated(ctx context.Context, name string, parts int, epoch uint64) {
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	for id := int32(0); int(id) < parts; id++ {
		for wctx.Err() == nil {
			changed := g.meta.Cache().Changed()
			_, leader, err := g.partitionLeader(wctx, name, id)
			if err == nil {
				var pc partitionv1.PartitionServiceClient
				if pc, err = g.partitionClient(leader); err == nil {
					_, err = pc.Fetch(wctx, &partitionv1.FetchRequest{Topic: name, Partition: id, Offset: 0,
						MaxRecords: 1, LifecycleEpoch: epoch})
				}
			}
			if err == nil || !reroutable(err) {
				break
			}
			t := time.NewTimer(10 * time.Millisecond)
			select {
			case <-wctx.Done():
			case <-changed:
			case <-t.C:
			}
			t.Stop()
		}
	}
}

// clientTopics lists the visible application topics (internal topics are
// the broker's own).
func (g *Role) clientTopics() []*metav1.Topic {
	var out []*metav1.Topic
	for _, t := range g.meta.Cache().View().Topics() {
		if visible(t) && !t.GetConfig().GetInternal() {
			out = append(out, t)
		}
	}
	return out
}

func (g *Role) cmdList(out []byte) ([]byte, error) {
	if !g.meta.Cache().View().Ready() {
		return nil, errcode.ClusterMetadataUnavailable.New("topic metadata not synced with metad yet", "command", "LIST")
	}
	ts := g.clientTopics()
	out = wire.AppendOKInt(wire.AppendOK(out), "count", int64(len(ts)))
	out = append(out, " topics="...)
	for i, t := range ts {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, t.GetConfig().GetName()...)
	}
	return out, nil
}

func (g *Role) cmdMetadata(ctx context.Context, out []byte, r *wire.Request) ([]byte, error) {
	name, err := required(r, "topic")
	if err != nil {
		return nil, err
	}
	t, err := g.lookupTopic(ctx, name)
	if err != nil {
		return nil, err
	}
	c := t.GetConfig()
	out = wire.AppendOKField(wire.AppendOK(out), "topic", name)
	out = wire.AppendOKInt(out, "partitions", int64(c.GetPartitions()))
	// Every partition is served through a gateway, so the leader address a
	// client sees is this gateway's (any gateway routes to the real leader).
	out = append(out, " leaders="...)
	for i := range t.GetPartitions() {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, g.advertised()...)
	}
	out = append(out, " epochs="...)
	for i, p := range t.GetPartitions() {
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendUint(out, p.GetLeaderEpoch(), 10)
	}
	out = wire.AppendOKUint(out, "revision", c.GetRevision())
	out = wire.AppendOKInt(out, "replication_factor", int64(c.GetReplicationFactor()))
	out = wire.AppendOKBool(out, "idempotent", c.GetIdempotent())
	out = wire.AppendOKBool(out, "event_sourcing", c.GetEventSourcing())
	out = wire.AppendOKField(out, "cleanup_policy", c.GetCleanupPolicy())
	out = wire.AppendOKField(out, "partitioner", c.GetPartitioner())
	out = wire.AppendOKField(out, "auth_policy", c.GetAuthPolicy())
	out = wire.AppendOKField(out, "read_acl", c.GetReadAcl())
	out = wire.AppendOKField(out, "write_acl", c.GetWriteAcl())
	out = wire.AppendOKInt(out, "retention_hours", c.GetRetentionHours())
	out = wire.AppendOKInt(out, "retention_bytes", c.GetRetentionBytes())
	return wire.AppendOKUint(out, "lifecycle_epoch", c.GetLifecycleEpoch()), nil
}

type describeJSON struct {
	Status     string              `json:"status"`
	Topic      string              `json:"topic"`
	Definition describeDefinition  `json:"definition"`
	Partitions []describePartition `json:"partitions"`
}

type describeDefinition struct {
	Name              string         `json:"name"`
	Revision          uint64         `json:"revision"`
	Partitions        int32          `json:"partitions"`
	ReplicationFactor int32          `json:"replication_factor"`
	Idempotent        bool           `json:"idempotent"`
	EventSourcing     bool           `json:"event_sourcing"`
	Policy            describePolicy `json:"policy"`
}

type describePolicy struct {
	CleanupPolicy string `json:"cleanup_policy"`
	Partitioner   string `json:"partitioner"`
	AuthPolicy    string `json:"auth_policy"`
}

type describePartition struct {
	ID       int32    `json:"id"`
	Leader   string   `json:"leader"`
	Replicas []string `json:"replicas"`
	ISR      []string `json:"isr"`
	LEO      uint64   `json:"leo"`
	HWM      uint64   `json:"hwm"`
}

func (g *Role) cmdDescribe(ctx context.Context, out []byte, r *wire.Request) ([]byte, error) {
	name, err := required(r, "topic")
	if err != nil {
		return nil, err
	}
	t, err := g.lookupTopic(ctx, name)
	if err != nil {
		return nil, err
	}
	c := t.GetConfig()
	// Offsets are best effort: a partition whose leader is unreachable is
	// described with its committed HWM checkpoint.
	offs, _ := g.offsets(ctx, t, nil)
	d := describeJSON{Status: "OK", Topic: name, Definition: describeDefinition{
		Name: c.GetName(), Revision: c.GetRevision(), Partitions: c.GetPartitions(), ReplicationFactor: c.GetReplicationFactor(),
		Idempotent: c.GetIdempotent(), EventSourcing: c.GetEventSourcing(),
		Policy: describePolicy{CleanupPolicy: c.GetCleanupPolicy(), Partitioner: c.GetPartitioner(), AuthPolicy: c.GetAuthPolicy()},
	}, Partitions: []describePartition{}}
	for _, p := range t.GetPartitions() {
		dp := describePartition{ID: p.GetId(), Replicas: nonNil(p.GetReplicas()), ISR: nonNil(p.GetIsr()), LEO: p.GetCommittedHwm(), HWM: p.GetCommittedHwm()}
		if p.GetLeader() != "" {
			dp.Leader = g.advertised()
		}
		if o, ok := offs[p.GetId()]; ok && o.GetError() == nil {
			dp.LEO, dp.HWM = o.GetLeo(), o.GetHwm()
		}
		d.Partitions = append(d.Partitions, dp)
	}
	b, err := json.Marshal(d)
	if err != nil {
		return nil, errcode.Internal.New("describe: " + err.Error())
	}
	return append(out, b...), nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// offsets asks each partition leader for the offsets of its partitions of t
// (all partitions when parts is nil).
func (g *Role) offsets(ctx context.Context, t *metav1.Topic, parts []int32) (map[int32]*partitionv1.PartitionOffsets, error) {
	if parts == nil {
		for _, p := range t.GetPartitions() {
			parts = append(parts, p.GetId())
		}
	}
	byLeader := map[string][]int32{}
	for _, id := range parts {
		if int(id) >= len(t.GetPartitions()) {
			continue
		}
		leader := t.GetPartitions()[id].GetLeader()
		byLeader[leader] = append(byLeader[leader], id)
	}
	out := make(map[int32]*partitionv1.PartitionOffsets, len(parts))
	var firstErr error
	for leader, ids := range byLeader {
		if leader == "" {
			if firstErr == nil {
				firstErr = errcode.LeaderNotFound.New("partition has no leader", "topic", t.GetConfig().GetName(), "partition", strconv.Itoa(int(ids[0])))
			}
			continue
		}
		pc, err := g.partitionClient(leader)
		if err == nil {
			var resp *partitionv1.ListOffsetsResponse
			resp, err = pc.ListOffsets(ctx, &partitionv1.ListOffsetsRequest{Topic: t.GetConfig().GetName(), Partitions: ids})
			if err == nil {
				for _, o := range resp.GetPartitions() {
					out[o.GetPartition()] = o
					// A per-partition NOT_LEADER or lifecycle_epoch_pending
					// (truncate not applied yet) is worth a retry too.
					if e := o.GetError(); e != nil && firstErr == nil && reroutable(errcode.FromProto(e)) {
						firstErr = errcode.FromProto(e)
					}
				}
				continue
			}
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return out, firstErr
}

func (g *Role) cmdListOffsets(ctx context.Context, out []byte, r *wire.Request) ([]byte, error) {
	name, ok := r.Get("topic")
	if !ok || name == "" {
		return nil, errcode.MissingTopic.New("topic is required", "command", "LIST_OFFSETS")
	}
	part, hasPart, err := partitionParam(r, "LIST_OFFSETS")
	if err != nil {
		return nil, err
	}
	t, err := g.lookupTopic(ctx, name)
	if err != nil {
		return nil, err
	}
	var parts []int32
	if hasPart {
		if int(part) >= len(t.GetPartitions()) {
			return nil, errcode.PartitionNotFound.New("partition does not exist", "topic", name, "partition", strconv.Itoa(int(part)))
		}
		parts = []int32{part}
	} else {
		for _, p := range t.GetPartitions() {
			parts = append(parts, p.GetId())
		}
	}
	var offs map[int32]*partitionv1.PartitionOffsets
	err = g.retryRoute(ctx, func() error {
		t, err = g.lookupTopic(ctx, name)
		if err != nil {
			return err
		}
		offs, err = g.offsets(ctx, t, parts)
		return err
	})
	if err != nil {
		return nil, err
	}
	out = wire.AppendOKField(wire.AppendOK(out), "topic", name)
	out = wire.AppendOKInt(out, "partitions", int64(len(t.GetPartitions())))
	out = append(out, " offsets="...)
	for i, id := range parts {
		o, ok := offs[id]
		if !ok {
			return nil, errcode.PartitionNotFound.New("partition offsets unavailable", "topic", name, "partition", strconv.Itoa(int(id)))
		}
		if e := o.GetError(); e != nil {
			return nil, errcode.FromProto(e)
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, 'P')
		out = strconv.AppendInt(out, int64(id), 10)
		out = strconv.AppendUint(append(out, ":earliest="...), o.GetEarliest(), 10)
		out = strconv.AppendUint(append(out, ":latest="...), o.GetLatest(), 10)
		out = strconv.AppendUint(append(out, ":leo="...), o.GetLeo(), 10)
		out = strconv.AppendUint(append(out, ":hwm="...), o.GetHwm(), 10)
	}
	return out, nil
}

type clusterJSON struct {
	Brokers                   clusterBrokers     `json:"brokers"`
	RaftLeader                clusterRaftLeader  `json:"raft_leader"`
	RaftServers               []clusterRaft      `json:"raft_servers"`
	Partitions                []clusterPartition `json:"partitions"`
	LeaderlessPartitions      int32              `json:"leaderless_partitions"`
	UnderReplicatedPartitions int32              `json:"under_replicated_partitions"`
	Revision                  uint64             `json:"revision"`
}

type clusterBrokers struct {
	Active   []clusterNode `json:"active"`
	Inactive []clusterNode `json:"inactive"`
}

type clusterNode struct {
	ID            string `json:"id"`
	Role          string `json:"role"`
	RPCAddress    string `json:"rpc_address"`
	ClientAddress string `json:"client_address,omitempty"`
}

type clusterRaftLeader struct {
	ID      string `json:"id"`
	Address string `json:"address"`
}

type clusterRaft struct {
	ID       string `json:"id"`
	Address  string `json:"address"`
	Suffrage string `json:"suffrage"`
}

type clusterPartition struct {
	Topic       string   `json:"topic"`
	Partition   int32    `json:"partition"`
	Leader      string   `json:"leader"`
	LeaderEpoch uint64   `json:"leader_epoch"`
	HWM         uint64   `json:"hwm"`
	Replicas    []string `json:"replicas"`
	ISR         []string `json:"isr"`
}

func (g *Role) cmdClusterStatus(ctx context.Context, out []byte) ([]byte, error) {
	resp, err := g.meta.ClusterStatus(ctx)
	if err != nil {
		return nil, err
	}
	cs := clusterJSON{Brokers: clusterBrokers{Active: []clusterNode{}, Inactive: []clusterNode{}}, RaftServers: []clusterRaft{},
		Partitions: []clusterPartition{}, RaftLeader: clusterRaftLeader{ID: resp.GetRaftLeaderId(), Address: resp.GetRaftLeaderAddress()},
		LeaderlessPartitions: resp.GetOfflinePartitions(), UnderReplicatedPartitions: resp.GetUnderReplicatedPartitions(), Revision: resp.GetRevision()}
	for _, n := range resp.GetNodes() {
		cn := clusterNode{ID: n.GetId(), Role: roleName(n.GetRole()), RPCAddress: n.GetRpcAddress(), ClientAddress: n.GetClientAddress()}
		if n.GetLive() {
			cs.Brokers.Active = append(cs.Brokers.Active, cn)
		} else {
			cs.Brokers.Inactive = append(cs.Brokers.Inactive, cn)
		}
	}
	for _, s := range resp.GetRaftServers() {
		cs.RaftServers = append(cs.RaftServers, clusterRaft{ID: s.GetId(), Address: s.GetAddress(), Suffrage: s.GetSuffrage()})
	}
	for _, t := range resp.GetTopics() {
		if !visible(t) {
			continue
		}
		for _, p := range t.GetPartitions() {
			cs.Partitions = append(cs.Partitions, clusterPartition{Topic: t.GetConfig().GetName(), Partition: p.GetId(), Leader: p.GetLeader(),
				LeaderEpoch: p.GetLeaderEpoch(), HWM: p.GetCommittedHwm(), Replicas: nonNil(p.GetReplicas()), ISR: nonNil(p.GetIsr())})
		}
	}
	b, err := json.Marshal(cs)
	if err != nil {
		return nil, errcode.MarshalClusterStatusFailed.New("cluster status", "reason", err.Error())
	}
	return append(wire.AppendOKField(wire.AppendOK(out), "cluster", ""), b...), nil
}

func roleName(r metav1.NodeRole) string {
	return strings.ToLower(strings.TrimPrefix(r.String(), "NODE_ROLE_"))
}

func (g *Role) cmdElectLeader(ctx context.Context, out []byte, r *wire.Request) ([]byte, error) {
	name, err := required(r, "topic")
	if err != nil {
		return nil, err
	}
	part, ok, err := partitionParam(r, "ELECT_LEADER")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errcode.Lookup("missing_partition").New("partition is required", "param", "partition")
	}
	broker, ok := r.Get("broker")
	if !ok || broker == "" {
		return nil, errcode.MissingBroker.New("broker is required", "command", "ELECT_LEADER")
	}
	resp, err := g.meta.ElectLeader(ctx, &metav1.ElectLeaderRequest{Topic: name, Partition: part, BrokerId: broker})
	if err != nil {
		return nil, err
	}
	out = wire.AppendOKField(wire.AppendOK(out), "topic", name)
	out = wire.AppendOKInt(out, "partition", int64(part))
	out = wire.AppendOKField(out, "previous_leader", resp.GetPreviousLeader())
	out = wire.AppendOKField(out, "leader", resp.GetLeader())
	out = wire.AppendOKUint(out, "leader_epoch", resp.GetLeaderEpoch())
	return wire.AppendOKBool(out, "changed", resp.GetChanged()), nil
}

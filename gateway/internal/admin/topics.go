package admin

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/strataio/strata/gateway/internal/command"
	"github.com/strataio/strata/gateway/internal/param"
	"github.com/strataio/strata/gateway/internal/route"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/metaclient"
	"github.com/strataio/strata/libs/wire"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// create is CREATE: create a topic or patch the given fields of one.
func (a *Handlers) create(ctx context.Context, c *command.Call) ([]byte, error) {
	p := param.Read(c.Req, c.Command)
	name := p.Required(param.Topic)
	if p.Err() == nil && !validTopicName(name) {
		p.Check(errcode.InvalidTopicName.New("topic name violates the portable name contract", "topic", param.Clip(name)))
	}
	req := &metav1.CreateTopicRequest{Name: name}
	req.Partitions = optInt32(&p, "partitions", 1, 1<<20)
	req.ReplicationFactor = optInt32(&p, "replication_factor", 1, 64)
	req.Idempotent = optBool(&p, "idempotent")
	req.EventSourcing = optBool(&p, "event_sourcing")
	req.AggregateReplay = optBool(&p, "aggregate_replay")
	req.RetentionHours = optInt64(&p, "retention_hours", 0, 1<<62)
	req.RetentionBytes = optInt64(&p, "retention_bytes", 0, 1<<62)
	for _, s := range []struct {
		key string
		dst **string
	}{{"cleanup_policy", &req.CleanupPolicy}, {"partitioner", &req.Partitioner}, {"auth_policy", &req.AuthPolicy},
		{"read_acl", &req.ReadAcl}, {"write_acl", &req.WriteAcl}, {"min_in_sync_replicas", &req.MinInSyncReplicas}} {
		if v, ok := c.Req.Get(s.key); ok {
			*s.dst = &v
		}
	}
	if v := req.CleanupPolicy; v != nil {
		switch *v {
		case "delete", "compact", "delete,compact":
		default:
			p.Check(errcode.InvalidTopicPolicy.New("cleanup_policy must be delete, compact or delete,compact", "topic", name, "cleanup_policy", param.Clip(*v)))
		}
	}
	if v := req.Partitioner; v != nil && *v != "hash_key" && *v != "round_robin" {
		p.Check(param.Invalid("partitioner", *v, "must be hash_key or round_robin"))
	}
	if v := req.AuthPolicy; v != nil {
		switch *v {
		case "open", "deny_write", "deny_read", "acl":
		default:
			p.Check(param.Invalid("auth_policy", *v, "must be open, deny_write, deny_read or acl"))
		}
	}
	if v := req.MinInSyncReplicas; v != nil {
		p.Check(checkMinISR(*v))
	}
	resp, err := toMetad(ctx, a.r, p.Err(), metav1.MetadataServiceClient.CreateTopic, req)
	if err != nil {
		return nil, err
	}
	t := resp.GetTopic()
	a.waitTopic(ctx, revisionAtLeast(name, t.GetConfig().GetRevision()))
	return appendTopicConfig(wire.AppendOK(c.Out), t.GetConfig(), resp.GetEffectiveMinInSyncReplicas()), nil
}

func optInt32(p *param.Reader, key string, lo, hi int64) *int32 {
	if v, ok := p.OptIntIfSet(key, lo, hi); ok {
		n := int32(v)
		return &n
	}
	return nil
}

func optInt64(p *param.Reader, key string, lo, hi int64) *int64 {
	if v, ok := p.OptIntIfSet(key, lo, hi); ok {
		return &v
	}
	return nil
}

func optBool(p *param.Reader, key string) *bool {
	if b, ok := p.OptBool(key, false); ok {
		return &b
	}
	return nil
}

// checkMinISR accepts a positive number or "default".
func checkMinISR(v string) error {
	if v != "default" {
		if n, err := strconv.Atoi(v); err != nil || n < 1 {
			return param.Invalid("min_in_sync_replicas", v, "must be a positive number or default")
		}
	}
	return nil
}

// validTopicName applies the portable name contract of spec 2.1.
func validTopicName(s string) bool {
	if len(s) == 0 || len(s) > 249 || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == '=') {
			return false
		}
	}
	return true
}

// appendTopicConfig writes the CREATE reply fields (WIRE-V2 9.4 order).
func appendTopicConfig(out []byte, c *metav1.TopicConfig, effMinISR int32) []byte {
	out = wire.AppendOKField(out, "topic", c.GetName())
	out = wire.AppendOKInt(out, "partitions", int64(c.GetPartitions()))
	out = appendTopicPolicy(out, c)
	out = wire.AppendOKUint(out, "revision", c.GetRevision())
	out = wire.AppendOKInt(out, "replication_factor", int64(c.GetReplicationFactor()))
	out = wire.AppendOKBool(out, "idempotent", c.GetIdempotent())
	out = wire.AppendOKBool(out, "event_sourcing", c.GetEventSourcing())
	out = wire.AppendOKUint(out, "lifecycle_epoch", c.GetLifecycleEpoch())
	out = appendMinISR(out, c)
	return wire.AppendOKInt(out, "effective_min_in_sync_replicas", int64(effMinISR))
}

// appendTopicPolicy writes the policy fields CREATE and METADATA answer in
// the same order.
func appendTopicPolicy(out []byte, c *metav1.TopicConfig) []byte {
	out = wire.AppendOKField(out, "cleanup_policy", c.GetCleanupPolicy())
	out = wire.AppendOKField(out, "partitioner", c.GetPartitioner())
	out = wire.AppendOKField(out, "auth_policy", c.GetAuthPolicy())
	out = wire.AppendOKField(out, "read_acl", c.GetReadAcl())
	out = wire.AppendOKField(out, "write_acl", c.GetWriteAcl())
	out = wire.AppendOKInt(out, "retention_hours", c.GetRetentionHours())
	return wire.AppendOKInt(out, "retention_bytes", c.GetRetentionBytes())
}

func appendMinISR(out []byte, c *metav1.TopicConfig) []byte {
	if c.MinInSyncReplicas == nil {
		return wire.AppendOKField(out, "min_in_sync_replicas", "default")
	}
	return wire.AppendOKInt(out, "min_in_sync_replicas", int64(c.GetMinInSyncReplicas()))
}

// alterTopicConfig is ALTER_TOPIC_CONFIG: replace a topic's min ISR override.
func (a *Handlers) alterTopicConfig(ctx context.Context, c *command.Call) ([]byte, error) {
	p := param.Read(c.Req, c.Command)
	name, v := p.Required(param.Topic), p.Required(param.MinInSyncReplicas)
	p.Check(checkMinISR(v))
	resp, err := toMetad(ctx, a.r, p.Err(), metav1.MetadataServiceClient.AlterTopicConfig,
		&metav1.AlterTopicConfigRequest{Name: name, MinInSyncReplicas: v})
	if err != nil {
		return nil, err
	}
	cfg := resp.GetTopic().GetConfig()
	rev := cfg.GetRevision()
	a.waitTopic(ctx, revisionAtLeast(name, rev))
	out := wire.AppendOKField(wire.AppendOK(c.Out), "topic", name)
	out = appendMinISR(out, cfg)
	out = wire.AppendOKInt(out, "effective_min_in_sync_replicas", int64(resp.GetEffectiveMinInSyncReplicas()))
	return wire.AppendOKUint(out, "revision", rev), nil
}

// refuseInternal refuses a DELETE or TRUNCATE (verb: deleted, truncated)
// of the internal offsets topic, which only the broker writes.
func refuseInternal(name, verb string) error {
	if name == internalOffsetsTopic {
		return errcode.InternalTopicDeleteForbidden.New("the internal offsets topic cannot be "+verb, "topic", name)
	}
	return nil
}

// ifExists reads DELETE's if_exists flag: a value given but not a boolean
// (even an empty one) is invalid_if_exists.
func ifExists(r *wire.Request) (bool, error) {
	v, ok := r.Get("if_exists")
	if !ok {
		return false, nil
	}
	b, err := strconv.ParseBool(strings.ToLower(v))
	if err != nil {
		return false, errcode.InvalidIfExists.New("if_exists must be true or false", "value", param.Clip(v))
	}
	return b, nil
}

// delete is DELETE: the topic is gone for clients at once; node-local
// cleanup follows asynchronously.
func (a *Handlers) delete(ctx context.Context, c *command.Call) ([]byte, error) {
	p := param.Read(c.Req, c.Command)
	name := p.Required(param.Topic)
	ie, ieErr := ifExists(c.Req)
	p.Check(ieErr)
	p.Check(refuseInternal(name, "deleted"))
	resp, err := toMetad(ctx, a.r, p.Err(), metav1.MetadataServiceClient.DeleteTopic, &metav1.DeleteTopicRequest{Name: name, IfExists: ie})
	if err != nil {
		return nil, err
	}
	pending := resp.GetCleanupPending()
	if resp.GetDeleted() || pending {
		a.waitTopic(ctx, func(v *metaclient.View) bool {
			t, ok := v.Topic(name)
			return !ok || !route.Visible(t) && len(t.GetCleanupPendingNodes()) == 0
		})
		pending = a.cleanupPending(name, false)
	}
	out := wire.AppendOKField(wire.AppendOK(c.Out), "topic", name)
	out = wire.AppendOKBool(out, "deleted", resp.GetDeleted())
	if pending {
		out = wire.AppendOKBool(out, "cleanup_pending", true)
	}
	return out, nil
}

// truncate is TRUNCATE: a new lifecycle epoch with empty partitions, guarded
// by the topic revision the client saw.
func (a *Handlers) truncate(ctx context.Context, c *command.Call) ([]byte, error) {
	p := param.Read(c.Req, c.Command)
	name, rev := p.Required(param.Topic), p.RequiredUint(param.ExpectedRevision)
	p.Check(refuseInternal(name, "truncated"))
	resp, err := toMetad(ctx, a.r, p.Err(), metav1.MetadataServiceClient.TruncateTopic,
		&metav1.TruncateTopicRequest{Name: name, ExpectedRevision: rev})
	if err != nil {
		return nil, err
	}
	cfg := resp.GetTopic().GetConfig()
	newRev := cfg.GetRevision()
	a.waitTopic(ctx, revisionAtLeast(name, newRev))
	a.waitTruncated(ctx, name, len(resp.GetTopic().GetPartitions()), cfg.GetLifecycleEpoch())
	pending := resp.GetCleanupPending()
	if pending {
		a.waitTopic(ctx, func(v *metaclient.View) bool {
			t, ok := v.Topic(name)
			return !ok || t.GetConfig().GetLifecycleEpoch() != cfg.GetLifecycleEpoch() || len(t.GetCleanupPendingNodes()) == 0
		})
		pending = a.cleanupPending(name, true)
	}
	out := wire.AppendOKField(wire.AppendOK(c.Out), "topic", name)
	out = wire.AppendOKBool(out, "truncated", true)
	out = wire.AppendOKUint(out, "revision", newRev)
	out = wire.AppendOKUint(out, "lifecycle_epoch", cfg.GetLifecycleEpoch())
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
func (a *Handlers) cleanupPending(name string, live bool) bool {
	t, ok := a.r.Cache().View().Topic(name)
	return ok && route.Visible(t) == live && len(t.GetCleanupPendingNodes()) > 0
}

// waitTruncated waits briefly until every partition leader serves the
// topic's new lifecycle epoch, so that "leo=0 hwm=0" in the TRUNCATE answer
// holds for the client's next LIST_OFFSETS or CONSUME: partition servers
// apply a truncate asynchronously from metad's watch. A fetch at the new
// epoch answers lifecycle_epoch_pending (or another reroutable error) until
// the leader replaced its log. Like waitTopic it gives up after a few
// seconds and answers anyway: the truncate is committed in metad, and reads
// stay fenced by the lifecycle epoch.
func (a *Handlers) waitTruncated(ctx context.Context, name string, parts int, epoch uint64) {
	wctx, cancel := context.WithTimeout(ctx, topicChangeWait)
	defer cancel()
	for id := int32(0); int(id) < parts; id++ {
		fetchAtEpoch := func(*metav1.Topic) *partitionv1.FetchRequest {
			return &partitionv1.FetchRequest{Topic: name, Partition: id, Offset: 0, MaxRecords: 1, LifecycleEpoch: epoch}
		}
		for wctx.Err() == nil {
			changed := a.r.Cache().Changed()
			_, err := route.CallLeader(wctx, a.r, name, id, partitionv1.PartitionServiceClient.Fetch, fetchAtEpoch)
			if err == nil || !route.Reroutable(err) {
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

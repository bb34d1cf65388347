package partitiond

import (
	"context"
	"slices"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/metaclient"
	"github.com/strataio/strata/libs/pace"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"

	"github.com/strataio/strata/partitiond/internal/partition"
)

type pkey struct {
	topic string
	id    int32
}

// assignment is one partition metad places on this node.
type assignment struct {
	topic string
	id    int32
	spec  partition.PartitionSpec
}

// assigned lists the partitions of ACTIVE topics whose replicas include this
// node (empty before the first snapshot).
func (r *Role) assigned(v *metaclient.View) []assignment {
	if !v.Ready() {
		return nil
	}
	var out []assignment
	for _, t := range v.Topics() {
		c := t.GetConfig()
		if c.GetState() == metav1.TopicState_TOPIC_STATE_DELETING {
			continue
		}
		for _, ps := range t.GetPartitions() {
			if !slices.Contains(ps.GetReplicas(), r.env.NodeID) {
				continue
			}
			out = append(out, assignment{topic: c.GetName(), id: ps.GetId(), spec: partition.PartitionSpec{
				Topic: c.GetName(), Partition: ps.GetId(), LifecycleEpoch: c.GetLifecycleEpoch(),
				LeaderEpoch: ps.GetLeaderEpoch(), Config: topicConfig(c),
			}})
		}
	}
	return out
}

func topicConfig(c *metav1.TopicConfig) partition.TopicConfig {
	return partition.TopicConfig{
		CleanupPolicy:  c.GetCleanupPolicy(),
		RetentionHours: c.GetRetentionHours(),
		RetentionBytes: c.GetRetentionBytes(),
		Idempotent:     c.GetIdempotent(),
	}
}

// reconciler keeps the local partitions in line with metad's view. It runs
// on every cache change and, after a failed step, again after a backoff, so
// a failed create, truncate, delete or cleanup report is retried until it
// succeeds or metad's view moves on.
type reconciler struct {
	r    *Role
	kick chan struct{}

	// applied is the last spec CreatePartition accepted per partition, so
	// unchanged assignments cost nothing on later passes.
	applied map[pkey]partition.PartitionSpec
	// reported remembers the cleanup reports metad accepted (topic →
	// "delete"/"truncate" and lifecycle epoch) until the view catches up.
	reported map[string]reportKey
	// orphans are local partitions whose topic the view lacks (warned once).
	orphans map[pkey]bool
}

type reportKey struct {
	kind  string
	epoch uint64
}

func newReconciler(r *Role) *reconciler {
	return &reconciler{r: r, kick: make(chan struct{}, 1),
		applied: map[pkey]partition.PartitionSpec{}, reported: map[string]reportKey{}, orphans: map[pkey]bool{}}
}

// poke asks for a pass soon (a request found its partition not open yet).
func (c *reconciler) poke() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *reconciler) run(ctx context.Context) {
	cache := c.r.meta.Cache()
	backoff := pace.Backoff{Initial: c.r.cfg.ReconcileRetry, Max: 30 * time.Second}
	for ctx.Err() == nil {
		changed := cache.Changed()
		var retry <-chan time.Time
		var timer *time.Timer
		if !c.pass(ctx, cache.View()) {
			timer = time.NewTimer(backoff.Next())
			retry = timer.C
		} else {
			backoff.Reset()
		}
		select {
		case <-ctx.Done():
		case <-changed:
		case <-c.kick:
		case <-retry:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// pass applies one view; it reports whether every step succeeded.
func (c *reconciler) pass(ctx context.Context, v *metaclient.View) bool {
	st, err := c.r.storage()
	if err != nil || !v.Ready() {
		return true // nothing to apply yet; a change wakes the loop
	}
	log := c.r.env.Logger
	self := c.r.env.NodeID
	ok := true

	// 1. Host every assigned partition at metad's lifecycle and leader
	// epochs (CreatePartition truncates a partition whose lifecycle epoch
	// advanced and fences the older one).
	want := map[pkey]bool{}
	assigned := c.r.assigned(v)
	defer c.r.applyRoles(st, v, assigned)
	for _, a := range assigned {
		k := pkey{a.topic, a.id}
		want[k] = true
		if prev, seen := c.applied[k]; seen && prev == a.spec {
			if _, err := st.Partition(a.topic, a.id); err == nil {
				continue
			}
		}
		if _, err := st.CreatePartition(ctx, a.spec); err != nil {
			log.Warn("assignment: create partition failed", "topic", a.topic, "partition", a.id,
				"lifecycle_epoch", a.spec.LifecycleEpoch, "err", err)
			delete(c.applied, k)
			ok = false
			continue
		}
		c.applied[k] = a.spec
	}

	for _, t := range v.Topics() {
		cfg := t.GetConfig()
		name := cfg.GetName()
		pending := slices.Contains(t.GetCleanupPendingNodes(), self)
		switch {
		case cfg.GetState() == metav1.TopicState_TOPIC_STATE_DELETING:
			// 2. Deleted topic: remove every local partition of it, then
			// report (only when metad waits for this node).
			done := true
			n := max(int32(len(t.GetPartitions())), cfg.GetPartitions())
			for _, p := range st.Partitions() {
				if p.Topic() == name {
					n = max(n, p.ID()+1)
				}
			}
			for id := int32(0); id < n; id++ {
				c.r.forget(name, id)
				complete, err := st.DeletePartition(ctx, name, id)
				if err != nil || !complete {
					log.Warn("assignment: delete partition incomplete", "topic", name, "partition", id, "err", err)
					done = false
				}
				delete(c.applied, pkey{name, id})
			}
			if !done {
				ok = false
				continue
			}
			if pending && !c.report(ctx, name, reportKey{"delete", cfg.GetLifecycleEpoch()}) {
				ok = false
			}
		case pending:
			// 3. Truncated topic: the cleanup of the replaced logs must be
			// complete on every assigned partition before the report.
			done := true
			for _, ps := range t.GetPartitions() {
				if !slices.Contains(ps.GetReplicas(), self) {
					continue
				}
				complete, err := st.TruncatePartition(ctx, name, ps.GetId(), cfg.GetLifecycleEpoch())
				if err != nil || !complete {
					log.Warn("assignment: truncate cleanup incomplete", "topic", name, "partition", ps.GetId(), "err", err)
					done = false
				}
			}
			if !done {
				ok = false
				continue
			}
			if !c.report(ctx, name, reportKey{"truncate", cfg.GetLifecycleEpoch()}) {
				ok = false
			}
		}
	}

	// 4. Partitions of ACTIVE topics this node no longer replicates. A topic
	// absent from the view keeps its data: metad removes a topic only after
	// this node reported its cleanup, so absence means a view older than
	// the local partition, never a deletion.
	for _, p := range st.Partitions() {
		k := pkey{p.Topic(), p.ID()}
		if want[k] {
			continue
		}
		t, found := v.Topic(p.Topic())
		if !found {
			if !c.orphans[k] {
				c.orphans[k] = true
				log.Warn("assignment: local partition of a topic metad does not list; kept (metad removes topics only after this node's cleanup report)",
					"topic", k.topic, "partition", k.id, "lifecycle_epoch", p.LifecycleEpoch(), "revision", v.Revision)
			}
			continue
		}
		delete(c.orphans, k)
		if t.GetConfig().GetState() == metav1.TopicState_TOPIC_STATE_DELETING ||
			t.GetConfig().GetLifecycleEpoch() < p.LifecycleEpoch() {
			continue
		}
		c.r.forget(k.topic, k.id)
		complete, err := st.DeletePartition(ctx, k.topic, k.id)
		if err != nil || !complete {
			log.Warn("assignment: removing unassigned partition incomplete", "topic", k.topic, "partition", k.id, "err", err)
			ok = false
		}
		delete(c.applied, k)
	}
	for name := range c.reported {
		if t, found := v.Topic(name); !found || !slices.Contains(t.GetCleanupPendingNodes(), self) {
			delete(c.reported, name)
		}
	}
	return ok
}

// report sends ReportCleanup once per (topic, kind, epoch) until the view
// shows this node no longer pending; it reports whether that is settled.
func (c *reconciler) report(ctx context.Context, topic string, k reportKey) bool {
	if c.reported[topic] == k {
		return true
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := c.r.meta.ReportCleanup(rctx, &metav1.ReportCleanupRequest{NodeId: c.r.env.NodeID, Topic: topic, LifecycleEpoch: k.epoch})
	switch {
	case err == nil:
	case errcode.CodeOf(err) == errcode.StaleLifecycleEpoch.Name():
		// metad moved on (a newer truncate); the next view says what to do.
	default:
		c.r.env.Logger.Warn("assignment: cleanup report failed", "topic", topic, "kind", k.kind, "lifecycle_epoch", k.epoch, "err", err)
		return false
	}
	c.r.env.Logger.Info("node-local cleanup reported", "topic", topic, "kind", k.kind, "lifecycle_epoch", k.epoch)
	c.reported[topic] = k
	return true
}

// checkpointLoop records the committed HWM of every partition this node
// leads with metad (spec 7/9 committed-HWM provenance) when it advanced.
func (r *Role) checkpointLoop(ctx context.Context) {
	sent := map[pkey][2]uint64{} // lifecycle epoch, hwm
	pace.Every(ctx, r.cfg.HwmCheckpointInterval, func() { r.checkpointOnce(ctx, sent) })
}

func (r *Role) checkpointOnce(ctx context.Context, sent map[pkey][2]uint64) {
	st, err := r.storage()
	v := r.meta.Cache().View()
	if err != nil || !v.Ready() {
		return
	}
	for _, p := range st.Partitions() {
		k := pkey{p.Topic(), p.ID()}
		t, ps, ok := v.Partition(k.topic, k.id)
		if !ok || ps.GetLeader() != r.env.NodeID || t.GetConfig().GetLifecycleEpoch() != p.LifecycleEpoch() {
			continue
		}
		o, err := p.ListOffsets()
		if err != nil {
			continue
		}
		epoch := p.LifecycleEpoch()
		last := sent[k]
		if o.HWM <= ps.GetCommittedHwm() || (last[0] == epoch && o.HWM <= last[1]) {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = r.meta.CheckpointHwm(cctx, &metav1.CheckpointHwmRequest{Topic: k.topic, Partition: k.id,
			LeaderEpoch: ps.GetLeaderEpoch(), LifecycleEpoch: epoch, Hwm: o.HWM})
		cancel()
		if err != nil {
			r.env.Logger.Debug("hwm checkpoint failed", "topic", k.topic, "partition", k.id, "err", err)
			continue
		}
		sent[k] = [2]uint64{epoch, o.HWM}
	}
}

// compactionEligible is spec 4.4 rule 6 with metad's view: the topic is
// ACTIVE at the local lifecycle epoch, this node leads, every replica is
// live and in the ISR, and the log end equals the committed HWM.
func (r *Role) compactionEligible(f partition.CompactionFacts) (bool, string) {
	v := r.meta.Cache().View()
	if !v.Ready() {
		return false, "metadata_unavailable"
	}
	t, ps, ok := v.Partition(f.Topic, f.Partition)
	switch {
	case !ok || t.GetConfig().GetState() != metav1.TopicState_TOPIC_STATE_ACTIVE:
		return false, "topic_not_active"
	case t.GetConfig().GetLifecycleEpoch() != f.LifecycleEpoch:
		return false, "lifecycle_epoch_mismatch"
	case ps.GetLeader() != r.env.NodeID:
		return false, "not_leader"
	case len(ps.GetIsr()) != len(ps.GetReplicas()):
		return false, "replicas_not_in_sync"
	case f.LEO != f.HWM:
		return false, "hwm_behind_leo"
	}
	for _, id := range ps.GetReplicas() {
		if n, ok := v.Node(id); !ok || !n.GetLive() {
			return false, "replica_not_live"
		}
	}
	return true, ""
}

package coordinatord

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/strataio/strata/coordinatord/internal/group"
	"github.com/strataio/strata/coordinatord/internal/offsetlog"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/groups"
	"github.com/strataio/strata/libs/metaclient"
	"github.com/strataio/strata/libs/pace"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

func itoa(p int32) string { return strconv.FormatInt(int64(p), 10) }

type shardState int

const (
	shardLoading shardState = iota
	shardReady
	shardCorrupt
	shardFenced
)

// shard is one owned __consumer_offsets partition: its groups and writer.
// mu guards the state and the group map only (held briefly); each group's
// commands are serialised by its entry.
type shard struct {
	p      int32
	epoch  int64
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	state  shardState
	err    error
	log    *offsetlog.Log
	groups map[string]*entry
}

func (s *shard) stop() { s.cancel() }

func (s *shard) readyErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case shardReady:
		return nil
	case shardLoading:
		return errcode.CoordinatorNotAvailable.New("offsets partition is being replayed", "partition", itoa(s.p), "reason", "loading")
	case shardCorrupt:
		return errcode.CoordinatorNotAvailable.New("offsets partition replay failed: "+s.err.Error(), "partition", itoa(s.p), "reason", "corrupt")
	}
	return errcode.CoordinatorNotAvailable.New("offsets partition fenced by a newer owner", "partition", itoa(s.p), "reason", "fenced")
}

// ownershipLoop reconciles owned partitions with the ring on every metadata
// change (and periodically, to retry creating the topic).
func (r *Role) ownershipLoop(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		ch := r.meta.Cache().Changed()
		v := r.meta.Cache().View()
		r.reconcile(ctx, v)
		r.reconcileTxn(ctx, v)
		select {
		case <-ctx.Done():
			return
		case <-ch:
		case <-t.C:
		}
	}
}

func (r *Role) reconcile(ctx context.Context, v *metaclient.View) {
	if !v.Ready() {
		return
	}
	if _, ok := v.Topic(groups.OffsetsTopic); !ok {
		if r.offsetsPlaceable(v) == nil {
			r.ensureTopic(ctx)
		}
		return
	}
	owned := map[int32]bool{}
	for _, p := range r.owned(v) {
		owned[p] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if ctx.Err() != nil {
		return
	}
	for p, s := range r.shards {
		s.mu.Lock()
		fenced := s.state == shardFenced
		s.mu.Unlock()
		if !owned[p] || fenced {
			r.releaseLocked(s)
		}
	}
	for p := range owned {
		if _, ok := r.shards[p]; !ok {
			r.takeoverLocked(ctx, p, int64(v.Revision))
		}
	}
}

// offsetsPlaceable says why metad would refuse to create __consumer_offsets
// now: too few live partition servers for its replication factor. On a
// fresh cluster the partition servers register a moment after the
// coordinators; creating the topic waits for them instead of failing.
func (r *Role) offsetsPlaceable(v *metaclient.View) error {
	live := len(v.Nodes(metav1.NodeRole_NODE_ROLE_PARTITIOND, true))
	if live < int(r.cfg.OffsetsReplicationFactor) {
		return errcode.CoordinatorNotAvailable.New("__consumer_offsets does not exist yet: waiting for live partition servers",
			"live_partitiond", strconv.Itoa(live), "replication_factor", itoa(r.cfg.OffsetsReplicationFactor))
	}
	return nil
}

// ensureTopic creates __consumer_offsets once (in the background, retried
// by the next reconcile when it fails).
func (r *Role) ensureTopic(ctx context.Context) {
	r.mu.Lock()
	if r.creating {
		r.mu.Unlock()
		return
	}
	r.creating = true
	r.mu.Unlock()
	r.Go(func(context.Context) {
		defer func() {
			r.mu.Lock()
			r.creating = false
			r.mu.Unlock()
		}()
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		policy := "compact"
		parts, rf := r.cfg.OffsetsPartitions, r.cfg.OffsetsReplicationFactor
		// cleanup_policy compact alone never deletes by age or size, which
		// is the spec's "unlimited retention" for this topic.
		_, err := r.meta.CreateTopic(cctx, &metav1.CreateTopicRequest{Name: groups.OffsetsTopic, Partitions: &parts,
			ReplicationFactor: &rf, CleanupPolicy: &policy, Internal: true})
		if err != nil && ctx.Err() == nil {
			r.env.Logger.Warn("create __consumer_offsets failed; will retry", "err", err)
		}
	})
}

// maxTakeovers bounds the takeover attempts (fence and replay of an offsets
// partition or a transaction shard) in progress at once. A starting node
// owns every partition of __consumer_offsets (16) and every transaction
// shard (50) at once; replaying all of them together multiplies the fetch
// buffers and RPCs in flight for no gain on a node with few cores
// (docs/performance.md, "Idle and peak RSS").
const maxTakeovers = 4

// takeoverSlotHold is how long one attempt keeps its slot: an attempt that
// takes longer (a long log, or a partition leader that stopped answering)
// gives its slot to the next one and goes on without, so a hung attempt
// delays the others by this much at most and never blocks them.
const takeoverSlotHold = 5 * time.Second

// takeoverSlot waits for one of maxTakeovers slots; release gives it back
// (at most once; it is also given back after takeoverSlotHold). ok is
// false when ctx ended first.
func (r *Role) takeoverSlot(ctx context.Context) (release func(), ok bool) {
	select {
	case r.takeovers <- struct{}{}:
	case <-ctx.Done():
		return nil, false
	}
	var once sync.Once
	give := func() { once.Do(func() { <-r.takeovers }) }
	t := time.AfterFunc(takeoverSlotHold, give)
	return func() { t.Stop(); give() }, true
}

// takeoverLocked starts owning partition p: fence, replay, then serve.
func (r *Role) takeoverLocked(ctx context.Context, p int32, epoch int64) {
	sctx, cancel := context.WithCancel(ctx)
	s := &shard{p: p, epoch: epoch, cancel: cancel, done: make(chan struct{}), groups: map[string]*entry{}}
	r.shards[p] = s
	r.env.Logger.Info("taking over offsets partition", "partition", p, "epoch", epoch)
	r.Go(func(context.Context) {
		defer close(s.done)
		r.runTakeover(sctx, s)
	})
}

func (r *Role) runTakeover(ctx context.Context, s *shard) {
	backoff := pace.Backoff{Initial: 50 * time.Millisecond, Max: 2 * time.Second}
	for ctx.Err() == nil {
		start := time.Now()
		// A retry uses the newest revision: an epoch partitiond already saw
		// cannot fence anything.
		release, ok := r.takeoverSlot(ctx)
		if !ok {
			return
		}
		s.epoch = max(s.epoch, int64(r.meta.Cache().View().Revision))
		log, rep, err := offsetlog.Takeover(ctx, r.logClient(s.p), offsetlog.Options{
			Topic: groups.OffsetsTopic, Partition: s.p, Epoch: s.epoch, Node: r.env.NodeID, Now: r.now,
			LifecycleEpoch: r.offsetsLifecycle(),
		})
		release()
		if err == nil {
			entries := make(map[string]*entry, len(rep.Groups))
			for name, g := range rep.Groups {
				entries[name] = newEntry(g)
			}
			s.mu.Lock()
			s.log, s.groups, s.state, s.err = log, entries, shardReady, nil
			s.mu.Unlock()
			r.mu.Lock()
			r.stats.groups += len(rep.Groups)
			r.stats.offsets += rep.Offsets
			r.stats.records += rep.Records
			r.stats.orphans += rep.Orphans
			r.mu.Unlock()
			r.m.replayDuration.Observe(time.Since(start).Seconds())
			r.env.Logger.Info("offsets partition replayed", "partition", s.p, "groups", len(rep.Groups),
				"offsets", rep.Offsets, "records", rep.Records, "orphans", rep.Orphans, "took", time.Since(start))
			return
		}
		if ctx.Err() != nil {
			return
		}
		e := errcode.From(err)
		if e.Code == errcode.StorageCorrupt.Name() {
			// Never serve a partial state: stay not ready until an operator
			// repairs the partition (a restart replays again).
			s.mu.Lock()
			s.state, s.err = shardCorrupt, e
			s.mu.Unlock()
			r.mu.Lock()
			r.stats.corrupt++
			r.mu.Unlock()
			r.env.Logger.Error("offsets partition replay found a corrupt record; readiness stays false", "partition", s.p, "err", e)
			return
		}
		if e.Field("reason") == "fenced" {
			s.mu.Lock()
			s.state, s.err = shardFenced, e
			s.mu.Unlock()
			return
		}
		r.env.Logger.Warn("offsets partition takeover failed; retrying", "partition", s.p, "err", e)
		if !backoff.Wait(ctx) {
			return
		}
	}
}

func (r *Role) offsetsLifecycle() func() uint64 {
	return func() uint64 {
		if t, ok := r.meta.Cache().View().Topic(groups.OffsetsTopic); ok {
			return t.GetConfig().GetLifecycleEpoch()
		}
		return 0
	}
}

// releaseLocked stops serving s and drops its groups (their new owner
// reports them; this node's metrics learn them from it, directory.go).
func (r *Role) releaseLocked(s *shard) {
	s.stop()
	delete(r.shards, s.p)
	s.mu.Lock()
	s.groups = nil
	if s.state == shardReady {
		s.state = shardFenced
		s.err = errcode.NotCoordinator.New("released")
	}
	s.mu.Unlock()
	r.env.Logger.Info("released offsets partition", "partition", s.p)
}

func topicsOf(g *group.Group) []string {
	if t := g.Topics(); len(t) > 0 {
		return t
	}
	return []string{g.Selector.Describe()}
}

// readyShards returns the shards serving now.
func (r *Role) readyShards() []*shard {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*shard, 0, len(r.shards))
	for _, p := range slices.Sorted(maps.Keys(r.shards)) {
		out = append(out, r.shards[p])
	}
	return out
}

// maintenanceLoop expires sessions and keeps expansions in line with the
// topics (growth, new pattern matches, deletion, truncation).
func (r *Role) maintenanceLoop(ctx context.Context) {
	pace.Every(ctx, r.cfg.ExpiryCheckInterval, func() {
		v := r.meta.Cache().View()
		for _, s := range r.readyShards() {
			r.maintainShard(ctx, s, v)
			r.resolveTxnMarks(ctx, s)
		}
		r.maintainTxns(ctx)
	})
}

func (r *Role) maintainShard(ctx context.Context, s *shard, v *metaclient.View) {
	entries, ready := s.snapshot()
	if !ready {
		return
	}
	topics := topicPartitions(v)
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		e := entries[name]
		e.mu.Lock()
		if ok, err := s.current(name, e); err != nil || !ok || e.g == nil {
			e.mu.Unlock()
			if err != nil {
				return
			}
			continue
		}
		now := r.now()
		g := e.g
		if gone := g.Expire(now, r.cfg.SessionTimeout); len(gone) > 0 {
			r.m.expired.Add(float64(len(gone)))
			r.env.Logger.Info("members expired", "group", name, "members", gone, "generation", g.Generation)
		}
		if v.Ready() {
			if err := r.refreshGroup(ctx, s, e, v, topics, now); err != nil {
				r.env.Logger.Warn("group refresh failed", "group", name, "err", err)
			}
		}
		e.mu.Unlock()
	}
}

// topicPartitions returns user topic -> partition count of v (ACTIVE only).
// viewWith returns a metadata view holding every topic sel names exactly,
// when metad has them. The cached view trails metad (the watch is
// asynchronous): a client that created a topic through one gateway and
// joins a group through another must not get topic_not_found, which is
// final. A name missing from the cache is asked of metad; when metad has
// it, the watch is awaited (bounded) until it delivers it. A name metad
// does not have leaves the cached view, and Expand answers topic_not_found.
func (r *Role) viewWith(ctx context.Context, sel group.Selector) (*metaclient.View, error) {
	v := r.meta.Cache().View()
	var missing []string
	for _, n := range append([]string{sel.Topic}, sel.Topics...) {
		if _, ok := v.Topic(n); n != "" && !ok {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 {
		return v, nil
	}
	for _, n := range missing {
		if _, err := r.meta.GetTopic(ctx, n); err != nil {
			if errcode.CodeOf(err) == errcode.TopicNotFound.Name() {
				return v, nil
			}
			return nil, err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, viewCatchUpTimeout)
	defer cancel()
	nv, err := r.meta.Cache().WaitFor(wctx, func(v *metaclient.View) bool {
		for _, n := range missing {
			if _, ok := v.Topic(n); !ok {
				return false
			}
		}
		return true
	})
	if err != nil {
		return nil, errcode.CoordinatorNotAvailable.New("metadata watch has not delivered the topic yet", "topic", missing[0], "reason", "metadata_lag")
	}
	return nv, nil
}

// viewCatchUpTimeout bounds the wait for the metadata watch to deliver a
// topic metad already has.
const viewCatchUpTimeout = 5 * time.Second

func topicPartitions(v *metaclient.View) map[string]int32 {
	out := map[string]int32{}
	for _, t := range v.Topics() {
		c := t.GetConfig()
		if c.GetInternal() || c.GetState() == metav1.TopicState_TOPIC_STATE_DELETING {
			continue
		}
		out[c.GetName()] = c.GetPartitions()
	}
	return out
}

// refreshGroup re-expands g and applies topic deletion and truncation:
// offsets of a truncated or deleted topic are tombstoned, and an exact-topic
// group without members whose topic is gone is deleted. Caller holds e.mu.
func (r *Role) refreshGroup(ctx context.Context, s *shard, e *entry, v *metaclient.View, topics map[string]int32, now time.Time) error {
	g := e.g
	var drop []group.TP
	lifecycle := maps.Clone(g.Lifecycle)
	for tp := range g.Offsets {
		t, ok := v.Topic(tp.Topic)
		switch {
		case !ok || t.GetConfig().GetState() == metav1.TopicState_TOPIC_STATE_DELETING:
			drop = append(drop, tp)
		default:
			if cur, known := g.Lifecycle[tp.Topic]; known && t.GetConfig().GetLifecycleEpoch() > cur {
				drop = append(drop, tp)
			}
		}
	}
	for _, name := range g.Topics() {
		if t, ok := v.Topic(name); ok {
			lifecycle[name] = t.GetConfig().GetLifecycleEpoch()
		}
	}
	parts, err := group.Expand(g.Selector, topics)
	exactGone := err != nil
	if exactGone {
		r.m.observationFailures.WithLabelValues(g.Selector.Describe(), g.Name, "topic_lookup").Inc()
		if len(g.Members) == 0 {
			return r.deleteGroupLocked(ctx, s, e)
		}
		parts = g.Partitions // keep serving members until they leave
	}
	group.SortTPs(drop)
	changed := !slices.Equal(parts, g.Partitions) || !maps.Equal(lifecycle, g.Lifecycle)
	if !changed && len(drop) == 0 {
		return nil
	}
	next := *g
	next.Partitions, next.Lifecycle = parts, lifecycle
	vals := append(offsetTombstones(g, drop), offsetlog.Registration(&next))
	if err := r.appendLog(ctx, s, vals); err != nil {
		return err
	}
	for _, tp := range drop {
		delete(g.Offsets, tp)
	}
	g.Lifecycle = lifecycle
	if g.SetPartitions(parts, now) {
		r.env.Logger.Info("group expansion changed", "group", g.Name, "partitions", len(parts), "generation", g.Generation)
	}
	e.setTopics()
	return nil
}

// deleteGroupLocked tombstones every offset of the group, then the group.
// Caller holds e.mu.
func (r *Role) deleteGroupLocked(ctx context.Context, s *shard, e *entry) error {
	g := e.g
	vals := offsetTombstones(g, group.SortTPs(slices.Collect(maps.Keys(g.Offsets))))
	for _, id := range slices.Sorted(maps.Keys(g.TxnMarks)) {
		vals = append(vals, offsetlog.TxnMarkClear(g.Name, g.Incarnation, id))
	}
	vals = append(vals, offsetlog.Value{V: offsetlog.FormatVersion, Type: offsetlog.TypeGroupTombstone, Group: g.Name, Incarnation: g.Incarnation})
	if err := r.appendLog(ctx, s, vals); err != nil {
		return err
	}
	s.remove(g.Name, e)
	r.env.Logger.Info("group deleted", "group", g.Name)
	return nil
}

// offsetTombstones returns the records that delete g's committed offsets
// of tps, in the order of tps.
func offsetTombstones(g *group.Group, tps []group.TP) []offsetlog.Value {
	vals := make([]offsetlog.Value, 0, len(tps)+1) // room for the record that follows
	for _, tp := range tps {
		vals = append(vals, offsetlog.Value{V: offsetlog.FormatVersion, Type: offsetlog.TypeOffsetTombstone,
			Group: g.Name, Incarnation: g.Incarnation, Topic: tp.Topic, Partition: tp.Partition})
	}
	return vals
}

// confirmRead proves that this node still owns s before a read is answered
// from memory: a deposed owner whose metadata view lags must not answer
// below a commit the new owner already acknowledged (offsetlog.Log.Confirm).
func (r *Role) confirmRead(ctx context.Context, s *shard) error {
	s.mu.Lock()
	log := s.log
	s.mu.Unlock()
	if log == nil {
		return s.readyErr()
	}
	if err := log.Confirm(ctx); err != nil {
		r.onWriteError(s, err)
		return err
	}
	return nil
}

// onWriteError marks s fenced when a newer owner took the partition, so the
// ownership loop drops it. Caller must not hold s.mu.
func (r *Role) onWriteError(s *shard, err error) {
	if s.log != nil && s.log.Fenced() != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.state, s.err = shardFenced, err
		r.env.Logger.Warn("offsets partition fenced by a newer owner", "partition", s.p)
	}
}

// hwmLoop refreshes the start offset and high watermark of every partition
// the owned groups select, for the lag metrics.
func (r *Role) hwmLoop(ctx context.Context) {
	pace.Every(ctx, r.cfg.LagRefreshInterval, func() { r.refreshHWM(ctx) })
}

func (r *Role) refreshHWM(ctx context.Context) {
	v := r.meta.Cache().View()
	want := map[string]bool{}
	for _, s := range r.readyShards() {
		entries, _ := s.snapshot()
		for _, e := range entries {
			for _, t := range e.topicList() {
				want[t] = true
			}
		}
	}
	next := map[group.TP]partOffsets{}
	for _, topic := range slices.Sorted(maps.Keys(want)) {
		t, ok := v.Topic(topic)
		if !ok {
			continue
		}
		byLeader := map[string][]int32{}
		for _, ps := range t.GetPartitions() {
			if n, ok := v.Node(ps.GetLeader()); ok && n.GetRpcAddress() != "" {
				byLeader[n.GetRpcAddress()] = append(byLeader[n.GetRpcAddress()], ps.GetId())
			}
		}
		for addr, parts := range byLeader {
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			res, err := r.listOffsets(cctx, addr, topic, parts)
			cancel()
			if err != nil {
				continue
			}
			for _, po := range res {
				if po.GetError() == nil {
					next[group.TP{Topic: topic, Partition: po.GetPartition()}] = partOffsets{start: po.GetEarliest(), hwm: po.GetHwm(), lso: po.GetLso()}
				}
			}
		}
	}
	r.mu.Lock()
	r.hwm = next
	r.mu.Unlock()
}

// resolveTxnMarks settles pending transactional offset marks that neither
// the commit nor the abort of their transaction cleared in time (a
// delayed staging call that arrived after the transaction ended, a mark
// whose transaction never staged there, a clear lost with a coordinator):
// a mark older than twice transaction_timeout is asked about at the
// transaction coordinator (TxnOffsetsPending) and cleared once its
// transaction can no longer commit offsets. It is never expired blindly: a
// decided commit whose offsets are not written yet must stay unstable,
// or a consumer would read the old offset and process the batch again.
// The RPC runs without the group's lock (the transaction coordinator may
// be calling this group's coordinator under its own lock).
func (r *Role) resolveTxnMarks(ctx context.Context, s *shard) {
	entries, ready := s.snapshot()
	if !ready {
		return
	}
	type candidate struct {
		name, id string
		e        *entry
		m        group.TxnMark
	}
	var todo []candidate
	cutoff := r.now().Add(-2 * r.cfg.TransactionTimeout)
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		e := entries[name]
		e.mu.Lock()
		if e.g != nil {
			for _, id := range slices.Sorted(maps.Keys(e.g.TxnMarks)) {
				if m := e.g.TxnMarks[id]; m.Marked.Before(cutoff) {
					todo = append(todo, candidate{name: name, id: id, e: e, m: m})
				}
			}
		}
		e.mu.Unlock()
	}
	for _, c := range todo {
		pending, err := r.askTxnOffsetsPending(ctx, c.id, c.m)
		if err != nil || pending {
			if err != nil {
				r.env.Logger.Warn("pending transactional offset mark not resolved yet", "group", c.name, "transactional_id", c.id, "err", err)
			}
			continue
		}
		c.e.mu.Lock()
		if ok, err := s.current(c.name, c.e); err == nil && ok && c.e.g != nil {
			if cur, ok := c.e.g.TxnMarks[c.id]; ok && cur.Same(c.m) {
				if err := r.write(ctx, s, []offsetlog.Value{offsetlog.TxnMarkClear(c.name, c.e.g.Incarnation, c.id)}); err == nil {
					delete(c.e.g.TxnMarks, c.id)
					r.env.Logger.Info("pending transactional offset mark resolved: its transaction ended", "group", c.name,
						"transactional_id", c.id, "producer_epoch", c.m.Epoch)
				}
			}
		}
		c.e.mu.Unlock()
	}
}

package coordinatord

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"time"

	"github.com/strataio/strata/coordinatord/internal/group"
	"github.com/strataio/strata/coordinatord/internal/offsetlog"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/groups"
	"github.com/strataio/strata/libs/metaclient"
	"github.com/strataio/strata/libs/wire"
	coordinatorv1 "github.com/strataio/strata/proto/strata/coordinator/v1"
)

// service implements CoordinatorService. Every handler resolves the group's
// shard (NOT_COORDINATOR when another node owns it), then works under the
// shard lock.
type service struct {
	coordinatorv1.UnimplementedCoordinatorServiceServer
	r *Role
}

// shardFor returns the ready shard owning group name.
func (r *Role) shardFor(name string) (*shard, error) {
	if name == "" {
		return nil, errcode.MissingParameter.New("group is required", "param", "group")
	}
	v := r.meta.Cache().View()
	if !v.Ready() {
		return nil, errcode.CoordinatorNotAvailable.New("metadata cache not synced with metad yet", "reason", "metadata")
	}
	p := groups.Partition(name, groups.OffsetsPartitions(v, r.cfg.OffsetsPartitions))
	owner := groups.PartitionOwner(r.ring(v), p)
	if owner != r.env.NodeID {
		return nil, notCoordinator(v, owner, name)
	}
	r.mu.Lock()
	s := r.shards[p]
	r.mu.Unlock()
	if s == nil {
		return nil, errcode.CoordinatorNotAvailable.New("offsets partition not taken over yet", "partition", itoa(p), "reason", "loading")
	}
	if err := s.readyErr(); err != nil {
		return nil, err
	}
	return s, nil
}

func notCoordinator(v *metaclient.View, owner, name string) error {
	if owner == "" {
		return errcode.CoordinatorNotAvailable.New("no live coordinator", "group", name, "reason", "no_coordinator")
	}
	addr := ""
	if n, ok := v.Node(owner); ok {
		addr = n.GetRpcAddress()
	}
	return errcode.NotCoordinator.New("group is coordinated by another node", "coordinator_id", owner,
		"coordinator_address", addr, "group", name)
}

func groupNotFound(name string) error {
	return errcode.GroupNotFound.New("group is not registered", "group", name)
}

// write appends vals to s's log within the append timeout and observes
// the write's duration. Caller holds the entry lock of the group written.
func (r *Role) write(ctx context.Context, s *shard, vals []offsetlog.Value) error {
	start := time.Now()
	err := r.appendLog(ctx, s, vals)
	r.m.writeDuration.Observe(time.Since(start).Seconds())
	return err
}

// appendLog appends vals to s's log within the append timeout; an error
// from a newer owner fences s. Caller holds the entry lock of the group
// written.
func (r *Role) appendLog(ctx context.Context, s *shard, vals []offsetlog.Value) error {
	wctx, cancel := context.WithTimeout(ctx, r.cfg.AppendTimeout)
	defer cancel()
	err := s.log.Append(wctx, vals)
	if err != nil {
		r.onWriteError(s, err)
	}
	return err
}

// register creates group name with sel in the placeholder e and persists
// it; on failure the placeholder is abandoned. With more, the records more
// returns for the new group go into the same append, so they are durable
// together with the registration or not at all (an error of more writes
// nothing). Caller holds e.mu.
func (r *Role) register(ctx context.Context, s *shard, e *entry, name string, sel group.Selector,
	more func(*group.Group) ([]offsetlog.Value, error)) (g *group.Group, err error) {
	defer func() {
		if err != nil {
			s.abandon(name, e)
		}
	}()
	v, err := r.viewWith(ctx, sel)
	if err != nil {
		return nil, err
	}
	parts, err := group.Expand(sel, topicPartitions(v))
	if err != nil {
		return nil, err
	}
	inc := uint64(r.now().UnixNano())
	g = group.New(name, sel, parts, inc)
	for _, t := range g.Topics() {
		if tt, ok := v.Topic(t); ok {
			g.Lifecycle[t] = tt.GetConfig().GetLifecycleEpoch()
		}
	}
	g.LastActivity = r.now()
	vals := []offsetlog.Value{offsetlog.Registration(g)}
	if more != nil {
		extra, err := more(g)
		if err != nil {
			return nil, err
		}
		vals = append(vals, extra...)
	}
	if err := r.write(ctx, s, vals); err != nil {
		return nil, err
	}
	e.g = g
	e.setTopics()
	return g, nil
}

func toProtoTPs(l []group.TP) []*coordinatorv1.TopicPartition {
	out := make([]*coordinatorv1.TopicPartition, len(l))
	for i, tp := range l {
		out[i] = &coordinatorv1.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}
	}
	return out
}

// assignment is a member's assignment as the Join and Sync responses
// carry it: topic-partition pairs in a multi-topic group, else partition
// ids of the one topic.
func assignment(g *group.Group, l []group.TP) (multiTopic bool, topicAssignments []*coordinatorv1.TopicPartition, assignments []int32) {
	if g.Selector.MultiTopic() {
		return true, toProtoTPs(l), nil
	}
	return false, nil, partitionsOf(l)
}

func partitionsOf(l []group.TP) []int32 {
	out := make([]int32, 0, len(l))
	for _, tp := range l {
		out = append(out, tp.Partition)
	}
	return out
}

func (x *service) RegisterGroup(ctx context.Context, req *coordinatorv1.RegisterGroupRequest) (*coordinatorv1.RegisterGroupResponse, error) {
	sel := group.Selector{Topic: req.GetTopic(), Topics: req.GetTopics(), Pattern: req.GetPattern()}
	if err := sel.Validate(); err != nil {
		return nil, err
	}
	sel = sel.Normalize()
	s, e, err := x.r.acquire(req.GetGroup(), true)
	if err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	if g := e.g; g != nil {
		if g.Selector.Equal(sel) {
			return &coordinatorv1.RegisterGroupResponse{Group: g.Name, Partitions: toProtoTPs(g.Partitions)}, nil
		}
		if len(g.Members) > 0 {
			return nil, errcode.TopicNotAssignedToGroup.New("group is active with another selector; stop its members first",
				"group", g.Name, "topic", sel.Describe())
		}
		v, err := x.r.viewWith(ctx, sel)
		if err != nil {
			return nil, err
		}
		parts, err := group.Expand(sel, topicPartitions(v))
		if err != nil {
			return nil, err
		}
		next := *g
		next.Selector, next.Partitions = sel, parts
		if err := x.r.write(ctx, s, []offsetlog.Value{offsetlog.Registration(&next)}); err != nil {
			return nil, err
		}
		g.Selector = sel
		g.SetPartitions(parts, x.r.now())
		e.setTopics()
		return &coordinatorv1.RegisterGroupResponse{Group: g.Name, Partitions: toProtoTPs(g.Partitions)}, nil
	}
	g, err := x.r.register(ctx, s, e, req.GetGroup(), sel, nil)
	if err != nil {
		return nil, err
	}
	return &coordinatorv1.RegisterGroupResponse{Group: g.Name, Partitions: toProtoTPs(g.Partitions), Created: true}, nil
}

func (x *service) JoinGroup(ctx context.Context, req *coordinatorv1.JoinGroupRequest) (*coordinatorv1.JoinGroupResponse, error) {
	s, e, err := x.r.acquire(req.GetGroup(), req.GetTopic() != "")
	if err != nil {
		return nil, err
	}
	if e == nil {
		return nil, groupNotFound(req.GetGroup())
	}
	defer e.mu.Unlock()
	g := e.g
	if g == nil {
		if g, err = x.r.register(ctx, s, e, req.GetGroup(), group.Selector{Topic: req.GetTopic()}, nil); err != nil {
			return nil, err
		}
	}
	res, err := g.Join(req.GetMember(), req.GetTopic(), x.r.now(), x.r.suffix)
	if err != nil {
		return nil, err
	}
	out := &coordinatorv1.JoinGroupResponse{Generation: res.Generation, Member: res.Member, Resumed: res.Resumed}
	out.MultiTopic, out.TopicAssignments, out.Assignments = assignment(g, res.Assigned)
	return out, nil
}

func (x *service) SyncGroup(ctx context.Context, req *coordinatorv1.SyncGroupRequest) (*coordinatorv1.SyncGroupResponse, error) {
	return withGroup(x.r, req.GetGroup(), func(_ *shard, g *group.Group) (*coordinatorv1.SyncGroupResponse, error) {
		as, err := g.Sync(req.GetMember(), req.GetGeneration(), req.GetTopic(), x.r.now())
		if err != nil {
			return nil, err
		}
		out := &coordinatorv1.SyncGroupResponse{}
		out.MultiTopic, out.TopicAssignments, out.Assignments = assignment(g, as)
		return out, nil
	})
}

func (x *service) Heartbeat(ctx context.Context, req *coordinatorv1.HeartbeatRequest) (*coordinatorv1.HeartbeatResponse, error) {
	return withGroup(x.r, req.GetGroup(), func(_ *shard, g *group.Group) (*coordinatorv1.HeartbeatResponse, error) {
		gen, err := g.Heartbeat(req.GetMember(), req.GetTopic(), req.Generation, x.r.now())
		if err != nil {
			return nil, err
		}
		return &coordinatorv1.HeartbeatResponse{Member: req.GetMember(), Generation: gen}, nil
	})
}

func (x *service) LeaveGroup(ctx context.Context, req *coordinatorv1.LeaveGroupRequest) (*coordinatorv1.LeaveGroupResponse, error) {
	return withGroup(x.r, req.GetGroup(), func(_ *shard, g *group.Group) (*coordinatorv1.LeaveGroupResponse, error) {
		if err := g.Leave(req.GetMember(), req.GetTopic(), x.r.now()); err != nil {
			return nil, err
		}
		return &coordinatorv1.LeaveGroupResponse{Group: g.Name, Member: req.GetMember()}, nil
	})
}

func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func (x *service) GroupStatus(ctx context.Context, req *coordinatorv1.GroupStatusRequest) (*coordinatorv1.GroupStatusResponse, error) {
	return withGroup(x.r, req.GetGroup(), func(_ *shard, g *group.Group) (*coordinatorv1.GroupStatusResponse, error) {
		out := &coordinatorv1.GroupStatusResponse{GroupName: g.Name, TopicName: g.Selector.Describe(), State: g.State(),
			Generation: g.Generation, MemberCount: int32(len(g.Members)), PartitionCount: int32(len(g.Partitions)),
			LastRebalanceUnixMs: unixMs(g.LastRebalance), Topics: g.Topics(), Pattern: g.Selector.Pattern}
		for _, id := range slices.Sorted(maps.Keys(g.Members)) {
			m := g.Members[id]
			pm := &coordinatorv1.GroupMember{MemberId: id, LastHeartbeatUnixMs: unixMs(m.LastHeartbeat)}
			if g.Selector.MultiTopic() {
				pm.TopicAssignments = toProtoTPs(m.Assigned)
			}
			pm.Assignments = partitionsOf(m.Assigned)
			out.Members = append(out.Members, pm)
		}
		return out, nil
	})
}

func (x *service) ListGroups(ctx context.Context, req *coordinatorv1.ListGroupsRequest) (*coordinatorv1.ListGroupsResponse, error) {
	out := &coordinatorv1.ListGroupsResponse{}
	x.r.eachGroup(func(g *group.Group) {
		out.Groups = append(out.Groups, &coordinatorv1.GroupSummary{Group: g.Name, Topics: topicsOf(g), State: g.State(),
			MemberCount: int32(len(g.Members)), Generation: g.Generation})
	})
	slices.SortFunc(out.Groups, func(a, b *coordinatorv1.GroupSummary) int { return cmp.Compare(a.Group, b.Group) })
	return out, nil
}

func (x *service) DeleteGroup(ctx context.Context, req *coordinatorv1.DeleteGroupRequest) (*coordinatorv1.DeleteGroupResponse, error) {
	s, e, err := x.r.existing(req.GetGroup())
	if err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	g := e.g
	if len(g.Members) > 0 {
		return nil, errcode.GroupNotEmpty.New("group has active members", "group", g.Name,
			"members", itoa(int32(len(g.Members))))
	}
	if err := x.r.deleteGroupLocked(ctx, s, e); err != nil {
		return nil, err
	}
	return &coordinatorv1.DeleteGroupResponse{Deleted: true}, nil
}

func (x *service) CommitOffset(ctx context.Context, req *coordinatorv1.CommitOffsetRequest) (*coordinatorv1.CommitOffsetResponse, error) {
	return withGroup(x.r, req.GetGroup(), func(s *shard, g *group.Group) (*coordinatorv1.CommitOffsetResponse, error) {
		tp, write, err := g.CheckCommit(req.GetTopic(), req.GetPartition(), req.GetOffset(), req.GetMember(), req.Generation)
		if err != nil {
			return nil, err
		}
		if write {
			if err := x.r.write(ctx, s, []offsetlog.Value{offsetlog.Offset(g.Name, g.Incarnation, tp, req.GetOffset())}); err != nil {
				return nil, err
			}
			g.SetOffset(tp, req.GetOffset())
		}
		g.LastActivity = x.r.now()
		x.r.m.commits.Add(1)
		return &coordinatorv1.CommitOffsetResponse{}, nil
	})
}

func (x *service) BatchCommit(ctx context.Context, req *coordinatorv1.BatchCommitRequest) (*coordinatorv1.BatchCommitResponse, error) {
	return withGroup(x.r, req.GetGroup(), func(s *shard, g *group.Group) (*coordinatorv1.BatchCommitResponse, error) {
		res, err := g.CheckBatch(req.GetTopic(), req.GetMember(), req.Generation, fromProtoOffsets(req.GetOffsets()), req.GetOffsetsList())
		if err != nil {
			return nil, err
		}
		if len(res.Write) > 0 {
			if err := x.r.write(ctx, s, offsetValues(g, res.Write)); err != nil {
				return nil, err
			}
			for tp, off := range res.Write {
				g.SetOffset(tp, off)
			}
		}
		g.LastActivity = x.r.now()
		x.r.m.commits.Add(float64(res.Batched))
		return &coordinatorv1.BatchCommitResponse{Batched: int32(res.Batched)}, nil
	})
}

// ResetOffsets is RESET_OFFSETS: the operator sets committed offsets of a
// group without active members, down or up (group.CheckReset). A missing
// group is registered against topic first, in the same append as its
// offsets; an existing group's entries are one append. A rejected request
// writes nothing, and the append is all or nothing. Not counted in
// strata_consumer_group_commits_total, which counts consumer commits.
func (x *service) ResetOffsets(ctx context.Context, req *coordinatorv1.ResetOffsetsRequest) (*coordinatorv1.ResetOffsetsResponse, error) {
	s, e, err := x.r.acquire(req.GetGroup(), true)
	if err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	entries := fromProtoOffsets(req.GetOffsets())
	var write map[group.TP]uint64
	check := func(g *group.Group) ([]offsetlog.Value, error) {
		var err error
		if write, err = g.CheckReset(req.GetTopic(), entries, req.GetOffsetsList()); err != nil {
			return nil, err
		}
		return offsetValues(g, write), nil
	}
	g := e.g
	created := g == nil
	if created {
		// An empty topic expands to nothing here; CheckReset then refuses
		// it (missing_topic) before anything is written.
		if g, err = x.r.register(ctx, s, e, req.GetGroup(), group.Selector{Topic: req.GetTopic()}, check); err != nil {
			return nil, err
		}
	} else {
		vals, err := check(g)
		if err != nil {
			return nil, err
		}
		if err := x.r.write(ctx, s, vals); err != nil {
			return nil, err
		}
	}
	for tp, off := range write {
		g.SetOffset(tp, off)
	}
	g.LastActivity = x.r.now()
	x.r.env.Logger.Info("group offsets reset", "group", g.Name, "topic", req.GetTopic(), "entries", len(write), "registered", created)
	return &coordinatorv1.ResetOffsetsResponse{Entries: int32(len(write)), Created: created}, nil
}

func fromProtoOffsets(l []*coordinatorv1.PartitionOffset) []wire.PartitionOffset {
	out := make([]wire.PartitionOffset, len(l))
	for i, e := range l {
		out[i] = wire.PartitionOffset{Partition: e.GetPartition(), Offset: e.GetOffset()}
	}
	return out
}

// offsetValues returns the offset records of write, sorted by partition.
func offsetValues(g *group.Group, write map[group.TP]uint64) []offsetlog.Value {
	tps := group.SortTPs(slices.Collect(maps.Keys(write)))
	vals := make([]offsetlog.Value, 0, len(tps))
	for _, tp := range tps {
		vals = append(vals, offsetlog.Offset(g.Name, g.Incarnation, tp, write[tp]))
	}
	return vals
}

func (x *service) FetchOffset(ctx context.Context, req *coordinatorv1.FetchOffsetRequest) (*coordinatorv1.FetchOffsetResponse, error) {
	s, err := x.r.shardFor(req.GetGroup())
	if err != nil {
		return nil, err
	}
	if err := x.r.confirmRead(ctx, s); err != nil {
		return nil, err
	}
	_, e, err := x.r.acquire(req.GetGroup(), false)
	if err != nil {
		return nil, err
	}
	if e == nil {
		return &coordinatorv1.FetchOffsetResponse{}, nil
	}
	defer e.mu.Unlock()
	g := e.g
	topic := req.GetTopic()
	if topic == "" {
		topic = g.Selector.Topic
	}
	tp := group.TP{Topic: topic, Partition: req.GetPartition()}
	if id, pending := g.PendingTxn(tp); pending {
		return nil, errcode.UnstableOffsetCommit.New("a transaction in flight staged offsets of this partition; retry once it commits or aborts",
			"group", g.Name, "topic", topic, "partition", itoa(tp.Partition), "transactional_id", id)
	}
	off, ok := g.Committed(tp)
	return &coordinatorv1.FetchOffsetResponse{Offset: off, Found: ok}, nil
}

func (x *service) TopicActivity(ctx context.Context, req *coordinatorv1.TopicActivityRequest) (*coordinatorv1.TopicActivityResponse, error) {
	if req.GetTopic() == "" {
		return nil, errcode.MissingTopic.New("topic is required", "param", "topic")
	}
	out := &coordinatorv1.TopicActivityResponse{}
	x.r.eachGroup(func(g *group.Group) {
		if !slices.Contains(g.Topics(), req.GetTopic()) && !g.Selector.Matches(req.GetTopic()) {
			return
		}
		out.Groups = append(out.Groups, g.Name)
		if len(g.Members) > 0 {
			out.ActiveMembers = true
		}
	})
	slices.Sort(out.Groups)
	out.ActiveTransactions = x.r.txnsOnTopic(req.GetTopic())
	return out, nil
}

// eachGroup calls f for every registered group of the serving shards, each
// under its entry lock.
func (r *Role) eachGroup(f func(*group.Group)) {
	for _, s := range r.readyShards() {
		entries, ready := s.snapshot()
		if !ready {
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(entries)) {
			e := entries[name]
			e.mu.Lock()
			if e.g != nil {
				f(e.g)
			}
			e.mu.Unlock()
		}
	}
}

// Transaction commands (txncoord.go).

func (s *service) InitProducerId(ctx context.Context, req *coordinatorv1.InitProducerIdRequest) (*coordinatorv1.InitProducerIdResponse, error) {
	return s.r.initProducerID(ctx, req)
}

func (s *service) BeginTxn(ctx context.Context, req *coordinatorv1.BeginTxnRequest) (*coordinatorv1.BeginTxnResponse, error) {
	return s.r.beginTxn(ctx, req)
}

func (s *service) TxnPublish(ctx context.Context, req *coordinatorv1.TxnPublishRequest) (*coordinatorv1.TxnPublishResponse, error) {
	return s.r.txnPublish(ctx, req)
}

func (s *service) EndTxn(ctx context.Context, req *coordinatorv1.EndTxnRequest) (*coordinatorv1.EndTxnResponse, error) {
	return s.r.endTxn(ctx, req)
}

func (s *service) TxnStatus(_ context.Context, req *coordinatorv1.TxnStatusRequest) (*coordinatorv1.TxnStatusResponse, error) {
	return s.r.txnStatus(req)
}

func (s *service) ListTxns(context.Context, *coordinatorv1.ListTxnsRequest) (*coordinatorv1.ListTxnsResponse, error) {
	return &coordinatorv1.ListTxnsResponse{Txns: s.r.listTxns()}, nil
}

func (s *service) AbortTxn(ctx context.Context, req *coordinatorv1.AbortTxnRequest) (*coordinatorv1.AbortTxnResponse, error) {
	return s.r.abortTxn(ctx, req)
}

// ValidateTxnOffsets checks a transaction's staged offsets on the group's
// coordinator (group.CheckTxnOffsets) and makes sure a pending mark of the
// transaction covers their partitions, durably, before it answers: from
// then until the commit writes the offsets (CommitTxnOffsets) or the abort
// drops them (AbortTxnOffsets), FetchOffset answers unstable_offset_commit
// for them (docs/transactions.md, "Pending transactional offsets").
func (x *service) ValidateTxnOffsets(ctx context.Context, req *coordinatorv1.ValidateTxnOffsetsRequest) (*coordinatorv1.ValidateTxnOffsetsResponse, error) {
	ref := req.GetTxn()
	if ref.GetTransactionalId() == "" || ref.GetProducerId() == "" || ref.GetEpoch() <= 0 {
		return nil, errcode.MissingParameter.New("the staging transaction is required", "param", "txn")
	}
	return withGroup(x.r, req.GetGroup(), func(s *shard, g *group.Group) (*coordinatorv1.ValidateTxnOffsetsResponse, error) {
		gen := req.GetGeneration()
		topic, entries, err := g.CheckTxnOffsets(req.GetTopic(), req.GetMember(), &gen, fromProtoOffsets(req.GetOffsets()), req.GetOffsetsList())
		if err != nil {
			return nil, err
		}
		cur, had := g.TxnMarks[ref.GetTransactionalId()]
		if had && cur.ProducerID == ref.GetProducerId() && cur.Epoch > ref.GetEpoch() {
			return nil, errcode.ProducerFenced.New("a later transaction of this transactional_id already staged offsets",
				"transactional_id", ref.GetTransactionalId(), "group", g.Name)
		}
		m := group.TxnMark{ProducerID: ref.GetProducerId(), Epoch: ref.GetEpoch(), Marked: x.r.now()}
		for _, e := range entries {
			m.Partitions = append(m.Partitions, group.TP{Topic: topic, Partition: e.Partition})
		}
		if next, changed := m.Merge(cur, had); changed {
			if err := x.r.write(ctx, s, []offsetlog.Value{offsetlog.TxnMark(g.Name, g.Incarnation, ref.GetTransactionalId(), next)}); err != nil {
				return nil, err
			}
			g.TxnMarks[ref.GetTransactionalId()] = next
		}
		out := &coordinatorv1.ValidateTxnOffsetsResponse{Incarnation: g.Incarnation}
		for _, e := range entries {
			out.Offsets = append(out.Offsets, &coordinatorv1.PartitionOffset{Partition: e.Partition, Offset: e.Offset})
		}
		return out, nil
	})
}

// endsMark returns the clear record of the mark of transaction ref on g
// when ref ends it: the same producer session at that epoch or a later
// one (a delayed call of an earlier transaction never clears a later
// transaction's mark).
func endsMark(g *group.Group, ref *coordinatorv1.TxnRef) []offsetlog.Value {
	m, ok := g.TxnMarks[ref.GetTransactionalId()]
	if !ok || m.ProducerID != ref.GetProducerId() || m.Epoch > ref.GetEpoch() {
		return nil
	}
	return []offsetlog.Value{offsetlog.TxnMarkClear(g.Name, g.Incarnation, ref.GetTransactionalId())}
}

// CommitTxnOffsets writes a committed transaction's staged offsets and
// clears its pending mark in the same append: the commit is decided, so
// member and generation are not checked again (they were just before the
// decision); only offsets above the committed ones are written, and
// nothing for a group recreated since.
func (x *service) CommitTxnOffsets(ctx context.Context, req *coordinatorv1.CommitTxnOffsetsRequest) (*coordinatorv1.CommitTxnOffsetsResponse, error) {
	s, e, err := x.r.existing(req.GetGroup())
	if err != nil {
		if errcode.CodeOf(err) == errcode.GroupNotFound.Name() {
			x.r.env.Logger.Warn("committed transaction's offsets dropped: the group no longer exists", "group", req.GetGroup())
			return &coordinatorv1.CommitTxnOffsetsResponse{}, nil
		}
		return nil, err
	}
	defer e.mu.Unlock()
	g := e.g
	write := map[group.TP]uint64{}
	if g.Incarnation != req.GetIncarnation() {
		x.r.env.Logger.Warn("committed transaction's offsets dropped: the group was registered again", "group", req.GetGroup(),
			"incarnation", g.Incarnation, "staged_incarnation", req.GetIncarnation())
	} else {
		for _, o := range req.GetOffsets() {
			tp := group.TP{Topic: o.GetTopic(), Partition: o.GetPartition()}
			if cur, ok := g.Offsets[tp]; ok && o.GetOffset() <= cur {
				continue
			}
			write[tp] = o.GetOffset()
		}
	}
	markEnd := endsMark(g, req.GetTxn())
	if vals := append(offsetValues(g, write), markEnd...); len(vals) > 0 {
		if err := x.r.write(ctx, s, vals); err != nil {
			return nil, err
		}
	}
	for tp, off := range write {
		g.SetOffset(tp, off)
	}
	if len(markEnd) > 0 {
		delete(g.TxnMarks, req.GetTxn().GetTransactionalId())
	}
	if len(write) > 0 {
		g.LastActivity = x.r.now()
		x.r.m.commits.Add(float64(len(write)))
	}
	return &coordinatorv1.CommitTxnOffsetsResponse{Written: uint32(len(write))}, nil
}

// AbortTxnOffsets clears an aborted transaction's pending mark: its staged
// offsets are never written, so the committed ones are stable again.
func (x *service) AbortTxnOffsets(ctx context.Context, req *coordinatorv1.AbortTxnOffsetsRequest) (*coordinatorv1.AbortTxnOffsetsResponse, error) {
	s, e, err := x.r.existing(req.GetGroup())
	if err != nil {
		if errcode.CodeOf(err) == errcode.GroupNotFound.Name() {
			return &coordinatorv1.AbortTxnOffsetsResponse{}, nil
		}
		return nil, err
	}
	defer e.mu.Unlock()
	g := e.g
	markEnd := endsMark(g, req.GetTxn())
	if len(markEnd) == 0 {
		return &coordinatorv1.AbortTxnOffsetsResponse{}, nil
	}
	if err := x.r.write(ctx, s, markEnd); err != nil {
		return nil, err
	}
	delete(g.TxnMarks, req.GetTxn().GetTransactionalId())
	return &coordinatorv1.AbortTxnOffsetsResponse{Cleared: true}, nil
}

func (x *service) TxnOffsetsPending(ctx context.Context, req *coordinatorv1.TxnOffsetsPendingRequest) (*coordinatorv1.TxnOffsetsPendingResponse, error) {
	return x.r.txnOffsetsPending(req)
}

func (x *service) SendOffsetsToTxn(ctx context.Context, req *coordinatorv1.SendOffsetsToTxnRequest) (*coordinatorv1.SendOffsetsToTxnResponse, error) {
	return x.r.sendOffsetsToTxn(ctx, req)
}

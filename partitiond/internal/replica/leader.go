package replica

import (
	"context"
	"errors"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/pki"
	"github.com/strataio/strata/libs/rpc"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"

	"github.com/strataio/strata/partitiond/internal/partition"
)

// leaderState is a partition this node leads at one leader epoch.
type leaderState struct {
	m         *Manager
	part      *partition.Partition
	topic     string
	id        int32
	lifecycle uint64
	epoch     uint64
	since     time.Time
	// epochStart is the log end when this leadership began: where its
	// epoch starts. A follower joins the ISR only once it reached it
	// (KAFKA-7128): the HWM a new leader starts with can lag the one its
	// predecessor acknowledged acks=all writes at, and a follower that
	// reached only the lagging HWM may lack acknowledged records.
	epochStart uint64

	mu       sync.Mutex
	replicas []string
	isr      []string // committed in metad
	pending  []string // an ALTER_ISR in flight (nil: none)
	// unconfirmed is the ISR metad answered to this leader's last
	// ALTER_ISR while no applied view showed it yet (nil: none). Views
	// are applied in order but trail metad: one read before the change
	// committed may come after the answer. Until a view shows it, isr is
	// the union of the view's ISR and this one, so an older view never
	// takes out of the HWM a follower metad already counts as in sync
	// (and may elect). Should metad change the ISR again before any
	// applied view showed this one, the union stays until this leader's
	// next ALTER_ISR (a member that left is dropped after MaxLag): the
	// larger set only ever holds the HWM back.
	unconfirmed []string
	minISR      int
	followers   map[string]*progress
}

// progress is what the leader knows of one follower.
type progress struct {
	offset       uint64 // durable log end the follower reported
	known        bool
	lastFetch    time.Time
	lastFetchEnd uint64 // the leader's durable end at lastFetch
	caughtUp     time.Time
}

func newLeaderState(m *Manager, a Assignment) *leaderState {
	return &leaderState{m: m, part: a.Part, topic: a.Topic, id: a.Partition, lifecycle: a.LifecycleEpoch,
		epoch: a.LeaderEpoch, since: m.cfg.Now(), epochStart: a.Part.LogEndOffset(), replicas: slices.Clone(a.Replicas), isr: slices.Clone(a.ISR),
		minISR: a.MinISR, followers: map[string]*progress{}}
}

func (ls *leaderState) update(a Assignment) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.replicas, ls.isr, ls.minISR = slices.Clone(a.Replicas), slices.Clone(a.ISR), a.MinISR
	if ls.unconfirmed != nil {
		if sameSet(ls.isr, ls.unconfirmed) {
			ls.unconfirmed = nil
		} else {
			for _, id := range ls.unconfirmed {
				if !slices.Contains(ls.isr, id) {
					ls.isr = append(ls.isr, id)
				}
			}
		}
	}
	if ls.pending != nil && sameSet(ls.pending, ls.isr) {
		ls.pending = nil
	}
	ls.recomputeLocked()
}

// recomputeLocked sets the partition's HWM cap: the smallest durable end
// over the ISR (and a pending ISR: the larger set counts while a change is
// in flight), or the current HWM, frozen, while the ISR is below the
// effective minimum or a member has not reported since this leadership
// began. A topic with fewer replicas than the minimum needs all of them.
func (ls *leaderState) recomputeLocked() {
	need := min(max(ls.minISR, 1), max(len(ls.replicas), 1))
	hwm := ls.part.HighWatermark()
	if len(ls.isr) < need {
		ls.part.SetHWMCap(hwm)
		return
	}
	limit := uint64(partition.NoHWMCap)
	count := func(id string) {
		if id == ls.m.cfg.NodeID {
			return
		}
		pr := ls.followers[id]
		if pr == nil || !pr.known {
			limit = min(limit, hwm)
			return
		}
		limit = min(limit, pr.offset)
	}
	for _, id := range ls.isr {
		count(id)
	}
	for _, id := range ls.pending {
		if !slices.Contains(ls.isr, id) {
			count(id)
		}
	}
	ls.part.SetHWMCap(limit)
}

// recordFetch notes a follower's fetch at offset (its durable end).
func (ls *leaderState) recordFetch(id string, offset uint64, now time.Time) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	pr := ls.followers[id]
	if pr == nil {
		pr = &progress{caughtUp: ls.since}
		ls.followers[id] = pr
	}
	end := ls.part.DurableEnd()
	switch {
	case offset >= end:
		pr.caughtUp = now
	case pr.known && offset >= pr.lastFetchEnd && pr.lastFetch.After(pr.caughtUp):
		// It reached what the leader had at its previous fetch.
		pr.caughtUp = pr.lastFetch
	}
	pr.offset, pr.known, pr.lastFetch, pr.lastFetchEnd = offset, true, now, end
	ls.recomputeLocked()
}

// maybeAlterISR proposes dropping followers that lag longer than MaxLag and
// adding followers that reached the HWM, as one ALTER_ISR through metad.
func (ls *leaderState) maybeAlterISR(now time.Time) {
	ls.mu.Lock()
	if ls.pending != nil {
		ls.mu.Unlock()
		return
	}
	maxLag := ls.m.cfg.MaxLag
	hwm := ls.part.HighWatermark()
	next := make([]string, 0, len(ls.replicas))
	changed := false
	for _, id := range ls.replicas {
		in := slices.Contains(ls.isr, id)
		if id == ls.m.cfg.NodeID {
			next = append(next, id)
			continue
		}
		pr := ls.followers[id]
		caughtUp := ls.since
		if pr != nil {
			caughtUp = pr.caughtUp
		}
		switch {
		case in && now.Sub(caughtUp) > maxLag:
			changed = true // drop it
		case in:
			next = append(next, id)
		case pr != nil && pr.known && pr.offset >= max(hwm, ls.epochStart) && now.Sub(pr.lastFetch) <= maxLag:
			next = append(next, id)
			changed = true
		}
	}
	if !changed {
		ls.mu.Unlock()
		return
	}
	ls.pending = next
	ls.recomputeLocked()
	old := slices.Clone(ls.isr)
	ls.mu.Unlock()

	ls.m.wg.Add(1)
	go func() {
		defer ls.m.wg.Done()
		ctx, cancel := context.WithTimeout(ls.m.ctx, 10*time.Second)
		defer cancel()
		resp, err := ls.m.cfg.Meta.AlterIsr(ctx, &metav1.AlterIsrRequest{Topic: ls.topic, Partition: ls.id,
			LeaderEpoch: ls.epoch, Isr: next, RequestedBy: ls.m.cfg.NodeID})
		ls.mu.Lock()
		if err == nil && resp.GetPartition() != nil {
			got := resp.GetPartition().GetIsr()
			if !sameSet(ls.isr, got) {
				ls.unconfirmed = slices.Clone(got) // no view showed it yet
			}
			ls.isr = slices.Clone(got)
		}
		ls.pending = nil
		ls.recomputeLocked()
		ls.mu.Unlock()
		if err != nil {
			ls.m.cfg.Metrics.isrChangeFailed()
			ls.m.cfg.Logger.Warn("ISR change not accepted", "topic", ls.topic, "partition", ls.id,
				"leader_epoch", ls.epoch, "from", old, "to", next, "err", err)
			return
		}
		ls.m.cfg.Metrics.isrChanged(len(next) < len(old))
		ls.m.cfg.Logger.Info("ISR changed", "topic", ls.topic, "partition", ls.id, "leader_epoch", ls.epoch,
			"from", old, "to", next, "hwm", hwm)
		ls.checkpointHWM(ctx)
	}()
}

// checkpointHWM records the HWM in metad, fenced by both epochs: an ISR
// change is a point where the committed HWM must be known there.
func (ls *leaderState) checkpointHWM(ctx context.Context) {
	err := ls.m.cfg.Meta.CheckpointHwm(ctx, &metav1.CheckpointHwmRequest{Topic: ls.topic, Partition: ls.id,
		LeaderEpoch: ls.epoch, LifecycleEpoch: ls.lifecycle, Hwm: ls.part.HighWatermark()})
	if err != nil && !errors.Is(err, errcode.InvalidCommitWatermark) {
		ls.m.cfg.Logger.Debug("HWM checkpoint after an ISR change failed", "topic", ls.topic, "partition", ls.id, "err", err)
	}
}

func (ls *leaderState) stats(now time.Time) PartitionStats {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	st := PartitionStats{Topic: ls.topic, Partition: ls.id, Replicas: len(ls.replicas), ISR: len(ls.isr)}
	end := ls.part.DurableEnd()
	for _, id := range ls.replicas {
		if id == ls.m.cfg.NodeID {
			continue
		}
		fs := FollowerStats{ID: id, InSync: slices.Contains(ls.isr, id), LagRecords: end}
		caughtUp := ls.since
		if pr := ls.followers[id]; pr != nil {
			caughtUp = pr.caughtUp
			if pr.known {
				fs.LagRecords = end - min(end, pr.offset)
			}
		}
		if fs.LagRecords > 0 {
			fs.LagSeconds = now.Sub(caughtUp).Seconds()
		}
		st.Followers = append(st.Followers, fs)
	}
	return st
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// Serve answers one follower's fetch session (the ReplicaFetch stream). The
// caller must be a partitiond whose certificate names the replica id each
// request carries (the CVE-2018-1288 lesson: a replica id is never taken on
// the caller's word).
func (m *Manager) Serve(stream partitionv1.PartitionService_ReplicaFetchServer) error {
	ctx := stream.Context()
	id, _ := rpc.PeerIdentity(ctx)
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if id.Role != pki.RolePartitiond || req.GetReplicaId() != id.NodeID {
			m.cfg.Metrics.replicaRefused()
			return errcode.PeerRoleForbidden.New("replica id does not match the caller's certificate",
				"replica_id", req.GetReplicaId(), "certificate", id.String())
		}
		resp, pooled, err := m.answer(ctx, req)
		if err != nil {
			return err
		}
		// The codec takes the answer's pooled batch buffers and gives them
		// back once gRPC has written them; resp is not used after this.
		if err := stream.SendMsg(&pooledAnswer{ReplicaFetchResponse: resp, pooled: pooled}); err != nil {
			return err
		}
	}
}

// pooledAnswer is a fetch answer whose batches were read into transport
// pool buffers (rpc.NewPooledBytes): rpc's codec marshals the batches as
// they are and returns the buffers to the pool once gRPC has sent them.
type pooledAnswer struct {
	*partitionv1.ReplicaFetchResponse
	pooled [][]byte
}

// PooledParts hands the batch buffers to rpc's codec.
func (a *pooledAnswer) PooledParts() [][]byte { return a.pooled }

type fetchItem struct {
	ls     *leaderState
	req    *partitionv1.ReplicaFetchPartition
	out    *partitionv1.ReplicaFetchPartitionData
	offset uint64
	done   bool // answered without batches (error, divergence)
}

// answer serves one fetch request: progress first (it may move the HWM),
// then the batches after each follower offset, long-polling while there
// are none.
//
// The batches of each partition are read into a transport pool buffer;
// pooled lists them for the codec (see pooledAnswer).
func (m *Manager) answer(ctx context.Context, req *partitionv1.ReplicaFetchRequest) (resp *partitionv1.ReplicaFetchResponse, pooled [][]byte, err error) {
	now := m.cfg.Now()
	replica := req.GetReplicaId()
	items := make([]*fetchItem, 0, len(req.GetPartitions()))
	resp = &partitionv1.ReplicaFetchResponse{}
	for _, p := range req.GetPartitions() {
		it := &fetchItem{req: p, offset: p.GetFetchOffset(),
			out: &partitionv1.ReplicaFetchPartitionData{Topic: p.GetTopic(), Partition: p.GetPartition()}}
		resp.Partitions = append(resp.Partitions, it.out)
		if err := m.check(it, replica); err != nil {
			it.out.Error = errcode.ToProto(errcode.From(err))
			it.done = true
		} else if !it.done {
			it.ls.recordFetch(replica, it.offset, now)
		}
		items = append(items, it)
	}
	wait := min(time.Duration(req.GetMaxWaitMs())*time.Millisecond, m.cfg.FetchMaxWait)
	maxBytes := m.cfg.FetchMaxBytes
	if b := int(req.GetMaxBytes()); b > 0 {
		maxBytes = min(maxBytes, b)
	}
	partMax := m.cfg.PartitionMaxBytes
	if b := int(req.GetPartitionMaxBytes()); b > 0 {
		partMax = min(partMax, b)
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	var changed []<-chan struct{}
	for {
		// Taken before the reads: an advance after them closes these.
		changed = m.durableChanged(items, changed[:0])
		total, any := 0, false
		for _, it := range items {
			if it.done {
				any = true
				continue
			}
			room := min(partMax, maxBytes-total)
			if room <= 0 {
				break
			}
			raw, _, err := it.ls.part.ReadBatchesInto(it.ls.lifecycle, it.offset, room, rpc.NewPooledBytes)
			if err == nil {
				// Checked after the read: a long poll can outlive the
				// leadership it was checked under, and a node that stopped
				// leading may cut its log and append another leader's
				// batches. Those must not reach a follower whose log was
				// checked against the old one: appended after its own
				// tail, they would hide a divergence from every later
				// check. A change is published (m.leaders) before the
				// partition becomes a follower, so a read seen as current
				// here was of the log as this leadership kept it.
				err = m.stillLeading(it)
			}
			if err != nil {
				it.out.Error = errcode.ToProto(errcode.From(err))
				it.done, any = true, true
				continue
			}
			if len(raw) > 0 {
				it.out.Batches = raw
				pooled = append(pooled, raw)
				total += len(raw)
				any = true
			}
		}
		for _, it := range items {
			if it.ls != nil {
				p := it.ls.part
				it.out.HighWatermark, it.out.LogStartOffset, it.out.LogEndOffset = p.HighWatermark(), p.LogStartOffset(), p.DurableEnd()
				it.out.LeaderEpoch = it.ls.epoch
			}
		}
		if any || wait <= 0 {
			m.cfg.Metrics.served(total)
			return resp, pooled, nil
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		}
		switch waitAny(changed, timer.C, ctx.Done()) {
		case waitTimer:
			wait = 0
		case waitDone:
			return nil, nil, ctx.Err()
		}
	}
}

// maxWaitPartitions is how many partitions a long poll waits on one by one;
// a fetch for more waits for any durable advance on the node.
const maxWaitPartitions = 3

// durableChanged returns (appended to chs) the channels closed at the next
// durable advance of the partitions items still wait for: the partitions'
// own, so a long poll sleeps through the group commits of every other
// partition on this node (a node leading some partitions follows the rest,
// and each of its followers' appends used to wake every long poll it
// served), or the node's when there are many.
func (m *Manager) durableChanged(items []*fetchItem, chs []<-chan struct{}) []<-chan struct{} {
	for _, it := range items {
		if it.done || it.ls == nil {
			continue
		}
		if len(chs) == maxWaitPartitions {
			return append(chs[:0], m.cfg.Node.DurableChanged())
		}
		chs = append(chs, it.ls.part.DurableChanged())
	}
	if len(chs) == 0 {
		chs = append(chs, m.cfg.Node.DurableChanged())
	}
	return chs
}

const (
	waitChanged = iota
	waitTimer
	waitDone
)

// waitAny waits until one of chs (1 to maxWaitPartitions channels) is
// closed, timer fires or done is closed.
func waitAny(chs []<-chan struct{}, timer <-chan time.Time, done <-chan struct{}) int {
	var a, b, c <-chan struct{} // nil channels never fire
	switch len(chs) {
	case 3:
		c = chs[2]
		fallthrough
	case 2:
		b = chs[1]
		fallthrough
	case 1:
		a = chs[0]
	}
	select {
	case <-a:
	case <-b:
	case <-c:
	case <-timer:
		return waitTimer
	case <-done:
		return waitDone
	}
	return waitChanged
}

// check resolves one requested partition: this node must lead it at the
// follower's epochs, the follower must be a replica, and its log must not
// have diverged from this one (KIP-320) nor lie outside it.
func (m *Manager) check(it *fetchItem, replica string) error {
	p := it.req
	ls := m.leader(key{p.GetTopic(), p.GetPartition()})
	// The error fields are built only for an error: check runs for every
	// partition of every fetch round.
	fields := func(kv ...string) []string {
		return append([]string{"topic", p.GetTopic(), "partition", strconv.Itoa(int(p.GetPartition()))}, kv...)
	}
	if ls == nil {
		return errcode.NotPartitionLeader.New("this node does not lead the partition", fields("requested_leader", m.cfg.NodeID)...)
	}
	it.ls = ls
	switch {
	case p.GetLifecycleEpoch() < ls.lifecycle:
		return errcode.StaleLifecycleEpoch.New("fetch under an older lifecycle epoch",
			fields("current", utoa(ls.lifecycle), "got", utoa(p.GetLifecycleEpoch()))...)
	case p.GetLifecycleEpoch() > ls.lifecycle:
		return errcode.LifecycleEpochPending.New("the leader has not applied the fetch's lifecycle epoch yet",
			fields("current", utoa(ls.lifecycle), "got", utoa(p.GetLifecycleEpoch()))...)
	case p.GetLeaderEpoch() != ls.epoch:
		return errcode.StaleLeaderEpoch.New("fetch under another leader epoch",
			fields("current", utoa(ls.epoch), "requested", utoa(p.GetLeaderEpoch()))...)
	}
	ls.mu.Lock()
	isReplica := slices.Contains(ls.replicas, replica)
	ls.mu.Unlock()
	if !isReplica || replica == m.cfg.NodeID {
		return errcode.NotAuthorizedForPartition.New("the fetching node is not a replica of the partition", fields("replica_id", replica)...)
	}
	part := ls.part
	if p.LastFetchedEpoch != nil {
		last := p.GetLastFetchedEpoch()
		e, end, ok := part.EndOffsetForEpoch(last)
		if !ok {
			// Nothing here at or below its epoch: everything it holds
			// diverges, down to where this log starts.
			e, end = 0, part.LogStartOffset()
		}
		if !ok || e != last || end < it.offset {
			it.out.Diverging = &partitionv1.DivergingEpoch{Epoch: e, EndOffset: end}
			it.done = true
			m.cfg.Metrics.diverged()
			return nil
		}
	}
	if start, end := part.LogStartOffset(), part.DurableEnd(); it.offset < start || it.offset > part.LogEndOffset() {
		return errcode.OffsetOutOfRange.New("fetch offset outside the leader's log",
			fields("requested", utoa(it.offset), "earliest", utoa(start), "latest", utoa(end))...)
	}
	return nil
}

// stillLeading fails when the leadership a fetch item was checked under is
// no longer this node's current one for the partition.
func (m *Manager) stillLeading(it *fetchItem) error {
	cur := m.leader(key{it.req.GetTopic(), it.req.GetPartition()})
	if cur == it.ls {
		return nil
	}
	fields := []string{"topic", it.req.GetTopic(), "partition", strconv.Itoa(int(it.req.GetPartition()))}
	if cur == nil {
		return errcode.NotPartitionLeader.New("this node stopped leading the partition during the fetch",
			append(fields, "requested_leader", m.cfg.NodeID)...)
	}
	return errcode.StaleLeaderEpoch.New("the leadership changed during the fetch",
		append(fields, "current", utoa(cur.epoch), "requested", utoa(it.req.GetLeaderEpoch()))...)
}

func utoa(v uint64) string { return strconv.FormatUint(v, 10) }

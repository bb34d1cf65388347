package partition

import (
	"context"
	"errors"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/partitiond/internal/producer"
	"github.com/strataio/strata/partitiond/internal/seglog"
	"github.com/strataio/strata/partitiond/internal/segment"
	"github.com/strataio/strata/partitiond/internal/statestore"
)

// Compaction run results (label result of
// strata_broker_log_compaction_runs_total).
const (
	CompactionCompleted = "completed"
	CompactionSkipped   = "skipped"
	CompactionFailed    = "failed"
)

// PartitionReport says what one maintenance pass did to a partition.
type PartitionReport struct {
	Topic           string
	Partition       int32
	Rolled          bool
	DeletedSegments int
	ExpiredProducer int
	Compaction      string // "" when the policy has no compaction
	CompactReason   string
	Compacted       seglog.CompactResult
	Err             error
}

// Maintain runs one maintenance pass over every hosted partition:
// producer-state expiry, roll of an aged active segment, retention by time
// and bytes (whole segments), compaction where the policy and the
// eligibility predicate allow it, and checkpoints (producer state, HWM,
// active segment index). It returns a report per partition.
func (n *Node) Maintain(ctx context.Context) []PartitionReport {
	var out []PartitionReport
	for _, p := range n.Partitions() {
		if ctx.Err() != nil {
			break
		}
		out = append(out, p.maintain(ctx))
	}
	return out
}

func (n *Node) policy(c TopicConfig) string {
	if c.CleanupPolicy == "" {
		return n.cfg.Defaults.CleanupPolicy
	}
	return c.CleanupPolicy
}

// retention returns the effective retention time and bytes (< 0: none).
func (n *Node) retention(c TopicConfig) (time.Duration, int64) {
	t := n.cfg.Defaults.Retention
	switch {
	case c.RetentionHours > 0:
		t = time.Duration(c.RetentionHours) * time.Hour
	case c.RetentionHours < 0:
		t = -1
	}
	b := n.cfg.Defaults.RetentionBytes
	switch {
	case c.RetentionBytes > 0:
		b = c.RetentionBytes
	case c.RetentionBytes < 0:
		b = -1
	}
	return t, b
}

func (p *Partition) maintain(ctx context.Context) PartitionReport {
	p.maint.Lock()
	defer p.maint.Unlock()
	rep := PartitionReport{Topic: p.topic, Partition: p.id}
	if p.gone.Load() != goneNot || p.log.Fenced() != nil {
		return rep
	}
	n := p.node
	now := n.clock.Now()
	meta := p.meta.Load()
	policy := n.policy(meta.Config)

	p.mu.Lock()
	rep.ExpiredProducer = p.producers.Expire(now)
	p.mu.Unlock()

	fail := func(err error) PartitionReport {
		rep.Err = err
		return rep
	}
	segs := p.log.Segments()
	act := segs[len(segs)-1]
	retTime, retBytes := n.retention(meta.Config)
	nowMs := now.UnixMilli()
	// Roll an idle active segment by age, and as soon as it is older than
	// the retention time, so retention never waits for the next append.
	if act.Size > 0 && (nowMs-act.FirstAppend >= n.cfg.Defaults.SegmentAge.Milliseconds() ||
		hasDelete(policy) && retTime > 0 && nowMs-act.MaxAppendTime > retTime.Milliseconds()) {
		if err := p.log.RollActive(); err != nil {
			return fail(p.storageErr(err))
		}
		rep.Rolled = true
		segs = p.log.Segments()
	}
	if hasDelete(policy) {
		del := 0
		var total int64
		for _, s := range segs {
			total += s.Size
		}
		// Only segments wholly below the high watermark go: above it, a
		// follower may not have copied the records yet (Kafka keeps the log
		// start at or below the HWM too), and an uncommitted tail is not
		// the retention's to drop.
		hwm := p.highWatermark()
		for _, s := range segs[:len(segs)-1] {
			byTime := retTime > 0 && nowMs-s.MaxAppendTime > retTime.Milliseconds()
			byBytes := retBytes >= 0 && total-s.Size >= retBytes
			if (!byTime && !byBytes) || s.Next > hwm {
				break
			}
			del++
			total -= s.Size
		}
		if del > 0 && n.cfg.BeforeRetention != nil {
			if err := n.cfg.BeforeRetention(p, segs[del].Base); err != nil {
				// The segments stay until a pass where the hook succeeds;
				// the rest of the pass goes on.
				rep.Err = err
				del = 0
			}
		}
		if del > 0 {
			// The deleted segments may hold the only copy of producer
			// batches newer than the last durable checkpoint (the periodic
			// one is not synced). Without a synced checkpoint first, a crash
			// after the deletion would rebuild an older sequence, and a
			// retry of a removed batch would be stored again (spec 4.6
			// rule 5: durable checkpoints keep the last sequence).
			if _, err := p.checkpointProducers(true); err != nil {
				return fail(err)
			}
			d, err := p.log.DeleteOldest(del)
			rep.DeletedSegments = d
			if err != nil {
				return fail(p.storageErr(err))
			}
			p.txns.TrimBelow(p.log.StartOffset())
		}
	}
	if hasCompact(policy) {
		rep.Compaction, rep.CompactReason, rep.Compacted = p.compact(ctx, policy, now)
		n.countCompaction(rep.Compaction, rep.CompactReason)
	}
	if err := p.checkpoint(ctx); err != nil {
		return fail(err)
	}
	return rep
}

// compact runs the cleaner when the eligibility predicate allows it (spec
// 4.4 rule 6). The producer state is checkpointed (synced) first, so a
// restart never has to rebuild the dedup window from compacted segments.
func (p *Partition) compact(ctx context.Context, policy string, now time.Time) (string, string, seglog.CompactResult) {
	n := p.node
	hwm := p.highWatermark()
	facts := CompactionFacts{Topic: p.topic, Partition: p.id, LifecycleEpoch: p.LifecycleEpoch(),
		CleanupPolicy: policy, LEO: p.log.EndOffset(), HWM: hwm}
	if n.cfg.CompactionEligible == nil {
		return CompactionSkipped, "no_eligibility_source", seglog.CompactResult{}
	}
	if ok, reason := n.cfg.CompactionEligible(facts); !ok {
		if reason == "" {
			reason = "not_eligible"
		}
		return CompactionSkipped, reason, seglog.CompactResult{}
	}
	segs := p.log.Segments()
	if len(segs) < 2 || segs[0].Next > hwm {
		return CompactionSkipped, "no_closed_segments", seglog.CompactResult{}
	}
	covered, err := p.checkpointProducers(true)
	if err != nil {
		return CompactionFailed, "checkpoint", seglog.CompactResult{}
	}
	// Never past the LSO: an undecided transaction's records are not
	// compacted before its marker decides them.
	// Below the LSO every transaction is decided: an aborted one's records
	// and its abort marker are dropped (the aborted index, and the
	// transaction index checkpoint just written, keep what they meant), so
	// an aborted value never wins a key over a committed one. Commit
	// markers stay: without one, a rebuild from the log would take the
	// transaction's records for an open transaction.
	drop := func(h *segment.Header) bool {
		return h.Flags&segment.FlagTransactional != 0 && p.txns.Aborted(h.ProducerID, h.BaseOffset)
	}
	res, err := p.log.Compact(seglog.CompactOptions{Now: now, DeleteRetention: n.cfg.Defaults.DeleteRetention,
		UpTo: min(p.txns.LSO(hwm), covered), Drop: drop})
	if err != nil {
		n.log.Error("compaction failed", "topic", p.topic, "partition", p.id, "err", err)
		if errors.Is(err, errcode.StorageCorrupt) {
			return CompactionFailed, "corrupt", res
		}
		return CompactionFailed, "io_error", res
	}
	if res.SegmentsRewritten == 0 {
		return CompactionCompleted, "nothing_to_clean", res
	}
	return CompactionCompleted, "cleaned", res
}

func (n *Node) countCompaction(result, reason string) {
	n.compactMu.Lock()
	n.compactRuns[[2]string{result, reason}]++
	n.compactMu.Unlock()
}

// checkpointProducers writes the producer states as of the current log end
// once that end is durable, and returns the offset it covers. The snapshot
// is taken under the append lock, so it describes exactly the batches below
// the returned offset.
//
// The transaction index is checkpointed with it, as of the same offset, so
// a partition that opens scans only the log after it (rebuildTxns).
func (p *Partition) checkpointProducers(sync bool) (uint64, error) {
	p.mu.Lock()
	snap := p.producers.Snapshot()
	txns := p.txns.Encode()
	end := p.log.EndOffset()
	p.mu.Unlock()
	if err := p.log.WaitDurable(context.Background(), end); err != nil {
		return 0, p.storageErr(err)
	}
	entries := make([]statestore.ProducerEntry, len(snap))
	for i, e := range snap {
		entries[i] = statestore.ProducerEntry{ID: e.ID, State: producer.Encode(&e.State)}
	}
	if err := p.node.state.PutProducerCheckpoint(p.topic, p.id, end, entries, sync); err != nil {
		return 0, err
	}
	if err := p.node.state.PutTxnCheckpoint(p.topic, p.id, end, txns, sync); err != nil {
		return 0, err
	}
	p.producerCovered = end
	p.lastProducerCkpt = end
	return end, nil
}

// checkpoint writes the periodic checkpoints: producer state and HWM when
// the log moved, the active segment's index once enough bytes were appended
// since the last one (bounding the rescan after a crash).
func (p *Partition) checkpoint(ctx context.Context) error {
	_ = ctx
	end := p.log.EndOffset()
	if end != p.lastProducerCkpt {
		if _, err := p.checkpointProducers(false); err != nil {
			return err
		}
		if err := p.node.state.PutHWM(p.topic, p.id, statestore.HWM{HWM: p.highWatermark(),
			LeaderEpoch: p.LeaderEpoch(), LifecycleEpoch: p.LifecycleEpoch()}); err != nil {
			return err
		}
	}
	segs := p.log.Segments()
	act := segs[len(segs)-1]
	since := act.Size
	if act.Base == p.ckptBase {
		since -= p.ckptSize
	}
	if since >= p.node.cfg.Defaults.CheckpointBytes {
		if err := p.log.Checkpoint(); err != nil {
			return p.storageErr(err)
		}
		p.ckptBase, p.ckptSize = act.Base, act.Size
	}
	return nil
}

package partition

import (
	"context"
	"math"
	"sync"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/partitiond/internal/producer"
	"github.com/strataio/strata/partitiond/internal/seglog"
	"github.com/strataio/strata/partitiond/internal/segment"
)

// The replication face of a partition (partitiond/internal/replica drives
// it). A partition is a leader (the default: clients append, the HWM is
// bounded by what the in-sync followers hold) or a follower (only the
// leader's batches are appended, through AppendReplica; the HWM is the
// leader's, as far as this log holds it).
//
// The high watermark is min(durable end, cap), never moving back except by
// a truncation: the cap is what replication allows. NoHWMCap, the default,
// makes the HWM the durable end, as for a single replica.

// NoHWMCap leaves the high watermark at the durable end.
const NoHWMCap = math.MaxUint64

// signal is a broadcast: wait returns a channel closed at the next fire.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

func (s *signal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

func (s *signal) fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

// HighWatermark returns the next offset visible to committed readers.
func (p *Partition) HighWatermark() uint64 { return p.highWatermark() }

func (p *Partition) highWatermark() uint64 {
	v := min(p.log.DurableEnd(), p.hwmCap.Load())
	for {
		old := p.hwm.Load()
		if v <= old {
			return old
		}
		if p.hwm.CompareAndSwap(old, v) {
			return v
		}
	}
}

// SetHWMCap sets the bound replication puts on the high watermark (see
// NoHWMCap) and wakes the readers and acks=all appends waiting on it.
func (p *Partition) SetHWMCap(v uint64) {
	if p.hwmCap.Swap(v) != v {
		p.hwmChanged.fire()
	}
}

// LowerHWM moves the high watermark down to v when it is above (and caps it
// there): a replica that becomes a follower starts from what it last knew
// was committed (its checkpoint), not from its own durable end, which may
// hold records its new leader never had.
func (p *Partition) LowerHWM(v uint64) {
	p.hwmCap.Store(v)
	for {
		old := p.hwm.Load()
		if old <= v || p.hwm.CompareAndSwap(old, v) {
			break
		}
	}
	p.hwmChanged.fire()
}

// CheckpointedHWM returns the HWM last checkpointed for this incarnation of
// the partition (0 when there is none).
func (p *Partition) CheckpointedHWM() uint64 {
	h, ok, err := p.node.state.GetHWM(p.topic, p.id)
	if err != nil || !ok || h.LifecycleEpoch != p.LifecycleEpoch() {
		return 0
	}
	return h.HWM
}

// HWMCap returns the current bound (NoHWMCap when none).
func (p *Partition) HWMCap() uint64 { return p.hwmCap.Load() }

// SetFollower makes the partition a follower (true: client appends are
// refused, AppendReplica works) or a leader (false). Appends waiting for
// acks=all on a partition that became a follower fail.
func (p *Partition) SetFollower(f bool) {
	p.mu.Lock()
	changed := p.follower.Swap(f) != f
	p.mu.Unlock()
	if changed {
		p.hwmChanged.fire()
	}
}

// Follower reports whether the partition is a follower.
func (p *Partition) Follower() bool { return p.follower.Load() }

// Changed returns a channel closed at the next durable-end advance, HWM cap
// change, role change, fence or close.
func (p *Partition) Changed() (log, hwm <-chan struct{}) {
	return p.log.Changed(), p.hwmChanged.wait()
}

// DurableChanged returns a channel closed at the next advance of this
// partition's durable end (or a truncation, a fence, the log's close): a
// leader's long poll for the few partitions of
// one fetch, which the node-wide Node.DurableChanged also wakes for every
// other partition's group commit (on a node that leads some partitions and
// follows the rest, most of them).
func (p *Partition) DurableChanged() <-chan struct{} { return p.log.Changed() }

// DurableEnd returns the offset below which the log is durable.
func (p *Partition) DurableEnd() uint64 { return p.log.DurableEnd() }

// LogEndOffset returns the next offset the log assigns.
func (p *Partition) LogEndOffset() uint64 { return p.log.EndOffset() }

// LogStartOffset returns the first retained offset.
func (p *Partition) LogStartOffset() uint64 { return p.log.StartOffset() }

// LastBatchEpoch returns the leader epoch of the log's last batch.
func (p *Partition) LastBatchEpoch() (uint64, bool) { return p.log.LastBatchEpoch() }

// EndOffsetForEpoch answers a follower's divergence question (KIP-320): the
// largest epoch <= e this log holds and where it ends.
func (p *Partition) EndOffsetForEpoch(e uint64) (epoch, end uint64, ok bool) {
	return p.log.EndOffsetForEpoch(e)
}

// ReadBatches returns whole stored batches from the one holding offset from,
// up to the durable end (see seglog.Log.ReadBatches): what a leader sends
// its followers.
func (p *Partition) ReadBatches(lifecycleEpoch, from uint64, maxBytes int) (raw []byte, next uint64, err error) {
	return p.ReadBatchesInto(lifecycleEpoch, from, maxBytes, nil)
}

// ReadBatchesInto is ReadBatches reading into a buffer from get (see
// seglog.Log.ReadBatchesInto): a leader's fetch answer in a transport pool
// buffer.
func (p *Partition) ReadBatchesInto(lifecycleEpoch, from uint64, maxBytes int, get func(n int) []byte) (raw []byte, next uint64, err error) {
	if err := p.check(lifecycleEpoch); err != nil {
		return nil, from, err
	}
	raw, next, err = p.log.ReadBatchesInto(from, maxBytes, get)
	return raw, next, p.storageErr(err)
}

// AppendReplica appends batches read from the leader's log (as
// ReadBatches returns them) to a follower, keeping their offsets, epochs
// and producer fields, and records idempotent batches in the producer table
// so this replica deduplicates retries once it leads. It returns the new
// log end; the batches become durable with the next group commit (see
// WaitDurable).
func (p *Partition) AppendReplica(lifecycleEpoch uint64, raw []byte) (uint64, error) {
	if err := p.check(lifecycleEpoch); err != nil {
		return 0, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.check(lifecycleEpoch); err != nil {
		return 0, err
	}
	if !p.follower.Load() {
		return 0, errcode.NotPartitionLeader.New("replicated batches reached the partition's leader", p.fields()...)
	}
	err := seglog.SplitBatches(raw, func(h *segment.Header, b []byte) error {
		if err := p.log.AppendStored(h, b); err != nil {
			return err
		}
		if h.Flags&segment.FlagIdempotent != 0 && h.BaseSequence > 0 {
			p.producers.Record(producer.Batch{ProducerID: string(h.ProducerID), Epoch: h.ProducerEpoch,
				BaseSeq: h.BaseSequence, LastSeq: h.LastSequence}, h.BaseOffset, h.LastOffset(), h.AppendTime)
		}
		return observeTxn(p.txns, p.node.inspector, h, b[h.Len():])
	})
	return p.log.EndOffset(), p.storageErr(err)
}

// WaitDurable blocks until the log is durable below end.
func (p *Partition) WaitDurable(ctx context.Context, end uint64) error {
	if err := p.log.WaitDurable(ctx, end); err != nil {
		return p.waitErr(err)
	}
	return nil
}

// TruncateTo cuts a follower's log at offset to (or at the start of the
// batch holding it) and rebuilds the producer table from what remains; see
// seglog.Log.TruncateTo. The HWM moves back to the new end when it was
// above it. It returns the new log end.
func (p *Partition) TruncateTo(lifecycleEpoch, to uint64) (uint64, error) {
	return p.rewind(lifecycleEpoch, func() (uint64, error) { return p.log.TruncateTo(to) })
}

// SkipTo moves a follower's log end forward to start (its leader's log
// starts there); see seglog.Log.SkipTo.
func (p *Partition) SkipTo(lifecycleEpoch, start uint64) (uint64, error) {
	return p.rewind(lifecycleEpoch, func() (uint64, error) { return start, p.log.SkipTo(start) })
}

func (p *Partition) rewind(lifecycleEpoch uint64, op func() (uint64, error)) (uint64, error) {
	if err := p.check(lifecycleEpoch); err != nil {
		return 0, err
	}
	p.maint.Lock()
	defer p.maint.Unlock()
	p.mu.Lock()
	if err := p.check(lifecycleEpoch); err != nil {
		p.mu.Unlock()
		return 0, err
	}
	if !p.follower.Load() {
		p.mu.Unlock()
		return 0, errcode.NotPartitionLeader.New("only a follower's log is cut or moved by replication", p.fields()...)
	}
	end, err := op()
	p.rewinds.Add(1)
	if err != nil {
		p.mu.Unlock()
		return 0, p.storageErr(err)
	}
	for {
		old := p.hwm.Load()
		if old <= end || p.hwm.CompareAndSwap(old, end) {
			break
		}
	}
	p.hwmChanged.fire()
	// The producer table is rebuilt from what remains (a checkpoint that
	// covers more than the new end is ignored), and a new checkpoint is
	// synced before any batch is appended after the cut: a checkpoint of
	// the old log must never be trusted once the log has grown past it
	// again.
	p.producerCovered = 0
	if err := p.rebuildProducers(); err != nil {
		p.mu.Unlock()
		return end, err
	}
	if err := p.rebuildTxns(); err != nil {
		p.mu.Unlock()
		return end, err
	}
	p.mu.Unlock()
	_, err = p.checkpointProducers(true)
	return end, err
}

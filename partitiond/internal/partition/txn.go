package partition

import (
	"context"
	"math"
	"strconv"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/partitiond/internal/record"
	"github.com/strataio/strata/partitiond/internal/seglog"
	"github.com/strataio/strata/partitiond/internal/segment"
	"github.com/strataio/strata/partitiond/internal/txnindex"
)

// The partition side of transactions (docs/transactions.md): the
// coordinator adds a producer epoch to the partition (AddTxn), writes the
// epoch's records (Append with Transactional), then ends it with a marker
// (WriteMarker). The transaction index (txnindex) follows every
// transactional batch and marker in log order, on the leader and on
// followers, so a new leader has the same LSO and aborted index.

// MarkerRequest asks for a transaction marker.
type MarkerRequest struct {
	LifecycleEpoch   uint64
	ProducerID       string
	ProducerEpoch    int64
	CoordinatorEpoch int64
	TransactionalID  string
	Commit           bool
	// ISRSize and MinISR as in AppendRequest: a marker is acknowledged
	// once the high watermark covers it.
	ISRSize int
	MinISR  int
}

// MarkerResult answers WriteMarker.
type MarkerResult struct {
	Offset uint64
	// Duplicate: a marker already ended this producer epoch; nothing was
	// written.
	Duplicate bool
}

// AddTxn registers the producer epoch as a transaction that may write to
// this partition (KIP-890); see txnindex.Index.Add for the refusals. Only
// the leader registers.
func (p *Partition) AddTxn(lifecycleEpoch uint64, producerID string, epoch, coordinatorEpoch int64) error {
	if producerID == "" {
		return errcode.MissingProducerID.New("AddTxnPartition without a producer id", p.fields("param", "producer_id")...)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.check(lifecycleEpoch); err != nil {
		return err
	}
	if p.follower.Load() {
		return errcode.NotPartitionLeader.New("this replica is a follower", p.fields()...)
	}
	return p.storageErr(p.txns.Add(producerID, epoch, coordinatorEpoch))
}

// WriteMarker appends the commit or abort marker that ends the producer
// epoch's transaction here and returns once the high watermark covers it
// (every in-sync replica holds it). A repeat for an epoch a marker already
// ended answers Duplicate without writing (after waiting for the log to be
// committed up to its end, so the original marker is covered too).
func (p *Partition) WriteMarker(ctx context.Context, req *MarkerRequest) (MarkerResult, error) {
	if err := p.check(req.LifecycleEpoch); err != nil {
		return MarkerResult{}, err
	}
	if req.ProducerID == "" {
		return MarkerResult{}, errcode.MissingProducerID.New("transaction marker without a producer id", p.fields("param", "producer_id")...)
	}
	if req.CoordinatorEpoch < math.MinInt32 || req.CoordinatorEpoch > math.MaxInt32 {
		return MarkerResult{}, errcode.InvalidParameter.New("coordinator epoch outside int32",
			p.fields("param", "coordinator_epoch", "value", strconv.FormatInt(req.CoordinatorEpoch, 10))...)
	}
	if isr, minISR := max(req.ISRSize, 1), max(req.MinISR, 1); minISR > isr {
		return MarkerResult{}, errcode.InsufficientInSyncReplicas.New("fewer in-sync replicas than the effective minimum",
			p.fields("isr", strconv.Itoa(isr), "min_in_sync_replicas", strconv.Itoa(minISR))...)
	}
	m := wire.TxnMarker{Commit: req.Commit, CoordinatorEpoch: int32(req.CoordinatorEpoch)}
	now := p.node.clock.Now()
	rec := wire.TxnMarkerRecord(p.topic, p.id, req.ProducerID, req.ProducerEpoch, req.TransactionalID, m, now.UnixMilli())
	body, err := rec.AppendTo(nil)
	if err != nil {
		return MarkerResult{}, err
	}
	in, err := p.node.inspector.Inspect(body)
	if err != nil {
		return MarkerResult{}, err
	}
	set := make([]byte, 4, 4+len(body))
	set[0], set[1], set[2], set[3] = byte(len(body)>>24), byte(len(body)>>16), byte(len(body)>>8), byte(len(body))
	set = append(set, body...)
	b := &seglog.Batch{Records: set, OffsetPos: []int{4 + in.OffsetPos},
		Flags:         segment.FlagControl | segment.FlagTransactional,
		ProducerID:    []byte(req.ProducerID),
		ProducerEpoch: req.ProducerEpoch,
		HasTimestamps: true, FirstTimestamp: in.Timestamp, MaxTimestamp: in.Timestamp,
	}

	p.mu.Lock()
	if err := p.check(req.LifecycleEpoch); err != nil {
		p.mu.Unlock()
		return MarkerResult{}, err
	}
	if p.follower.Load() {
		p.mu.Unlock()
		return MarkerResult{}, errcode.NotPartitionLeader.New("this replica is a follower", p.fields()...)
	}
	dup, err := p.txns.CheckMarker(req.ProducerID, req.ProducerEpoch, req.CoordinatorEpoch)
	if err != nil {
		p.mu.Unlock()
		return MarkerResult{}, p.storageErr(err)
	}
	var res MarkerResult
	if dup {
		res.Duplicate = true
	} else {
		b.LeaderEpoch = p.meta.Load().LeaderEpoch
		off, err := p.log.Append(b)
		if err != nil {
			p.mu.Unlock()
			return MarkerResult{}, p.storageErr(err)
		}
		p.txns.Marker(req.ProducerID, req.ProducerEpoch, req.CoordinatorEpoch, req.Commit, off)
		res.Offset = off
	}
	end := p.log.EndOffset()
	p.mu.Unlock()
	if !dup {
		// The LSO moves with the index, not only with the HWM: the group
		// commit may make the marker durable (and wake the readers) before
		// the index records the decision above, and a read_committed long
		// poll that woke then saw the transaction still open.
		p.hwmChanged.fire()
	}
	pa := &PendingAppend{p: p, durable: end, all: true}
	if err := pa.Wait(ctx); err != nil {
		return MarkerResult{}, err
	}
	return res, nil
}

// OpenTxns lists the partition's open transactions, oldest first.
func (p *Partition) OpenTxns() []txnindex.Open { return p.txns.OpenTxns() }

// LastStableOffset returns the partition's LSO.
func (p *Partition) LastStableOffset() uint64 { return p.txns.LSO(p.highWatermark()) }

// committedSkip is read_committed's batch filter: control markers and the
// batches of aborted transactions are left out. Batches of committed
// transactions and non-transactional batches are read; nothing undecided is
// below the LSO the read stops at.
func (p *Partition) committedSkip(h *segment.Header) bool {
	if h.Flags&segment.FlagControl != 0 {
		return true
	}
	return h.Flags&segment.FlagTransactional != 0 && p.txns.Aborted(h.ProducerID, h.BaseOffset)
}

// observeTxn feeds one stored batch to the transaction index: the first
// batch of a producer epoch opens its transaction, a control batch ends it.
func observeTxn(x *txnindex.Index, insp record.Inspector, h *segment.Header, recs []byte) error {
	switch {
	case h.Flags&segment.FlagControl != 0:
		rec, _, ok, bad := record.Next(recs)
		if !ok || bad {
			return errcode.StorageCorrupt.New("control batch without a record", "offset", utoa(h.BaseOffset))
		}
		if _, err := insp.Inspect(rec); err != nil {
			return err
		}
		v, err := wire.ParseRecord(rec)
		if err != nil {
			return err
		}
		k, _ := v.ControlKey()
		val, _ := v.ControlValue()
		m, err := wire.ParseTxnMarker(k, val)
		if err != nil {
			return errcode.StorageCorrupt.New("control record does not decode: "+err.Error(), "offset", utoa(h.BaseOffset))
		}
		x.Marker(string(h.ProducerID), h.ProducerEpoch, int64(m.CoordinatorEpoch), m.Commit, h.BaseOffset)
	case h.Flags&segment.FlagTransactional != 0:
		x.Appended(string(h.ProducerID), h.ProducerEpoch, h.BaseOffset)
	}
	return nil
}

// rebuildTxns rebuilds the transaction index (when the partition opens and
// after a follower's log is cut) from its checkpoint and the log after it,
// or from the whole log when there is no usable checkpoint: which batches
// are transactional is known only by reading them. A checkpoint is usable
// when it covers no more than the log holds, the rule of the producer
// checkpoint it is written with (a cut keeps a prefix of the log, and a
// new checkpoint is synced before the log grows past the cut). Aborted
// ranges below the log start are dropped.
func (p *Partition) rebuildTxns() error {
	x := txnindex.New()
	from := p.log.StartOffset()
	covered, data, ok, err := p.node.state.TxnCheckpoint(p.topic, p.id)
	if err != nil {
		return err
	}
	if ok && covered <= p.log.EndOffset() {
		if x, err = txnindex.Decode(data); err != nil {
			return errcode.StorageCorrupt.New("transaction index checkpoint does not decode: "+err.Error(), p.fields()...)
		}
		from = max(from, covered)
	}
	p.txnScanFrom = from
	err = p.log.ScanBatches(from, math.MaxUint64, func(h *segment.Header, recs []byte) error {
		return observeTxn(x, p.node.inspector, h, recs)
	})
	if err != nil {
		return p.storageErr(err)
	}
	x.TrimBelow(p.log.StartOffset())
	if p.txns == nil {
		p.txns = x
	} else {
		p.txns.Reset(x)
	}
	return nil
}

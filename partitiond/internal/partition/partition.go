package partition

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/partitiond/internal/producer"
	"github.com/strataio/strata/partitiond/internal/record"
	"github.com/strataio/strata/partitiond/internal/seglog"
	"github.com/strataio/strata/partitiond/internal/segment"
	"github.com/strataio/strata/partitiond/internal/statestore"
	"github.com/strataio/strata/partitiond/internal/txnindex"
)

// Acks values (spec 4.6): -1 and "all" are aliases.
const (
	AcksNone   int32 = 0
	AcksLeader int32 = 1
	AcksAll    int32 = -1
)

// AppendRequest is one batch to append (the Go form of the proto
// AppendRequest plus the ISR facts the caller knows from metad).
type AppendRequest struct {
	// LifecycleEpoch is the topic lifecycle epoch the caller routed with.
	LifecycleEpoch uint64
	Acks           int32
	// Records is the record set ([u32 length][Wire v2 record] repeated).
	// Append writes the partition and the assigned offsets into it in
	// place; it must not be used concurrently with the call.
	Records     []byte
	RecordCount uint32
	// Producer identity (spec 4.6). Idempotent with BaseSequence > 0 turns
	// on dedup; LastSequence 0 means BaseSequence + RecordCount - 1.
	ProducerID    string
	ProducerEpoch int64
	BaseSequence  uint64
	LastSequence  uint64
	Idempotent    bool
	// Transactional marks a write of an open transaction (TXN_PUBLISH through
	// the coordinator): the producer epoch must have been added to the
	// partition (AddTxn), BaseSequence > 0 is required and deduplicates
	// whatever the topic's idempotence setting, acks must be all, and the
	// records may carry transaction metadata (never control fields).
	Transactional bool
	// ISRSize and MinISR are the current in-sync replica count and the
	// effective minimum (topic override, else broker min_insync_replicas);
	// values <= 0 mean 1 (a standalone single replica).
	ISRSize int
	MinISR  int
	// Guard, when set, runs under the partition's append lock right before
	// the batch is written (after the lifecycle, leader, transaction and
	// dedup checks); an error
	// refuses the append. Appended runs under the same lock right after the
	// write with the batch's first offset. Together they make a check and
	// an append one step: APPEND_STREAM's version check
	// (partitiond/internal/streams).
	Guard    func() error
	Appended func(base uint64)
}

// AppendResult answers an append.
type AppendResult struct {
	BaseOffset uint64
	LastOffset uint64
	// Duplicate: the batch was a retry of a stored one; the offsets are the
	// original ones.
	Duplicate   bool
	LeaderEpoch uint64
}

// Isolation is a fetch's isolation level.
type Isolation uint8

// Isolation levels: read_committed stops at the last stable offset and
// skips aborted transactional batches and control markers; read_uncommitted
// reads the raw log up to the high watermark, markers included.
const (
	ReadCommitted Isolation = iota
	ReadUncommitted
)

// FetchRequest asks for records from Offset.
type FetchRequest struct {
	LifecycleEpoch uint64
	Offset         uint64
	// MaxRecords and MaxBytes bound the answer (0: node defaults). The first
	// record is returned even when it alone exceeds MaxBytes.
	MaxRecords int
	MaxBytes   int
	// Wait is the long-poll time: with nothing at Offset yet, Fetch waits up
	// to Wait for an append to become readable.
	Wait      time.Duration
	Isolation Isolation
}

// FetchResult answers a fetch.
type FetchResult struct {
	// Records is a record set with offsets written in.
	Records     []byte
	RecordCount int
	// NextOffset is the offset to fetch next.
	NextOffset     uint64
	LogStartOffset uint64
	HighWatermark  uint64
	LogEndOffset   uint64
	// LastStableOffset is the end read_committed readers see (<= HWM).
	LastStableOffset uint64
}

// Offsets is a partition's offset range (spec 2.2).
type Offsets struct {
	// Earliest is the first retained offset.
	Earliest uint64
	// Latest is the next readable committed offset (autoOffsetReset=latest).
	Latest uint64
	// LEO is the next offset to assign.
	LEO uint64
	// HWM is the next offset visible to committed readers.
	HWM uint64
	// LSO is the last stable offset: the first offset of the earliest
	// undecided transaction, else the HWM. read_committed readers end there.
	LSO uint64
}

const (
	goneNot = iota
	goneDeleted
	goneTruncated
	goneClosed
)

// Partition is one partition replica on this node. Its methods are safe for
// concurrent use.
type Partition struct {
	node  *Node
	topic string
	id    int32

	// mu orders appends with the producer table: check, assign offsets,
	// write, record, as one step.
	mu        sync.Mutex
	producers *producer.Table
	// txns is the transaction state (added epochs, open transactions, the
	// LSO, the aborted index); mutated under mu, read by fetches under its
	// own leaf lock.
	txns *txnindex.Index
	// txnScanFrom is where the last rebuild of txns started reading the
	// log (its checkpoint's offset, or the log start): for tests.
	txnScanFrom uint64

	// maint excludes maintenance from lifecycle changes.
	maint sync.Mutex

	log  *seglog.Log
	meta atomic.Pointer[statestore.Meta]

	gone      atomic.Int32
	goneEpoch atomic.Uint64

	// Replication (replica.go): the HWM is min(durable end, hwmCap), kept
	// monotonic in hwm; follower turns client appends off. hwmChanged also
	// fires when a marker moves the LSO (txn.go).
	hwmCap     atomic.Uint64
	hwm        atomic.Uint64
	follower   atomic.Bool
	hwmChanged signal
	// rewinds counts follower truncations and skips (streamlog.go).
	rewinds atomic.Uint64

	// Maintenance bookkeeping (under maint).
	ckptBase         uint64
	ckptSize         int64
	lastProducerCkpt uint64
	producerCovered  uint64
}

// Topic returns the partition's topic.
func (p *Partition) Topic() string { return p.topic }

// ID returns the partition number.
func (p *Partition) ID() int32 { return p.id }

// LifecycleEpoch returns the topic lifecycle epoch the partition's data
// belongs to.
func (p *Partition) LifecycleEpoch() uint64 { return p.meta.Load().LifecycleEpoch }

// LeaderEpoch returns the leader epoch appends are stored under.
func (p *Partition) LeaderEpoch() uint64 { return p.meta.Load().LeaderEpoch }

// Config returns the stored topic config.
func (p *Partition) Config() TopicConfig { return p.meta.Load().Config }

func (p *Partition) fields(kv ...string) []string {
	return append([]string{"topic", p.topic, "partition", strconv.Itoa(int(p.id))}, kv...)
}

func utoa(v uint64) string { return strconv.FormatUint(v, 10) }

// check rejects requests on a partition that was deleted or replaced, or
// that carry another lifecycle epoch.
func (p *Partition) check(epoch uint64) error {
	switch p.gone.Load() {
	case goneDeleted:
		return errcode.PartitionNotFound.New("partition is not hosted on this node", p.fields()...)
	case goneClosed:
		// The node is shutting down (a clean stop moves leadership away
		// first): requests that raced the close are retried on the new
		// leader. partition_not_found would be final for the client.
		return errcode.RoleUnavailable.New("partition server is shutting down", p.fields()...)
	case goneTruncated:
		cur := p.goneEpoch.Load()
		if epoch < cur {
			return errcode.StaleLifecycleEpoch.New("topic was truncated under a newer lifecycle epoch",
				p.fields("current", utoa(cur), "got", utoa(epoch))...)
		}
		return errcode.LifecycleEpochPending.New("partition was replaced by a truncate; look it up again",
			p.fields("current", utoa(cur), "got", utoa(epoch))...)
	}
	cur := p.meta.Load().LifecycleEpoch
	switch {
	case epoch < cur:
		return errcode.StaleLifecycleEpoch.New("request carries an older topic lifecycle epoch",
			p.fields("current", utoa(cur), "got", utoa(epoch))...)
	case epoch > cur:
		return errcode.LifecycleEpochPending.New("this node has not applied the request's lifecycle epoch yet",
			p.fields("current", utoa(cur), "got", utoa(epoch))...)
	}
	return nil
}

// storageErr adds the partition to storage errors from the log.
func (p *Partition) storageErr(err error) error { return withPartition(err, p.topic, p.id) }

// withPartition returns a typed error with the topic and partition fields
// added where err lacks them (a copy: err itself is not changed); an
// untyped err is returned as it is.
func withPartition(err error, topic string, id int32) error {
	var e *errcode.Error
	if errors.As(err, &e) {
		c := *e
		c.Fields = append([]errcode.Field(nil), e.Fields...)
		for _, f := range []errcode.Field{{Key: "topic", Value: topic}, {Key: "partition", Value: strconv.Itoa(int(id))}} {
			if !hasField(c.Fields, f.Key) {
				c.Fields = insertField(c.Fields, f)
			}
		}
		return &c
	}
	return err
}

func hasField(fs []errcode.Field, k string) bool {
	for _, f := range fs {
		if f.Key == k {
			return true
		}
	}
	return false
}

func insertField(fs []errcode.Field, f errcode.Field) []errcode.Field {
	i := 0
	for i < len(fs) && fs[i].Key < f.Key {
		i++
	}
	fs = append(fs, errcode.Field{})
	copy(fs[i+1:], fs[i:])
	fs[i] = f
	return fs
}

func ctxErr(err error, what string) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return errcode.RequestTimeout.New(what + ": deadline exceeded")
	}
	return errcode.RequestCancelled.New(what + ": request cancelled")
}

// Append stores a batch (spec 4.6). Validation, the acks rules and the
// idempotence rules are checked before anything is written or any producer
// sequence changes. With acks 1 or all the call returns after the fdatasync
// that covers the batch; with acks 0 it returns once the batch is written
// (it is still made durable by the next group commit). A retried idempotent
// batch returns its original offsets with Duplicate set, also only once
// they are durable.
func (p *Partition) Append(ctx context.Context, req *AppendRequest) (AppendResult, error) {
	pa, err := p.AppendAsync(ctx, req)
	if err != nil {
		return AppendResult{}, err
	}
	if req.Acks == AcksNone && !pa.Result.Duplicate {
		return pa.Result, nil
	}
	if err := pa.Wait(ctx); err != nil {
		return AppendResult{}, err
	}
	return pa.Result, nil
}

// PendingAppend is a batch written to the log (or recognised as a retry of a
// stored one) whose durability may still be outstanding.
type PendingAppend struct {
	// Result holds the assigned (or, for a duplicate, the original) offsets.
	// They must not be acknowledged with acks 1 or all before Wait returns.
	Result  AppendResult
	p       *Partition
	durable uint64 // the log end the acknowledgement waits for
	all     bool   // acks all: also wait for the high watermark
}

// Wait blocks until the fdatasync covering the batch finished and, for
// acks all, until the high watermark passed the batch: every in-sync
// replica holds it durably (or ctx ends). An fsync failure is returned,
// never retried-and-acknowledged; a partition that stopped leading answers
// NOT_PARTITION_LEADER (retryable: the gateway looks the leader up again,
// and an idempotent retry is answered with the original offsets).
func (pa *PendingAppend) Wait(ctx context.Context) error {
	p := pa.p
	if err := p.log.WaitDurable(ctx, pa.durable); err != nil {
		return p.waitErr(err)
	}
	if !pa.all {
		return nil
	}
	for {
		logCh, hwmCh := p.Changed()
		if p.highWatermark() >= pa.durable {
			return nil
		}
		if err := p.checkGone(); err != nil {
			return err
		}
		if p.follower.Load() {
			return errcode.NotPartitionLeader.New("the partition stopped leading before the batch was committed", p.fields()...)
		}
		if err := p.log.Fenced(); err != nil {
			return p.storageErr(err)
		}
		select {
		case <-logCh:
		case <-hwmCh:
		case <-ctx.Done():
			return p.waitErr(ctx.Err())
		}
	}
}

// AppendAsync is Append split in two for pipelined callers (the gRPC Produce
// stream): it validates and writes the batch, assigning its offsets in call
// order, and returns without waiting for the group-commit fdatasync; the
// caller acknowledges after PendingAppend.Wait (acks 1 or all). Calls on one
// partition are ordered by their return, so a caller issuing appends one
// after the other keeps their order in the log.
func (p *Partition) AppendAsync(ctx context.Context, req *AppendRequest) (*PendingAppend, error) {
	if err := p.check(req.LifecycleEpoch); err != nil {
		return nil, err
	}
	switch req.Acks {
	case AcksNone, AcksLeader, AcksAll:
	default:
		return nil, errcode.InvalidParameter.New("acks must be 0, 1, -1 or all", p.fields("param", "acks", "value", strconv.Itoa(int(req.Acks)))...)
	}
	if req.Transactional {
		switch {
		case req.Acks != AcksAll:
			return nil, errcode.InvalidParameter.New("transactional writes use acks all", p.fields("param", "acks")...)
		case req.ProducerID == "":
			return nil, errcode.MissingProducerID.New("transactional write without a producer id", p.fields("param", "producer_id")...)
		case req.BaseSequence == 0:
			return nil, errcode.InvalidParameter.New("transactional writes need seqNum above 0", p.fields("param", "seqNum")...)
		}
	}
	if req.Idempotent && req.Acks != AcksAll {
		return nil, errcode.IdempotenceRequiresAcksAll.New("idempotence requires acks all or -1",
			p.fields("acks", strconv.Itoa(int(req.Acks)))...)
	}
	if req.Acks == AcksAll {
		isr, minISR := max(req.ISRSize, 1), max(req.MinISR, 1)
		if minISR > isr {
			return nil, errcode.InsufficientInSyncReplicas.New("fewer in-sync replicas than the effective minimum",
				p.fields("isr", strconv.Itoa(isr), "min_in_sync_replicas", strconv.Itoa(minISR))...)
		}
	}
	meta := p.meta.Load()
	b, err := p.prepare(req, meta)
	if err != nil {
		return nil, err
	}
	dedup := (req.Idempotent || req.Transactional) && req.BaseSequence > 0
	var pb producer.Batch
	if dedup {
		last := req.LastSequence
		n := uint64(len(b.OffsetPos))
		if last == 0 {
			last = req.BaseSequence + n - 1
		}
		if last < req.BaseSequence || last-req.BaseSequence+1 != n {
			return nil, errcode.InvalidParameter.New("sequence range does not match the record count",
				p.fields("param", "last_sequence", "base", utoa(req.BaseSequence), "last", utoa(last), "records", utoa(n))...)
		}
		if req.ProducerID == "" {
			return nil, errcode.MissingParameter.New("idempotent append without a producer id", p.fields("param", "producer_id")...)
		}
		pb = producer.Batch{ProducerID: req.ProducerID, Epoch: req.ProducerEpoch, BaseSeq: req.BaseSequence, LastSeq: last}
		b.Flags |= segment.FlagIdempotent
		b.BaseSequence, b.LastSequence = req.BaseSequence, last
	}
	b.ProducerID = []byte(req.ProducerID)
	b.ProducerEpoch = req.ProducerEpoch
	if req.Transactional {
		b.Flags |= segment.FlagTransactional
	}

	now := p.node.clock.Now()
	p.mu.Lock()
	if err := p.check(req.LifecycleEpoch); err != nil {
		p.mu.Unlock()
		return nil, err
	}
	if p.follower.Load() {
		p.mu.Unlock()
		return nil, errcode.NotPartitionLeader.New("this replica is a follower", p.fields()...)
	}
	if req.Transactional {
		// Before the dedup check: a retry that arrives after the marker
		// ended its epoch is a delayed write and is refused, not answered.
		if err := p.txns.CheckAppend(req.ProducerID, req.ProducerEpoch); err != nil {
			p.mu.Unlock()
			return nil, p.storageErr(err)
		}
	}
	if dedup {
		v, err := p.producers.Check(pb, now)
		if err != nil {
			p.mu.Unlock()
			return nil, p.storageErr(err)
		}
		if v.Duplicate {
			p.mu.Unlock()
			res := AppendResult{BaseOffset: v.Ref.BaseOffset, LastOffset: v.Ref.LastOffset, Duplicate: true, LeaderEpoch: meta.LeaderEpoch}
			return &PendingAppend{Result: res, p: p, durable: v.Ref.LastOffset + 1, all: req.Acks == AcksAll}, nil
		}
	}
	// The guard runs after the dedup check: a retried transactional event
	// append (TXN_APPEND_STREAM) is answered as the duplicate it is, not
	// refused because its own first attempt took the version.
	if req.Guard != nil {
		if err := req.Guard(); err != nil {
			p.mu.Unlock()
			return nil, err
		}
	}
	b.LeaderEpoch = p.meta.Load().LeaderEpoch
	base, err := p.log.Append(b)
	if err != nil {
		p.mu.Unlock()
		return nil, p.storageErr(err)
	}
	last := base + uint64(len(b.OffsetPos)) - 1
	if dedup {
		p.producers.Record(pb, base, last, now.UnixMilli())
	}
	if req.Transactional {
		p.txns.Appended(req.ProducerID, req.ProducerEpoch, base)
	}
	if req.Appended != nil {
		req.Appended(base)
	}
	p.mu.Unlock()
	res := AppendResult{BaseOffset: base, LastOffset: last, LeaderEpoch: b.LeaderEpoch}
	return &PendingAppend{Result: res, p: p, durable: last + 1, all: req.Acks == AcksAll}, nil
}

func (p *Partition) waitErr(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return ctxErr(err, "append written but not yet acknowledged as durable")
	}
	return p.storageErr(err)
}

// prepare validates the record set and builds the log batch: every record
// must decode, belong to this topic, carry a key on compacted topics, never
// carry control fields (markers are written by WriteMarker only), and carry
// transaction metadata only on a transactional write. The partition field of
// every record is set to this partition.
func (p *Partition) prepare(req *AppendRequest, meta *statestore.Meta) (*seglog.Batch, error) {
	set := req.Records
	if len(set) == 0 || req.RecordCount == 0 {
		return nil, errcode.InvalidParameter.New("empty record set", p.fields("param", "records")...)
	}
	if len(set) > p.node.cfg.Defaults.MaxBatchBytes {
		return nil, errcode.InvalidParameter.New("record set larger than the batch limit",
			p.fields("param", "records", "bytes", strconv.Itoa(len(set)), "max", strconv.Itoa(p.node.cfg.Defaults.MaxBatchBytes))...)
	}
	if req.RecordCount > 100_000 {
		return nil, errcode.InvalidParameter.New("more than 100000 records in one batch", p.fields("param", "record_count")...)
	}
	compact := hasCompact(p.node.policy(meta.Config))
	b := &seglog.Batch{Records: set, OffsetPos: make([]int, 0, req.RecordCount)}
	topic := []byte(p.topic)
	pos := 0
	var in record.Info // one for every record: InspectInto overwrites it whole
	for pos < len(set) {
		rec, _, ok, bad := record.Next(set[pos:])
		if bad || !ok {
			return nil, errcode.MalformedInput.New("record set length prefixes do not cover the set",
				p.fields("record", strconv.Itoa(len(b.OffsetPos)))...)
		}
		// Wire's inspection (node.inspector) without its interface call
		// and copies of Info: this loop runs for every appended record.
		if err := record.InspectInto(rec, &in); err != nil {
			return nil, err
		}
		n := len(b.OffsetPos)
		switch {
		case !bytes.Equal(in.Topic, topic):
			return nil, errcode.InvalidParameter.New("record topic differs from the partition's topic",
				p.fields("param", "records", "record", strconv.Itoa(n), "record_topic", string(in.Topic))...)
		case in.Control:
			return nil, errcode.TransactionMetadataForbidden.New("control records are written by the transaction coordinator's markers only",
				p.fields("command", "PUBLISH", "record", strconv.Itoa(n))...)
		case in.Transactional && !req.Transactional:
			return nil, errcode.TransactionMetadataForbidden.New("transaction metadata is internal to TXN_PUBLISH",
				p.fields("command", "PUBLISH", "record", strconv.Itoa(n))...)
		case compact && !in.HasKey:
			return nil, errcode.InvalidParameter.New("records of a compacted topic need a key",
				p.fields("param", "key", "record", strconv.Itoa(n))...)
		}
		record.SetPartition(rec, &in, p.id)
		b.OffsetPos = append(b.OffsetPos, pos+4+in.OffsetPos)
		if in.HasTimestamp {
			if !b.HasTimestamps {
				b.HasTimestamps, b.FirstTimestamp, b.MaxTimestamp = true, in.Timestamp, in.Timestamp
			}
			b.MaxTimestamp = max(b.MaxTimestamp, in.Timestamp)
		}
		pos += 4 + len(rec)
	}
	if len(b.OffsetPos) != int(req.RecordCount) {
		return nil, errcode.InvalidParameter.New("record_count differs from the records sent",
			p.fields("param", "record_count", "declared", strconv.Itoa(int(req.RecordCount)), "found", strconv.Itoa(len(b.OffsetPos)))...)
	}
	return b, nil
}

// ListOffsets returns the partition's offset range.
func (p *Partition) ListOffsets() (Offsets, error) {
	if err := p.checkGone(); err != nil {
		return Offsets{}, err
	}
	hwm := p.highWatermark()
	return Offsets{Earliest: p.log.StartOffset(), Latest: hwm, LEO: p.log.EndOffset(), HWM: hwm, LSO: p.txns.LSO(hwm)}, nil
}

func (p *Partition) checkGone() error {
	if p.gone.Load() == goneNot {
		return nil
	}
	return p.check(p.meta.Load().LifecycleEpoch)
}

// OffsetForTime returns the first offset of the first batch whose max
// timestamp is at least ts (through the time index); ok is false when no
// stored batch is that late.
func (p *Partition) OffsetForTime(ts int64) (uint64, bool, error) {
	if err := p.checkGone(); err != nil {
		return 0, false, err
	}
	off, ok, err := p.log.OffsetForTime(ts)
	return off, ok, p.storageErr(err)
}

// Fetch reads records from req.Offset (spec 4.6 CONSUME):
//
//   - below the log start, or above the log end offset:
//     errcode.OffsetOutOfRange with requested, earliest and latest;
//   - at or above the high watermark (and not above the log end): an empty
//     answer, after waiting up to req.Wait for an append to become readable
//     (woken by the append's fdatasync, no polling);
//   - otherwise the records from the offset, never any at or above the high
//     watermark (the durable end with one replica). Compaction gaps are
//     skipped: NextOffset moves past them even when no record is returned.
//
// When the partition is fenced after a storage failure, data below the
// durable end is still served and anything above it fails with
// errcode.StorageUnavailable instead of waiting.
func (p *Partition) Fetch(ctx context.Context, req *FetchRequest) (FetchResult, error) {
	maxRecords, maxBytes := req.MaxRecords, req.MaxBytes
	if maxRecords <= 0 {
		maxRecords = p.node.cfg.Defaults.FetchMaxRecords
	}
	if maxBytes <= 0 {
		maxBytes = p.node.cfg.Defaults.FetchMaxBytes
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		changed, hwmChanged := p.Changed()
		if err := p.check(req.LifecycleEpoch); err != nil {
			return FetchResult{}, err
		}
		start, hwm, leo := p.log.StartOffset(), p.highWatermark(), p.log.EndOffset()
		lso := p.txns.LSO(hwm)
		res := FetchResult{NextOffset: req.Offset, LogStartOffset: start, HighWatermark: hwm, LogEndOffset: leo, LastStableOffset: lso}
		if req.Offset < start || req.Offset > leo {
			return FetchResult{}, p.outOfRange(req.Offset, start, hwm)
		}
		end, skip := hwm, (func(*segment.Header) bool)(nil)
		if req.Isolation == ReadCommitted {
			end, skip = lso, p.committedSkip
		}
		if req.Offset < end {
			r, err := p.log.ReadFiltered(req.Offset, maxRecords, maxBytes, end, skip)
			if errors.Is(err, seglog.ErrBelowStart) {
				return FetchResult{}, p.outOfRange(req.Offset, p.log.StartOffset(), hwm)
			}
			if err != nil {
				return FetchResult{}, p.storageErr(err)
			}
			if r.Count > 0 || r.Next > req.Offset {
				res.Records, res.RecordCount, res.NextOffset = r.Records, r.Count, r.Next
				return res, nil
			}
		}
		if p.log.Fenced() != nil {
			return FetchResult{}, p.storageErr(errcode.StorageUnavailable.New("partition storage is fenced; nothing above the durable end can be read",
				"durable_end", utoa(hwm)))
		}
		if req.Wait <= 0 {
			return res, nil
		}
		if timer == nil {
			timer = time.NewTimer(req.Wait)
		}
		select {
		case <-changed:
		case <-hwmChanged:
		case <-timer.C:
			return res, nil
		case <-ctx.Done():
			return FetchResult{}, ctxErr(ctx.Err(), "fetch")
		}
	}
}

func (p *Partition) outOfRange(requested, earliest, latest uint64) error {
	return errcode.OffsetOutOfRange.New("offset outside the retained log",
		p.fields("requested", utoa(requested), "earliest", utoa(earliest), "latest", utoa(latest))...)
}

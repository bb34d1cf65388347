package seglog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/partitiond/internal/clock"
	"github.com/strataio/strata/partitiond/internal/fsys"
	"github.com/strataio/strata/partitiond/internal/record"
	"github.com/strataio/strata/partitiond/internal/segment"
)

// Scheduler queues a log for the node's group-commit syncer. Request must
// not block; the syncer later calls SyncPending on the log.
type Scheduler interface {
	Request(t SyncTarget)
}

// SyncTarget is what the syncer syncs.
type SyncTarget interface {
	SyncPending()
}

// Defaults of Config fields left zero.
const (
	DefaultSegmentBytes  = 1 << 30
	DefaultSegmentAge    = 7 * 24 * time.Hour
	DefaultIndexInterval = 4096
	// MaxSegmentBytes keeps every position in a u32 index entry.
	MaxSegmentBytes = math.MaxInt32
)

// Config configures one partition log.
type Config struct {
	// Dir is the log directory; it must exist (its entry durable in the
	// parent) before Open.
	Dir string
	FS  fsys.FS
	// Clock stamps append times and drives roll by age.
	Clock clock.Clock
	// Syncer batches fdatasyncs across the node (group commit).
	Syncer Scheduler
	// Cache holds open segment readers for the node.
	Cache *ReaderCache
	// Inspector reads keys for compaction.
	Inspector record.Inspector
	Logger    *slog.Logger
	// SegmentBytes rolls the active segment before it would exceed this size.
	SegmentBytes int64
	// SegmentAge rolls a non-empty active segment this long after its first
	// append.
	SegmentAge time.Duration
	// IndexInterval is the number of log bytes between sparse index entries.
	IndexInterval int
	// Preallocate is the largest step, in bytes, by which the active
	// segment's file is extended (fallocate, mode 0) ahead of its data end;
	// steps start at 64 KiB and grow with the segment; 0 turns it off. Appends inside the allocated part change neither the file size
	// nor the block map, so their fdatasync writes no inode (ext4). Closed
	// segments are cut back to their data end; recovery cuts the zero tail
	// of the last segment like a torn write.
	Preallocate int64
	// CacheWindow is how many bytes of the log's tail stay in the OS page
	// cache: synced bytes further behind the durable end are dropped from it
	// after they are written, and after a read (pagecache.go). 0 leaves the
	// page cache to the kernel.
	CacheWindow int64
	// OnDrop, when set, is called with the bytes given back to the kernel
	// (CacheWindow): read says the pages were dropped after a read, not
	// after being written. It must not block.
	OnDrop func(read bool, n int64)
	// VerifyAll makes Open check the CRC of every batch of every segment,
	// not only the part after the last checkpoint.
	VerifyAll bool
	// OnFence is called once when the log fences itself after an I/O or
	// fdatasync failure.
	OnFence func(err error)
	// OnDurable, when set, is called after every advance of the durable
	// end (a leader wakes its followers' long polls with it). It must not
	// block.
	OnDurable func()
	// OnSync, when set, is called with the duration of every fdatasync of
	// the group commit that made data durable (the storage's fsync latency
	// metric). It must not block.
	OnSync func(time.Duration)
}

func (c *Config) setDefaults() {
	if c.Clock == nil {
		c.Clock = clock.System{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = DefaultSegmentBytes
	}
	if c.SegmentBytes > MaxSegmentBytes {
		c.SegmentBytes = MaxSegmentBytes
	}
	if c.SegmentAge <= 0 {
		c.SegmentAge = DefaultSegmentAge
	}
	if c.IndexInterval <= 0 {
		c.IndexInterval = DefaultIndexInterval
	}
	if c.Inspector == nil {
		c.Inspector = record.Wire{}
	}
	if c.Cache == nil {
		c.Cache = NewReaderCache(64)
	}
}

var segIDs atomic.Uint64

// seg is one segment. The active segment's metadata changes under mu (held
// briefly by the appender); a closed segment never changes. A retired
// segment (deleted by retention or replaced by compaction) may not be opened
// again; readers that find it retired retry with a fresh snapshot.
type seg struct {
	base uint64
	path string

	mu           sync.RWMutex
	retired      bool
	closed       bool // no more appends; fully synced
	size         int64
	next         uint64
	lastBatchPos int64
	maxTS        int64
	maxAppend    int64
	firstAppend  int64
	index        []segment.IndexEntry
	tindex       []segment.TimeEntry
	sinceIndex   int64

	w *writer // active segment only
}

// writer is the active segment's write handle. mu serialises SyncData with
// Close so the syncer never syncs a closed file. A failed fdatasync is
// sticky (err): the file is closed, and every later sync or roll of it
// returns the same failure, never "already synced". Without that, a roll
// racing the fence of a failed sync (fence is visible to writers only once
// its report ran) took the closed file for a synced one, made its unsynced
// tail durable and wrote an index past the data the disk holds.
type writer struct {
	f      fsys.File
	mu     sync.Mutex
	closed bool
	err    error
	// alloc is the file size preallocation reached (the data end when
	// nothing was preallocated). Only the appender (l.mu) uses it.
	alloc int64
}

func (w *writer) sync() (skipped bool, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return false, w.err
	}
	if w.closed {
		return true, nil
	}
	if err := w.f.SyncData(); err != nil {
		w.err = err
		return false, err
	}
	return false, nil
}

func (w *writer) syncAndClose() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return nil
	}
	err := w.f.SyncData()
	w.closed = true
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	w.err = err
	return err
}

func (w *writer) closeNoSync() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed {
		w.closed = true
		_ = w.f.Close()
	}
}

func (s *seg) summary() segment.Summary {
	return segment.Summary{LogSize: s.size, NextOffset: s.next, LastBatchPos: s.lastBatchPos,
		MaxTimestamp: s.maxTS, MaxAppendTime: s.maxAppend, FirstAppendTime: s.firstAppend}
}

// mark is a point in the log: offsets below end are in segments up to seg,
// whose first pos bytes hold them.
type mark struct {
	seg *seg
	pos int64
	end uint64
	// gen is the log's truncation generation when the mark was made: a
	// sync that began before a truncation must not move the durable end
	// back over the cut (advanceDurable ignores marks of an older gen).
	gen uint64
}

type errBox struct{ err error }

// Log is one partition's segment log.
type Log struct {
	cfg Config

	// mu serialises appends, rolls, checkpoints, truncation and Close.
	mu     sync.Mutex
	active *seg
	epochs []EpochStart
	closed bool
	gen    uint64 // truncations so far (marks carry it)
	// noPrealloc: the file system cannot preallocate (l.mu).
	noPrealloc bool

	// segsMu guards replacing the segment snapshot (a leaf lock).
	segsMu sync.Mutex
	segs   atomic.Pointer[[]*seg]

	// maint serialises retention and compaction.
	maint sync.Mutex

	leo     atomic.Uint64
	written atomic.Pointer[mark]
	durable atomic.Pointer[mark]
	queued  atomic.Bool
	fencing atomic.Bool
	fenced  atomic.Pointer[errBox]

	nmu     sync.Mutex
	changed chan struct{}

	syncs atomic.Uint64
	shut  atomic.Bool

	drop dropper
}

func (l *Log) isShut() bool { return l.shut.Load() }

// Errors of the log. Partition code maps them to catalogue codes with the
// partition's name; they are also *errcode.Error values themselves.
var (
	// ErrClosed: the log was closed.
	ErrClosed = errors.New("seglog: log closed")
	// errRetired: a reader raced a segment's deletion or replacement.
	errRetired = errors.New("seglog: segment retired")
)

// Open opens (recovering) or creates the log in cfg.Dir. A damaged tail is
// cut back to the last valid batch; damage below the tail is returned as an
// errcode.StorageCorrupt error.
func Open(cfg Config) (*Log, error) {
	cfg.setDefaults()
	l := &Log{cfg: cfg, changed: make(chan struct{})}
	if err := l.recover(); err != nil {
		return nil, err
	}
	return l, nil
}

// Dir returns the log directory.
func (l *Log) Dir() string { return l.cfg.Dir }

// Fenced returns the error that fenced the log, or nil.
func (l *Log) Fenced() error {
	if b := l.fenced.Load(); b != nil {
		return b.err
	}
	return nil
}

func (l *Log) unavailable(msg string) *errcode.Error {
	cause := l.Fenced()
	e := errcode.StorageUnavailable.New(msg, "dir", l.cfg.Dir)
	if cause != nil {
		e.Message = msg + ": " + cause.Error()
	}
	return e
}

// fence stops the log after an I/O failure: an fdatasync error is never
// retried and acknowledged (on Linux a failed writeback marks the pages
// clean, so a retried fsync can succeed without the data), and a failed
// write may have left a partial batch in the file.
func (l *Log) fence(err error) {
	if !l.fencing.CompareAndSwap(false, true) {
		return
	}
	l.cfg.Logger.Error("partition log fenced after a storage failure", "dir", l.cfg.Dir, "err", err)
	// The failure is reported before anyone can see the fence, so a caller
	// that got its error has always been counted (storage failure metrics
	// and logs are never behind what clients saw).
	if l.cfg.OnFence != nil {
		l.cfg.OnFence(err)
	}
	l.fenced.Store(&errBox{err})
	l.notify()
}

// notify wakes everything waiting on Changed.
func (l *Log) notify() {
	l.nmu.Lock()
	close(l.changed)
	l.changed = make(chan struct{})
	l.nmu.Unlock()
}

// Changed returns a channel closed at the next durable-end advance, fence or
// close. Callers read the state after taking the channel, then wait on it.
func (l *Log) Changed() <-chan struct{} {
	l.nmu.Lock()
	defer l.nmu.Unlock()
	return l.changed
}

// StartOffset returns the first retained offset (the base of the oldest
// segment; with compaction the first record may be later).
func (l *Log) StartOffset() uint64 { return (*l.segs.Load())[0].base }

// EndOffset returns the log end offset: the next offset to assign.
func (l *Log) EndOffset() uint64 { return l.leo.Load() }

// DurableEnd returns the offset below which every batch is synced.
func (l *Log) DurableEnd() uint64 { return l.durable.Load().end }

// Syncs returns the number of successful fdatasyncs of this log's segments.
func (l *Log) Syncs() uint64 { return l.syncs.Load() }

func (l *Log) advanceDurable(m *mark) {
	for {
		d := l.durable.Load()
		if m.gen < d.gen || m.end <= d.end {
			return
		}
		if l.durable.CompareAndSwap(d, m) {
			l.notify()
			if l.cfg.OnDurable != nil {
				l.cfg.OnDurable()
			}
			return
		}
	}
}

// WaitDurable blocks until every offset below end is durable, the log is
// fenced (errcode.StorageUnavailable) or ctx ends.
func (l *Log) WaitDurable(ctx context.Context, end uint64) error {
	for {
		ch := l.Changed()
		if l.durable.Load().end >= end {
			return nil
		}
		if l.Fenced() != nil {
			return l.unavailable("partition storage failed before the batch was durable")
		}
		if l.isClosed() {
			return errcode.StorageUnavailable.New("partition log closed before the batch was durable", "dir", l.cfg.Dir)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (l *Log) isClosed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// SyncPending is called by the node syncer: it fdatasyncs the active
// segment up to what was written when the call began and advances the
// durable end. A failure fences the log.
func (l *Log) SyncPending() {
	l.queued.Store(false)
	if l.Fenced() != nil {
		return
	}
	w := l.written.Load()
	if w == nil || w.end <= l.durable.Load().end {
		return
	}
	start := time.Now()
	skipped, err := w.seg.w.sync()
	if err != nil {
		l.fence(fmt.Errorf("fdatasync %s: %w", w.seg.path, err))
		return
	}
	if skipped { // a roll or Close synced it already
		return
	}
	if l.cfg.OnSync != nil {
		l.cfg.OnSync(time.Since(start))
	}
	l.syncs.Add(1)
	l.advanceDurable(w)
	l.dropBehind(w)
}

func (l *Log) requestSync() {
	if l.cfg.Syncer == nil {
		l.SyncPending()
		return
	}
	if l.queued.CompareAndSwap(false, true) {
		l.cfg.Syncer.Request(l)
	}
}

// Batch is one batch to append. Records is patched in place (offsets) and
// must not change until Append returns.
type Batch struct {
	// Records is the record set: [u32 length][record] repeated.
	Records []byte
	// OffsetPos holds, per record, the byte position in Records of its u64
	// offset field.
	OffsetPos []int
	Flags     uint16
	// LeaderEpoch is stored in the batch; a new epoch starts a history entry.
	LeaderEpoch uint64
	// HasTimestamps says FirstTimestamp/MaxTimestamp came from the records;
	// otherwise the append time is used.
	HasTimestamps  bool
	FirstTimestamp int64
	MaxTimestamp   int64
	ProducerID     []byte
	ProducerEpoch  int64
	BaseSequence   uint64
	LastSequence   uint64
}

// Append writes b at the end of the log, assigning consecutive offsets from
// the log end. It returns the base offset once the batch is written (not yet
// durable: see WaitDurable). Callers that need to order appends with other
// state (idempotence) hold their own lock around Append.
func (l *Log) Append(b *Batch) (uint64, error) {
	n := len(b.OffsetPos)
	if n == 0 {
		return 0, errcode.InvalidParameter.New("empty batch", "param", "records")
	}
	if len(b.ProducerID) > segment.MaxProducerIDLen {
		return 0, errcode.InvalidParameter.New("producer id too long", "param", "producer_id",
			"max", strconv.Itoa(segment.MaxProducerIDLen))
	}
	hdrLen := segment.HeaderFixed + len(b.ProducerID)
	total := int64(hdrLen + len(b.Records))
	if total > l.cfg.SegmentBytes || total > segment.MaxBatchLen {
		return 0, errcode.InvalidParameter.New("batch larger than a segment", "param", "records",
			"bytes", strconv.FormatInt(total, 10), "segment_bytes", strconv.FormatInt(l.cfg.SegmentBytes, 10))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return 0, err
	}
	now := l.cfg.Clock.Now().UnixMilli()
	base := l.leo.Load()
	last := base + uint64(n) - 1
	if last < base || last == math.MaxUint64 {
		return 0, errcode.Internal.New("offset space exhausted", "dir", l.cfg.Dir)
	}
	h := segment.Header{
		Flags:           b.Flags,
		BaseOffset:      base,
		LastOffsetDelta: uint32(n - 1),
		RecordCount:     uint32(n),
		LeaderEpoch:     b.LeaderEpoch,
		FirstTimestamp:  now,
		MaxTimestamp:    now,
		AppendTime:      now,
		ProducerEpoch:   b.ProducerEpoch,
		BaseSequence:    b.BaseSequence,
		LastSequence:    b.LastSequence,
		ProducerID:      b.ProducerID,
	}
	if b.HasTimestamps {
		h.FirstTimestamp, h.MaxTimestamp = b.FirstTimestamp, b.MaxTimestamp
	}
	if err := l.checkEpochLocked(h.LeaderEpoch); err != nil {
		return 0, err
	}
	for i, p := range b.OffsetPos {
		putU64(b.Records[p:], base+uint64(i))
	}
	if err := l.writeBatchLocked(&h, nil, b.Records, now); err != nil {
		return 0, err
	}
	return base, nil
}

func (l *Log) writableLocked() error {
	if l.closed {
		return errcode.StorageUnavailable.New("partition log closed", "dir", l.cfg.Dir)
	}
	if l.Fenced() != nil {
		return l.unavailable("partition storage is fenced")
	}
	return nil
}

// checkEpochLocked refuses a batch under an older leader epoch than the
// newest the log holds. l.mu is held.
func (l *Log) checkEpochLocked(e uint64) error {
	if len(l.epochs) > 0 && e < l.epochs[len(l.epochs)-1].Epoch {
		cur := l.epochs[len(l.epochs)-1].Epoch
		return errcode.StaleLeaderEpoch.New("append under an older leader epoch",
			"current", strconv.FormatUint(cur, 10), "requested", strconv.FormatUint(e, 10))
	}
	return nil
}

// writeBatchLocked writes one batch whose header fields are set (offsets
// included; Length, CRC and the durable watermark are filled here) at the
// end of the active segment, rolling first when needed, and records a new
// leader epoch in the history before the epoch's first batch. stored, when
// not nil, is the encoded header h was parsed from (a replicated batch): it
// is written as it is but for the watermark, its CRC adjusted to it rather
// than computed again over the records. l.mu is held.
func (l *Log) writeBatchLocked(h *segment.Header, stored, recs []byte, now int64) error {
	hdrLen := segment.HeaderFixed + len(h.ProducerID)
	total := int64(hdrLen + len(recs))
	last := h.LastOffset()
	a := l.active
	if a.size > 0 && (a.size+total > l.cfg.SegmentBytes ||
		now-a.firstAppend >= l.cfg.SegmentAge.Milliseconds() ||
		last-a.base > math.MaxUint32) {
		if err := l.rollLocked(); err != nil {
			return err
		}
		a = l.active
	}
	if len(l.epochs) == 0 || h.LeaderEpoch > l.epochs[len(l.epochs)-1].Epoch {
		// The history entry is durable before the first batch of the epoch,
		// so the history never misses an epoch the log holds.
		es := append(append([]EpochStart(nil), l.epochs...), EpochStart{Epoch: h.LeaderEpoch, StartOffset: h.BaseOffset})
		if err := WriteFileAtomic(l.cfg.FS, l.cfg.Dir, EpochFile, encodeEpochs(es)); err != nil {
			l.fence(fmt.Errorf("write leader epoch history: %w", err))
			return l.unavailable("partition storage failed")
		}
		l.epochs = es
	}
	h.DurableWatermark = l.durable.Load().end
	var hb [segment.HeaderFixed + segment.MaxProducerIDLen]byte
	if stored != nil {
		copy(hb[:], stored[:hdrLen])
		segment.SetDurableWatermark(hb[:hdrLen], int(total), h.DurableWatermark)
		h.CRC = binary.BigEndian.Uint32(hb[8:])
	} else {
		segment.PutHeader(hb[:], h, recs)
	}
	pos := a.size
	l.preallocLocked(a, pos+total)
	if _, err := a.w.f.WriteAt(hb[:hdrLen], pos); err != nil {
		l.fence(fmt.Errorf("write %s: %w", a.path, err))
		return l.unavailable("partition storage write failed")
	}
	if _, err := a.w.f.WriteAt(recs, pos+int64(hdrLen)); err != nil {
		l.fence(fmt.Errorf("write %s: %w", a.path, err))
		return l.unavailable("partition storage write failed")
	}
	a.mu.Lock()
	a.addBatchLocked(h, pos, l.cfg.IndexInterval)
	a.mu.Unlock()
	l.leo.Store(last + 1)
	l.written.Store(&mark{seg: a, pos: pos + total, end: last + 1, gen: l.gen})
	l.requestSync()
	return nil
}

// unsupportedLogged keeps the "cannot preallocate" line to one per process.
var unsupportedLogged atomic.Bool

// minPreallocate is the first preallocation step of a segment. Steps then
// double with the data the segment holds up to Config.Preallocate, so the
// many idle partitions of a node (a fresh all-in-one has 66 internal ones)
// hold 64 KiB each, not a whole step, and a recovery after a crash reads
// back a zero tail proportional to the segment.
const minPreallocate = 64 << 10

// preallocLocked extends the active segment's file past end (the data end
// after the next write) when the file does not reach end yet: to the next
// multiple of the step, never beyond SegmentBytes. A failure is not an
// append failure: the write that follows grows the file as it always did
// (and reports a real I/O error itself). l.mu is held.
func (l *Log) preallocLocked(a *seg, end int64) {
	limit := l.cfg.Preallocate
	if limit <= 0 || l.noPrealloc || end <= a.w.alloc {
		return
	}
	step := int64(minPreallocate)
	for step < a.size && step < limit {
		step *= 2
	}
	step = min(step, limit)
	to := max(min((end/step+1)*step, l.cfg.SegmentBytes), end)
	err := a.w.f.Allocate(a.w.alloc, to)
	switch {
	case err == nil:
	case errors.Is(err, errors.ErrUnsupported):
		l.noPrealloc = true
		if unsupportedLogged.CompareAndSwap(false, true) {
			l.cfg.Logger.Info("the file system cannot preallocate segment files; they grow with every append",
				"dir", l.cfg.Dir, "err", err)
		}
		return
	default:
		// Out of space, most likely: the file may have grown part of the
		// way (roll and Close cut any size past the data end), and the
		// write reports the shortage if it is real. Retry at the next step.
		l.cfg.Logger.Debug("preallocating segment file failed", "path", a.path, "err", err)
	}
	a.w.alloc = to
}

// cutToDataEnd cuts a closed segment file (preallocated space) back to its
// data end, durably, so a closed segment's file size is its data end. size
// is the file size, or -1 when unknown.
func (l *Log) cutToDataEnd(s *seg, size int64) error {
	if size >= 0 && size <= s.size {
		return nil
	}
	return l.cfg.FS.Truncate(s.path, s.size)
}

// addBatchLocked records a batch written at pos in the segment's metadata
// and sparse indexes. s.mu is held for writing (or s is private).
func (s *seg) addBatchLocked(h *segment.Header, pos int64, interval int) {
	if s.lastBatchPos >= 0 && s.sinceIndex >= int64(interval) {
		rel := uint32(h.BaseOffset - s.base)
		s.index = append(s.index, segment.IndexEntry{RelOffset: rel, Pos: uint32(pos)})
		if len(s.tindex) == 0 || s.maxTS > s.tindex[len(s.tindex)-1].Timestamp {
			if len(s.tindex) == 0 || rel > s.tindex[len(s.tindex)-1].RelOffset {
				s.tindex = append(s.tindex, segment.TimeEntry{Timestamp: s.maxTS, RelOffset: rel})
			}
		}
		s.sinceIndex = 0
	}
	if s.lastBatchPos < 0 {
		s.firstAppend = h.AppendTime
		s.maxTS = h.MaxTimestamp
	}
	s.sinceIndex += int64(h.Length)
	s.size = pos + int64(h.Length)
	s.next = h.NextOffset()
	s.lastBatchPos = pos
	s.maxTS = max(s.maxTS, h.MaxTimestamp)
	s.maxAppend = max(s.maxAppend, h.AppendTime)
}

// rollLocked closes the active segment (fdatasync, index files) and starts
// a new one at the log end. l.mu is held.
func (l *Log) rollLocked() error {
	old := l.active
	fileSize, err := old.w.f.Size()
	if err != nil {
		fileSize = -1
	}
	if err := old.w.syncAndClose(); err != nil {
		l.fence(fmt.Errorf("fdatasync %s at roll: %w", old.path, err))
		return l.unavailable("partition storage failed")
	}
	// The closed segment is exact before its successor exists: recovery
	// only ever finds preallocated zeros in the last segment.
	if err := l.cutToDataEnd(old, fileSize); err != nil {
		l.fence(fmt.Errorf("cut preallocated tail of %s at roll: %w", old.path, err))
		return l.unavailable("partition storage failed")
	}
	l.syncs.Add(1)
	old.mu.Lock()
	old.closed = true
	old.mu.Unlock()
	l.advanceDurable(&mark{seg: old, pos: old.size, end: old.next, gen: l.gen})
	if err := l.writeIndexes(old); err != nil {
		l.fence(fmt.Errorf("write index of %s: %w", old.path, err))
		return l.unavailable("partition storage failed")
	}
	ns, err := l.createSegment(l.leo.Load())
	if err != nil {
		l.fence(err)
		return l.unavailable("partition storage failed")
	}
	l.active = ns
	l.publish(func(ss []*seg) []*seg { return append(ss, ns) })
	return nil
}

// createSegment creates an empty active segment file and makes its
// directory entry durable.
func (l *Log) createSegment(base uint64) (*seg, error) {
	path := l.cfg.FS.Join(l.cfg.Dir, segment.FileName(base, segment.LogExt))
	f, err := l.cfg.FS.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create segment %s: %w", path, err)
	}
	if err := l.cfg.FS.SyncDir(l.cfg.Dir); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("sync directory %s: %w", l.cfg.Dir, err)
	}
	return &seg{base: base, path: path, next: base, lastBatchPos: -1, w: &writer{f: f}}, nil
}

// writeIndexes writes s's offset and time index files (atomically). The
// offset index carries the segment summary: the next Open trusts the
// segment up to that size without rereading it.
func (l *Log) writeIndexes(s *seg) error {
	s.mu.RLock()
	sum := s.summary()
	idx := segment.EncodeIndex(sum, s.index)
	tidx := segment.EncodeTimeIndex(sum.LogSize, s.tindex)
	s.mu.RUnlock()
	// Time index first: a valid offset index implies a current time index.
	if err := WriteFileAtomic(l.cfg.FS, l.cfg.Dir, segment.FileName(s.base, segment.TimeIndexExt), tidx); err != nil {
		return err
	}
	return WriteFileAtomic(l.cfg.FS, l.cfg.Dir, segment.FileName(s.base, segment.IndexExt), idx)
}

// publish replaces the segment snapshot readers see.
func (l *Log) publish(f func([]*seg) []*seg) {
	l.segsMu.Lock()
	defer l.segsMu.Unlock()
	cur := *l.segs.Load()
	next := f(append([]*seg(nil), cur...))
	l.segs.Store(&next)
}

// Checkpoint syncs the active segment and writes its index files, so a
// restart after a crash rescans only what was appended after it.
func (l *Log) Checkpoint() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.Fenced() != nil {
		return nil
	}
	return l.checkpointLocked()
}

func (l *Log) checkpointLocked() error {
	a := l.active
	if _, err := a.w.sync(); err != nil {
		l.fence(fmt.Errorf("fdatasync %s: %w", a.path, err))
		return l.unavailable("partition storage failed")
	}
	l.syncs.Add(1)
	a.mu.RLock()
	m := &mark{seg: a, pos: a.size, end: a.next, gen: l.gen}
	a.mu.RUnlock()
	l.advanceDurable(m)
	if err := l.writeIndexes(a); err != nil {
		l.fence(fmt.Errorf("write index of %s: %w", a.path, err))
		return l.unavailable("partition storage failed")
	}
	return nil
}

// Close syncs the active segment, writes its index files (a clean restart
// then reads nothing back) and releases every file. Appends and reads fail
// afterwards.
func (l *Log) Close() error {
	l.maint.Lock()
	defer l.maint.Unlock()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	var err error
	a := l.active
	fileSize := int64(-1)
	if l.Fenced() == nil {
		if fileSize, err = a.w.f.Size(); err != nil {
			fileSize = -1
		}
		err = l.checkpointLocked()
	}
	l.closed = true
	l.shut.Store(true)
	a.w.closeNoSync()
	if err == nil && l.Fenced() == nil {
		// A clean restart then finds the file exact and reads nothing.
		if cerr := l.cutToDataEnd(a, fileSize); cerr != nil {
			err = ioUnavailable("cut preallocated tail of "+a.path, cerr)
		}
	}
	l.mu.Unlock()
	for _, s := range *l.segs.Load() {
		l.cfg.Cache.drop(s)
	}
	l.notify()
	return err
}

// Epochs returns the leader epoch history.
func (l *Log) Epochs() []EpochStart {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]EpochStart(nil), l.epochs...)
}

// EndOffsetForEpoch returns the end offset of leader epoch e (the start of
// the next epoch in the history, or the log end for the latest epoch) and
// the largest epoch <= e in the history; ok is false when the history has
// no epoch <= e.
func (l *Log) EndOffsetForEpoch(e uint64) (epoch, end uint64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.epochs) - 1; i >= 0; i-- {
		if l.epochs[i].Epoch <= e {
			if i == len(l.epochs)-1 {
				return l.epochs[i].Epoch, l.leo.Load(), true
			}
			return l.epochs[i].Epoch, l.epochs[i+1].StartOffset, true
		}
	}
	return 0, 0, false
}

// SegmentInfo describes one segment for retention decisions and stats.
type SegmentInfo struct {
	Base          uint64
	Next          uint64
	Size          int64
	IndexBytes    int64
	MaxTimestamp  int64
	MaxAppendTime int64
	FirstAppend   int64
	Active        bool
}

// Segments describes the segments, oldest first.
func (l *Log) Segments() []SegmentInfo {
	ss := *l.segs.Load()
	out := make([]SegmentInfo, len(ss))
	for i, s := range ss {
		s.mu.RLock()
		out[i] = SegmentInfo{Base: s.base, Next: s.next, Size: s.size,
			IndexBytes:   int64(64 + 8*len(s.index) + 24 + 12*len(s.tindex)),
			MaxTimestamp: s.maxTS, MaxAppendTime: s.maxAppend, FirstAppend: s.firstAppend, Active: !s.closed}
		s.mu.RUnlock()
	}
	return out
}

func putU64(b []byte, v uint64) {
	_ = b[7]
	b[0], b[1], b[2], b[3] = byte(v>>56), byte(v>>48), byte(v>>40), byte(v>>32)
	b[4], b[5], b[6], b[7] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
}

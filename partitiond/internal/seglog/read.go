package seglog

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"strconv"
	"sync"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/partitiond/internal/fsys"
	"github.com/strataio/strata/partitiond/internal/record"
	"github.com/strataio/strata/partitiond/internal/segment"
)

// ErrBelowStart is returned by Read when from is below the first retained
// offset (retention ran between the caller's range check and the read).
var ErrBelowStart = errcode.OffsetOutOfRange.New("offset below the retained log")

// ReadResult is the outcome of Read.
type ReadResult struct {
	// Records is a record set (offsets written in): the stored bytes of
	// consecutive records, concatenated.
	Records []byte
	Count   int
	// Next is the offset to read next: after the last returned record, or
	// past offsets that no longer hold a record (compaction gaps).
	Next uint64
}

const (
	smallChunk = 64 << 10
	largeChunk = 4 << 20
)

var (
	smallBufs = sync.Pool{New: func() any { b := make([]byte, smallChunk); return &b }}
	largeBufs = sync.Pool{New: func() any { b := make([]byte, largeChunk); return &b }}
)

// lookupLocked returns the position of the last indexed batch at or before
// offset off (0 when none). s.mu is held.
func (s *seg) lookupLocked(off uint64) int64 {
	if off <= s.base || len(s.index) == 0 {
		return 0
	}
	rel := off - s.base
	if rel > math.MaxUint32 {
		rel = math.MaxUint32
	}
	i := sort.Search(len(s.index), func(i int) bool { return uint64(s.index[i].RelOffset) > rel })
	if i == 0 {
		return 0
	}
	return int64(s.index[i-1].Pos)
}

// batchFn is called by walk for each durable batch that ends after from,
// with the whole stored batch (raw) and its record set (recs, a suffix of
// raw); both are only valid during the call. It returns true to stop.
type batchFn func(h *segment.Header, raw, recs []byte) (stop bool, err error)

// walk visits, in offset order, every durable batch with an offset range
// ending after from and a base offset below limit. segEnd is called after a
// segment was visited to its readable end, with the offset where the next
// segment (or limit) starts. Every batch's CRC is checked: damage found by a
// read is errcode.StorageCorrupt.
func (l *Log) walk(from, limit uint64, chunk int, fn batchFn, segEnd func(boundary uint64)) error {
	return l.walkOwning(from, limit, chunk, nil, fn, segEnd)
}

// handover lets a walk's batchFn keep a large batch instead of copying it:
// for a batch larger than the read chunk for which want returns true, the
// walk reads the batch into a fresh buffer of its own (not the pooled one)
// and sets fresh while fn runs; fn may then keep raw and recs.
type handover struct {
	want  func(h *segment.Header) bool
	fresh bool
}

// walkOwning is walk with a handover (nil: none).
func (l *Log) walkOwning(from, limit uint64, chunk int, own *handover, fn batchFn, segEnd func(boundary uint64)) error {
	if l.isShut() {
		return errcode.StorageUnavailable.New("partition log closed", "dir", l.cfg.Dir)
	}
	d := l.durable.Load()
	limit = min(limit, d.end)
	if from >= limit {
		return nil
	}
	ss := *l.segs.Load()
	if from < ss[0].base {
		return ErrBelowStart
	}
	i := sort.Search(len(ss), func(i int) bool { return ss[i].base > from }) - 1
	for ; i < len(ss); i++ {
		s := ss[i]
		if s.base >= limit {
			return nil
		}
		s.mu.RLock()
		if s.retired {
			s.mu.RUnlock()
			return errRetired
		}
		var end int64
		switch {
		case s.closed:
			end = s.size
		case d.seg == s:
			end = d.pos
		}
		start := s.lookupLocked(from)
		s.mu.RUnlock()
		if start < end {
			var next *seg
			if i+1 < len(ss) {
				next = ss[i+1]
			}
			cold := l.coldFrom(s, next, d, end)
			stop, err := l.walkSegment(s, start, end, cold, limit, chunk, own, fn)
			if err != nil || stop {
				return err
			}
		}
		boundary := limit
		if i+1 < len(ss) && ss[i+1].base < limit {
			boundary = ss[i+1].base
		}
		if segEnd != nil {
			segEnd(boundary)
		}
	}
	return nil
}

func (l *Log) openReader(s *seg) func() (fsys.File, error) {
	return func() (fsys.File, error) {
		s.mu.RLock()
		defer s.mu.RUnlock()
		if s.retired {
			return nil, errRetired
		}
		return l.cfg.FS.Open(s.path)
	}
}

// walkSegment walks s from pos to end; the pages of the bytes below cold are
// dropped from the page cache once read.
func (l *Log) walkSegment(s *seg, pos, end, cold int64, limit uint64, chunk int, own *handover, fn batchFn) (bool, error) {
	e, err := l.cfg.Cache.acquire(s, l.openReader(s))
	if err != nil {
		if err == errRetired {
			return false, err
		}
		return false, errcode.StorageUnavailable.New("open segment: "+err.Error(), "segment", s.path)
	}
	defer l.cfg.Cache.release(e)
	drops := l.newColdReads(e.f, cold, pos)
	defer drops.flush()
	pool := &smallBufs
	if need := min(int64(chunk), end-pos); need > smallChunk {
		pool = &largeBufs
		chunk = int(need)
	}
	bp := pool.Get().(*[]byte)
	defer pool.Put(bp)
	buf := *bp
	if chunk < len(buf) && chunk >= smallChunk {
		buf = buf[:chunk]
	}
	corrupt := func(at int64, prob string) error {
		return errcode.StorageCorrupt.New("damaged batch found by a read", "segment", s.path,
			"position", strconv.FormatInt(at, 10), "problem", prob)
	}
	for first := true; pos < end; first = false {
		n := min(int64(len(buf)), end-pos)
		if first {
			// The first read only looks at the first batches: a batch
			// larger than this is read exactly below. A fetch of one
			// megabyte batch used to pread the whole 4 MiB chunk and
			// use a quarter of it.
			n = min(n, smallChunk)
		}
		if err := segment.ReadFull(e.f, buf[:n], pos); err != nil {
			return false, errcode.StorageUnavailable.New("read segment: "+err.Error(), "segment", s.path)
		}
		drops.read(pos, n)
		var p int64
		for p < n {
			rest := buf[p:n]
			h, prob := segment.ParseHeader(rest)
			if prob == segment.Short && p > 0 {
				break // refill from this batch
			}
			if prob != segment.OK {
				return false, corrupt(pos+p, prob.String())
			}
			if pos+p+int64(h.Length) > end {
				return false, corrupt(pos+p, "past_end")
			}
			var b []byte
			var big *[]byte // pooled buffer of a batch larger than buf
			handed := false // b is fresh, for fn to keep
			if int64(h.Length) <= n-p {
				b = rest[:h.Length]
			} else if p > 0 {
				break
			} else {
				// A batch larger than the chunk: keep the bytes already
				// read and read only the remainder, into a pooled buffer
				// when it fits one (large batches are the common case
				// of big fetches; a fresh zeroed allocation per read
				// costs as much as the copy) — unless fn takes the batch
				// as it is, then into a buffer fn keeps: the zeroing
				// costs less than fn's copy out of the pooled one.
				handed = own != nil && own.want(&h)
				if handed {
					b = make([]byte, h.Length)
				} else if h.Length <= largeChunk {
					big = largeBufs.Get().(*[]byte)
					b = (*big)[:h.Length]
				} else {
					b = make([]byte, h.Length)
				}
				copy(b, rest)
				if err := segment.ReadFull(e.f, b[len(rest):], pos+int64(len(rest))); err != nil {
					if big != nil {
						largeBufs.Put(big)
					}
					return false, errcode.StorageUnavailable.New("read segment: "+err.Error(), "segment", s.path)
				}
				drops.read(pos, int64(len(b)))
			}
			if own != nil {
				own.fresh = handed
			}
			stop, err := l.visitBatch(b, limit, fn, func(prob segment.Problem) error { return corrupt(pos+p, prob.String()) })
			if big != nil {
				largeBufs.Put(big)
			}
			if err != nil || stop {
				return stop, err
			}
			p += int64(len(b))
		}
		pos += p
	}
	return false, nil
}

// Read returns up to maxRecords records (and about maxBytes bytes: the first
// record is returned even when larger) with offsets from `from` up to limit,
// which is capped at the durable end: nothing that is not durable is ever
// returned. maxRecords or maxBytes <= 0 mean no limit of that kind.
func (l *Log) Read(from uint64, maxRecords, maxBytes int, limit uint64) (ReadResult, error) {
	return l.ReadFiltered(from, maxRecords, maxBytes, limit, nil)
}

// ReadFiltered is Read leaving out every batch for which skip (when not
// nil) returns true: its offsets are passed over as a gap, so Next moves
// past them even when nothing is returned. read_committed fetches skip
// control markers and aborted transactional batches this way, deciding per
// batch header without looking at the records.
func (l *Log) ReadFiltered(from uint64, maxRecords, maxBytes int, limit uint64, skip func(h *segment.Header) bool) (ReadResult, error) {
	if maxRecords <= 0 {
		maxRecords = math.MaxInt
	}
	if maxBytes <= 0 {
		maxBytes = math.MaxInt
	}
	for range 100 {
		r, err := l.read(from, maxRecords, maxBytes, limit, skip)
		if err != errRetired {
			return r, err
		}
	}
	return ReadResult{}, errcode.StorageUnavailable.New("segments changed during every read attempt", "dir", l.cfg.Dir)
}

func (l *Log) read(from uint64, maxRecords, maxBytes int, limit uint64, skip func(h *segment.Header) bool) (ReadResult, error) {
	res := ReadResult{Next: from}
	chunk := smallChunk
	if maxBytes < largeChunk {
		chunk = max(smallChunk, maxBytes+2*l.cfg.IndexInterval+segment.HeaderFixed+segment.MaxProducerIDLen)
	} else {
		chunk = largeChunk
	}
	var out []byte
	// A batch that will be the whole answer (below) is read straight into
	// the answer when it is larger than the chunk — a consumer asking for
	// as many records as its producer batches.
	own := &handover{want: func(h *segment.Header) bool {
		return out == nil && h.BaseOffset >= from && int(h.RecordCount) == maxRecords && int(h.Length)-h.Len() <= maxBytes
	}}
	fn := func(h *segment.Header, _, recs []byte) (bool, error) {
		if h.LastOffset() < from {
			return false, nil
		}
		if skip != nil && skip(h) {
			res.Next = max(res.Next, h.NextOffset())
			return false, nil
		}
		whole := h.BaseOffset >= from && res.Count+int(h.RecordCount) <= maxRecords && len(out)+len(recs) <= maxBytes
		if out == nil && whole && res.Count+int(h.RecordCount) == maxRecords {
			// This batch is the whole read (a consumer asking for as many
			// records as its producer batches): the batch's own buffer
			// when the walk read it into a fresh one, else an exact
			// copy. append into nil does not zero the bytes it copies
			// over, make does (a megabyte memclr per fetch in consume
			// profiles).
			if own.fresh {
				out = recs[:len(recs):len(recs)]
			} else {
				out = append([]byte(nil), recs...)
			}
			res.Count += int(h.RecordCount)
			res.Next = h.NextOffset()
			return true, nil
		}
		if out == nil {
			// Grows by doubling from here; bounded by maxBytes.
			out = make([]byte, 0, min(maxBytes, chunk, max(4<<10, 2*len(recs))))
		}
		if whole {
			out = append(out, recs...)
			res.Count += int(h.RecordCount)
			res.Next = h.NextOffset()
			// Full: stop here. Going on only read (a chunk of up to
			// 4 MiB) and CRC-checked the next batch to find that none
			// of it fits — four times the bytes of a one-batch fetch.
			return res.Count >= maxRecords || len(out) >= maxBytes, nil
		}
		for set := recs; len(set) > 0; {
			n := int(binary.BigEndian.Uint32(set))
			off := record.OffsetOf(set[4 : 4+n])
			if off >= from {
				if res.Count >= maxRecords || (res.Count > 0 && len(out)+4+n > maxBytes) {
					return true, nil
				}
				out = append(out, set[:4+n]...)
				res.Count++
				res.Next = off + 1
			}
			set = set[4+n:]
		}
		res.Next = max(res.Next, h.NextOffset())
		return false, nil
	}
	segEnd := func(boundary uint64) { res.Next = max(res.Next, boundary) }
	if err := l.walkOwning(from, limit, chunk, own, fn, segEnd); err != nil {
		return ReadResult{}, err
	}
	res.Records = out
	return res, nil
}

// ScanBatches calls fn for every durable batch whose offsets end after from
// and start below upTo, in order (headers and record sets; both only valid
// during the call). Rebuilding producer state and compaction use it.
func (l *Log) ScanBatches(from, upTo uint64, fn func(h *segment.Header, recs []byte) error) error {
	return l.walk(from, upTo, largeChunk, func(h *segment.Header, _, recs []byte) (bool, error) {
		if h.LastOffset() < from {
			return false, nil
		}
		return false, fn(h, recs)
	}, nil)
}

// OffsetForTime returns the base offset of the first durable batch whose
// max timestamp is at least ts (record timestamps, or the append time for
// records without one), found through the time index. ok is false when no
// batch is that late.
func (l *Log) OffsetForTime(ts int64) (off uint64, ok bool, err error) {
	for range 100 {
		off, ok, err = l.offsetForTime(ts)
		if err != errRetired {
			return off, ok, err
		}
	}
	return 0, false, errcode.StorageUnavailable.New("segments changed during every read attempt", "dir", l.cfg.Dir)
}

func (l *Log) offsetForTime(ts int64) (uint64, bool, error) {
	ss := *l.segs.Load()
	for _, s := range ss {
		s.mu.RLock()
		if s.lastBatchPos < 0 || s.maxTS < ts {
			s.mu.RUnlock()
			continue
		}
		// Start from the last time entry below ts: every batch before it
		// has a max timestamp below ts.
		from := s.base
		i := sort.Search(len(s.tindex), func(i int) bool { return s.tindex[i].Timestamp >= ts })
		if i > 0 {
			from = s.base + uint64(s.tindex[i-1].RelOffset)
		}
		s.mu.RUnlock()
		var found uint64
		ok := false
		err := l.walk(from, math.MaxUint64, smallChunk, func(h *segment.Header, _, _ []byte) (bool, error) {
			if h.MaxTimestamp >= ts {
				found, ok = h.BaseOffset, true
				return true, nil
			}
			return false, nil
		}, nil)
		if err != nil || ok {
			return found, ok, err
		}
	}
	return 0, false, nil
}

// Verify checks the whole log: every durable batch of every segment (CRC,
// record set, offsets increasing within the segment's range) and every
// sparse index entry (it points at the start of a batch with that base
// offset). It is a scrub for operators and the oracle of crash tests.
func (l *Log) Verify() error {
	l.maint.Lock()
	defer l.maint.Unlock()
	d := l.durable.Load()
	ss := *l.segs.Load()
	for i, s := range ss {
		s.mu.RLock()
		end := s.size
		if !s.closed {
			end = 0
			if d.seg == s {
				end = d.pos
			}
		}
		idx := append([]segment.IndexEntry(nil), s.index...)
		tidx := append([]segment.TimeEntry(nil), s.tindex...)
		s.mu.RUnlock()
		e, err := l.cfg.Cache.acquire(s, l.openReader(s))
		if err != nil {
			return err
		}
		starts := map[int64]uint64{}
		next := s.base
		_, prob, err := segment.Scan(e.f, 0, end, func(pos int64, h *segment.Header, _ []byte) error {
			if h.BaseOffset < next {
				return fmt.Errorf("segment %d: batch at %d has base %d below %d", s.base, pos, h.BaseOffset, next)
			}
			starts[pos] = h.BaseOffset
			next = h.NextOffset()
			return nil
		})
		l.cfg.Cache.release(e)
		if err != nil {
			return err
		}
		if prob != segment.OK {
			return fmt.Errorf("segment %d: damaged batch (%s)", s.base, prob)
		}
		if i+1 < len(ss) && next > ss[i+1].base {
			return fmt.Errorf("segment %d overlaps segment %d", s.base, ss[i+1].base)
		}
		for _, ie := range idx {
			if int64(ie.Pos) >= end {
				continue // entry for a batch not yet durable
			}
			base, ok := starts[int64(ie.Pos)]
			if !ok || base != s.base+uint64(ie.RelOffset) {
				return fmt.Errorf("segment %d: index entry %+v does not point at its batch", s.base, ie)
			}
		}
		for j := 1; j < len(tidx); j++ {
			if tidx[j].Timestamp < tidx[j-1].Timestamp || tidx[j].RelOffset <= tidx[j-1].RelOffset {
				return fmt.Errorf("segment %d: time index out of order", s.base)
			}
		}
	}
	return nil
}

// visitBatch checks one stored batch and hands it to fn unless it starts at
// or beyond limit (stop).
func (l *Log) visitBatch(b []byte, limit uint64, fn batchFn, corrupt func(segment.Problem) error) (bool, error) {
	h, recs, prob := segment.CheckBatch(b)
	if prob != segment.OK {
		return false, corrupt(prob)
	}
	if h.BaseOffset >= limit {
		return true, nil
	}
	return fn(&h, b, recs)
}

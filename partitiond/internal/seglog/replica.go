package seglog

import (
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/partitiond/internal/segment"
)

// The replication side of the log: a leader serves whole stored batches to
// its followers (ReadBatches), a follower appends them as they are
// (AppendStored), cuts a tail that diverged from the leader's log
// (TruncateTo) and jumps ahead when it is behind the leader's log start
// (SkipTo).

// ReadBatches returns whole stored batches, as the log holds them (headers
// included, checked against their CRC), from the batch holding offset from
// up to the durable end: at least one batch when there is one, and then as
// many as fit in maxBytes. next is the offset after the last batch returned
// (from when none). The bytes are a fresh copy owned by the caller.
func (l *Log) ReadBatches(from uint64, maxBytes int) (raw []byte, next uint64, err error) {
	return l.ReadBatchesInto(from, maxBytes, nil)
}

// ReadBatchesInto is ReadBatches copying the batches into a buffer from
// get (nil: a fresh allocation). get(n) returns an empty slice with room
// for at least n bytes, n being what the durable bytes after from (at most
// maxBytes) need; raw then starts at that buffer's start and is the
// caller's as ReadBatches' bytes are. Only when the answer outgrows it (a
// first batch larger than maxBytes, or a read across segments) does append
// move raw to a fresh allocation, and the buffer is dropped. A leader
// answering a follower's fetch reads into a transport pool buffer that
// goes back to the pool once gRPC has sent it: the growing slice of
// ReadBatches (growslice and its copies) and the garbage of every answer
// were about 7 % of the one-process replication profile at 1 KiB.
func (l *Log) ReadBatchesInto(from uint64, maxBytes int, get func(n int) []byte) (raw []byte, next uint64, err error) {
	if maxBytes <= 0 {
		maxBytes = math.MaxInt
	}
	for range 100 {
		raw, next, err = l.readBatches(from, maxBytes, get)
		if err != errRetired {
			return raw, next, err
		}
	}
	return nil, from, errcode.StorageUnavailable.New("segments changed during every read attempt", "dir", l.cfg.Dir)
}

func (l *Log) readBatches(from uint64, maxBytes int, get func(n int) []byte) ([]byte, uint64, error) {
	var out []byte
	if get != nil {
		if n := l.durableBytesAfter(from, maxBytes); n > 0 {
			out = get(n)[:0]
		}
	}
	next := from
	chunk := smallChunk
	if maxBytes >= largeChunk {
		chunk = largeChunk
	}
	err := l.walk(from, math.MaxUint64, chunk, func(h *segment.Header, raw, _ []byte) (bool, error) {
		if h.LastOffset() < from {
			return false, nil
		}
		if len(out) > 0 && len(out)+len(raw) > maxBytes {
			return true, nil
		}
		// append grows out without zeroing it first (a make'd buffer is
		// cleared, then overwritten).
		out = append(out, raw...)
		next = h.NextOffset()
		return false, nil
	}, nil)
	if err != nil {
		return nil, from, err
	}
	return out, next, nil
}

// durableBytesAfter returns how many bytes a read of the batches from
// offset from needs, at most maxBytes: the durable bytes of the active
// segment from the indexed batch at or before from (an upper bound: batches
// before from are skipped), maxBytes when from lies in an older segment
// (the read may cross segments), 0 when nothing after from is durable.
func (l *Log) durableBytesAfter(from uint64, maxBytes int) int {
	d := l.durable.Load()
	if d == nil || d.seg == nil || from >= d.end {
		return 0
	}
	s := d.seg
	if from < s.base {
		return maxBytes
	}
	s.mu.RLock()
	start := s.lookupLocked(from)
	s.mu.RUnlock()
	if d.pos <= start {
		return 0
	}
	return int(min(int64(maxBytes), d.pos-start))
}

// SplitBatches calls fn for each stored batch in raw (as ReadBatches returns
// them), after checking its framing and CRC. A damaged batch stops the walk
// with errcode.MalformedInput: replicated bytes are never appended unchecked.
func SplitBatches(raw []byte, fn func(h *segment.Header, batch []byte) error) error {
	for len(raw) > 0 {
		h, prob := segment.ParseHeader(raw)
		if prob == segment.OK && uint64(h.Length) > uint64(len(raw)) {
			prob = segment.Short
		}
		if prob != segment.OK {
			return errcode.MalformedInput.New("replicated batch is damaged", "problem", prob.String())
		}
		b := raw[:h.Length]
		h, _, prob = segment.CheckBatch(b)
		if prob != segment.OK {
			return errcode.MalformedInput.New("replicated batch is damaged", "problem", prob.String(),
				"offset", strconv.FormatUint(h.BaseOffset, 10))
		}
		if err := fn(&h, b); err != nil {
			return err
		}
		raw = raw[h.Length:]
	}
	return nil
}

// AppendStored appends one batch replicated from the leader (batch is one
// stored batch as SplitBatches yields it, h its header). Offsets, leader
// epoch, timestamps and producer fields are kept as the leader wrote them;
// only the durable watermark is this log's own (it tells a torn tail from
// damage on *this* disk), so the CRC changes with it: it is derived from
// the batch's own CRC (segment.SetDurableWatermark), which SplitBatches
// checked, not computed again over the records. A batch whose CRC did not
// match stays one that does not. The batch must start at or after the log
// end: a gap is allowed (batches a compaction on the leader removed), an
// overlap is not.
func (l *Log) AppendStored(h *segment.Header, batch []byte) error {
	if int(h.Length) != len(batch) || len(batch) < h.Len() {
		return errcode.MalformedInput.New("replicated batch length differs from its header", "param", "records",
			"bytes", strconv.Itoa(len(batch)), "length", strconv.FormatUint(uint64(h.Length), 10))
	}
	recs := batch[h.Len():]
	if int64(h.Length) > l.cfg.SegmentBytes {
		return errcode.InvalidParameter.New("replicated batch larger than a segment", "param", "records",
			"bytes", strconv.FormatUint(uint64(h.Length), 10), "segment_bytes", strconv.FormatInt(l.cfg.SegmentBytes, 10))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	if leo := l.leo.Load(); h.BaseOffset < leo {
		return errcode.InvalidParameter.New("replicated batch overlaps the log end", "param", "records",
			"base_offset", strconv.FormatUint(h.BaseOffset, 10), "log_end_offset", strconv.FormatUint(leo, 10))
	}
	if err := l.checkEpochLocked(h.LeaderEpoch); err != nil {
		return err
	}
	hc := *h
	return l.writeBatchLocked(&hc, batch[:h.Len()], recs, l.cfg.Clock.Now().UnixMilli())
}

// LastBatchEpoch returns the leader epoch of the last batch in the log (ok
// false for an empty log): what a follower sends as its last fetched epoch
// so the leader can tell whether their logs diverge (KIP-320).
func (l *Log) LastBatchEpoch() (epoch uint64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	leo := l.leo.Load()
	for i := len(l.epochs) - 1; i >= 0; i-- {
		if l.epochs[i].StartOffset < leo {
			return l.epochs[i].Epoch, true
		}
	}
	return 0, false
}

// TruncateTo removes every batch at or after offset to, so that the log
// ends there (a follower cutting the tail that diverged from its new leader;
// KIP-101/279). When a batch straddles to, it is removed whole and the log
// ends at its base. Offsets at or past the log end change nothing; below
// the log start the log is emptied down to its start. It returns the new log
// end. Everything kept is durable on return.
//
// Crash safety: later segments are removed newest first, then the cut
// segment loses its index files (which describe more than will remain)
// before the file is cut, and only then is the leader epoch history cut
// (recovery drops entries past the log end, but cannot add back epochs of
// batches a trusted index covers); a crash at any point leaves a prefix of
// the old log that recovery opens with a matching history.
func (l *Log) TruncateTo(to uint64) (uint64, error) {
	l.maint.Lock()
	defer l.maint.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return 0, err
	}
	leo := l.leo.Load()
	if to >= leo {
		return leo, nil
	}
	ss := *l.segs.Load()
	to = max(to, ss[0].base)
	i := sort.Search(len(ss), func(i int) bool { return ss[i].base > to }) - 1
	cut := ss[i]
	pos, end, lastPos, err := l.cutPoint(cut, to)
	if err != nil {
		return 0, err
	}

	// 1. Later segments go, newest first; their readers retry.
	fs, dir := l.cfg.FS, l.cfg.Dir
	for j := len(ss) - 1; j > i; j-- {
		s := ss[j]
		if s == l.active {
			s.w.closeNoSync()
		}
		err := l.retire(s, nil, func() (bool, error) { return l.removeSegmentFiles(s) })
		if err != nil {
			l.fence(fmt.Errorf("remove segment %s: %w", s.path, err))
			return 0, l.unavailable("partition storage failed")
		}
	}

	// 2. The cut segment: indexes first, then the file (durable on return).
	for _, ext := range []string{segment.IndexExt, segment.TimeIndexExt} {
		if err := fs.Remove(fs.Join(dir, segment.FileName(cut.base, ext))); err != nil && !isNotExist(err) {
			l.fence(fmt.Errorf("remove index of %s: %w", cut.path, err))
			return 0, l.unavailable("partition storage failed")
		}
	}
	if err := fs.SyncDir(dir); err != nil {
		l.fence(fmt.Errorf("sync %s: %w", dir, err))
		return 0, l.unavailable("partition storage failed")
	}
	if cut == l.active {
		cut.w.closeNoSync()
	}
	if err := fs.Truncate(cut.path, pos); err != nil {
		l.fence(fmt.Errorf("truncate %s: %w", cut.path, err))
		return 0, l.unavailable("partition storage failed")
	}
	w, err := fs.OpenRW(cut.path)
	if err != nil {
		l.fence(fmt.Errorf("open %s: %w", cut.path, err))
		return 0, l.unavailable("partition storage failed")
	}
	if err := w.SyncData(); err != nil {
		_ = w.Close()
		l.fence(fmt.Errorf("fdatasync %s: %w", cut.path, err))
		return 0, l.unavailable("partition storage failed")
	}

	// 3. The epoch history loses the epochs that start at or after the cut.
	keep := len(l.epochs)
	for keep > 0 && l.epochs[keep-1].StartOffset >= end {
		keep--
	}
	if keep != len(l.epochs) {
		es := append([]EpochStart(nil), l.epochs[:keep]...)
		if err := WriteFileAtomic(l.cfg.FS, l.cfg.Dir, EpochFile, encodeEpochs(es)); err != nil {
			l.fence(fmt.Errorf("write leader epoch history: %w", err))
			return 0, l.unavailable("partition storage failed")
		}
		l.epochs = es
	}

	// The cut segment becomes the active one again, as a new seg value so
	// readers holding the old one retry with the new snapshot.
	cut.mu.RLock()
	ns := &seg{base: cut.base, path: cut.path, size: pos, next: end, lastBatchPos: lastPos,
		maxTS: cut.maxTS, maxAppend: cut.maxAppend, firstAppend: cut.firstAppend, w: &writer{f: w, alloc: pos}}
	for _, e := range cut.index {
		if int64(e.Pos) < pos && cut.base+uint64(e.RelOffset) < end {
			ns.index = append(ns.index, e)
		}
	}
	for _, e := range cut.tindex {
		if cut.base+uint64(e.RelOffset) < end {
			ns.tindex = append(ns.tindex, e)
		}
	}
	cut.mu.RUnlock()
	if lastPos < 0 {
		ns.firstAppend, ns.maxTS, ns.maxAppend = 0, 0, 0
	}
	lastIdx := int64(0)
	if len(ns.index) > 0 {
		lastIdx = int64(ns.index[len(ns.index)-1].Pos)
	}
	ns.sinceIndex = pos - lastIdx
	if err := l.retire(cut, ns, func() (bool, error) { return true, nil }); err != nil {
		return 0, err
	}
	l.active = ns
	l.gen++
	l.leo.Store(end)
	m := &mark{seg: ns, pos: pos, end: end, gen: l.gen}
	l.written.Store(m)
	l.durable.Store(m)
	l.notify()
	return end, nil
}

// cutPoint finds where segment s must be cut to end the log at or below
// to: the position of the first batch that ends at or after to (pos), the
// new log end (end: that batch's base, or the segment's end when no batch
// does) and the position of the last batch kept (lastPos, -1 for none).
// It reads batch headers from the file, written data included, starting at
// the index entry before the one at or below to, so the batch before the
// cut is seen too: at most about two index intervals of headers.
func (l *Log) cutPoint(s *seg, to uint64) (pos int64, end uint64, lastPos int64, err error) {
	s.mu.RLock()
	size, next, base := s.size, s.next, s.base
	from := int64(0)
	if rel := to - base; len(s.index) > 0 && rel > 0 {
		i := sort.Search(len(s.index), func(i int) bool { return uint64(s.index[i].RelOffset) >= min(rel, math.MaxUint32) })
		if i >= 2 {
			from = int64(s.index[i-2].Pos)
		}
	}
	s.mu.RUnlock()
	f, err := l.cfg.FS.Open(s.path)
	if err != nil {
		return 0, 0, 0, ioUnavailable("open segment "+s.path, err)
	}
	defer f.Close()
	var hb [segment.HeaderFixed]byte
	p, prev := from, int64(-1)
	for p < size {
		if err := segment.ReadFull(f, hb[:], p); err != nil {
			return 0, 0, 0, ioUnavailable("read segment "+s.path, err)
		}
		h, prob := segment.ParseHeader(hb[:])
		if prob != segment.OK && prob != segment.Short {
			return 0, 0, 0, l.corrupt("damaged batch header found by a truncation", "segment", s.path,
				"position", strconv.FormatInt(p, 10), "problem", prob.String())
		}
		if h.LastOffset() >= to {
			if p == 0 {
				return 0, base, -1, nil
			}
			return p, h.BaseOffset, prev, nil
		}
		prev = p
		p += int64(h.Length)
	}
	return size, next, prev, nil
}

// SkipTo moves the log end forward to start, leaving the offsets between
// unused: a follower whose log ends below its leader's log start continues
// from there. The active segment is closed and a new one starts at start;
// older segments stay until retention removes them. start below the log end
// is an error.
func (l *Log) SkipTo(start uint64) error {
	l.maint.Lock()
	defer l.maint.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return err
	}
	leo := l.leo.Load()
	switch {
	case start < leo:
		return errcode.InvalidParameter.New("cannot skip backwards", "log_end_offset", strconv.FormatUint(leo, 10),
			"start", strconv.FormatUint(start, 10))
	case start == leo:
		return nil
	}
	if l.active.size == 0 {
		// An empty active segment is replaced by one at start.
		old := l.active
		old.w.closeNoSync()
		ns, err := l.createSegment(start)
		if err != nil {
			l.fence(err)
			return l.unavailable("partition storage failed")
		}
		if err := l.retire(old, ns, func() (bool, error) {
			if err := l.cfg.FS.Remove(old.path); err != nil && !isNotExist(err) {
				return false, err
			}
			return true, l.cfg.FS.SyncDir(l.cfg.Dir)
		}); err != nil {
			l.fence(err)
			return l.unavailable("partition storage failed")
		}
		l.active = ns
	} else {
		l.leo.Store(start) // rollLocked starts the new segment at the log end
		if err := l.rollLocked(); err != nil {
			return err
		}
	}
	l.gen++
	l.leo.Store(start)
	m := &mark{seg: l.active, pos: 0, end: start, gen: l.gen}
	l.written.Store(m)
	l.durable.Store(m)
	l.notify()
	return nil
}

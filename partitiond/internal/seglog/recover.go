package seglog

import (
	"bytes"
	"errors"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/partitiond/internal/fsys"
	"github.com/strataio/strata/partitiond/internal/segment"
)

// errOrder stops a scan at a batch whose offsets go backwards.
var errOrder = errors.New("seglog: batch offsets out of order")

func (l *Log) corrupt(msg string, kv ...string) *errcode.Error {
	return errcode.StorageCorrupt.New(msg, append([]string{"dir", l.cfg.Dir}, kv...)...)
}

func ioUnavailable(op string, err error) *errcode.Error {
	return errcode.StorageUnavailable.New(op + ": " + err.Error())
}

type segFiles struct{ log, index, tindex bool }

// recover opens the log directory: it removes leftovers of interrupted
// writes, trusts each segment up to the size its index file covers (after
// checking the last batch there), validates every batch after that point,
// cuts a torn tail of the last segment, rebuilds missing or stale indexes
// and reconciles the leader epoch history.
//
// A torn tail is told from damage to durable data by the durable watermark
// each batch carries: if any valid batch after the damage was written when
// the damaged offset was already durable, the damage is corruption and Open
// fails with errcode.StorageCorrupt instead of cutting acknowledged data.
func (l *Log) recover() error {
	fs, dir := l.cfg.FS, l.cfg.Dir
	names, err := fs.List(dir)
	if err != nil {
		return ioUnavailable("list log directory "+dir, err)
	}
	files := map[uint64]*segFiles{}
	dirty := false
	for _, name := range names {
		if strings.HasSuffix(name, segment.TmpExt) || strings.HasSuffix(name, segment.CompactExt) || strings.HasSuffix(name, ".truncate") {
			if err := fs.Remove(fs.Join(dir, name)); err != nil {
				return ioUnavailable("remove leftover "+name, err)
			}
			dirty = true
			continue
		}
		base, ext, ok := segment.ParseName(name)
		if !ok {
			continue
		}
		f := files[base]
		if f == nil {
			f = &segFiles{}
			files[base] = f
		}
		switch ext {
		case segment.LogExt:
			f.log = true
		case segment.IndexExt:
			f.index = true
		case segment.TimeIndexExt:
			f.tindex = true
		}
	}
	var bases []uint64
	for base, f := range files {
		if f.log {
			bases = append(bases, base)
			continue
		}
		// Index files without their segment: left by an interrupted
		// retention delete.
		for _, ext := range []string{segment.IndexExt, segment.TimeIndexExt} {
			if err := fs.Remove(fs.Join(dir, segment.FileName(base, ext))); err != nil && !isNotExist(err) {
				return ioUnavailable("remove orphan index", err)
			}
		}
		dirty = true
	}
	if dirty {
		if err := fs.SyncDir(dir); err != nil {
			return ioUnavailable("sync log directory", err)
		}
	}
	slices.Sort(bases)

	var epochs []EpochStart
	if b, err := readWholeFile(fs, fs.Join(dir, EpochFile)); err == nil {
		if epochs, err = decodeEpochs(b); err != nil {
			return l.corrupt("leader epoch history unreadable: " + err.Error())
		}
	} else if !isNotExist(err) {
		return ioUnavailable("read leader epoch history", err)
	}
	lastEpoch := func() (uint64, bool) {
		if len(epochs) == 0 {
			return 0, false
		}
		return epochs[len(epochs)-1].Epoch, true
	}
	epochsChanged := false
	onEpoch := func(h *segment.Header) {
		if e, ok := lastEpoch(); !ok || h.LeaderEpoch > e {
			epochs = append(epochs, EpochStart{Epoch: h.LeaderEpoch, StartOffset: h.BaseOffset})
			epochsChanged = true
		}
	}

	if len(bases) == 0 {
		ns, err := l.createSegment(0)
		if err != nil {
			return ioUnavailable("create first segment", err)
		}
		l.active = ns
		l.segs.Store(&[]*seg{ns})
		m := &mark{seg: ns}
		l.durable.Store(m)
		l.written.Store(m)
		if len(epochs) > 0 {
			epochs, epochsChanged = nil, true
		}
		l.epochs = epochs
		if epochsChanged {
			return l.persistEpochs()
		}
		return nil
	}

	segs := make([]*seg, 0, len(bases))
	var prevNext uint64
	for i, base := range bases {
		last := i == len(bases)-1
		if i > 0 && base < prevNext {
			return l.corrupt("segment overlaps the previous one", "segment", strconv.FormatUint(base, 10),
				"previous_end", strconv.FormatUint(prevNext, 10))
		}
		s, err := l.recoverSegment(base, files[base], last, onEpoch)
		if err != nil {
			for _, o := range segs {
				l.cfg.Cache.drop(o)
			}
			return err
		}
		segs = append(segs, s)
		prevNext = s.next
	}
	a := segs[len(segs)-1]
	l.active = a
	l.segs.Store(&segs)
	l.leo.Store(a.next)
	m := &mark{seg: a, pos: a.size, end: a.next}
	l.durable.Store(m)
	l.written.Store(m)

	// Entries past the end belong to a cut tail.
	for len(epochs) > 0 && epochs[len(epochs)-1].StartOffset > a.next {
		epochs = epochs[:len(epochs)-1]
		epochsChanged = true
	}
	l.epochs = epochs
	if epochsChanged {
		if err := l.persistEpochs(); err != nil {
			a.w.closeNoSync()
			return err
		}
	}
	return nil
}

func (l *Log) persistEpochs() error {
	if err := WriteFileAtomic(l.cfg.FS, l.cfg.Dir, EpochFile, encodeEpochs(l.epochs)); err != nil {
		return ioUnavailable("write leader epoch history", err)
	}
	return nil
}

// recoverSegment opens one segment. For the last segment it also opens the
// writer, after cutting a torn tail and syncing what the scan accepted.
func (l *Log) recoverSegment(base uint64, files *segFiles, last bool, onEpoch func(*segment.Header)) (*seg, error) {
	fs, dir := l.cfg.FS, l.cfg.Dir
	segName := segment.FileName(base, segment.LogExt)
	path := fs.Join(dir, segName)
	f, err := fs.Open(path)
	if err != nil {
		return nil, ioUnavailable("open segment "+segName, err)
	}
	closeF := func() {
		if f != nil {
			_ = f.Close()
			f = nil
		}
	}
	defer closeF()
	size, err := f.Size()
	if err != nil {
		return nil, ioUnavailable("stat segment "+segName, err)
	}
	s := &seg{base: base, path: path, next: base, lastBatchPos: -1, maxTS: 0}

	var scanFrom int64
	if !l.cfg.VerifyAll && files.index && files.tindex {
		ok, err := l.loadIndexes(f, s, size)
		if err != nil {
			return nil, err
		}
		if ok {
			scanFrom = s.size
		} else {
			s = &seg{base: base, path: path, next: base, lastBatchPos: -1}
		}
	}
	scanned := scanFrom < size || scanFrom == 0
	if scanned {
		expected := s.next
		visit := func(pos int64, h *segment.Header, _ []byte) error {
			if h.BaseOffset < expected || h.LastOffset()-base > math.MaxUint32 {
				return errOrder
			}
			s.addBatchLocked(h, pos, l.cfg.IndexInterval)
			expected = h.NextOffset()
			onEpoch(h)
			return nil
		}
		end, prob, err := segment.Scan(f, scanFrom, size, visit)
		bad := prob.String()
		if errors.Is(err, errOrder) {
			bad, err = "offset_order", nil
		} else if prob == segment.OK && err == nil {
			bad = ""
		}
		if err != nil {
			return nil, ioUnavailable("read segment "+segName, err)
		}
		if bad != "" {
			if !last {
				return nil, l.corrupt("damaged batch in a closed segment", "segment", segName,
					"position", strconv.FormatInt(end, 10), "problem", bad, "offset", strconv.FormatUint(s.next, 10))
			}
			later, err := segment.FindValid(f, end+1, size, s.next)
			if err != nil {
				return nil, ioUnavailable("read segment "+segName, err)
			}
			for _, h := range later {
				if h.DurableWatermark > s.next {
					return nil, l.corrupt("damaged batch below durable data", "segment", segName,
						"position", strconv.FormatInt(end, 10), "problem", bad, "offset", strconv.FormatUint(s.next, 10),
						"later_batch", strconv.FormatUint(h.BaseOffset, 10))
				}
			}
			// Zeros up to the file size are preallocated space (Config.
			// Preallocate) after a crash: expected, not a torn write.
			zero, err := allZero(f, end, size)
			if err != nil {
				return nil, ioUnavailable("read segment "+segName, err)
			}
			if zero {
				l.cfg.Logger.Info("cutting preallocated space after the last batch of partition log", "dir", dir,
					"segment", segName, "position", end, "dropped_bytes", size-end, "next_offset", s.next)
			} else {
				l.cfg.Logger.Warn("cutting torn tail of partition log", "dir", dir, "segment", segName,
					"position", end, "problem", bad, "dropped_bytes", size-end, "next_offset", s.next)
			}
			closeF()
			if err := fs.Truncate(path, end); err != nil {
				return nil, ioUnavailable("truncate torn tail of "+segName, err)
			}
			size = end
		}
	}
	if s.size != size {
		return nil, l.corrupt("segment size disagrees with its batches", "segment", segName)
	}
	closeF()
	if !last {
		s.closed = true
		if scanned {
			// Rebuilt indexes: write them so the next start trusts them.
			if err := l.writeIndexes(s); err != nil {
				return nil, ioUnavailable("write index of "+segName, err)
			}
		}
		return s, nil
	}
	w, err := fs.OpenRW(path)
	if err != nil {
		return nil, ioUnavailable("open segment "+segName+" for append", err)
	}
	// What the scan accepted may sit only in the page cache of a crashed
	// process: make it durable before it is served or counted as durable.
	if err := w.SyncData(); err != nil {
		_ = w.Close()
		return nil, ioUnavailable("fdatasync "+segName, err)
	}
	s.w = &writer{f: w, alloc: size}
	return s, nil
}

// allZero reports whether f holds only zero bytes in [from, to).
func allZero(f io.ReaderAt, from, to int64) (bool, error) {
	n := min(max(to-from, 0), segment.ScanChunk)
	buf, zeros := make([]byte, n), make([]byte, n)
	for off := from; off < to; {
		n := min(int64(len(buf)), to-off)
		if err := segment.ReadFull(f, buf[:n], off); err != nil {
			return false, err
		}
		if !bytes.Equal(buf[:n], zeros[:n]) {
			return false, nil
		}
		off += n
	}
	return true, nil
}

// loadIndexes reads s's index files and, when they are consistent with the
// segment file, fills s from them. ok is false when they must be rebuilt.
func (l *Log) loadIndexes(f interface {
	ReadAt([]byte, int64) (int, error)
}, s *seg, size int64) (bool, error) {
	fs, dir := l.cfg.FS, l.cfg.Dir
	ib, err := readWholeFile(fs, fs.Join(dir, segment.FileName(s.base, segment.IndexExt)))
	if err != nil {
		return false, nil
	}
	sum, entries, err := segment.DecodeIndex(ib)
	if err != nil {
		return false, nil
	}
	tb, err := readWholeFile(fs, fs.Join(dir, segment.FileName(s.base, segment.TimeIndexExt)))
	if err != nil {
		return false, nil
	}
	tsize, tentries, err := segment.DecodeTimeIndex(tb)
	if err != nil || tsize != sum.LogSize {
		return false, nil
	}
	if sum.LogSize > size {
		// The index covers bytes that were durable when it was written.
		return false, l.corrupt("segment shorter than its index says", "segment", segment.FileName(s.base, segment.LogExt),
			"size", strconv.FormatInt(size, 10), "indexed", strconv.FormatInt(sum.LogSize, 10))
	}
	if sum.LastBatchPos < 0 {
		if sum.LogSize != 0 || sum.NextOffset != s.base {
			return false, nil
		}
	} else {
		hb := make([]byte, segment.HeaderFixed+segment.MaxProducerIDLen)
		n := min(int64(len(hb)), sum.LogSize-sum.LastBatchPos)
		if err := segment.ReadFull(f, hb[:n], sum.LastBatchPos); err != nil {
			return false, nil
		}
		h, p := segment.ParseHeader(hb[:n])
		if p != segment.OK || sum.LastBatchPos+int64(h.Length) != sum.LogSize || h.NextOffset() != sum.NextOffset {
			return false, nil
		}
		b := make([]byte, h.Length)
		if err := segment.ReadFull(f, b, sum.LastBatchPos); err != nil {
			return false, nil
		}
		if _, _, p := segment.CheckBatch(b); p != segment.OK {
			return false, nil
		}
		if h.BaseOffset < s.base {
			return false, nil
		}
	}
	for _, e := range entries {
		if uint64(e.RelOffset)+s.base >= sum.NextOffset {
			return false, nil
		}
	}
	s.size = sum.LogSize
	s.next = sum.NextOffset
	s.lastBatchPos = sum.LastBatchPos
	s.maxTS = sum.MaxTimestamp
	s.maxAppend = sum.MaxAppendTime
	s.firstAppend = sum.FirstAppendTime
	s.index = entries
	s.tindex = tentries
	lastIdx := int64(0)
	if len(entries) > 0 {
		lastIdx = int64(entries[len(entries)-1].Pos)
	}
	s.sinceIndex = s.size - lastIdx
	return true, nil
}

func isNotExist(err error) bool { return fsys.IsNotExist(err) }

package seglog

import (
	"fmt"
	"time"

	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/partitiond/internal/record"
	"github.com/strataio/strata/partitiond/internal/segment"
)

// RollActive closes the active segment and starts a new one when the active
// segment holds at least one batch. Retention uses it so an idle active
// segment can age out.
func (l *Log) RollActive() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errcode.StorageUnavailable.New("partition log closed", "dir", l.cfg.Dir)
	}
	if l.Fenced() != nil {
		return l.unavailable("partition storage is fenced")
	}
	if l.active.size == 0 {
		return nil
	}
	return l.rollLocked()
}

// retire takes old out of service: readers that have not opened it yet
// retry with a fresh snapshot, readers holding an open file keep reading the
// old file. ops does the file work; when it reports committed, old is
// replaced by repl (or removed when repl is nil) in the snapshot.
func (l *Log) retire(old, repl *seg, ops func() (committed bool, err error)) error {
	old.mu.Lock()
	defer old.mu.Unlock()
	old.retired = true
	l.cfg.Cache.drop(old)
	committed, err := ops()
	if !committed {
		old.retired = false
		return err
	}
	l.publish(func(ss []*seg) []*seg {
		out := ss[:0]
		for _, s := range ss {
			switch {
			case s != old:
				out = append(out, s)
			case repl != nil:
				out = append(out, repl)
			}
		}
		return out
	})
	return err
}

// DeleteOldest deletes up to n of the oldest segments, never the active
// one, and returns how many it deleted. The log start offset moves to the
// base of the first remaining segment. Each deletion is durable (directory
// fsync) before the next, so a crash never leaves a hole in the log.
func (l *Log) DeleteOldest(n int) (int, error) {
	l.maint.Lock()
	defer l.maint.Unlock()
	if l.isShut() {
		return 0, errcode.StorageUnavailable.New("partition log closed", "dir", l.cfg.Dir)
	}
	deleted := 0
	for deleted < n {
		ss := *l.segs.Load()
		if len(ss) < 2 {
			break
		}
		s := ss[0]
		s.mu.RLock()
		closed := s.closed
		s.mu.RUnlock()
		if !closed {
			break
		}
		err := l.retire(s, nil, func() (bool, error) { return l.removeSegmentFiles(s) })
		if err != nil {
			return deleted, errcode.StorageUnavailable.New("delete segment: "+err.Error(), "segment", s.path)
		}
		deleted++
	}
	return deleted, nil
}

// removeSegmentFiles removes a retired segment's file, then its index
// files, then syncs the directory. committed reports that the segment file
// is gone (a leftover index is removed at the next open).
func (l *Log) removeSegmentFiles(s *seg) (committed bool, err error) {
	fs, dir := l.cfg.FS, l.cfg.Dir
	if err := fs.Remove(s.path); err != nil && !isNotExist(err) {
		return false, err
	}
	for _, ext := range []string{segment.IndexExt, segment.TimeIndexExt} {
		if err := fs.Remove(fs.Join(dir, segment.FileName(s.base, ext))); err != nil && !isNotExist(err) {
			return true, err
		}
	}
	return true, fs.SyncDir(dir)
}

// CompactOptions configures one compaction pass.
type CompactOptions struct {
	Now time.Time
	// DeleteRetention is how long a tombstone that is the latest value of
	// its key stays after it was appended.
	DeleteRetention time.Duration
	// UpTo bounds the pass: only records below it decide the latest value
	// of a key, and only closed segments that end at or below it are
	// rewritten (the caller passes the high watermark and the offset its
	// producer-state checkpoint covers).
	UpTo uint64
	// Drop, when set, names batches to leave out altogether: they never
	// decide a key's latest value and are not rewritten (the partition
	// passes an aborted transaction's records and its abort marker).
	Drop func(h *segment.Header) bool
}

// CompactResult reports a compaction pass.
type CompactResult struct {
	SegmentsRewritten int
	RecordsRemoved    int
	BytesBefore       int64
	BytesAfter        int64
}

// Compact keeps, in closed segments below opts.UpTo, only the latest record
// of each key (and drops tombstones older than DeleteRetention). Offsets are
// preserved, so the log becomes sparse; batches that lose every record are
// dropped, segments that lose every batch stay as empty files so the log
// start offset never moves. Records without a key are kept, except in
// batches opts.Drop names.
//
// Each rewritten segment is written to a temporary file and synced, the old
// index files are removed, the new file is renamed over the old one and the
// index files are written again; a crash at any point leaves either segment
// version, with indexes rebuilt by the next Open when missing.
func (l *Log) Compact(opts CompactOptions) (CompactResult, error) {
	l.maint.Lock()
	defer l.maint.Unlock()
	var res CompactResult
	if l.isShut() {
		return res, errcode.StorageUnavailable.New("partition log closed", "dir", l.cfg.Dir)
	}
	upTo := min(opts.UpTo, l.DurableEnd())
	latest := make(map[string]uint64)
	err := l.ScanBatches(l.StartOffset(), upTo, func(h *segment.Header, recs []byte) error {
		if opts.Drop != nil && opts.Drop(h) {
			return nil
		}
		return eachRecord(recs, func(rec []byte, off uint64) error {
			if off >= upTo {
				return nil
			}
			in, err := l.cfg.Inspector.Inspect(rec)
			if err != nil {
				return errcode.StorageCorrupt.New("stored record does not decode: "+err.Error(), "dir", l.cfg.Dir)
			}
			if in.HasKey {
				latest[string(in.Key)] = off
			}
			return nil
		})
	})
	if err != nil {
		return res, err
	}
	expireBefore := opts.Now.Add(-opts.DeleteRetention).UnixMilli()
	for _, s := range *l.segs.Load() {
		s.mu.RLock()
		closed, next := s.closed, s.next
		s.mu.RUnlock()
		if !closed || next > upTo {
			break
		}
		r, err := l.compactSegment(s, latest, expireBefore, opts.Drop)
		if err != nil {
			return res, err
		}
		res.SegmentsRewritten += r.SegmentsRewritten
		res.RecordsRemoved += r.RecordsRemoved
		res.BytesBefore += r.BytesBefore
		res.BytesAfter += r.BytesAfter
	}
	return res, nil
}

func eachRecord(recs []byte, fn func(rec []byte, off uint64) error) error {
	for len(recs) > 0 {
		n := int(uint32(recs[0])<<24 | uint32(recs[1])<<16 | uint32(recs[2])<<8 | uint32(recs[3]))
		rec := recs[4 : 4+n]
		if err := fn(rec, record.OffsetOf(rec)); err != nil {
			return err
		}
		recs = recs[4+n:]
	}
	return nil
}

func (l *Log) compactSegment(s *seg, latest map[string]uint64, expireBefore int64, drop func(*segment.Header) bool) (CompactResult, error) {
	var res CompactResult
	fs, dir := l.cfg.FS, l.cfg.Dir
	tmp := fs.Join(dir, segment.FileName(s.base, segment.LogExt+segment.CompactExt))
	f, err := fs.Create(tmp)
	if err != nil {
		return res, errcode.StorageUnavailable.New("create compacted segment: "+err.Error(), "segment", s.path)
	}
	abort := func(err error) (CompactResult, error) {
		_ = f.Close()
		_ = fs.Remove(tmp)
		if _, ok := err.(*errcode.Error); ok {
			return CompactResult{}, err
		}
		return CompactResult{}, errcode.StorageUnavailable.New("compact segment: "+err.Error(), "segment", s.path)
	}
	ns := &seg{base: s.base, path: s.path, next: s.base, lastBatchPos: -1, closed: true}
	var out, kept []byte
	var pos int64
	var hb [segment.HeaderFixed + segment.MaxProducerIDLen]byte
	flush := func() error {
		if len(out) == 0 {
			return nil
		}
		if _, err := f.WriteAt(out, pos-int64(len(out))); err != nil {
			return err
		}
		out = out[:0]
		return nil
	}
	s.mu.RLock()
	end := s.next
	res.BytesBefore = s.size
	s.mu.RUnlock()
	err = l.ScanBatches(s.base, end, func(h *segment.Header, recs []byte) error {
		if drop != nil && drop(h) {
			res.RecordsRemoved += int(h.RecordCount)
			return nil
		}
		kept = kept[:0]
		n := 0
		err := eachRecord(recs, func(rec []byte, off uint64) error {
			in, err := l.cfg.Inspector.Inspect(rec)
			if err != nil {
				return errcode.StorageCorrupt.New("stored record does not decode: "+err.Error(), "segment", s.path)
			}
			keep := true
			if in.HasKey {
				if lo, ok := latest[string(in.Key)]; ok && lo != off {
					keep = false
				} else if in.Tombstone() && h.AppendTime <= expireBefore {
					keep = false
				}
			}
			if keep {
				kept = appendPrefixed(kept, rec)
				n++
			} else {
				res.RecordsRemoved++
			}
			return nil
		})
		if err != nil || n == 0 {
			return err
		}
		nh := *h
		nh.RecordCount = uint32(n)
		nh.ProducerID = append([]byte(nil), h.ProducerID...)
		segment.PutHeader(hb[:], &nh, kept)
		out = append(out, hb[:nh.Len()]...)
		out = append(out, kept...)
		ns.addBatchLocked(&nh, pos, l.cfg.IndexInterval)
		pos += int64(nh.Length)
		if len(out) >= 1<<20 {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return abort(err)
	}
	if res.RecordsRemoved == 0 {
		_ = f.Close()
		_ = fs.Remove(tmp)
		return CompactResult{}, nil
	}
	if err := f.SyncData(); err != nil {
		return abort(err)
	}
	if err := f.Close(); err != nil {
		_ = fs.Remove(tmp)
		return CompactResult{}, errcode.StorageUnavailable.New("close compacted segment: "+err.Error(), "segment", s.path)
	}
	ns.size = pos
	res.SegmentsRewritten = 1
	res.BytesAfter = pos
	err = l.retire(s, ns, func() (bool, error) {
		for _, ext := range []string{segment.IndexExt, segment.TimeIndexExt} {
			if err := fs.Remove(fs.Join(dir, segment.FileName(s.base, ext))); err != nil && !isNotExist(err) {
				return false, err
			}
		}
		if err := fs.SyncDir(dir); err != nil {
			return false, err
		}
		if err := fs.Rename(tmp, s.path); err != nil {
			return false, err
		}
		if err := fs.SyncDir(dir); err != nil {
			return true, err
		}
		return true, l.writeIndexes(ns)
	})
	if err != nil {
		_ = fs.Remove(tmp)
		return res, errcode.StorageUnavailable.New(fmt.Sprintf("swap compacted segment: %v", err), "segment", s.path)
	}
	return res, nil
}

func appendPrefixed(dst, rec []byte) []byte {
	n := len(rec)
	dst = append(dst, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	return append(dst, rec...)
}

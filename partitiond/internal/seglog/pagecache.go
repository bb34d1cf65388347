package seglog

import (
	"sync"

	"github.com/strataio/strata/partitiond/internal/fsys"
)

// Page-cache drop-behind. A log keeps only its last CacheWindow bytes in the
// OS page cache: once synced bytes fall further behind the durable end, and
// after a read of bytes that far behind, their pages are given back
// (fsys.File.DropCache). Producers and tailing consumers work inside the
// window; a consumer catching up reads its history from the disk without
// pushing the tail out of the cache. A log's page-cache footprint stays
// about one window, and the freed pages are there for the next appends: on a
// VM whose balloon takes free memory back (free page reporting), writing
// into memory the host reclaimed costs several times the copy itself. A
// busy writer gets its freed pages back; several processes writing at
// moderate rates less reliably (docs/performance.md, "Page-cache
// drop-behind").

const (
	// dropStep: drops are at least this large (one fadvise per MiB, not
	// per group commit).
	dropStep = 1 << 20
	// pageSize aligns drops: fadvise drops only pages a range covers
	// whole, so ranges that meet mid-page would keep that page forever.
	pageSize = 4096
)

// dropper is the write side's progress: the bytes of seg below pos were
// dropped.
type dropper struct {
	mu  sync.Mutex
	seg *seg
	pos int64
}

// dropBehind drops the pages of synced bytes more than CacheWindow behind m,
// the durable end a sync just reached. It runs on the syncer after the
// durable end moved, so no acknowledgement waits for it.
func (l *Log) dropBehind(m *mark) {
	win := l.cfg.CacheWindow
	if win <= 0 || !l.drop.mu.TryLock() {
		return
	}
	defer l.drop.mu.Unlock()
	d := &l.drop
	if d.seg != m.seg {
		if d.seg != nil {
			if m.pos < win {
				return // the previous segment's tail is still in the window
			}
			l.dropClosed(d.seg, d.pos, m.seg)
		}
		d.seg, d.pos = m.seg, 0
	}
	to := (m.pos - win) &^ (pageSize - 1)
	if to < d.pos { // a truncation cut the log below what was dropped
		d.pos = max(to, 0)
		return
	}
	if to-d.pos < dropStep {
		return
	}
	if m.seg.w.dropCache(d.pos, to-d.pos) {
		l.dropped(false, to-d.pos)
		d.pos = to
	}
}

// dropped reports n bytes given back (Config.OnDrop).
func (l *Log) dropped(read bool, n int64) {
	if l.cfg.OnDrop != nil && n > 0 {
		l.cfg.OnDrop(read, n)
	}
}

// dropClosed drops the pages of the closed segments from `from` (its bytes
// from pos on) up to, not including, upTo. Errors are ignored: dropping is
// advice, and a segment retired meanwhile has no pages left to drop.
func (l *Log) dropClosed(from *seg, pos int64, upTo *seg) {
	for _, s := range *l.segs.Load() {
		if s.base < from.base || s.base >= upTo.base {
			continue
		}
		start := int64(0)
		if s == from {
			start = pos
		}
		s.mu.RLock()
		size, closed := s.size, s.closed
		s.mu.RUnlock()
		if !closed || size <= start {
			continue
		}
		// A descriptor of its own, not the reader cache's: a one-off drop
		// should neither evict a reader nor count as a reader's miss.
		if f, err := l.openReader(s)(); err == nil {
			if f.DropCache(start, size-start) == nil {
				l.dropped(false, size-start)
			}
			_ = f.Close()
		}
	}
}

// dropCache drops [off, off+n) of the active segment's pages; false when
// the file was closed meanwhile (a roll: dropClosed takes over) or the drop
// failed (it is tried again with the next step).
func (w *writer) dropCache(off, n int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	return w.f.DropCache(off, n) == nil
}

// coldFrom returns the position in segment s from which its bytes are
// within the window of the durable end d (the bytes below it are cold);
// next is the segment after s in the snapshot (nil for the last), end the
// readable end of s.
func (l *Log) coldFrom(s, next *seg, d *mark, end int64) int64 {
	win := l.cfg.CacheWindow
	switch {
	case win <= 0:
		return 0
	case s == d.seg:
		return d.pos - win
	case next == d.seg:
		return end + d.pos - win
	default: // older segments are cold as a whole
		return end
	}
}

// coldReads drops, after a walk read them, the pages of the bytes of a
// segment below cold, in steps of at least dropStep.
type coldReads struct {
	l              *Log
	f              fsys.File
	cold, from, to int64
}

func (l *Log) newColdReads(f fsys.File, cold, pos int64) coldReads {
	return coldReads{l: l, f: f, cold: cold, from: pos &^ (pageSize - 1)}
}

// read notes that [pos, pos+n) was read.
func (c *coldReads) read(pos, n int64) {
	if pos >= c.cold {
		return
	}
	c.to = max(c.to, min(pos+n, c.cold))
	if c.to-c.from >= dropStep {
		c.flush()
	}
}

// flush drops what was read of the cold part and not dropped yet.
func (c *coldReads) flush() {
	if to := c.to &^ (pageSize - 1); to > c.from {
		if c.f.DropCache(c.from, to-c.from) == nil {
			c.l.dropped(true, to-c.from)
		}
		c.from = to
	}
}

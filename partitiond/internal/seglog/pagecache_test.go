package seglog

import (
	"sort"
	"sync"
	"testing"

	"github.com/strataio/strata/partitiond/internal/fsys"
)

// dropRecorder wraps an FS and records every DropCache call per path.
type dropRecorder struct {
	fsys.FS
	mu    sync.Mutex
	drops map[string][][2]int64
}

type recordingFile struct {
	fsys.File
	path string
	r    *dropRecorder
}

func (f recordingFile) DropCache(off, n int64) error {
	f.r.mu.Lock()
	defer f.r.mu.Unlock()
	f.r.drops[f.path] = append(f.r.drops[f.path], [2]int64{off, off + n})
	return f.File.DropCache(off, n)
}

func (r *dropRecorder) wrap(path string, open func(string) (fsys.File, error)) (fsys.File, error) {
	f, err := open(path)
	if err != nil {
		return nil, err
	}
	return recordingFile{File: f, path: path, r: r}, nil
}

func (r *dropRecorder) Create(name string) (fsys.File, error) { return r.wrap(name, r.FS.Create) }
func (r *dropRecorder) OpenRW(name string) (fsys.File, error) { return r.wrap(name, r.FS.OpenRW) }
func (r *dropRecorder) Open(name string) (fsys.File, error)   { return r.wrap(name, r.FS.Open) }

// paths returns the segment file paths of l, oldest first, with their sizes.
func paths(l *Log) (p []string, size []int64) {
	for _, s := range *l.segs.Load() {
		s.mu.RLock()
		p, size = append(p, s.path), append(size, s.size)
		s.mu.RUnlock()
	}
	return p, size
}

// total sums the lengths of spans.
func total(spans [][2]int64) (n int64) {
	for _, s := range spans {
		n += s[1] - s[0]
	}
	return n
}

// onDrop returns a Config.OnDrop that sums what it is told into written and read.
func onDrop(written, read *int64) func(bool, int64) {
	return func(r bool, n int64) {
		if r {
			*read += n
		} else {
			*written += n
		}
	}
}

// take returns the recorded drops (sorted per path) and forgets them.
func (r *dropRecorder) take() map[string][][2]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	d := r.drops
	for _, spans := range d {
		sort.Slice(spans, func(i, j int) bool { return spans[i][0] < spans[j][0] })
	}
	r.drops = map[string][][2]int64{}
	return d
}

// covered returns the end of the contiguous prefix [0, end) the spans cover
// (they must start at 0 and meet or overlap).
func covered(t *testing.T, path string, spans [][2]int64) int64 {
	t.Helper()
	var end int64
	for _, s := range spans {
		if s[0] > end {
			t.Fatalf("%s: drops leave a gap at %d (next starts at %d): %v", path, end, s[0], spans)
		}
		end = max(end, s[1])
	}
	return end
}

func (e *testEnv) recorded() *dropRecorder {
	r := &dropRecorder{FS: e.fs, drops: map[string][][2]int64{}}
	e.fs = r
	return r
}

// TestDropBehindAppends: appends give back the pages of synced bytes more
// than the window behind the durable end — whole closed segments once the
// active one holds a window, the active one up to about a window behind its
// end, never a byte inside the window.
func TestDropBehindAppends(t *testing.T) {
	e := newEnv(t)
	rec := e.recorded()
	const win = 1 << 20
	var written, read int64
	l := e.open(t, func(c *Config) { c.SegmentBytes = 4 << 20; c.CacheWindow = win; c.OnDrop = onDrop(&written, &read) })
	defer l.Close()
	appendN(t, l, 320, 32<<10) // ≈ 10 MiB: two closed segments and the active one

	ps, sizes := paths(l)
	if len(ps) != 3 {
		t.Fatalf("%d segments, want 3", len(ps))
	}
	drops := rec.take()
	for i, p := range ps[:2] {
		if got := covered(t, p, drops[p]); got != sizes[i] {
			t.Fatalf("closed segment %s: dropped up to %d of %d", p, got, sizes[i])
		}
	}
	d := l.durable.Load()
	got := covered(t, ps[2], drops[ps[2]])
	if got > d.pos-win {
		t.Fatalf("active segment dropped up to %d, inside the window (durable pos %d)", got, d.pos)
	}
	if got < d.pos-win-dropStep-pageSize {
		t.Fatalf("active segment dropped up to %d only (durable pos %d)", got, d.pos)
	}
	if got%pageSize != 0 {
		t.Fatalf("drop end %d not page aligned", got)
	}
	var sum int64
	for _, spans := range drops {
		sum += total(spans)
	}
	if written != sum || read != 0 {
		t.Fatalf("OnDrop reported %d written, %d read; the drops cover %d", written, read, sum)
	}
	readAll(t, l, 0, 32<<10)
}

// TestColdReadsDropPages: a reader walking the log's history gives back the
// pages of what it read further than the window behind the durable end, and
// leaves the window's pages alone.
func TestColdReadsDropPages(t *testing.T) {
	e := newEnv(t)
	const win = 1 << 20
	l := e.open(t, func(c *Config) { c.SegmentBytes = 64 << 20 })
	appendN(t, l, 160, 32<<10) // ≈ 5 MiB in one segment, window off
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rec := e.recorded()
	var written, read int64
	l = e.open(t, func(c *Config) { c.SegmentBytes = 64 << 20; c.CacheWindow = win; c.OnDrop = onDrop(&written, &read) })
	defer l.Close()
	rec.take() // recovery's reads
	read = 0
	readAll(t, l, 0, 32<<10)

	ps, _ := paths(l)
	d := l.durable.Load()
	drops := rec.take()
	got := covered(t, ps[0], drops[ps[0]])
	if got > d.pos-win || got < d.pos-win-pageSize {
		t.Fatalf("reads dropped up to %d; want the page below %d (durable pos %d)", got, d.pos-win, d.pos)
	}
	if sum := total(drops[ps[0]]); read != sum || written != 0 {
		t.Fatalf("OnDrop reported %d read, %d written; the drops cover %d", read, written, sum)
	}
}

// TestNoWindowNoDrops: CacheWindow 0 leaves the page cache to the kernel.
func TestNoWindowNoDrops(t *testing.T) {
	e := newEnv(t)
	rec := e.recorded()
	l := e.open(t, func(c *Config) { c.SegmentBytes = 2 << 20 })
	defer l.Close()
	appendN(t, l, 160, 32<<10)
	readAll(t, l, 0, 32<<10)
	if d := rec.take(); len(d) != 0 {
		t.Fatalf("drops with no window: %v", d)
	}
}

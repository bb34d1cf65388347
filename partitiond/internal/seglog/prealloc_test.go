package seglog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/strataio/strata/partitiond/internal/fsys"
	"github.com/strataio/strata/partitiond/internal/segment"
)

// preallocEnv is newEnv whose files preallocate by writing zeros (MemFS has
// no fallocate): what a fallocated region reads as.
func preallocEnv(t *testing.T) *testEnv {
	e := newEnv(t)
	e.fs = fsys.ZeroFill(e.fs)
	return e
}

// withPrealloc sets a small preallocation step (several steps per 8 KiB test
// segment) and a segment size.
func withPrealloc(step, segBytes int64) func(*Config) {
	return func(c *Config) { c.Preallocate, c.SegmentBytes = step, segBytes }
}

// crashedPrealloc is e after a crash that kept pct% of the unsynced data, with
// preallocation on again for the appends after recovery.
func (e *testEnv) crashedPrealloc(pct int) *testEnv {
	c := e.crashed(pct)
	c.fs = fsys.ZeroFill(c.fs)
	return c
}

// checkExactFiles fails unless every closed segment's file (and the active
// one's, when active is set) is exactly as long as its data.
func checkExactFiles(t *testing.T, e *testEnv, segs []SegmentInfo, active bool) {
	t.Helper()
	for _, s := range segs {
		if s.Active && !active {
			continue
		}
		n := int64(len(fileBytes(t, e.mem, e.fs.Join(e.dir, segment.FileName(s.Base, segment.LogExt)))))
		if n != s.Size {
			t.Fatalf("segment %d: file %d bytes, data %d (active %v)", s.Base, n, s.Size, s.Active)
		}
	}
}

// TestPreallocatedActiveSegmentIsAheadAndClosedOnesExact: the active file
// runs ahead of its data in steps, bounded by the segment size; rolled
// segments are cut back to their data; Close cuts the active one, so a
// clean restart finds exact files and everything reads back.
func TestPreallocatedActiveSegmentIsAheadAndClosedOnesExact(t *testing.T) {
	e := preallocEnv(t)
	l := e.open(t, withPrealloc(1024, 8<<10))
	appendN(t, l, 3, 100)
	segs := l.Segments()
	a := segs[len(segs)-1]
	if n := int64(len(fileBytes(t, e.mem, activePath(l)))); n != 1024 || a.Size >= n {
		t.Fatalf("active file %d bytes for %d of data, want one 1 KiB step", n, a.Size)
	}
	appendN(t, l, 200, 100)
	segs = l.Segments()
	if len(segs) < 3 {
		t.Fatalf("%d segments, want rolls", len(segs))
	}
	checkExactFiles(t, e, segs, false)
	a = segs[len(segs)-1]
	if n := int64(len(fileBytes(t, e.mem, activePath(l)))); n <= a.Size || n > 8<<10 {
		t.Fatalf("active file %d bytes for %d of data (segment bytes 8 KiB)", n, a.Size)
	}
	l = e.reopen(t, l)
	defer l.Close()
	checkExactFiles(t, e, l.Segments(), true)
	if l.EndOffset() != 203 || readAll(t, l, 0, 100) != 203 {
		t.Fatalf("end %d after reopen", l.EndOffset())
	}
	if err := l.Verify(); err != nil {
		t.Fatal(err)
	}
}

// TestPreallocationStepsGrowWithTheSegment: 64 KiB first, then doubling
// with the data up to the configured step, then multiples of it.
func TestPreallocationStepsGrowWithTheSegment(t *testing.T) {
	e := preallocEnv(t)
	l := e.open(t, withPrealloc(256<<10, 1<<20))
	defer l.Close()
	var sizes []int64
	for l.EndOffset() < 900 {
		appendN(t, l, 1, 1000)
		if n := int64(len(fileBytes(t, e.mem, activePath(l)))); len(sizes) == 0 || n != sizes[len(sizes)-1] {
			sizes = append(sizes, n)
		}
	}
	want := []int64{64 << 10, 128 << 10, 256 << 10, 512 << 10, 768 << 10, 1 << 20}
	if fmt.Sprint(sizes) != fmt.Sprint(want) {
		t.Fatalf("file sizes %v, want %v", sizes, want)
	}
}

// TestCrashWithPreallocatedZeroTail: a crash leaves the active segment with
// zeros after its last batch (a fallocated region). Recovery cuts them as it
// cuts a torn write (logged at info, not as a warning), keeps every durable batch, and appends continue; with
// every unsynced byte kept (100 %) and with none (0 %), and with
// verify_on_open (every batch of every segment checked).
func TestCrashWithPreallocatedZeroTail(t *testing.T) {
	for _, pct := range []int{0, 100, -1} {
		verifyAll := pct < 0
		pct = max(pct, 0)
		var warnings atomic.Int64
		e := preallocEnv(t)
		l := e.open(t, withPrealloc(4096, 1<<20))
		appendN(t, l, 10, 150)
		path := activePath(l)
		dataEnd := l.Segments()[0].Size
		if n := int64(len(fileBytes(t, e.mem, path))); n != 4096 {
			t.Fatalf("file %d bytes, want 4096 preallocated", n)
		}
		c := e.crashedPrealloc(pct)
		l.Close()
		if n := int64(len(fileBytes(t, c.mem, path))); n != 4096 {
			t.Fatalf("crashed file %d bytes: the test needs the zero tail", n)
		}
		l2, err := Open(func() Config {
			cf := c.config()
			withPrealloc(4096, 1<<20)(&cf)
			cf.VerifyAll = verifyAll
			cf.Logger = slog.New(countHandler{slog.LevelWarn, &warnings})
			return cf
		}())
		if err != nil {
			t.Fatalf("pct %d: %v", pct, err)
		}
		if l2.EndOffset() != 10 || l2.DurableEnd() != 10 || readAll(t, l2, 0, 150) != 10 {
			t.Fatalf("pct %d: end %d durable %d", pct, l2.EndOffset(), l2.DurableEnd())
		}
		if warnings.Load() != 0 {
			t.Fatalf("pct %d: a zero tail was logged as a torn write", pct)
		}
		if n := int64(len(fileBytes(t, c.mem, path))); n != dataEnd {
			t.Fatalf("pct %d: recovered file %d bytes, data end %d", pct, n, dataEnd)
		}
		appendN(t, l2, 30, 150)
		if readAll(t, l2, 0, 150) != 40 {
			t.Fatal("appends after recovery")
		}
		if err := l2.Verify(); err != nil {
			t.Fatal(err)
		}
		l2.Close()
	}
}

// TestTornBatchInsidePreallocatedArea: the last batch is cut at every byte
// inside a preallocated area (zeros after it up to the file size, as a
// crash in the middle of its write leaves them): recovery keeps exactly the
// whole batches and the log takes appends again.
func TestTornBatchInsidePreallocatedArea(t *testing.T) {
	e := preallocEnv(t)
	l := e.open(t, withPrealloc(4096, 1<<20))
	appendN(t, l, 10, 150)
	path := activePath(l)
	full := fileBytes(t, e.mem, path)
	dataEnd := l.Segments()[0].Size
	starts := batchStarts(full[:dataEnd])
	if len(starts) != 10 || int64(len(full)) != 4096 {
		t.Fatalf("%d batches in a %d-byte file", len(starts), len(full))
	}
	for cut := starts[9]; cut < dataEnd; cut++ {
		c := e.crashed(0)
		data := make([]byte, len(full)) // the preallocated zeros
		copy(data, full[:cut])
		writeFile(t, c.mem, path, data)
		l2, err := Open(c.config())
		if err != nil {
			t.Fatalf("cut at %d: %v", cut, err)
		}
		if l2.EndOffset() != 9 || readAll(t, l2, 0, 150) != 9 {
			t.Fatalf("cut at %d: end %d, want 9", cut, l2.EndOffset())
		}
		appendN(t, l2, 1, 150)
		if err := l2.Verify(); err != nil {
			t.Fatal(err)
		}
		l2.Close()
	}
	l.Close()
}

// TestCrashWhenPreallocatedToTheSegmentEnd: the active segment's file
// reaches segment_bytes before the roll (the last step is bounded by it); a
// crash there and a crash right after the roll both recover every durable
// batch, and every closed segment stays exact.
func TestCrashWhenPreallocatedToTheSegmentEnd(t *testing.T) {
	e := preallocEnv(t)
	l := e.open(t, withPrealloc(3000, 8<<10))
	for l.Segments()[0].Size < 7<<10 {
		appendN(t, l, 1, 150)
	}
	if len(l.Segments()) != 1 || int64(len(fileBytes(t, e.mem, activePath(l)))) != 8<<10 {
		t.Fatal("want one segment preallocated to segment_bytes")
	}
	before := e.crashedPrealloc(0)
	n := l.EndOffset()
	for len(l.Segments()) == 1 {
		appendN(t, l, 1, 150)
	}
	after := e.crashedPrealloc(0)
	total := l.EndOffset()
	l.Close()
	for _, c := range []struct {
		env  *testEnv
		want uint64
	}{{before, n}, {after, total}} {
		l2, err := Open(func() Config { cf := c.env.config(); withPrealloc(3000, 8<<10)(&cf); return cf }())
		if err != nil {
			t.Fatal(err)
		}
		if l2.EndOffset() != c.want || readAll(t, l2, 0, 150) != c.want {
			t.Fatalf("end %d, want %d", l2.EndOffset(), c.want)
		}
		appendN(t, l2, 60, 150)
		checkExactFiles(t, c.env, l2.Segments(), false)
		if err := l2.Verify(); err != nil {
			t.Fatal(err)
		}
		l2.Close()
	}
}

// TestTruncateToInPreallocatedSegment: a replica's truncation cuts the
// preallocated space too, and appends after it preallocate again.
func TestTruncateToInPreallocatedSegment(t *testing.T) {
	e := preallocEnv(t)
	l := e.open(t, withPrealloc(4096, 1<<20))
	appendN(t, l, 20, 100)
	if _, err := l.TruncateTo(12); err != nil {
		t.Fatal(err)
	}
	if n, s := int64(len(fileBytes(t, e.mem, activePath(l)))), l.Segments()[0].Size; n != s {
		t.Fatalf("file %d bytes after truncation, data %d", n, s)
	}
	appendN(t, l, 5, 100)
	if int64(len(fileBytes(t, e.mem, activePath(l)))) != 4096 {
		t.Fatal("no preallocation after truncation")
	}
	l = e.reopen(t, l)
	defer l.Close()
	if l.EndOffset() != 17 || readAll(t, l, 0, 100) != 17 {
		t.Fatalf("end %d", l.EndOffset())
	}
}

// countHandler counts the log records at or above a level.
type countHandler struct {
	level slog.Level
	n     *atomic.Int64
}

func (h countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= h.level {
		h.n.Add(1)
	}
	return nil
}
func (h countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countHandler) WithGroup(string) slog.Handler      { return h }

// TestPreallocateUnsupportedFallsBack: on a file system without fallocate
// (MemFS files have no descriptor: ErrUnsupported) the files grow with
// their appends as before, with one log line in the process at most.
func TestPreallocateUnsupportedFallsBack(t *testing.T) {
	unsupportedLogged.Store(false)
	var lines atomic.Int64
	e := newEnv(t)
	open := func() *Log {
		return e.open(t, withPrealloc(4096, 8<<10), func(c *Config) {
			c.Logger = slog.New(countHandler{slog.LevelInfo, &lines})
		})
	}
	l := open()
	appendN(t, l, 100, 100)
	if len(l.Segments()) < 2 {
		t.Fatal("want rolls")
	}
	checkExactFiles(t, e, l.Segments(), true)
	l.Close()
	l = open()
	appendN(t, l, 10, 100)
	checkExactFiles(t, e, l.Segments(), true)
	l.Close()
	if lines.Load() != 1 {
		t.Fatalf("%d log lines, want 1", lines.Load())
	}
}

// TestPreallocateOnTheRealFileSystem runs fallocate on the test's
// directory: the active file is allocated ahead, a copy of the directory as
// a kill -9 leaves it (page cache contents, zero tail) recovers every
// batch, and Close leaves exact files.
func TestPreallocateOnTheRealFileSystem(t *testing.T) {
	dir := t.TempDir()
	logDir := filepath.Join(dir, "log")
	if err := os.Mkdir(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Dir: logDir, FS: fsys.Default(), Cache: NewReaderCache(4), SegmentBytes: 256 << 10,
		IndexInterval: 1024, Preallocate: 64 << 10}
	l, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 1000, 100) // ~ 130 KiB: 3 steps, no roll
	segs := l.Segments()
	a := segs[len(segs)-1]
	st, err := os.Stat(filepath.Join(logDir, segment.FileName(a.Base, segment.LogExt)))
	if err != nil {
		t.Fatal(err)
	}
	if !l.noPrealloc && (st.Size() <= a.Size || st.Size()%(64<<10) != 0) {
		t.Fatalf("active file %d bytes for %d of data, want 64 KiB steps ahead", st.Size(), a.Size)
	}
	if l.noPrealloc {
		t.Log("the test directory's file system has no fallocate: fallback checked only")
	}
	// A kill -9 now leaves the files as they are: copy them.
	crash := filepath.Join(dir, "crash")
	if err := os.CopyFS(crash, os.DirFS(logDir)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{logDir, crash} {
		c := cfg
		c.Dir, c.Cache = d, NewReaderCache(4)
		l, err := Open(c)
		if err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		if l.EndOffset() != 1000 || readAll(t, l, 0, 100) != 1000 {
			t.Fatalf("%s: end %d", d, l.EndOffset())
		}
		appendN(t, l, 10, 100)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		for _, s := range l.Segments() {
			st, err := os.Stat(filepath.Join(d, segment.FileName(s.Base, segment.LogExt)))
			if err != nil {
				t.Fatal(err)
			}
			if st.Size() != s.Size {
				t.Fatalf("%s: segment %d file %d bytes, data %d after Close", d, s.Base, st.Size(), s.Size)
			}
		}
	}
}

// TestAllZero checks the zero-tail test recovery uses for its log line.
func TestAllZero(t *testing.T) {
	b := make([]byte, 3*segment.ScanChunk)
	for _, c := range []struct {
		at   int
		want bool
	}{{-1, true}, {0, false}, {segment.ScanChunk + 7, false}, {len(b) - 1, false}} {
		d := bytes.Clone(b)
		if c.at >= 0 {
			d[c.at] = 1
		}
		got, err := allZero(bytes.NewReader(d), 0, int64(len(d)))
		if err != nil || got != c.want {
			t.Fatalf("byte %d set: %v, %v", c.at, got, err)
		}
	}
	if _, err := allZero(bytes.NewReader(b), 0, int64(len(b))+1); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short file: %v", err)
	}
}

package seglog

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/partitiond/internal/fsys"
	"github.com/strataio/strata/partitiond/internal/segment"
)

// crashed returns a copy of e's file system as a crash now would leave it
// with every synced byte and pct% of the rest.
func (e *testEnv) crashed(pct int) *testEnv {
	c := *e
	c.mem = e.mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(3, 4))})
	c.fs = fsys.FromVFS(c.mem)
	c.cache = NewReaderCache(8)
	return &c
}

func activePath(l *Log) string {
	ss := l.Segments()
	return l.cfg.FS.Join(l.cfg.Dir, segment.FileName(ss[len(ss)-1].Base, segment.LogExt))
}

func fileBytes(t *testing.T, fs *vfs.MemFS, path string) []byte {
	t.Helper()
	b, err := fs.UnsafeGetFileDataBuffer(path)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), b...)
}

func writeFile(t *testing.T, fs *vfs.MemFS, path string, data []byte) {
	t.Helper()
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// TestTornTailAtEveryByte cuts the active segment at every byte offset of
// its last two batches (and appends garbage after each cut): recovery keeps
// exactly the batches that are whole, never fails, and the log takes
// appends again.
func TestTornTailAtEveryByte(t *testing.T) {
	e := newEnv(t)
	l := e.open(t, func(c *Config) { c.SegmentBytes = 1 << 20 })
	appendN(t, l, 10, 150)
	path := activePath(l)
	full := fileBytes(t, e.mem, path)
	// Batch boundaries from the log itself.
	var starts []int64
	if _, _, err := segment.Scan(bytes.NewReader(full), 0, int64(len(full)), func(pos int64, _ *segment.Header, _ []byte) error {
		starts = append(starts, pos)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(starts) != 10 {
		t.Fatalf("%d batches", len(starts))
	}
	garbage := bytes.Repeat([]byte{0xA5, 0x00, 0x53, 0x54}, 64)
	cuts := 0
	for cut := starts[8]; cut < int64(len(full)); cut++ {
		for _, junk := range [][]byte{nil, garbage} {
			c := e.crashed(0)
			data := append(append([]byte(nil), full[:cut]...), junk...)
			writeFile(t, c.mem, path, data)
			l2, err := Open(c.config())
			if err != nil {
				t.Fatalf("cut at %d (+%d junk): recovery failed: %v", cut, len(junk), err)
			}
			want := uint64(8)
			if cut >= starts[9] {
				want = 9
			}
			if l2.EndOffset() != want || l2.DurableEnd() != want {
				t.Fatalf("cut at %d: end %d, want %d", cut, l2.EndOffset(), want)
			}
			if end := readAll(t, l2, 0, 150); end != want {
				t.Fatalf("cut at %d: read to %d", cut, end)
			}
			appendN(t, l2, 1, 150)
			if err := l2.Verify(); err != nil {
				t.Fatal(err)
			}
			l2.Close()
			cuts++
		}
	}
	t.Logf("torn tail: %d cut positions (with and without trailing garbage) recovered", cuts)
	l.Close()
}

// TestMidLogCorruptionIsStartupError damages a batch that later durable
// batches were written after: recovery refuses to cut it (that would lose
// acknowledged data) and fails with storage_corrupt.
func TestMidLogCorruptionIsStartupError(t *testing.T) {
	for _, tc := range []struct {
		name  string
		batch int
		flip  int // byte inside the batch
	}{{"HeaderByte", 3, 20}, {"PayloadByte", 3, 150}, {"LengthField", 5, 6}, {"MagicOfFirstBatch", 0, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			l := e.open(t, func(c *Config) { c.SegmentBytes = 1 << 20 })
			appendN(t, l, 12, 150) // each append waits for its fsync
			path := activePath(l)
			c := e.crashed(0) // crash: no clean-close checkpoint
			l.Close()
			data := fileBytes(t, c.mem, path)
			starts := batchStarts(data)
			data[starts[tc.batch]+int64(tc.flip)] ^= 0x40
			writeFile(t, c.mem, path, data)
			_, err := Open(c.config())
			if !errors.Is(err, errcode.StorageCorrupt) {
				t.Fatalf("got %v, want storage_corrupt", err)
			}
		})
	}
}

// TestClosedSegmentCorruption: damage to a closed segment is a startup
// error when the check reaches it (its last batch, its index, or every
// batch with VerifyAll) and otherwise a storage_corrupt read error; never
// a silent cut.
func TestClosedSegmentCorruption(t *testing.T) {
	setup := func(t *testing.T) (*testEnv, string, []int64) {
		e := newEnv(t)
		l := e.open(t)
		appendN(t, l, 80, 150)
		segs := l.Segments()
		if len(segs) < 3 {
			t.Fatal("want closed segments")
		}
		path := l.cfg.FS.Join(l.cfg.Dir, segment.FileName(segs[0].Base, segment.LogExt))
		l.Close()
		return e, path, batchStarts(fileBytes(t, e.mem, path))
	}
	flip := func(t *testing.T, e *testEnv, path string, at int64) {
		data := fileBytes(t, e.mem, path)
		data[at] ^= 0x01
		writeFile(t, e.mem, path, data)
	}
	t.Run("LastBatchIsStartupError", func(t *testing.T) {
		e, path, starts := setup(t)
		flip(t, e, path, starts[len(starts)-1]+120)
		if _, err := Open(e.config()); !errors.Is(err, errcode.StorageCorrupt) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("MiddleBatchWithVerifyAllIsStartupError", func(t *testing.T) {
		e, path, starts := setup(t)
		flip(t, e, path, starts[2]+120)
		if _, err := Open(func() Config { c := e.config(); c.VerifyAll = true; return c }()); !errors.Is(err, errcode.StorageCorrupt) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("MiddleBatchFoundByReadAndScrub", func(t *testing.T) {
		e, path, starts := setup(t)
		flip(t, e, path, starts[2]+120)
		l, err := Open(e.config())
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if _, err := l.Read(0, 0, 0, l.DurableEnd()); !errors.Is(err, errcode.StorageCorrupt) {
			t.Fatalf("read: %v", err)
		}
		if err := l.Verify(); err == nil {
			t.Fatal("verify missed the damage")
		}
		if l.EndOffset() != 80 {
			t.Fatal("damage below the tail cut data")
		}
	})
	t.Run("MissingIndexRebuilt", func(t *testing.T) {
		e, path, _ := setup(t)
		idx := path[:len(path)-len(segment.LogExt)] + segment.IndexExt
		if err := e.mem.Remove(idx); err != nil {
			t.Fatal(err)
		}
		l, err := Open(e.config())
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Verify(); err != nil {
			t.Fatal(err)
		}
		if end := readAll(t, l, 0, 150); end != 80 {
			t.Fatal(end)
		}
		l.Close()
		if ok, _ := e.fs.Exists(idx); !ok {
			t.Fatal("rebuilt index not written")
		}
	})
	t.Run("DamagedIndexRebuilt", func(t *testing.T) {
		e, path, _ := setup(t)
		idx := path[:len(path)-len(segment.LogExt)] + segment.IndexExt
		b := fileBytes(t, e.mem, idx)
		b[len(b)-1] ^= 0xff
		writeFile(t, e.mem, idx, b)
		l, err := Open(e.config())
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if end := readAll(t, l, 0, 150); end != 80 {
			t.Fatal(end)
		}
	})
}

// TestRecoveryIgnoresUnsyncedGarbageAfterCrash: a crash that keeps random
// unsynced blocks (valid batches after a hole) is a torn tail, not
// corruption: those batches were written before the hole was durable.
func TestRecoveryIgnoresUnsyncedGarbageAfterCrash(t *testing.T) {
	for seed := range 30 {
		e := newEnv(t)
		l := e.open(t, func(c *Config) { c.SegmentBytes = 1 << 20 })
		appendN(t, l, 5, 150)
		// Unsynced appends (no syncer: write only).
		l.cfg.Syncer = noSync{}
		for i := range 40 {
			off := l.EndOffset()
			if _, err := l.Append(makeBatch(t, testRecord(t, "", payloadFor(off, 200+i)))); err != nil {
				t.Fatal(err)
			}
		}
		c := *e
		c.mem = e.mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: rand.New(rand.NewPCG(uint64(seed), 1))})
		c.fs = fsys.FromVFS(c.mem)
		c.cache = NewReaderCache(4)
		l2, err := Open(c.config())
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if l2.EndOffset() < 5 {
			t.Fatalf("seed %d: synced data lost", seed)
		}
		if err := l2.Verify(); err != nil {
			t.Fatal(err)
		}
		l2.Close()
		l.Close()
	}
}

type noSync struct{}

func (noSync) Request(SyncTarget) {}

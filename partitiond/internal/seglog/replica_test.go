package seglog

import (
	"bytes"
	"context"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/strataio/strata/partitiond/internal/fsys"
	"github.com/strataio/strata/partitiond/internal/segment"
)

// appendEpochs appends single-record batches with payloadFor(offset): n[i]
// batches under leader epoch epochs[i].
func appendEpochs(t testing.TB, l *Log, epochs []uint64, n []int, size int) {
	t.Helper()
	for i, e := range epochs {
		for range n[i] {
			b := makeBatch(t, testRecord(t, "", payloadFor(l.EndOffset(), size)))
			b.LeaderEpoch = e
			if _, err := l.Append(b); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := l.WaitDurable(context.Background(), l.EndOffset()); err != nil {
		t.Fatal(err)
	}
}

// replicate copies leader's durable batches after follower's end into the
// follower, maxBytes per read, the way a follower's fetcher does.
func replicate(t testing.TB, leader, follower *Log, maxBytes int) {
	t.Helper()
	for follower.EndOffset() < leader.DurableEnd() {
		raw, next, err := leader.ReadBatches(follower.EndOffset(), maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		if len(raw) == 0 {
			t.Fatalf("no batches at %d below the durable end %d", follower.EndOffset(), leader.DurableEnd())
		}
		if err := SplitBatches(raw, func(h *segment.Header, b []byte) error { return follower.AppendStored(h, b) }); err != nil {
			t.Fatal(err)
		}
		if follower.EndOffset() != next {
			t.Fatalf("follower end %d, leader said next %d", follower.EndOffset(), next)
		}
	}
	if err := follower.WaitDurable(context.Background(), follower.EndOffset()); err != nil {
		t.Fatal(err)
	}
}

type batchView struct {
	h    segment.Header
	recs []byte
}

// batchesOf returns every durable batch of l with its header's durable
// watermark and CRC cleared: the fields a replica writes for itself.
func batchesOf(t testing.TB, l *Log) []batchView {
	t.Helper()
	var out []batchView
	err := l.ScanBatches(l.StartOffset(), l.DurableEnd(), func(h *segment.Header, recs []byte) error {
		c := *h
		c.DurableWatermark, c.CRC = 0, 0
		c.ProducerID = append([]byte(nil), h.ProducerID...)
		out = append(out, batchView{h: c, recs: append([]byte(nil), recs...)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameBatches(t testing.TB, a, b []batchView) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%d batches vs %d", len(a), len(b))
	}
	for i := range a {
		if a[i].h.BaseOffset != b[i].h.BaseOffset || a[i].h.LeaderEpoch != b[i].h.LeaderEpoch ||
			a[i].h.AppendTime != b[i].h.AppendTime || a[i].h.Length != b[i].h.Length || !bytes.Equal(a[i].recs, b[i].recs) {
			t.Fatalf("batch %d differs: %+v vs %+v", i, a[i].h, b[i].h)
		}
	}
}

func TestReplicatedLogIsIdenticalToTheLeaders(t *testing.T) {
	le, fe := newEnv(t), newEnv(t)
	leader, follower := le.open(t), fe.open(t)
	defer leader.Close()
	appendEpochs(t, leader, []uint64{1, 3, 4}, []int{40, 25, 30}, 100)
	// Small reads, then one large: whole batches either way.
	replicate(t, leader, follower, 300)
	appendEpochs(t, leader, []uint64{6}, []int{20}, 100)
	replicate(t, leader, follower, 1<<20)
	sameBatches(t, batchesOf(t, leader), batchesOf(t, follower))
	if got, want := follower.Epochs(), leader.Epochs(); len(got) != 4 || !equalEpochs(got, want) {
		t.Fatalf("follower epochs %v, leader %v", got, want)
	}
	if end := readAll(t, follower, 0, 100); end != 115 {
		t.Fatalf("follower reads to %d", end)
	}
	// A replica survives a restart like any log.
	if err := follower.Close(); err != nil {
		t.Fatal(err)
	}
	follower = fe.open(t)
	defer follower.Close()
	sameBatches(t, batchesOf(t, leader), batchesOf(t, follower))
	if e, ok := follower.LastBatchEpoch(); !ok || e != 6 {
		t.Fatalf("last batch epoch %d %v", e, ok)
	}
}

func equalEpochs(a, b []EpochStart) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestAppendStoredRefusesOverlapsDamageAndOlderEpochs(t *testing.T) {
	le, fe := newEnv(t), newEnv(t)
	leader, follower := le.open(t), fe.open(t)
	defer leader.Close()
	defer follower.Close()
	appendEpochs(t, leader, []uint64{2, 3}, []int{3, 3}, 50)
	raw, _, err := leader.ReadBatches(0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var batches [][]byte
	var heads []segment.Header
	if err := SplitBatches(raw, func(h *segment.Header, b []byte) error {
		batches, heads = append(batches, b), append(heads, *h)
		return nil
	}); err != nil || len(batches) != 6 {
		t.Fatalf("split: %d %v", len(batches), err)
	}
	damaged := append([]byte(nil), raw...)
	damaged[len(batches[0])+200] ^= 1
	if err := SplitBatches(damaged, func(*segment.Header, []byte) error { return nil }); err == nil {
		t.Fatal("a flipped bit passed the CRC check")
	}
	if err := SplitBatches(raw[:len(raw)-3], func(*segment.Header, []byte) error { return nil }); err == nil {
		t.Fatal("a cut batch passed")
	}
	for i := 0; i < 4; i++ {
		if err := follower.AppendStored(&heads[i], batches[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := follower.AppendStored(&heads[1], batches[1]); err == nil {
		t.Fatal("an overlapping batch was appended")
	}
	// Batch 5 after a gap (a batch the leader compacted away) is fine.
	if err := follower.AppendStored(&heads[5], batches[5]); err != nil {
		t.Fatal(err)
	}
	older := heads[5]
	older.BaseOffset, older.LeaderEpoch = 9, 2
	if err := follower.AppendStored(&older, batches[5]); err == nil {
		t.Fatal("a batch under an older epoch was appended")
	}
}

func TestTruncateTo(t *testing.T) {
	// 3 epochs, single-record batches of ~130 bytes over 8 KiB segments
	// (several segments), and one 5-record batch at offsets 100-104.
	build := func(t *testing.T) (*testEnv, *Log) {
		e := newEnv(t)
		l := e.open(t)
		appendEpochs(t, l, []uint64{1, 2}, []int{60, 40}, 100)
		b := makeBatch(t, testRecord(t, "", payloadFor(100, 100)), testRecord(t, "", payloadFor(101, 100)),
			testRecord(t, "", payloadFor(102, 100)), testRecord(t, "", payloadFor(103, 100)), testRecord(t, "", payloadFor(104, 100)))
		b.LeaderEpoch = 5
		if _, err := l.Append(b); err != nil {
			t.Fatal(err)
		}
		appendEpochs(t, l, []uint64{5}, []int{30}, 100)
		return e, l
	}
	for _, c := range []struct {
		name     string
		to, want uint64
		epochs   int
	}{
		{"past the end", 500, 135, 3},
		{"at the end", 135, 135, 3},
		{"inside the last epoch", 120, 120, 3},
		{"inside a multi-record batch", 102, 100, 2},
		{"at an epoch start", 60, 60, 1},
		{"inside the first epoch", 17, 17, 1},
		{"to the start", 0, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, l := build(t)
			end, err := l.TruncateTo(c.to)
			if err != nil || end != c.want || l.EndOffset() != c.want || l.DurableEnd() != c.want {
				t.Fatalf("TruncateTo(%d) = %d, %v; end %d durable %d, want %d", c.to, end, err, l.EndOffset(), l.DurableEnd(), c.want)
			}
			if got := len(l.Epochs()); got != c.epochs {
				t.Fatalf("epochs %v, want %d entries", l.Epochs(), c.epochs)
			}
			if end := readAll(t, l, 0, 100); end != c.want {
				t.Fatalf("reads end at %d", end)
			}
			// The log takes appends at the cut, under a new epoch.
			appendEpochs(t, l, []uint64{7}, []int{12}, 100)
			if end := readAll(t, l, 0, 100); end != c.want+12 {
				t.Fatalf("after appends reads end at %d", end)
			}
			before := batchesOf(t, l)
			epochs := l.Epochs()
			l = e.reopen(t, l)
			defer l.Close()
			sameBatches(t, before, batchesOf(t, l))
			if !equalEpochs(l.Epochs(), epochs) {
				t.Fatalf("reopened epochs %v, want %v", l.Epochs(), epochs)
			}
		})
	}
}

func TestSkipTo(t *testing.T) {
	e := newEnv(t)
	l := e.open(t)
	if err := l.SkipTo(40); err != nil || l.EndOffset() != 40 || l.StartOffset() != 40 {
		t.Fatalf("skip on an empty log: %v end %d start %d", err, l.EndOffset(), l.StartOffset())
	}
	appendEpochs(t, l, []uint64{1}, []int{10}, 100)
	if err := l.SkipTo(30); err == nil {
		t.Fatal("skipped backwards")
	}
	if err := l.SkipTo(70); err != nil || l.EndOffset() != 70 {
		t.Fatalf("skip: %v end %d", err, l.EndOffset())
	}
	appendEpochs(t, l, []uint64{2}, []int{5}, 100)
	if end := readAll(t, l, 70, 100); end != 75 {
		t.Fatalf("read to %d", end)
	}
	l = e.reopen(t, l)
	defer l.Close()
	if l.StartOffset() != 40 || l.EndOffset() != 75 {
		t.Fatalf("reopened start %d end %d", l.StartOffset(), l.EndOffset())
	}
	if r, err := l.Read(40, 0, 1<<20, 50); err != nil || r.Count != 10 || r.Next != 50 {
		t.Fatalf("old part: %d records, next %d, %v", r.Count, r.Next, err)
	}
	if end := readAll(t, l, 70, 100); end != 75 {
		t.Fatalf("new part reads to %d", end)
	}
}

// crashAt fails every file operation from the k-th on, after cloning the
// file system as a power loss at that moment would leave it.
type crashAt struct {
	mu      sync.Mutex
	k, ops  int
	pct     int
	mem     *vfs.MemFS
	clone   *vfs.MemFS
	crashed bool
}

func (c *crashAt) MaybeError(errorfs.Op) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crashed {
		return errorfs.ErrInjected
	}
	if c.ops == c.k {
		c.crashed = true
		c.clone = c.mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: c.pct, RNG: rand.New(rand.NewPCG(uint64(c.k), 9))})
		return errorfs.ErrInjected
	}
	c.ops++
	return nil
}

func (c *crashAt) String() string { return "crashAt" }

// TestTruncateCrashSweep loses power at every file operation of a
// truncation that removes segments and cuts one: the log opens again,
// holds a prefix of the old log that ends between the cut and the old end,
// with an epoch history that matches its batches, and takes appends.
func TestTruncateCrashSweep(t *testing.T) {
	run := func(k, pct int) (ops int, crashed bool, after *Log, e *testEnv, before []batchView) {
		e = newEnv(t)
		l := e.open(t)
		appendEpochs(t, l, []uint64{1, 2, 4}, []int{50, 50, 40}, 100)
		before = batchesOf(t, l)
		c := &crashAt{k: -1, pct: pct, mem: e.mem}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		inj := *e
		inj.fs = fsys.FromVFS(errorfs.Wrap(e.mem, c))
		l = inj.open(t)
		c.mu.Lock()
		c.k, c.ops = k, 0 // count from the truncation on
		c.mu.Unlock()
		_, err := l.TruncateTo(75)
		_ = l.Close()
		if !c.crashed {
			if err != nil {
				t.Fatalf("truncate without a crash: %v", err)
			}
			return c.ops, false, nil, e, before
		}
		ce := *e
		ce.mem, ce.fs, ce.cache = c.clone, fsys.FromVFS(c.clone), NewReaderCache(8)
		return c.ops, true, ce.open(t), &ce, before
	}
	total, _, _, _, _ := run(-1, 0)
	points := 0
	for _, pct := range []int{0, 50, 100} {
		for k := 0; k < total; k++ {
			_, crashed, l, _, before := run(k, pct)
			if !crashed {
				continue
			}
			points++
			got := batchesOf(t, l)
			end := l.EndOffset()
			if end < 75 || end > 140 {
				t.Fatalf("k=%d pct=%d: end %d outside [75, 140]", k, pct, end)
			}
			sameBatches(t, before[:len(got)], got)
			for _, ep := range l.Epochs() {
				if ep.StartOffset >= end {
					t.Fatalf("k=%d: epoch %+v at or past the end %d", k, ep, end)
				}
			}
			if e, ok := l.LastBatchEpoch(); !ok || e != got[len(got)-1].h.LeaderEpoch {
				t.Fatalf("k=%d: last batch epoch %d, batch says %d", k, e, got[len(got)-1].h.LeaderEpoch)
			}
			appendEpochs(t, l, []uint64{9}, []int{3}, 100)
			if readAll(t, l, 0, 100) != end+3 {
				t.Fatalf("k=%d: appends after recovery not readable", k)
			}
			_ = l.Close()
		}
	}
	if points < total*3*3/4 {
		t.Fatalf("only %d crash points for %d operations", points, total)
	}
	t.Logf("%d file operations, %d crash points", total, points)
}

// TestReadBatchesInto: reading into the caller's buffer returns what
// ReadBatches returns, starting at that buffer's start, with a buffer
// asked for no larger than maxBytes nor than the durable bytes after from.
func TestReadBatchesInto(t *testing.T) {
	e := newEnv(t)
	l := e.open(t)
	defer l.Close()
	appendEpochs(t, l, []uint64{1}, []int{20}, 300)
	for _, c := range []struct {
		from     uint64
		maxBytes int
	}{{0, 1 << 20}, {7, 1 << 20}, {7, 1000}, {19, 1 << 20}, {0, 1}, {20, 1 << 20}} {
		want, wantNext, err := l.ReadBatches(c.from, c.maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		var asked []int
		var buf []byte
		got, next, err := l.ReadBatchesInto(c.from, c.maxBytes, func(n int) []byte {
			asked = append(asked, n)
			buf = make([]byte, 0, n)
			return buf
		})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) || next != wantNext {
			t.Fatalf("from %d max %d: ReadBatchesInto differs from ReadBatches", c.from, c.maxBytes)
		}
		if len(want) == 0 {
			if len(asked) != 0 {
				t.Fatalf("from %d: asked for a buffer with nothing to read", c.from)
			}
			continue
		}
		if len(asked) != 1 || asked[0] > c.maxBytes {
			t.Fatalf("from %d max %d: asked for %v", c.from, c.maxBytes, asked)
		}
		// A first batch larger than maxBytes outgrows the buffer;
		// otherwise the answer is in it.
		if len(want) <= asked[0] && &got[0] != &buf[:1][0] {
			t.Fatalf("from %d max %d: the answer is not in the buffer asked for (%d bytes)", c.from, c.maxBytes, asked[0])
		}
	}
}

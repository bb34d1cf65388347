package seglog

import (
	"bytes"
	"context"
	"sync/atomic"
	"testing"

	"github.com/strataio/strata/partitiond/internal/fsys"
)

// countingFS counts the bytes read through files it opened read-only.
type countingFS struct {
	fsys.FS
	read *atomic.Int64
}

func (c countingFS) Open(name string) (fsys.File, error) {
	f, err := c.FS.Open(name)
	if err != nil {
		return nil, err
	}
	return countingFile{f, c.read}, nil
}

type countingFile struct {
	fsys.File
	read *atomic.Int64
}

func (f countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.read.Add(int64(n))
	return n, err
}

// TestReadOfOneBatchReadsThatBatch: a fetch that one stored batch fills
// reads about that batch from the segment — not a 4 MiB chunk, nor the next
// batch to find that it does not fit.
func TestReadOfOneBatchReadsThatBatch(t *testing.T) {
	e := newEnv(t)
	var read atomic.Int64
	l := e.open(t, func(c *Config) {
		c.FS = countingFS{c.FS, &read}
		c.SegmentBytes = 64 << 20
	})
	defer l.Close()
	const perBatch = 100
	var batchBytes int
	for range 4 {
		var recs [][]byte
		for range perBatch {
			recs = append(recs, testRecord(t, "", payloadFor(0, 1024)))
		}
		b := makeBatch(t, recs...)
		batchBytes = len(b.Records)
		if _, err := l.Append(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.WaitDurable(context.Background(), l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	for _, from := range []uint64{0, perBatch, 2 * perBatch} {
		read.Store(0)
		r, err := l.Read(from, perBatch, 64<<20, l.EndOffset())
		if err != nil || r.Count != perBatch || r.Next != from+perBatch {
			t.Fatalf("read from %d: %d records, next %d, %v", from, r.Count, r.Next, err)
		}
		// The batch plus its header and some slack, well below two batches.
		if got := read.Load(); got > int64(batchBytes)+4<<10 {
			t.Fatalf("read from %d: %d bytes from the segment for a %d-byte batch", from, got, batchBytes)
		}
	}
}

// TestWholeLargeBatchReadIsItsOwnBuffer: a read that is exactly one batch
// larger than the first read chunk gets the batch's record set as read (no
// copy), the same bytes as a read that copies them, and a buffer of its
// own: writing into it changes no later read.
func TestWholeLargeBatchReadIsItsOwnBuffer(t *testing.T) {
	e := newEnv(t)
	l := e.open(t, func(c *Config) { c.SegmentBytes = 64 << 20 })
	defer l.Close()
	const perBatch = 100
	for range 2 {
		var recs [][]byte
		for i := range perBatch {
			recs = append(recs, testRecord(t, "", payloadFor(uint64(i), 1024)))
		}
		if _, err := l.Append(makeBatch(t, recs...)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.WaitDurable(context.Background(), l.EndOffset()); err != nil {
		t.Fatal(err)
	}
	whole, err := l.Read(0, perBatch, 64<<20, l.EndOffset())
	if err != nil || whole.Count != perBatch || len(whole.Records) <= smallChunk {
		t.Fatalf("whole read: %d records, %d bytes, %v", whole.Count, len(whole.Records), err)
	}
	// One record more than the batch: the copying path, the same bytes.
	copied, err := l.Read(0, perBatch+1, 64<<20, l.EndOffset())
	if err != nil || !bytes.Equal(copied.Records[:len(whole.Records)], whole.Records) {
		t.Fatalf("the handed-over batch differs from the copied one (%v)", err)
	}
	if cap(whole.Records) != len(whole.Records) {
		t.Fatalf("records capacity %d past their length %d", cap(whole.Records), len(whole.Records))
	}
	for i := range whole.Records {
		whole.Records[i] = 0xFF
	}
	again, err := l.Read(0, perBatch, 64<<20, l.EndOffset())
	if err != nil || !bytes.Equal(again.Records, copied.Records[:len(again.Records)]) {
		t.Fatalf("a later read sees the first read's writes (%v)", err)
	}
}

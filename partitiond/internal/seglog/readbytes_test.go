package seglog

import (
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

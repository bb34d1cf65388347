package seglog

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/partitiond/internal/clock"
	"github.com/strataio/strata/partitiond/internal/fsys"
	"github.com/strataio/strata/partitiond/internal/record"
	"github.com/strataio/strata/partitiond/internal/recordtest"
	"github.com/strataio/strata/partitiond/internal/segment"
)

const testTopic = "orders"

// testRecord encodes one record of testTopic with a payload and an optional key.
func testRecord(t testing.TB, key string, payload []byte) []byte {
	t.Helper()
	return recordtest.Encode(t, wire.Record{Topic: testTopic, Payload: payload, Key: key})
}

// makeBatch builds a Batch from records (already encoded, unprefixed).
func makeBatch(t testing.TB, recs ...[]byte) *Batch {
	t.Helper()
	var set []byte
	for _, r := range recs {
		set = recordtest.Append(set, r)
	}
	return &Batch{Records: set, OffsetPos: recordtest.OffsetPositions(t, set)}
}

// payloadFor is the deterministic payload of record i.
func payloadFor(i uint64, size int) []byte {
	p := bytes.Repeat([]byte{byte(i)}, size)
	copy(p, fmt.Sprintf("rec-%d-", i))
	return p
}

type testEnv struct {
	fs    fsys.FS
	mem   *vfs.MemFS
	clock *clock.Manual
	cache *ReaderCache
	dir   string
}

func newEnv(t testing.TB) *testEnv {
	t.Helper()
	mem := vfs.NewCrashableMem()
	e := &testEnv{mem: mem, fs: fsys.FromVFS(mem), clock: clock.NewManual(time.Unix(1_700_000_000, 0)),
		cache: NewReaderCache(8), dir: "/log"}
	if err := e.fs.MkdirAll(e.dir); err != nil {
		t.Fatal(err)
	}
	if err := e.fs.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *testEnv) config() Config {
	return Config{Dir: e.dir, FS: e.fs, Clock: e.clock, Cache: e.cache, SegmentBytes: 8 << 10, IndexInterval: 512}
}

func (e *testEnv) open(t testing.TB, mod ...func(*Config)) *Log {
	t.Helper()
	c := e.config()
	for _, m := range mod {
		m(&c)
	}
	l, err := Open(c)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return l
}

// reopen closes l (cleanly) and opens the log again.
func (e *testEnv) reopen(t testing.TB, l *Log) *Log {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return e.open(t)
}

// batchStarts are the positions of the batches of a segment file's data.
func batchStarts(data []byte) []int64 {
	var starts []int64
	segment.Scan(bytes.NewReader(data), 0, int64(len(data)), func(pos int64, _ *segment.Header, _ []byte) error {
		starts = append(starts, pos)
		return nil
	})
	return starts
}

// appendN appends n single-record batches with payloads payloadFor(offset)
// and waits until they are durable.
func appendN(t testing.TB, l *Log, n int, size int) {
	t.Helper()
	for range n {
		off := l.EndOffset()
		if _, err := l.Append(makeBatch(t, testRecord(t, "", payloadFor(off, size)))); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.WaitDurable(context.Background(), l.EndOffset()); err != nil {
		t.Fatal(err)
	}
}

// readAll reads every record from `from` and checks offsets are dense and
// payloads match payloadFor.
func readAll(t testing.TB, l *Log, from uint64, size int) uint64 {
	t.Helper()
	next := from
	for {
		r, err := l.Read(next, 0, 64<<10, l.DurableEnd())
		if err != nil {
			t.Fatalf("read at %d: %v", next, err)
		}
		if r.Count == 0 {
			return next
		}
		set := r.Records
		for range r.Count {
			rec, rest, ok, bad := record.Next(set)
			if !ok || bad {
				t.Fatalf("bad record set at %d", next)
			}
			v, err := wire.ParseRecord(rec)
			if err != nil {
				t.Fatal(err)
			}
			if v.Offset() != next {
				t.Fatalf("offset %d, want %d", v.Offset(), next)
			}
			if !bytes.Equal(v.Payload(), payloadFor(next, size)) {
				t.Fatalf("payload of %d differs", next)
			}
			next++
			set = rest
		}
		if len(set) != 0 {
			t.Fatalf("trailing bytes in record set")
		}
	}
}

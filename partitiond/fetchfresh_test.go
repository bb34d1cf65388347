package partitiond

import (
	"bytes"
	"testing"
	"unsafe"

	"github.com/strataio/strata/libs/fake/metadfake"
	"github.com/strataio/strata/libs/wire"
	"github.com/strataio/strata/partitiond/internal/recordtest"
	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// TestFetchRecordsAreFreshPerCall checks what libs/rpc's direct path relies
// on to hand a FetchResponse's records to the caller without a copy
// (rpc.handOver): every answer of service.Fetch holds a record buffer of
// its own, which the server neither keeps nor shares. For each way the log
// builds an answer (a large batch that is the whole answer, read into a
// buffer of its own; a small batch that is the whole answer; several
// batches; records from the middle of a batch), two fetches of the same
// records never share memory, and overwriting one answer changes neither
// the log nor a later answer.
func TestFetchRecordsAreFreshPerCall(t *testing.T) {
	c := startCluster(t, nil, nil, "")
	c.metad.PutTopic(metadfake.NewTopic("fresh", 1, 1, "p1", "p1"))
	c.waitServing(t, "fresh", 0)
	appendBatch := func(n, size int) {
		t.Helper()
		recs := make([]wire.Record, n)
		for i := range recs {
			recs[i] = wire.Record{Topic: "fresh", Payload: bytes.Repeat([]byte{byte('a' + i%26)}, size)}
		}
		set := recordtest.Set(t, recs...)
		if _, err := c.client.Append(ctx(t), &partitionv1.AppendRequest{Topic: "fresh", Partition: 0, Acks: 1,
			Records: set, RecordCount: uint32(n)}); err != nil {
			t.Fatal(err)
		}
	}
	appendBatch(200, 1024) // offsets 0-199: one batch above the 64 KiB read chunk
	appendBatch(5, 10)     // 200-204
	appendBatch(5, 10)     // 205-209
	svc := &service{r: c.role}
	for _, tc := range []struct {
		name       string
		offset     uint64
		maxRecords uint32
	}{
		{"large batch as the whole answer", 0, 200},
		{"small batch as the whole answer", 200, 5},
		{"several batches", 200, 10},
		{"from the middle of a batch", 100, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fetch := func() []byte {
				t.Helper()
				r, err := svc.Fetch(ctx(t), &partitionv1.FetchRequest{Topic: "fresh", Partition: 0, Offset: tc.offset, MaxRecords: tc.maxRecords})
				if err != nil {
					t.Fatal(err)
				}
				if r.GetRecordCount() != tc.maxRecords || len(r.GetRecords()) == 0 {
					t.Fatalf("fetched %d records (%d bytes), want %d", r.GetRecordCount(), len(r.GetRecords()), tc.maxRecords)
				}
				return r.GetRecords()
			}
			a, b := fetch(), fetch()
			if !bytes.Equal(a, b) {
				t.Fatal("two fetches of the same records differ")
			}
			if overlap(a, b) {
				t.Fatal("two answers share a record buffer")
			}
			want := append([]byte(nil), b...)
			for i := range a[:cap(a)] {
				a[:cap(a)][i] = 0xAA
			}
			if got := fetch(); !bytes.Equal(got, want) || overlap(got, a) || overlap(got, b) {
				t.Fatal("writing into an answer changed the log or a later answer")
			}
			if !bytes.Equal(b, want) {
				t.Fatal("writing into one answer changed another")
			}
		})
	}
}

// overlap reports whether the backing arrays of a and b (up to their
// capacity) share memory.
func overlap(a, b []byte) bool {
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa < pb+uintptr(cap(b)) && pb < pa+uintptr(cap(a))
}

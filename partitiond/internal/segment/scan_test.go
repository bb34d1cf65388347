package segment

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// batchWith builds a stored batch at base with one record of size bytes and
// producer id pid.
func batchWith(base uint64, pid string, size int) []byte {
	rec := bytes.Repeat([]byte{'x'}, size)
	recs := binary.BigEndian.AppendUint32(nil, uint32(len(rec)))
	recs = append(recs, rec...)
	h := Header{BaseOffset: base, RecordCount: 1, LeaderEpoch: 1, FirstTimestamp: 1700000000000,
		MaxTimestamp: 1700000000000, AppendTime: 1700000000000, DurableWatermark: base, ProducerEpoch: 1,
		BaseSequence: 1, LastSequence: 1, ProducerID: []byte(pid)}
	b := make([]byte, h.Len()+len(recs))
	PutHeader(b, &h, recs)
	copy(b[h.Len():], recs)
	return b
}

// TestScanHeaderAcrossChunk: a batch whose fixed header ends inside the
// scanner's read chunk but whose producer id runs past it is read whole
// (the scanner reads again from the batch), not reported as a torn batch —
// which recovery took for corruption below durable data (a partition that
// would not open after kill -9 once its active segment passed 1 MiB with
// transactional batches).
func TestScanHeaderAcrossChunk(t *testing.T) {
	pid := "txn-producer-with-a-long-id"
	for _, over := range []int{1, 2, len(pid) - 1} {
		// The second batch starts so that its fixed header ends over bytes
		// before the chunk boundary and its producer id crosses it.
		start := ScanChunk - HeaderFixed - over
		first := batchWith(0, "", 0)
		first = batchWith(0, "", start-len(first))
		if len(first) != start {
			t.Fatalf("first batch %d bytes, want %d", len(first), start)
		}
		file := append(append(append([]byte(nil), first...), batchWith(1, pid, 100)...), batchWith(2, pid, 100)...)
		var bases []uint64
		end, prob, err := Scan(bytes.NewReader(file), 0, int64(len(file)), func(_ int64, h *Header, _ []byte) error {
			bases = append(bases, h.BaseOffset)
			return nil
		})
		if err != nil || prob != OK || end != int64(len(file)) || len(bases) != 3 {
			t.Fatalf("over %d: scan ended at %d of %d, problem %v, err %v, batches %v", over, end, len(file), prob, err, bases)
		}
	}
	// A header that really is cut at the end of the file is still Short.
	file := batchWith(0, pid, 10)
	if _, prob, _ := Scan(bytes.NewReader(file[:HeaderFixed+2]), 0, int64(HeaderFixed+2), nil); prob != Short {
		t.Fatalf("cut header: %v, want Short", prob)
	}
}

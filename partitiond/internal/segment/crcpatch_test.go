package segment

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// checkSetDurableWatermark sets the CRC of b (at least a fixed header long)
// to match its bytes, rewrites its watermark to w with SetDurableWatermark,
// and compares the result with a full computation.
func checkSetDurableWatermark(t *testing.T, b []byte, w uint64) {
	t.Helper()
	be := binary.BigEndian
	be.PutUint32(b[8:], crc32.Checksum(b[12:], Castagnoli))
	SetDurableWatermark(b, len(b), w)
	if got := be.Uint64(b[watermarkPos:]); got != w {
		t.Fatalf("watermark %d, want %d", got, w)
	}
	if got, want := be.Uint32(b[8:]), crc32.Checksum(b[12:], Castagnoli); got != want {
		t.Fatalf("len %d, watermark %d: CRC %08x, a full pass gives %08x", len(b), w, got, want)
	}
}

func TestSetDurableWatermark(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{HeaderFixed, HeaderFixed + 1, HeaderFixed + 3, 1000, 4096, 100_003, 1 << 20} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		for _, w := range []uint64{0, 1, 1 << 63, r.Uint64(), binary.BigEndian.Uint64(b[watermarkPos:])} {
			checkSetDurableWatermark(t, b, w)
		}
	}
	// A real batch: the follower's result equals PutHeader with its own
	// watermark over the same records.
	var set []byte
	for i := range 7 {
		set = binary.BigEndian.AppendUint32(set, uint32(30+i))
		set = append(set, bytes.Repeat([]byte{byte('a' + i)}, 30+i)...)
	}
	h0 := Header{BaseOffset: 42, LastOffsetDelta: 6, RecordCount: 7, LeaderEpoch: 3, DurableWatermark: 40,
		ProducerID: []byte("p-1")}
	b := make([]byte, h0.Len()+len(set))
	PutHeader(b, &h0, set)
	copy(b[h0.Len():], set)
	h, recs, prob := CheckBatch(b)
	if prob != OK {
		t.Fatal(prob)
	}
	h.DurableWatermark = 12345
	want := make([]byte, len(b))
	PutHeader(want, &h, recs)
	copy(want[h.Len():], recs)
	SetDurableWatermark(b, len(b), 12345)
	if !bytes.Equal(b, want) {
		t.Fatal("rewritten batch differs from one encoded with the new watermark")
	}
	if _, _, prob := CheckBatch(b); prob != OK {
		t.Fatal(prob)
	}
	// Damage stays damage: a batch whose CRC did not match does not match
	// after the rewrite either.
	b[len(b)-1] ^= 1
	SetDurableWatermark(b, len(b), 99)
	if _, _, prob := CheckBatch(b); prob != BadCRC {
		t.Fatalf("damaged batch after the rewrite: %v, want bad_crc", prob)
	}
}

// FuzzSetDurableWatermark: for any bytes and watermark, the patched CRC is
// the one a full pass computes.
func FuzzSetDurableWatermark(f *testing.F) {
	f.Add(validBatch(1), uint64(7))
	f.Add(validBatch(5), uint64(0))
	f.Add(make([]byte, HeaderFixed), uint64(1<<63))
	f.Fuzz(func(t *testing.T, b []byte, w uint64) {
		if len(b) < HeaderFixed {
			return
		}
		checkSetDurableWatermark(t, b, w)
	})
}

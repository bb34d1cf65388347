package segment

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// validBatch builds a stored batch of n length-prefixed records.
func validBatch(n int) []byte {
	var recs []byte
	for i := 0; i < n; i++ {
		rec := bytes.Repeat([]byte{byte('a' + i)}, 10+i)
		recs = binary.BigEndian.AppendUint32(recs, uint32(len(rec)))
		recs = append(recs, rec...)
	}
	h := Header{BaseOffset: 42, LastOffsetDelta: uint32(n - 1), RecordCount: uint32(n), LeaderEpoch: 3,
		FirstTimestamp: 1700000000000, MaxTimestamp: 1700000000005, AppendTime: 1700000000006,
		DurableWatermark: 42, ProducerEpoch: 1, BaseSequence: 1, LastSequence: uint64(n), ProducerID: []byte("p-1")}
	b := make([]byte, h.Len()+len(recs))
	PutHeader(b, &h, recs)
	copy(b[h.Len():], recs)
	return b
}

// FuzzCheckBatch: recovery validates every stored batch with CheckBatch, so
// arbitrary bytes (a torn or corrupt tail) must yield a Problem, never a
// panic, and whatever passes must be self-consistent.
func FuzzCheckBatch(f *testing.F) {
	f.Add(validBatch(1))
	f.Add(validBatch(5))
	torn := validBatch(3)
	f.Add(torn[:len(torn)-4])
	flipped := validBatch(2)
	flipped[len(flipped)-1] ^= 0xff
	f.Add(flipped)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		h, recs, prob := CheckBatch(b)
		if prob != OK {
			return
		}
		if int(h.Length) != len(b) || h.Len()+len(recs) != len(b) {
			t.Fatalf("accepted batch with length %d, header %d + records %d, input %d", h.Length, h.Len(), len(recs), len(b))
		}
		if uint64(h.RecordCount) > uint64(h.LastOffsetDelta)+1 {
			t.Fatalf("accepted record count %d above last offset delta %d + 1", h.RecordCount, h.LastOffsetDelta)
		}
		// Re-encoding the accepted header over the same records reproduces
		// the input byte for byte.
		out := make([]byte, len(b))
		h2 := h
		PutHeader(out, &h2, recs)
		copy(out[h2.Len():], recs)
		if !bytes.Equal(out, b) {
			t.Fatalf("re-encoded batch differs from accepted input")
		}
	})
}

// FuzzDecodeIndex: index files are trusted on restart only when they
// decode; bad bytes must give an error (the index is then rebuilt).
func FuzzDecodeIndex(f *testing.F) {
	f.Add(EncodeIndex(Summary{LogSize: 4096, NextOffset: 100, LastBatchPos: 3000, MaxTimestamp: 5, MaxAppendTime: 6, FirstAppendTime: 1},
		[]IndexEntry{{0, 0}, {50, 2048}}))
	f.Add(EncodeIndex(Summary{LastBatchPos: -1}, nil))
	f.Add([]byte("not an index"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, entries, err := DecodeIndex(b)
		if err != nil {
			return
		}
		if again := EncodeIndex(s, entries); !bytes.Equal(again, b) {
			t.Fatalf("decoded index re-encodes differently")
		}
	})
}

// FuzzDecodeTimeIndex mirrors FuzzDecodeIndex for the time index.
func FuzzDecodeTimeIndex(f *testing.F) {
	f.Add(EncodeTimeIndex(4096, []TimeEntry{{}, {}}))
	f.Add(EncodeTimeIndex(0, nil))
	f.Add([]byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		size, entries, err := DecodeTimeIndex(b)
		if err != nil {
			return
		}
		if again := EncodeTimeIndex(size, entries); !bytes.Equal(again, b) {
			t.Fatalf("decoded time index re-encodes differently")
		}
	})
}

// FuzzParseName: segment file names found in a partition directory are
// parsed on open; foreign names must be rejected, accepted ones round-trip.
func FuzzParseName(f *testing.F) {
	f.Add(FileName(0, ".log"))
	f.Add(FileName(123456789, ".index"))
	f.Add("00000000000000000042.timeindex")
	f.Add("junk.log")
	f.Fuzz(func(t *testing.T, name string) {
		base, ext, ok := ParseName(name)
		if !ok {
			return
		}
		if FileName(base, ext) != name {
			t.Fatalf("ParseName(%q) = %d %q, which names %q", name, base, ext, FileName(base, ext))
		}
	})
}

package segment

import (
	"encoding/binary"
	"hash/crc32"
	"math"
)

// Stored batch constants.
const (
	BatchMagic   uint32 = 0x53544231 // "STB1"
	BatchVersion uint16 = 1
	// HeaderFixed is the header size without the producer id.
	HeaderFixed = 98
	// MaxProducerIDLen bounds the producer id stored in a header.
	MaxProducerIDLen = 1024
	// MaxBatchLen bounds one stored batch (positions in the index are u32).
	MaxBatchLen = math.MaxInt32
)

// Batch flags.
const (
	FlagIdempotent    uint16 = 1 << 0
	FlagTransactional uint16 = 1 << 1
	FlagControl       uint16 = 1 << 2
	knownFlags               = FlagIdempotent | FlagTransactional | FlagControl
)

// Castagnoli is the CRC32C table of stored batches.
var Castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is a stored batch header.
type Header struct {
	Length           uint32
	CRC              uint32
	Flags            uint16
	BaseOffset       uint64
	LastOffsetDelta  uint32
	RecordCount      uint32
	LeaderEpoch      uint64
	FirstTimestamp   int64
	MaxTimestamp     int64
	AppendTime       int64
	DurableWatermark uint64
	ProducerEpoch    int64
	BaseSequence     uint64
	LastSequence     uint64
	ProducerID       []byte
}

// LastOffset returns the batch's last offset.
func (h *Header) LastOffset() uint64 { return h.BaseOffset + uint64(h.LastOffsetDelta) }

// NextOffset returns the offset after the batch.
func (h *Header) NextOffset() uint64 { return h.LastOffset() + 1 }

// Len returns the header's encoded size.
func (h *Header) Len() int { return HeaderFixed + len(h.ProducerID) }

// PutHeader encodes h into dst[:h.Len()] for a batch whose record set is
// records, filling Length and CRC (CRC over the header from byte 12 on plus
// the records). dst must have room for h.Len() bytes.
func PutHeader(dst []byte, h *Header, records []byte) {
	h.Length = uint32(h.Len() + len(records))
	b := dst[:h.Len()]
	be := binary.BigEndian
	be.PutUint32(b[0:], BatchMagic)
	be.PutUint32(b[4:], h.Length)
	be.PutUint16(b[12:], BatchVersion)
	be.PutUint16(b[14:], h.Flags)
	be.PutUint64(b[16:], h.BaseOffset)
	be.PutUint32(b[24:], h.LastOffsetDelta)
	be.PutUint32(b[28:], h.RecordCount)
	be.PutUint64(b[32:], h.LeaderEpoch)
	be.PutUint64(b[40:], uint64(h.FirstTimestamp))
	be.PutUint64(b[48:], uint64(h.MaxTimestamp))
	be.PutUint64(b[56:], uint64(h.AppendTime))
	be.PutUint64(b[64:], h.DurableWatermark)
	be.PutUint64(b[72:], uint64(h.ProducerEpoch))
	be.PutUint64(b[80:], h.BaseSequence)
	be.PutUint64(b[88:], h.LastSequence)
	be.PutUint16(b[96:], uint16(len(h.ProducerID)))
	copy(b[98:], h.ProducerID)
	crc := crc32.Update(0, Castagnoli, b[12:])
	h.CRC = crc32.Update(crc, Castagnoli, records)
	be.PutUint32(b[8:], h.CRC)
}

// Problem says why bytes are not a valid stored batch.
type Problem uint8

// Problems, from "too short to tell" to "well formed but wrong".
const (
	OK Problem = iota
	// Short: fewer bytes than the header or the declared length (a torn tail).
	Short
	BadMagic
	BadVersion
	BadLength
	BadFlags
	BadCRC
	BadCount
	BadRecords
)

var problemNames = [...]string{"ok", "short", "bad_magic", "bad_version", "bad_length", "bad_flags", "bad_crc", "bad_count", "bad_records"}

func (p Problem) String() string {
	if int(p) < len(problemNames) {
		return problemNames[p]
	}
	return "unknown"
}

// ParseHeader decodes the header at the start of b. It checks magic,
// version, flags and that the declared length covers the header; it does not
// need the whole batch and does not check the CRC. ProducerID aliases b.
func ParseHeader(b []byte) (Header, Problem) {
	var h Header
	if len(b) < HeaderFixed {
		if len(b) >= 4 && binary.BigEndian.Uint32(b) != BatchMagic {
			return h, BadMagic
		}
		return h, Short
	}
	be := binary.BigEndian
	if be.Uint32(b) != BatchMagic {
		return h, BadMagic
	}
	if be.Uint16(b[12:]) != BatchVersion {
		return h, BadVersion
	}
	h.Length = be.Uint32(b[4:])
	h.CRC = be.Uint32(b[8:])
	h.Flags = be.Uint16(b[14:])
	h.BaseOffset = be.Uint64(b[16:])
	h.LastOffsetDelta = be.Uint32(b[24:])
	h.RecordCount = be.Uint32(b[28:])
	h.LeaderEpoch = be.Uint64(b[32:])
	h.FirstTimestamp = int64(be.Uint64(b[40:]))
	h.MaxTimestamp = int64(be.Uint64(b[48:]))
	h.AppendTime = int64(be.Uint64(b[56:]))
	h.DurableWatermark = be.Uint64(b[64:])
	h.ProducerEpoch = int64(be.Uint64(b[72:]))
	h.BaseSequence = be.Uint64(b[80:])
	h.LastSequence = be.Uint64(b[88:])
	pl := int(be.Uint16(b[96:]))
	if pl > MaxProducerIDLen || uint64(h.Length) < uint64(HeaderFixed+pl) || h.Length > MaxBatchLen {
		return h, BadLength
	}
	if h.Flags&^knownFlags != 0 {
		return h, BadFlags
	}
	if h.RecordCount == 0 || uint64(h.RecordCount) > uint64(h.LastOffsetDelta)+1 {
		return h, BadCount
	}
	if h.BaseOffset > math.MaxUint64-uint64(h.LastOffsetDelta)-1 {
		return h, BadCount
	}
	if len(b) < HeaderFixed+pl {
		return h, Short
	}
	h.ProducerID = b[HeaderFixed : HeaderFixed+pl : HeaderFixed+pl]
	return h, OK
}

// CheckBatch validates a whole stored batch: header, length equal to
// len(b), CRC, and a record set of exactly RecordCount length-prefixed
// records. It returns the header and the record set.
func CheckBatch(b []byte) (Header, []byte, Problem) {
	h, p := ParseHeader(b)
	if p != OK {
		return h, nil, p
	}
	if int(h.Length) > len(b) {
		return h, nil, Short
	}
	if int(h.Length) != len(b) {
		return h, nil, BadLength
	}
	if crc32.Checksum(b[12:], Castagnoli) != h.CRC {
		return h, nil, BadCRC
	}
	recs := b[h.Len():]
	if !checkRecordSet(recs, int(h.RecordCount)) {
		return h, nil, BadRecords
	}
	return h, recs, OK
}

// checkRecordSet walks the length prefixes: exactly count records of at
// least 30 bytes each (the fixed fields of a Wire v2 record).
func checkRecordSet(set []byte, count int) bool {
	n := 0
	for len(set) > 0 {
		if len(set) < 4 {
			return false
		}
		l := binary.BigEndian.Uint32(set)
		if l < 30 || uint64(l) > uint64(len(set)-4) {
			return false
		}
		set = set[4+l:]
		n++
	}
	return n == count
}

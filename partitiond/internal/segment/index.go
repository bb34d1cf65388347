package segment

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
)

// File name extensions of a segment's files. A segment is named by its base
// offset, zero-padded to 20 digits so names sort by offset.
const (
	LogExt       = ".log"
	IndexExt     = ".index"
	TimeIndexExt = ".timeindex"
	// TmpExt marks a file being written; recovery removes it.
	TmpExt = ".tmp"
	// CompactExt marks a compacted segment being written; recovery removes it.
	CompactExt = ".compact"
)

// FileName returns the name of the segment file with base offset base.
func FileName(base uint64, ext string) string {
	return fmt.Sprintf("%020d%s", base, ext)
}

// ParseName splits a segment file name into base offset and extension
// (everything from the first dot). ok is false for names of other files.
func ParseName(name string) (base uint64, ext string, ok bool) {
	dot := strings.IndexByte(name, '.')
	if dot != 20 {
		return 0, "", false
	}
	b, err := strconv.ParseUint(name[:20], 10, 64)
	if err != nil {
		return 0, "", false
	}
	return b, name[dot:], true
}

// IndexEntry is one sparse offset index entry: the first batch at or after
// a byte position, by offset relative to the segment base.
type IndexEntry struct {
	RelOffset uint32
	Pos       uint32
}

// TimeEntry is one time index entry: the largest record timestamp seen in
// the segment up to the batch at RelOffset.
type TimeEntry struct {
	Timestamp int64
	RelOffset uint32
}

// Summary describes a segment's contents up to LogSize bytes. The offset
// index file carries it so a restart trusts a closed segment without
// rereading it.
type Summary struct {
	LogSize         int64
	NextOffset      uint64
	LastBatchPos    int64 // -1 when the segment holds no batch
	MaxTimestamp    int64
	MaxAppendTime   int64
	FirstAppendTime int64
}

const (
	indexMagic      uint32 = 0x53494458 // "SIDX"
	timeIndexMagic  uint32 = 0x53544958 // "STIX"
	indexVersion    uint16 = 1
	indexHeaderLen         = 64
	timeHeaderLen          = 24
	indexEntryLen          = 8
	timeEntryLen           = 12
	maxIndexEntries        = 1 << 28
)

// indexCRC is the checksum of index file b: its header up to the CRC field
// at crcPos, then the entries after the headerLen-byte header.
func indexCRC(b []byte, crcPos, headerLen int) uint32 {
	return crc32.Update(crc32.Update(0, Castagnoli, b[:crcPos]), Castagnoli, b[headerLen:])
}

// EncodeIndex returns the offset index file for a segment.
func EncodeIndex(s Summary, entries []IndexEntry) []byte {
	b := make([]byte, indexHeaderLen+indexEntryLen*len(entries))
	be := binary.BigEndian
	be.PutUint32(b[0:], indexMagic)
	be.PutUint16(b[4:], indexVersion)
	be.PutUint64(b[8:], uint64(s.LogSize))
	be.PutUint64(b[16:], s.NextOffset)
	be.PutUint64(b[24:], uint64(s.LastBatchPos))
	be.PutUint64(b[32:], uint64(s.MaxTimestamp))
	be.PutUint64(b[40:], uint64(s.MaxAppendTime))
	be.PutUint64(b[48:], uint64(s.FirstAppendTime))
	be.PutUint32(b[56:], uint32(len(entries)))
	p := indexHeaderLen
	for _, e := range entries {
		be.PutUint32(b[p:], e.RelOffset)
		be.PutUint32(b[p+4:], e.Pos)
		p += indexEntryLen
	}
	be.PutUint32(b[60:], indexCRC(b, 60, indexHeaderLen))
	return b
}

// DecodeIndex parses an offset index file, checking its CRC and that entries
// increase in both offset and position and lie inside the covered log.
func DecodeIndex(b []byte) (Summary, []IndexEntry, error) {
	var s Summary
	be := binary.BigEndian
	if len(b) < indexHeaderLen || be.Uint32(b) != indexMagic || be.Uint16(b[4:]) != indexVersion {
		return s, nil, fmt.Errorf("segment: not an offset index file")
	}
	n := be.Uint32(b[56:])
	if n > maxIndexEntries || len(b) != indexHeaderLen+indexEntryLen*int(n) {
		return s, nil, fmt.Errorf("segment: offset index length %d does not match %d entries", len(b), n)
	}
	if indexCRC(b, 60, indexHeaderLen) != be.Uint32(b[60:]) {
		return s, nil, fmt.Errorf("segment: offset index checksum mismatch")
	}
	s = Summary{
		LogSize:         int64(be.Uint64(b[8:])),
		NextOffset:      be.Uint64(b[16:]),
		LastBatchPos:    int64(be.Uint64(b[24:])),
		MaxTimestamp:    int64(be.Uint64(b[32:])),
		MaxAppendTime:   int64(be.Uint64(b[40:])),
		FirstAppendTime: int64(be.Uint64(b[48:])),
	}
	if s.LogSize < 0 || s.LastBatchPos < -1 || s.LastBatchPos >= s.LogSize && s.LastBatchPos >= 0 {
		return s, nil, fmt.Errorf("segment: offset index summary out of range")
	}
	entries := make([]IndexEntry, n)
	p := indexHeaderLen
	for i := range entries {
		entries[i] = IndexEntry{RelOffset: be.Uint32(b[p:]), Pos: be.Uint32(b[p+4:])}
		p += indexEntryLen
		if int64(entries[i].Pos) >= s.LogSize {
			return s, nil, fmt.Errorf("segment: offset index entry %d points past the log", i)
		}
		if i > 0 && (entries[i].RelOffset <= entries[i-1].RelOffset || entries[i].Pos <= entries[i-1].Pos) {
			return s, nil, fmt.Errorf("segment: offset index entry %d out of order", i)
		}
	}
	return s, entries, nil
}

// EncodeTimeIndex returns the time index file of a segment covering logSize
// bytes.
func EncodeTimeIndex(logSize int64, entries []TimeEntry) []byte {
	b := make([]byte, timeHeaderLen+timeEntryLen*len(entries))
	be := binary.BigEndian
	be.PutUint32(b[0:], timeIndexMagic)
	be.PutUint16(b[4:], indexVersion)
	be.PutUint64(b[8:], uint64(logSize))
	be.PutUint32(b[16:], uint32(len(entries)))
	p := timeHeaderLen
	for _, e := range entries {
		be.PutUint64(b[p:], uint64(e.Timestamp))
		be.PutUint32(b[p+8:], e.RelOffset)
		p += timeEntryLen
	}
	be.PutUint32(b[20:], indexCRC(b, 20, timeHeaderLen))
	return b
}

// DecodeTimeIndex parses a time index file; entries must not decrease.
func DecodeTimeIndex(b []byte) (int64, []TimeEntry, error) {
	be := binary.BigEndian
	if len(b) < timeHeaderLen || be.Uint32(b) != timeIndexMagic || be.Uint16(b[4:]) != indexVersion {
		return 0, nil, fmt.Errorf("segment: not a time index file")
	}
	n := be.Uint32(b[16:])
	if n > maxIndexEntries || len(b) != timeHeaderLen+timeEntryLen*int(n) {
		return 0, nil, fmt.Errorf("segment: time index length %d does not match %d entries", len(b), n)
	}
	if indexCRC(b, 20, timeHeaderLen) != be.Uint32(b[20:]) {
		return 0, nil, fmt.Errorf("segment: time index checksum mismatch")
	}
	entries := make([]TimeEntry, n)
	p := timeHeaderLen
	for i := range entries {
		entries[i] = TimeEntry{Timestamp: int64(be.Uint64(b[p:])), RelOffset: be.Uint32(b[p+8:])}
		p += timeEntryLen
		if i > 0 && (entries[i].Timestamp < entries[i-1].Timestamp || entries[i].RelOffset <= entries[i-1].RelOffset) {
			return 0, nil, fmt.Errorf("segment: time index entry %d out of order", i)
		}
	}
	return int64(be.Uint64(b[8:])), entries, nil
}

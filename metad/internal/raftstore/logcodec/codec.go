package logcodec

import (
	"encoding/binary"
	"hash/crc32"
	"math"
	"strconv"
	"time"

	"github.com/hashicorp/raft"

	"github.com/strataio/strata/libs/errcode"
)

// FormatVersion is the first byte of every encoded log entry. A reader
// meeting another value refuses the entry (errcode.StorageCorrupt) rather
// than guessing at its layout.
const FormatVersion = 1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Encoded entry layout (all integers big-endian):
//
//	0      version (1)
//	1..4   CRC32C of bytes 5..end
//	5..12  index
//	13..20 term
//	21     type (raft.LogType)
//	22     flags: bit 0 set when appended_at is present
//	       [appended_at: 8-byte unix seconds (int64), 4-byte nanoseconds]
//	       uvarint len(data), data
//	       uvarint len(extensions), extensions
const (
	headerLen      = 23
	flagAppendedAt = 1 << 0
	maxFieldLen    = math.MaxInt32 // a single field cannot exceed 2 GiB
)

// Append appends the encoding of l to dst and returns the extended slice.
func Append(dst []byte, l *raft.Log) []byte {
	start := len(dst)
	dst = append(dst, FormatVersion, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint64(dst, l.Index)
	dst = binary.BigEndian.AppendUint64(dst, l.Term)
	var flags byte
	if !l.AppendedAt.IsZero() {
		flags |= flagAppendedAt
	}
	dst = append(dst, byte(l.Type), flags)
	if flags&flagAppendedAt != 0 {
		dst = binary.BigEndian.AppendUint64(dst, uint64(l.AppendedAt.Unix()))
		dst = binary.BigEndian.AppendUint32(dst, uint32(l.AppendedAt.Nanosecond()))
	}
	dst = binary.AppendUvarint(dst, uint64(len(l.Data)))
	dst = append(dst, l.Data...)
	dst = binary.AppendUvarint(dst, uint64(len(l.Extensions)))
	dst = append(dst, l.Extensions...)
	binary.BigEndian.PutUint32(dst[start+1:], crc32.Checksum(dst[start+5:], castagnoli))
	return dst
}

// Decode decodes b into l. Data and Extensions alias b, so callers pass a
// buffer they own. Any deviation from the layout is errcode.StorageCorrupt.
func Decode(b []byte, l *raft.Log) error {
	if len(b) < headerLen {
		return corrupt("log entry shorter than its header", len(b))
	}
	if b[0] != FormatVersion {
		return errcode.StorageCorrupt.New("unknown raft log entry format version", "version", strconv.Itoa(int(b[0])))
	}
	if got, want := crc32.Checksum(b[5:], castagnoli), binary.BigEndian.Uint32(b[1:5]); got != want {
		return errcode.StorageCorrupt.New("raft log entry checksum mismatch", "reason", "crc32c")
	}
	var out raft.Log
	out.Index = binary.BigEndian.Uint64(b[5:13])
	out.Term = binary.BigEndian.Uint64(b[13:21])
	out.Type = raft.LogType(b[21])
	flags := b[22]
	if flags&^flagAppendedAt != 0 {
		return corrupt("unknown raft log entry flags", int(flags))
	}
	rest := b[headerLen:]
	if flags&flagAppendedAt != 0 {
		if len(rest) < 12 {
			return corrupt("raft log entry truncated in appended_at", len(b))
		}
		sec := int64(binary.BigEndian.Uint64(rest[:8]))
		nsec := binary.BigEndian.Uint32(rest[8:12])
		if nsec >= 1e9 {
			return corrupt("raft log entry appended_at nanoseconds out of range", int(nsec))
		}
		out.AppendedAt = time.Unix(sec, int64(nsec))
		rest = rest[12:]
	}
	var err error
	if out.Data, rest, err = readField(rest, "data"); err != nil {
		return err
	}
	if out.Extensions, rest, err = readField(rest, "extensions"); err != nil {
		return err
	}
	if len(rest) != 0 {
		return corrupt("trailing bytes after raft log entry", len(rest))
	}
	*l = out
	return nil
}

func readField(b []byte, name string) (field, rest []byte, err error) {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return nil, nil, errcode.StorageCorrupt.New("raft log entry has a bad length", "field", name)
	}
	b = b[k:]
	if n > maxFieldLen || n > uint64(len(b)) {
		return nil, nil, errcode.StorageCorrupt.New("raft log entry field overruns the value", "field", name)
	}
	if n == 0 {
		return nil, b, nil
	}
	return b[:n:n], b[n:], nil
}

func corrupt(msg string, n int) error {
	return errcode.StorageCorrupt.New(msg, "value", strconv.Itoa(n))
}

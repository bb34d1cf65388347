package wire

import (
	"encoding/binary"

	"github.com/strataio/strata/libs/errcode"
)

// Batch frame constants (WIRE-V2 section 7.1, SERVICE-SPEC 4.6).
const (
	// BatchMagic is "CBV2".
	BatchMagic uint32 = 0x43425632
	// BatchVersion is the batch version, 2.
	BatchVersion uint16 = 2
	// BatchFlagIdempotent is flag bit 0; every other bit is rejected.
	BatchFlagIdempotent uint16 = 0x0001
	// MaxBatchRecords bounds record_count.
	MaxBatchRecords = 100_000

	// batchFixed is a batch header without topic and acks bytes: magic 4,
	// version 2, flags 2, topic length 4, partition 4, acks length 4,
	// batch_start 8, batch_end 8, record_count 4.
	batchFixed = 40
	// minRecordWire is the smallest length-prefixed record.
	minRecordWire = 4 + recordFixed
	// batchTopicPos is where the topic length prefix starts.
	batchTopicPos = 8
)

// ValidAcks reports whether s is an acks value a batch may carry: "", "0",
// "none", "1", "-1" or "all".
func ValidAcks(s string) bool {
	switch s {
	case "", "0", "none", "1", "-1", "all":
		return true
	}
	return false
}

func batchError(reason, msg string, kv ...string) *errcode.Error {
	return decodeError(payloadCBV2, reason, msg, kv...)
}

// IsBatch reports whether b starts with the CBV2 magic and version (how a
// broker and the SDKs tell a batch from a CRQ2 payload).
func IsBatch(b []byte) bool {
	return len(b) >= 6 && binary.BigEndian.Uint32(b) == BatchMagic && binary.BigEndian.Uint16(b[4:]) == BatchVersion
}

// BatchHeader is the part of a batch before its records.
type BatchHeader struct {
	Idempotent bool
	Topic      string
	Partition  int32
	Acks       string
	BatchStart uint64
	BatchEnd   uint64
}

// BatchView is a zero-copy view of an encoded CBV2 batch. Accessors return
// sub-slices of the underlying bytes; SetPartition and AssignOffsets patch
// them in place.
type BatchView struct {
	b          []byte
	flags      uint16
	topicEnd   int
	acksEnd    int
	start, end uint64
	count      uint32
	recordsPos int
}

// ParseBatch checks a whole batch in one pass: the header (magic, version 2,
// flags, acks value, record_count at most 100,000 and backed by enough
// bytes) and every record (ParseRecord's rules, plus topic and partition
// equal to the header's), and that nothing trails the last record. It does
// not allocate unless it fails.
func ParseBatch(b []byte) (BatchView, error) {
	v, err := ParseBatchHeader(b)
	if err != nil {
		return BatchView{}, err
	}
	if err := v.Validate(); err != nil {
		return BatchView{}, err
	}
	return v, nil
}

// ParseBatchHeader checks and returns the batch header only; the records are
// checked by Validate or while iterating.
func ParseBatchHeader(b []byte) (BatchView, error) {
	if len(b) < batchFixed {
		return BatchView{}, batchError("truncated", "batch shorter than its header", "length", itoa(len(b)))
	}
	if m := binary.BigEndian.Uint32(b); m != BatchMagic {
		return BatchView{}, batchError("bad_magic", "batch magic is not CBV2", "magic", hex32(m))
	}
	if ver := binary.BigEndian.Uint16(b[4:]); ver != BatchVersion {
		return BatchView{}, batchError("bad_version", "unsupported batch version", "version", itoa(int(ver)))
	}
	v := BatchView{b: b, flags: binary.BigEndian.Uint16(b[6:])}
	if v.flags&^BatchFlagIdempotent != 0 {
		return BatchView{}, batchError("bad_flags", "unknown batch flag bits", "flags", hex32(uint32(v.flags)))
	}
	tl := binary.BigEndian.Uint32(b[batchTopicPos:])
	if uint64(tl) > uint64(len(b)-batchFixed) {
		return BatchView{}, batchError("truncated", "batch topic longer than the batch")
	}
	v.topicEnd = batchTopicPos + 4 + int(tl)
	al := binary.BigEndian.Uint32(b[v.topicEnd+4:])
	if uint64(al) > uint64(len(b)-batchFixed-int(tl)) {
		return BatchView{}, batchError("truncated", "batch acks longer than the batch")
	}
	v.acksEnd = v.topicEnd + 8 + int(al)
	if acks := b[v.topicEnd+8 : v.acksEnd]; !ValidAcks(string(acks)) {
		return BatchView{}, batchError("bad_acks", "acks outside \"\", 0, none, 1, -1, all", "acks", string(acks))
	}
	v.start = binary.BigEndian.Uint64(b[v.acksEnd:])
	v.end = binary.BigEndian.Uint64(b[v.acksEnd+8:])
	v.count = binary.BigEndian.Uint32(b[v.acksEnd+16:])
	v.recordsPos = v.acksEnd + 20
	if v.count > MaxBatchRecords {
		return BatchView{}, batchError("too_many_records", "record_count above 100,000", "count", u32toa(v.count))
	}
	if uint64(v.count)*minRecordWire > uint64(len(b)-v.recordsPos) {
		return BatchView{}, batchError("truncated", "record_count exceeds the records section", "count", u32toa(v.count))
	}
	return v, nil
}

// Validate checks every record of the batch (see ParseBatch).
func (v *BatchView) Validate() error {
	it := v.Records()
	for it.next() {
	}
	return it.Err()
}

// Bytes returns the batch's encoded bytes.
func (v *BatchView) Bytes() []byte { return v.b }

// Flags returns the raw flags.
func (v *BatchView) Flags() uint16 { return v.flags }

// Idempotent reports flag bit 0.
func (v *BatchView) Idempotent() bool { return v.flags&BatchFlagIdempotent != 0 }

// Topic returns the batch topic bytes.
func (v *BatchView) Topic() []byte { return v.b[batchTopicPos+4 : v.topicEnd : v.topicEnd] }

// Partition returns the batch partition.
func (v *BatchView) Partition() int32 { return int32(binary.BigEndian.Uint32(v.b[v.topicEnd:])) }

// Acks returns the acks bytes.
func (v *BatchView) Acks() []byte { return v.b[v.topicEnd+8 : v.acksEnd : v.acksEnd] }

// BatchStart returns batch_start.
func (v *BatchView) BatchStart() uint64 { return v.start }

// BatchEnd returns batch_end.
func (v *BatchView) BatchEnd() uint64 { return v.end }

// RecordCount returns record_count.
func (v *BatchView) RecordCount() int { return int(v.count) }

// RecordsSection returns the length-prefixed records, as stored by a log and
// as BatchBuilder.AppendRecords takes them.
func (v *BatchView) RecordsSection() []byte { return v.b[v.recordsPos:] }

// Header copies the header into a BatchHeader (allocates the strings).
func (v *BatchView) Header() BatchHeader {
	return BatchHeader{
		Idempotent: v.Idempotent(), Topic: string(v.Topic()), Partition: v.Partition(),
		Acks: string(v.Acks()), BatchStart: v.start, BatchEnd: v.end,
	}
}

// Records returns an iterator over the records.
func (v *BatchView) Records() RecordIter {
	return RecordIter{b: v.b, pos: v.recordsPos, left: v.count, topic: v.Topic(), partition: v.Partition()}
}

// SetPartition overwrites the partition of the batch header and of every
// record in place. The batch must have passed ParseBatch.
func (v *BatchView) SetPartition(p int32) {
	binary.BigEndian.PutUint32(v.b[v.topicEnd:], uint32(p))
	pos := v.recordsPos
	topicPrefix := 4 + (v.topicEnd - batchTopicPos - 4)
	for range v.count {
		l := int(binary.BigEndian.Uint32(v.b[pos:]))
		// Records carry the batch's topic, so the partition sits at a fixed
		// distance from the record start.
		binary.BigEndian.PutUint32(v.b[pos+4+topicPos+topicPrefix:], uint32(p))
		pos += 4 + l
	}
}

// AssignOffsets overwrites the offsets of the records in place with base,
// base+1, ... and returns the offset after the last one. The batch must have
// passed ParseBatch.
func (v *BatchView) AssignOffsets(base uint64) uint64 {
	pos := v.recordsPos
	offPos := 4 + topicPos + 4 + (v.topicEnd - batchTopicPos - 4) + 4
	for range v.count {
		l := int(binary.BigEndian.Uint32(v.b[pos:]))
		binary.BigEndian.PutUint64(v.b[pos+offPos:], base)
		base++
		pos += 4 + l
	}
	return base
}

// RecordIter walks the records of a batch, validating each one as it goes.
// Use it as
//
//	it := view.Records()
//	for rec, ok := it.Next(); ok; rec, ok = it.Next() { ... }
//	if err := it.Err(); err != nil { ... }
type RecordIter struct {
	b         []byte
	pos       int
	left      uint32
	index     int
	topic     []byte
	partition int32
	cur       RecordView
	err       error
}

// Next returns the next record; false at the end or on the first invalid
// record (see Err).
func (it *RecordIter) Next() (RecordView, bool) {
	if !it.next() {
		return RecordView{}, false
	}
	return it.cur, true
}

// Pos returns the byte position, within the batch, of the length prefix of
// the record Next returned last.
func (it *RecordIter) Pos() int { return it.pos - 4 - len(it.cur.b) }

// Err returns the error that stopped the iteration, or nil.
func (it *RecordIter) Err() error { return it.err }

func (it *RecordIter) next() bool {
	if it.err != nil {
		return false
	}
	if it.left == 0 {
		if it.pos != len(it.b) {
			it.err = batchError("trailing_bytes", "bytes after the last record", "trailing", itoa(len(it.b)-it.pos))
		}
		return false
	}
	if len(it.b)-it.pos < 4 {
		it.err = batchError("truncated", "record length prefix truncated", "index", itoa(it.index))
		return false
	}
	l := binary.BigEndian.Uint32(it.b[it.pos:])
	if uint64(l) > uint64(len(it.b)-it.pos-4) {
		it.err = batchError("truncated", "record longer than the batch", "index", itoa(it.index))
		return false
	}
	start := it.pos + 4
	end := start + int(l)
	if err := it.cur.parse(it.b[start:end:end]); err != nil {
		err.Fields = append(err.Fields, errcode.Field{Key: "index", Value: itoa(it.index)})
		err.Normalize()
		it.err = err
		return false
	}
	if string(it.cur.Topic()) != string(it.topic) || it.cur.Partition() != it.partition {
		it.err = batchError("routing_mismatch", "record topic or partition differs from the batch header",
			"index", itoa(it.index))
		return false
	}
	it.pos = end
	it.left--
	it.index++
	return true
}

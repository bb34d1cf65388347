package wire

import (
	"encoding/binary"
	"slices"
	"unsafe"

	"github.com/strataio/strata/libs/errcode"
)

// BatchBuilder builds a CBV2 batch by appending records to a header: encoded
// records copied as they are (AppendRecord, AppendRecords, the consumer-fetch
// path that re-encodes a stored run of records by concatenation) or Record
// structs encoded in place (Add). The zero value is ready after Reset; it
// allocates only when the destination slice must grow.
type BatchBuilder struct {
	buf       []byte
	start     int
	topic     string
	partition int32
	rangePos  int
	count     uint32
	err       error
}

func builderError(reason, msg string, kv ...string) *errcode.Error {
	return encodeError(payloadCBV2, reason, msg, kv...)
}

// Reset starts a batch with header h, appended to dst.
func (bb *BatchBuilder) Reset(dst []byte, h BatchHeader) error {
	*bb = BatchBuilder{buf: dst, start: len(dst), topic: h.Topic, partition: h.Partition}
	if !ValidAcks(h.Acks) {
		bb.err = builderError("bad_acks", "acks outside \"\", 0, none, 1, -1, all", "acks", h.Acks)
		return bb.err
	}
	if len(h.Topic)+len(h.Acks) > PublicMaxPayload {
		bb.err = builderError("too_large", "batch header above the public 64 MiB bound")
		return bb.err
	}
	var flags uint16
	if h.Idempotent {
		flags = BatchFlagIdempotent
	}
	b := appendU32(bb.buf, BatchMagic)
	b = appendU16(b, BatchVersion)
	b = appendU16(b, flags)
	b = appendString(b, h.Topic)
	b = appendU32(b, uint32(h.Partition))
	b = appendString(b, h.Acks)
	bb.rangePos = len(b)
	b = appendU64(b, h.BatchStart)
	b = appendU64(b, h.BatchEnd)
	bb.buf = appendU32(b, 0)
	return nil
}

// SetRange overwrites batch_start and batch_end.
func (bb *BatchBuilder) SetRange(start, end uint64) {
	if bb.err == nil {
		binary.BigEndian.PutUint64(bb.buf[bb.rangePos:], start)
		binary.BigEndian.PutUint64(bb.buf[bb.rangePos+8:], end)
	}
}

// Count returns the number of records appended so far.
func (bb *BatchBuilder) Count() int { return int(bb.count) }

// Size returns the batch's encoded size so far, so a caller can stop before
// PublicMaxPayload.
func (bb *BatchBuilder) Size() int { return len(bb.buf) - bb.start }

func (bb *BatchBuilder) room(n int, records int) error {
	if bb.err != nil {
		return bb.err
	}
	if int(bb.count)+records > MaxBatchRecords {
		return builderError("too_many_records", "batch would exceed 100,000 records")
	}
	if bb.Size()+n > PublicMaxPayload {
		return builderError("too_large", "batch would exceed the public 64 MiB bound")
	}
	return nil
}

func (bb *BatchBuilder) checkRouting(rec []byte) error {
	topic, pp, err := recordRouting(rec)
	if err != nil {
		return err
	}
	if string(topic) != bb.topic || int32(binary.BigEndian.Uint32(rec[pp:])) != bb.partition {
		return builderError("routing_mismatch", "record topic or partition differs from the batch header")
	}
	return nil
}

// AppendRecord copies one encoded record (without a length prefix) into the
// batch. Only its topic and partition are read, to check them against the
// header.
func (bb *BatchBuilder) AppendRecord(rec []byte) error {
	if err := bb.room(4+len(rec), 1); err != nil {
		return err
	}
	if err := bb.checkRouting(rec); err != nil {
		return err
	}
	bb.buf = appendU32(bb.buf, uint32(len(rec)))
	bb.buf = append(bb.buf, rec...)
	bb.count++
	return nil
}

// AppendRecords copies a run of length-prefixed records (a records section,
// as BatchView.RecordsSection returns and a log stores) in one copy, after
// walking the length prefixes to count the records and check their routing.
func (bb *BatchBuilder) AppendRecords(section []byte) error {
	if err := bb.room(len(section), 0); err != nil {
		return err
	}
	n := 0
	for pos := 0; pos < len(section); n++ {
		if len(section)-pos < 4 {
			return builderError("truncated", "record length prefix truncated", "index", itoa(n))
		}
		l := binary.BigEndian.Uint32(section[pos:])
		if uint64(l) > uint64(len(section)-pos-4) {
			return builderError("truncated", "record longer than the section", "index", itoa(n))
		}
		if err := bb.checkRouting(section[pos+4 : pos+4+int(l)]); err != nil {
			return err
		}
		pos += 4 + int(l)
	}
	if err := bb.room(0, n); err != nil {
		return err
	}
	bb.buf = append(bb.buf, section...)
	bb.count += uint32(n)
	return nil
}

// Add encodes r into the batch. A record with an empty Topic takes the
// header's topic and partition; otherwise both must equal the header's.
func (bb *BatchBuilder) Add(r *Record) error {
	if bb.err != nil {
		return bb.err
	}
	topic, part := r.Topic, r.Partition
	if topic == "" {
		topic, part = bb.topic, bb.partition
	} else if topic != bb.topic || part != bb.partition {
		return builderError("routing_mismatch", "record topic or partition differs from the batch header")
	}
	e, err := r.check(len(topic))
	if err != nil {
		return err
	}
	if err := bb.room(4+e.size, 1); err != nil {
		return err
	}
	// The size is known, so the length prefix is written first and the
	// record is appended without growing the buffer again.
	bb.buf = appendU32(slices.Grow(bb.buf, 4+e.size), uint32(e.size))
	bb.buf = r.appendChecked(bb.buf, topic, part, e)
	bb.count++
	return nil
}

// Bytes finishes the batch (writes record_count) and returns dst extended by
// the batch. The builder may keep appending afterwards; call Bytes again.
func (bb *BatchBuilder) Bytes() ([]byte, error) {
	if bb.err != nil {
		return bb.buf, bb.err
	}
	binary.BigEndian.PutUint32(bb.buf[bb.rangePos+16:], bb.count)
	return bb.buf, nil
}

// Batch is a whole batch as plain structs, for clients and tests.
type Batch struct {
	BatchHeader
	Records []Record
}

// FillSequenceRange sets BatchStart and BatchEnd, when zero, to the first and
// last record's SeqNum (what the Go SDK does before encoding).
func (b *Batch) FillSequenceRange() {
	if len(b.Records) == 0 {
		return
	}
	if b.BatchStart == 0 {
		b.BatchStart = b.Records[0].SeqNum
	}
	if b.BatchEnd == 0 {
		b.BatchEnd = b.Records[len(b.Records)-1].SeqNum
	}
}

// AppendTo appends the encoded batch to dst. Records with an empty Topic take
// the batch's topic and partition.
func (b *Batch) AppendTo(dst []byte) ([]byte, error) {
	var bb BatchBuilder
	if err := bb.Reset(dst, b.BatchHeader); err != nil {
		return dst, err
	}
	for i := range b.Records {
		if err := bb.Add(&b.Records[i]); err != nil {
			return dst, err
		}
	}
	return bb.Bytes()
}

// DecodeBatch decodes and validates a batch into structs that own their data.
// All fields view one copy of b, so the cost is a few allocations per batch,
// not per field.
func DecodeBatch(b []byte) (*Batch, error) {
	return decodeBatch(append([]byte(nil), b...))
}

// DecodeBatchOwned is DecodeBatch for a b the caller hands over: the records
// alias b instead of a copy of it (a megabyte CONSUME reply was copied after
// being read). The caller must neither use nor change b afterwards.
func DecodeBatchOwned(b []byte) (*Batch, error) {
	return decodeBatch(b)
}

// decodeBatch validates b and decodes it in one pass over the records. The
// strings view b without a copy, which is sound because nothing can write b
// any more (DecodeBatch copied it; DecodeBatchOwned's caller handed it
// over): the byte fields handed out (Payload, ControlKey, ControlValue)
// cover other bytes than the strings and are capped, so writing or
// appending to them never reaches a string.
func decodeBatch(b []byte) (*Batch, error) {
	v, err := ParseBatchHeader(b)
	if err != nil {
		return nil, err
	}
	s := unsafe.String(unsafe.SliceData(b), len(b))
	out := &Batch{BatchHeader: v.Header(), Records: make([]Record, v.count)}
	it := v.Records()
	for i := range out.Records {
		if !it.next() {
			break
		}
		it.cur.fill(&out.Records[i], s, b, it.pos-len(it.cur.b)) // from the record's first byte within b
	}
	// After record_count records, next checks that nothing trails them.
	if it.next(); it.Err() != nil {
		return nil, it.Err()
	}
	return out, nil
}

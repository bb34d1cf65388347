package wire

import (
	"encoding/binary"
	"math/bits"
	"unsafe"

	"github.com/strataio/strata/libs/errcode"
)

// Record versions (WIRE-V2 section 7.2). Strata writes version 2 unless a
// record carries event_id or payload_digest, which only version 3 can hold;
// it reads both.
const (
	RecordVersion2 uint16 = 2
	RecordVersion3 uint16 = 3
)

// Presence bits of a record, in wire order. Each set bit adds its field(s)
// after the payload, in bit order.
const (
	PresenceTimestamp               uint64 = 1 << iota // i64
	PresenceProducer                                   // producer_id string, seq_num u64, epoch i64
	PresenceKey                                        // string
	PresenceEventType                                  // string
	PresenceSchemaVersion                              // u32
	PresenceAggregateVersion                           // u64
	PresenceMetadata                                   // string
	PresenceTransactionalID                            // string
	PresenceTransactionState                           // string: "", open, committed, aborted
	PresenceTransactionMarker                          // string: "", commit, abort
	PresenceControlType                                // string: "", transaction
	PresenceControlVersion                             // i16
	PresenceControlCoordinatorEpoch                    // i64
	PresenceControlKey                                 // bytes
	PresenceControlValue                               // bytes
	PresenceEventID                                    // string, version 3 only
	PresencePayloadDigest                              // string, version 3 only
)

// Known presence masks per record version; any other bit rejects the record.
const (
	PresenceMaskV2 uint64 = 0x7FFF
	PresenceMaskV3 uint64 = 0x1FFFF
)

// Values of the transactional string fields.
const (
	TxnStateOpen           = "open"
	TxnStateCommitted      = "committed"
	TxnStateAborted        = "aborted"
	TxnMarkerCommit        = "commit"
	TxnMarkerAbort         = "abort"
	ControlTypeTransaction = "transaction"
)

const (
	numOptional = 17
	// recordFixed is the size of a record without topic and payload bytes:
	// version 2 + presence 8 + topic length 4 + partition 4 + offset 8 +
	// payload length 4.
	recordFixed = 30
	// topicPos is where the topic length prefix starts in a record.
	topicPos = 10
)

// Wire shapes of the optional fields, indexed by bit number.
const (
	shapeI64 = iota
	shapeProducer
	shapeString
	shapeU32
	shapeU64
	shapeI16
)

var optionalShape = [numOptional]uint8{
	shapeI64, shapeProducer, shapeString, shapeString, shapeU32, shapeU64, shapeString, shapeString,
	shapeString, shapeString, shapeString, shapeI16, shapeI64, shapeString, shapeString, shapeString, shapeString,
}

// shapeSize is the encoded size of each shape without its string bytes
// (a string's u32 length; the producer's length, seq_num and epoch).
var shapeSize = [...]int{shapeI64: 8, shapeProducer: 4 + 16, shapeString: 4, shapeU32: 4, shapeU64: 8, shapeI16: 2}

// RecordView is a zero-copy view of one encoded record. Field accessors return
// sub-slices of the underlying bytes (valid as long as those bytes are), and
// the Set methods patch them in place. A RecordView is a plain value: taking
// one from a RecordIter allocates nothing.
type RecordView struct {
	b        []byte
	presence uint64
	version  uint16
	topicEnd uint32
	opt      [numOptional]uint32 // start of each present optional field
}

func recordError(reason, msg string, kv ...string) *errcode.Error {
	return decodeError(payloadRecord, reason, msg, kv...)
}

// ParseRecord validates b as one encoded record (without its u32 length
// prefix) and returns a view of it. It checks the version (2 or 3), unknown
// presence bits for that version, every length against the bytes that remain,
// the value sets of transaction_state, transaction_marker and
// control_batch_type, and that no bytes trail the last field. It does not
// allocate unless it fails.
func ParseRecord(b []byte) (RecordView, error) {
	var v RecordView
	if err := v.parse(b); err != nil {
		return RecordView{}, err
	}
	return v, nil
}

func (v *RecordView) parse(b []byte) *errcode.Error {
	if len(b) < recordFixed {
		return recordError("truncated", "record shorter than its fixed fields", "length", itoa(len(b)))
	}
	v.b = b
	v.version = binary.BigEndian.Uint16(b)
	v.presence = binary.BigEndian.Uint64(b[2:])
	var mask uint64
	switch v.version {
	case RecordVersion2:
		mask = PresenceMaskV2
	case RecordVersion3:
		mask = PresenceMaskV3
	default:
		return recordError("bad_version", "unsupported record version", "version", itoa(int(v.version)))
	}
	if v.presence&^mask != 0 {
		return recordError("unknown_presence_bits", "record sets presence bits its version does not define",
			"presence", "0x"+utoaBase16(v.presence), "version", itoa(int(v.version)))
	}
	n := len(b)
	tl := binary.BigEndian.Uint32(b[topicPos:])
	// topic, partition 4, offset 8, payload length 4 must fit.
	if uint64(tl) > uint64(n-recordFixed) {
		return recordError("truncated", "record topic longer than the record")
	}
	pos := topicPos + 4 + int(tl)
	v.topicEnd = uint32(pos)
	pos += 12
	pl := binary.BigEndian.Uint32(b[pos:])
	pos += 4
	if uint64(pl) > uint64(n-pos) {
		return recordError("truncated", "record payload longer than the record")
	}
	pos += int(pl)
	for p := v.presence; p != 0; p &= p - 1 {
		i := bits.TrailingZeros64(p)
		v.opt[i] = uint32(pos)
		need := shapeSize[optionalShape[i]]
		switch optionalShape[i] {
		case shapeString:
			if n-pos < 4 {
				return recordError("truncated", "record field truncated", "bit", itoa(i))
			}
			l := binary.BigEndian.Uint32(b[pos:])
			if uint64(l) > uint64(n-pos-4) {
				return recordError("truncated", "record field longer than the record", "bit", itoa(i))
			}
			need = 4 + int(l)
			if i >= 8 && i <= 10 && !validTxnValue(i, b[pos+4:pos+need]) {
				return recordError("bad_value", "transactional field outside its value set", "bit", itoa(i),
					"value", string(b[pos+4:pos+need]))
			}
		case shapeProducer:
			if n-pos < 4 {
				return recordError("truncated", "record producer truncated")
			}
			l := binary.BigEndian.Uint32(b[pos:])
			if uint64(l)+16 > uint64(n-pos-4) {
				return recordError("truncated", "record producer longer than the record")
			}
			need = 4 + int(l) + 16
		}
		if need > n-pos {
			return recordError("truncated", "record field truncated", "bit", itoa(i))
		}
		pos += need
	}
	if pos != n {
		return recordError("trailing_bytes", "bytes after the last record field", "trailing", itoa(n-pos))
	}
	return nil
}

func validTxnValue[T string | []byte](bit int, val T) bool {
	switch bit {
	case 8:
		return len(val) == 0 || string(val) == TxnStateOpen || string(val) == TxnStateCommitted || string(val) == TxnStateAborted
	case 9:
		return len(val) == 0 || string(val) == TxnMarkerCommit || string(val) == TxnMarkerAbort
	case 10:
		return len(val) == 0 || string(val) == ControlTypeTransaction
	}
	return true
}

func utoaBase16(v uint64) string {
	const digits = "0123456789abcdef"
	if v == 0 {
		return "0"
	}
	var buf [16]byte
	i := len(buf)
	for v > 0 {
		i--
		buf[i] = digits[v&15]
		v >>= 4
	}
	return string(buf[i:])
}

// Bytes returns the record's encoded bytes (without the length prefix).
func (v *RecordView) Bytes() []byte { return v.b }

// Version returns the record version (2 or 3).
func (v *RecordView) Version() uint16 { return v.version }

// Presence returns the presence bitmap.
func (v *RecordView) Presence() uint64 { return v.presence }

// Topic returns the record's topic bytes.
func (v *RecordView) Topic() []byte { return v.b[topicPos+4 : v.topicEnd : v.topicEnd] }

// TopicString returns the topic as a string (allocates).
func (v *RecordView) TopicString() string { return string(v.Topic()) }

// PartitionPos returns the byte position of the i32 partition in Bytes().
func (v *RecordView) PartitionPos() int { return int(v.topicEnd) }

// OffsetPos returns the byte position of the u64 offset in Bytes(), where a
// log patches the offset it assigns.
func (v *RecordView) OffsetPos() int { return int(v.topicEnd) + 4 }

// Partition returns the record's partition.
func (v *RecordView) Partition() int32 { return int32(binary.BigEndian.Uint32(v.b[v.topicEnd:])) }

// Offset returns the record's offset.
func (v *RecordView) Offset() uint64 { return binary.BigEndian.Uint64(v.b[v.topicEnd+4:]) }

// SetOffset overwrites the offset in place.
func (v *RecordView) SetOffset(off uint64) { binary.BigEndian.PutUint64(v.b[v.topicEnd+4:], off) }

// SetPartition overwrites the partition in place.
func (v *RecordView) SetPartition(p int32) { binary.BigEndian.PutUint32(v.b[v.topicEnd:], uint32(p)) }

// Payload returns the payload bytes.
func (v *RecordView) Payload() []byte {
	p := v.topicEnd + 12
	l := binary.BigEndian.Uint32(v.b[p:])
	return v.b[p+4 : p+4+l : p+4+l]
}

func (v *RecordView) str(bit int) ([]byte, bool) {
	if v.presence&(1<<bit) == 0 {
		return nil, false
	}
	p := v.opt[bit]
	l := binary.BigEndian.Uint32(v.b[p:])
	return v.b[p+4 : p+4+l : p+4+l], true
}

func (v *RecordView) u64(bit int) (uint64, bool) {
	if v.presence&(1<<bit) == 0 {
		return 0, false
	}
	return binary.BigEndian.Uint64(v.b[v.opt[bit]:]), true
}

// Timestamp returns the timestamp and whether it is present.
func (v *RecordView) Timestamp() (int64, bool) {
	t, ok := v.u64(0)
	return int64(t), ok
}

// Producer returns producer_id, seq_num and epoch (one presence bit).
func (v *RecordView) Producer() (id []byte, seq uint64, epoch int64, ok bool) {
	if v.presence&PresenceProducer == 0 {
		return nil, 0, 0, false
	}
	p := v.opt[1]
	l := binary.BigEndian.Uint32(v.b[p:])
	e := p + 4 + l
	return v.b[p+4 : e : e], binary.BigEndian.Uint64(v.b[e:]), int64(binary.BigEndian.Uint64(v.b[e+8:])), true
}

// Key returns the key and whether it is present.
func (v *RecordView) Key() ([]byte, bool) { return v.str(2) }

// EventType returns the event type and whether it is present.
func (v *RecordView) EventType() ([]byte, bool) { return v.str(3) }

// SchemaVersion returns the schema version and whether it is present.
func (v *RecordView) SchemaVersion() (uint32, bool) {
	if v.presence&PresenceSchemaVersion == 0 {
		return 0, false
	}
	return binary.BigEndian.Uint32(v.b[v.opt[4]:]), true
}

// AggregateVersion returns the aggregate version and whether it is present.
func (v *RecordView) AggregateVersion() (uint64, bool) { return v.u64(5) }

// Metadata returns the metadata and whether it is present.
func (v *RecordView) Metadata() ([]byte, bool) { return v.str(6) }

// TransactionalID returns the transactional id and whether it is present.
func (v *RecordView) TransactionalID() ([]byte, bool) { return v.str(7) }

// TransactionState returns the transaction state ("", open, committed,
// aborted) and whether it is present.
func (v *RecordView) TransactionState() ([]byte, bool) { return v.str(8) }

// TransactionMarker returns the transaction marker ("", commit, abort) and
// whether it is present.
func (v *RecordView) TransactionMarker() ([]byte, bool) { return v.str(9) }

// ControlType returns control_batch_type ("", transaction) and whether it is
// present.
func (v *RecordView) ControlType() ([]byte, bool) { return v.str(10) }

// ControlVersion returns control_batch_version and whether it is present.
func (v *RecordView) ControlVersion() (int16, bool) {
	if v.presence&PresenceControlVersion == 0 {
		return 0, false
	}
	return int16(binary.BigEndian.Uint16(v.b[v.opt[11]:])), true
}

// ControlCoordinatorEpoch returns control_batch_coordinator_epoch and whether
// it is present.
func (v *RecordView) ControlCoordinatorEpoch() (int64, bool) {
	e, ok := v.u64(12)
	return int64(e), ok
}

// ControlKey returns control_batch_key and whether it is present (present
// and empty is possible).
func (v *RecordView) ControlKey() ([]byte, bool) { return v.str(13) }

// ControlValue returns control_batch_value and whether it is present.
func (v *RecordView) ControlValue() ([]byte, bool) { return v.str(14) }

// EventID returns the event id (version 3) and whether it is present.
func (v *RecordView) EventID() ([]byte, bool) { return v.str(15) }

// PayloadDigest returns the payload digest (version 3) and whether it is
// present.
func (v *RecordView) PayloadDigest() ([]byte, bool) { return v.str(16) }

// KeyString returns the key as a string, "" when absent (allocates).
func (v *RecordView) KeyString() string { k, _ := v.Key(); return string(k) }

// IsControl reports whether the record is a transaction control marker
// (control_batch_type = transaction).
func (v *RecordView) IsControl() bool {
	t, _ := v.ControlType()
	return string(t) == ControlTypeTransaction
}

// Record copies the view into a Record that owns its data: one copy of the
// record's bytes that every field views (see decodeBatch for why sharing it
// is sound).
func (v *RecordView) Record() Record {
	c := append([]byte(nil), v.b...)
	var r Record
	v.fill(&r, unsafe.String(unsafe.SliceData(c), len(c)), c, 0)
	return r
}

// fill sets r's fields from the view, r being zero. Strings are taken from s
// and byte fields from c, both holding the view's bytes from index at on (a
// copy of the record, or of the whole batch it came from), so decoding costs
// no allocation per field. Only present fields are written, and a record
// with none past the key (the common one) returns early.
func (v *RecordView) fill(r *Record, s string, c []byte, at int) {
	b := v.b
	str := func(p int) (string, int) { // the string whose u32 length is at p, and where it ends
		e := p + 4 + int(binary.BigEndian.Uint32(b[p:]))
		return s[at+p+4 : at+e], e
	}
	byt := func(p int) []byte {
		lo, hi := at+p+4, at+p+4+int(binary.BigEndian.Uint32(b[p:]))
		return c[lo:hi:hi]
	}
	r.Version = v.version
	r.Topic = s[at+topicPos+4 : at+int(v.topicEnd)]
	r.Partition = v.Partition()
	r.Offset = v.Offset()
	r.Payload = byt(int(v.topicEnd) + 12)
	p := v.presence
	if p == 0 {
		return
	}
	if p&PresenceTimestamp != 0 {
		r.Timestamp = int64(binary.BigEndian.Uint64(b[v.opt[0]:]))
	}
	if p&PresenceProducer != 0 {
		var e int
		r.ProducerID, e = str(int(v.opt[1]))
		r.SeqNum = binary.BigEndian.Uint64(b[e:])
		r.Epoch = int64(binary.BigEndian.Uint64(b[e+8:]))
	}
	if p&PresenceKey != 0 {
		r.Key, _ = str(int(v.opt[2]))
	}
	if p&^(PresenceTimestamp|PresenceProducer|PresenceKey) == 0 {
		return
	}
	strField := func(bit int) string {
		if p&(1<<bit) == 0 {
			return ""
		}
		f, _ := str(int(v.opt[bit]))
		return f
	}
	r.EventType = strField(3)
	r.SchemaVersion, _ = v.SchemaVersion()
	r.AggregateVersion, _ = v.AggregateVersion()
	r.Metadata = strField(6)
	r.TransactionalID = strField(7)
	r.TransactionState = strField(8)
	r.TransactionMarker = strField(9)
	r.ControlType = strField(10)
	r.ControlVersion, _ = v.ControlVersion()
	r.ControlCoordinatorEpoch, _ = v.ControlCoordinatorEpoch()
	if p&PresenceControlKey != 0 {
		r.ControlKey = byt(int(v.opt[13]))
	}
	if p&PresenceControlValue != 0 {
		r.ControlValue = byt(int(v.opt[14]))
	}
	r.EventID = strField(15)
	r.PayloadDigest = strField(16)
}

// recordRouting reads only a record's version, topic and partition: enough
// to patch or route it without a full parse.
func recordRouting(rec []byte) (topic []byte, partitionPos int, err error) {
	if len(rec) < recordFixed {
		return nil, 0, recordError("truncated", "record shorter than its fixed fields", "length", itoa(len(rec)))
	}
	if v := binary.BigEndian.Uint16(rec); v != RecordVersion2 && v != RecordVersion3 {
		return nil, 0, recordError("bad_version", "unsupported record version", "version", itoa(int(v)))
	}
	tl := binary.BigEndian.Uint32(rec[topicPos:])
	if uint64(tl) > uint64(len(rec)-recordFixed) {
		return nil, 0, recordError("truncated", "record topic longer than the record")
	}
	end := topicPos + 4 + int(tl)
	return rec[topicPos+4 : end], end, nil
}

// RecordOffsetPos returns the byte position of the offset field in an encoded
// record (without its length prefix), reading only the record's prefix.
func RecordOffsetPos(rec []byte) (int, error) {
	_, pp, err := recordRouting(rec)
	return pp + 4, err
}

// SetRecordOffset overwrites the offset of an encoded record in place. The
// offset is a fixed-size field, so nothing moves; a broker assigns offsets
// without re-encoding.
func SetRecordOffset(rec []byte, off uint64) error {
	_, pp, err := recordRouting(rec)
	if err != nil {
		return err
	}
	binary.BigEndian.PutUint64(rec[pp+4:], off)
	return nil
}

// SetRecordPartition overwrites the partition of an encoded record in place.
func SetRecordPartition(rec []byte, p int32) error {
	_, pp, err := recordRouting(rec)
	if err != nil {
		return err
	}
	binary.BigEndian.PutUint32(rec[pp:], uint32(p))
	return nil
}

package wire

import "encoding/binary"

// Record is one record as a plain struct, for clients and tests. The hot
// paths use RecordView instead. Optional fields are written when non-zero
// (WIRE-V2 section 7.2 presence rules); ControlKey and ControlValue are
// written when non-nil, so present-but-empty survives a round trip.
type Record struct {
	// Version is the record version to write: 0 picks 2, or 3 when EventID or
	// PayloadDigest is set. Decoding sets it to the version read.
	Version   uint16
	Topic     string
	Partition int32
	Offset    uint64
	Payload   []byte

	Timestamp               int64
	ProducerID              string
	SeqNum                  uint64
	Epoch                   int64
	Key                     string
	EventType               string
	SchemaVersion           uint32
	AggregateVersion        uint64
	Metadata                string
	TransactionalID         string
	TransactionState        string
	TransactionMarker       string
	ControlType             string
	ControlVersion          int16
	ControlCoordinatorEpoch int64
	ControlKey              []byte
	ControlValue            []byte
	EventID                 string
	PayloadDigest           string
}

// optional is one optional field of a Record as the encoder sees it: its
// value as a string (str), bytes (byt, ControlKey and ControlValue only) or
// number (num, written in the width of the bit's optionalShape).
type optional struct {
	present bool
	str     string
	byt     []byte
	num     uint64
}

func optString(s string) optional { return optional{present: s != "", str: s} }

// optBytes is present when non-nil, so present-but-empty survives.
func optBytes(b []byte) optional { return optional{present: b != nil, byt: b} }

func optNumber[T int16 | uint32 | int64 | uint64](v T) optional {
	return optional{present: v != 0, num: uint64(v)}
}

// optionals returns r's optional fields indexed by presence bit. The
// producer field's str is producer_id; seq_num and epoch follow it.
func (r *Record) optionals() [numOptional]optional {
	return [numOptional]optional{
		optNumber(r.Timestamp),
		{present: r.ProducerID != "" || r.SeqNum != 0 || r.Epoch != 0, str: r.ProducerID},
		optString(r.Key),
		optString(r.EventType),
		optNumber(r.SchemaVersion),
		optNumber(r.AggregateVersion),
		optString(r.Metadata),
		optString(r.TransactionalID),
		optString(r.TransactionState),
		optString(r.TransactionMarker),
		optString(r.ControlType),
		optNumber(r.ControlVersion),
		optNumber(r.ControlCoordinatorEpoch),
		optBytes(r.ControlKey),
		optBytes(r.ControlValue),
		optString(r.EventID),
		optString(r.PayloadDigest),
	}
}

// Presence returns the presence bitmap the encoder writes for r.
func (r *Record) Presence() uint64 {
	var p uint64
	for i, f := range r.optionals() {
		if f.present {
			p |= 1 << i
		}
	}
	return p
}

// encodedSize returns the record's encoded size for the given presence.
func (r *Record) encodedSize(p uint64) int {
	n := recordFixed + len(r.Topic) + len(r.Payload)
	for i, f := range r.optionals() {
		if p&(1<<i) != 0 {
			n += shapeSize[optionalShape[i]] + len(f.str) + len(f.byt)
		}
	}
	return n
}

// check validates what the encoder writes; it returns the version and
// presence to use.
func (r *Record) check() (uint16, uint64, error) {
	fail := func(reason, msg string, kv ...string) (uint16, uint64, error) {
		return 0, 0, encodeError(payloadRecord, reason, msg, kv...)
	}
	p := r.Presence()
	v := r.Version
	switch v {
	case 0:
		v = RecordVersion2
		if p&^PresenceMaskV2 != 0 {
			v = RecordVersion3
		}
	case RecordVersion2:
		if p&^PresenceMaskV2 != 0 {
			return fail("needs_version_3", "event_id and payload_digest need record version 3")
		}
	case RecordVersion3:
	default:
		return fail("bad_version", "record version must be 2 or 3", "version", itoa(int(v)))
	}
	if !validTxnValue(8, r.TransactionState) {
		return fail("bad_value", "transaction_state outside its value set", "value", r.TransactionState)
	}
	if !validTxnValue(9, r.TransactionMarker) {
		return fail("bad_value", "transaction_marker outside its value set", "value", r.TransactionMarker)
	}
	if !validTxnValue(10, r.ControlType) {
		return fail("bad_value", "control_batch_type outside its value set", "value", r.ControlType)
	}
	if n := r.encodedSize(p); n > PublicMaxPayload {
		return fail("too_large", "record above the public 64 MiB bound", "length", itoa(n))
	}
	return v, p, nil
}

// AppendTo appends the encoded record (without a length prefix).
func (r *Record) AppendTo(dst []byte) ([]byte, error) {
	v, p, err := r.check()
	if err != nil {
		return dst, err
	}
	return r.appendChecked(dst, v, p), nil
}

func (r *Record) appendChecked(b []byte, v uint16, p uint64) []byte {
	b = appendU16(b, v)
	b = appendU64(b, p)
	b = appendString(b, r.Topic)
	b = appendU32(b, uint32(r.Partition))
	b = appendU64(b, r.Offset)
	b = appendBytes(b, r.Payload)
	// Optional fields follow in bit order.
	for i, f := range r.optionals() {
		if p&(1<<i) == 0 {
			continue
		}
		switch optionalShape[i] {
		case shapeI64, shapeU64:
			b = appendU64(b, f.num)
		case shapeU32:
			b = appendU32(b, uint32(f.num))
		case shapeI16:
			b = appendU16(b, uint16(f.num))
		case shapeProducer:
			b = appendU64(appendU64(appendString(b, r.ProducerID), r.SeqNum), uint64(r.Epoch))
		case shapeString:
			if f.byt != nil {
				b = appendBytes(b, f.byt)
			} else {
				b = appendString(b, f.str)
			}
		}
	}
	return b
}

// appendPrefixed appends r with its u32 length prefix, as inside a batch.
func (r *Record) appendPrefixed(dst []byte) ([]byte, error) {
	v, p, err := r.check()
	if err != nil {
		return dst, err
	}
	at := len(dst)
	dst = r.appendChecked(append(dst, 0, 0, 0, 0), v, p)
	binary.BigEndian.PutUint32(dst[at:], uint32(len(dst)-at-4))
	return dst, nil
}

// DecodeRecord decodes one record (without its length prefix) into a Record
// that owns its data. Errors are errcode.DecodeFailed.
func DecodeRecord(b []byte) (Record, error) {
	v, err := ParseRecord(b)
	if err != nil {
		return Record{}, err
	}
	return v.Record(), nil
}

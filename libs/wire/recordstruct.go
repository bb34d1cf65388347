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

// Presence returns the presence bitmap the encoder writes for r.
func (r *Record) Presence() uint64 {
	var p uint64
	set := func(cond bool, bit uint64) {
		if cond {
			p |= bit
		}
	}
	set(r.Timestamp != 0, PresenceTimestamp)
	set(r.ProducerID != "" || r.SeqNum != 0 || r.Epoch != 0, PresenceProducer)
	set(r.Key != "", PresenceKey)
	set(r.EventType != "", PresenceEventType)
	set(r.SchemaVersion != 0, PresenceSchemaVersion)
	set(r.AggregateVersion != 0, PresenceAggregateVersion)
	set(r.Metadata != "", PresenceMetadata)
	set(r.TransactionalID != "", PresenceTransactionalID)
	set(r.TransactionState != "", PresenceTransactionState)
	set(r.TransactionMarker != "", PresenceTransactionMarker)
	set(r.ControlType != "", PresenceControlType)
	set(r.ControlVersion != 0, PresenceControlVersion)
	set(r.ControlCoordinatorEpoch != 0, PresenceControlCoordinatorEpoch)
	set(r.ControlKey != nil, PresenceControlKey)
	set(r.ControlValue != nil, PresenceControlValue)
	set(r.EventID != "", PresenceEventID)
	set(r.PayloadDigest != "", PresencePayloadDigest)
	return p
}

// encodedSize returns the record's encoded size for the given presence.
func (r *Record) encodedSize(p uint64) int {
	n := recordFixed + len(r.Topic) + len(r.Payload)
	if p&PresenceTimestamp != 0 {
		n += 8
	}
	if p&PresenceProducer != 0 {
		n += 20 + len(r.ProducerID)
	}
	strs := [...]struct {
		bit uint64
		l   int
	}{
		{PresenceKey, len(r.Key)}, {PresenceEventType, len(r.EventType)}, {PresenceMetadata, len(r.Metadata)},
		{PresenceTransactionalID, len(r.TransactionalID)}, {PresenceTransactionState, len(r.TransactionState)},
		{PresenceTransactionMarker, len(r.TransactionMarker)}, {PresenceControlType, len(r.ControlType)},
		{PresenceControlKey, len(r.ControlKey)}, {PresenceControlValue, len(r.ControlValue)},
		{PresenceEventID, len(r.EventID)}, {PresencePayloadDigest, len(r.PayloadDigest)},
	}
	for _, s := range strs {
		if p&s.bit != 0 {
			n += 4 + s.l
		}
	}
	if p&PresenceSchemaVersion != 0 {
		n += 4
	}
	if p&PresenceAggregateVersion != 0 {
		n += 8
	}
	if p&PresenceControlVersion != 0 {
		n += 2
	}
	if p&PresenceControlCoordinatorEpoch != 0 {
		n += 8
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
	if p&PresenceTimestamp != 0 {
		b = appendU64(b, uint64(r.Timestamp))
	}
	if p&PresenceProducer != 0 {
		b = appendString(b, r.ProducerID)
		b = appendU64(b, r.SeqNum)
		b = appendU64(b, uint64(r.Epoch))
	}
	if p&PresenceKey != 0 {
		b = appendString(b, r.Key)
	}
	if p&PresenceEventType != 0 {
		b = appendString(b, r.EventType)
	}
	if p&PresenceSchemaVersion != 0 {
		b = appendU32(b, r.SchemaVersion)
	}
	if p&PresenceAggregateVersion != 0 {
		b = appendU64(b, r.AggregateVersion)
	}
	if p&PresenceMetadata != 0 {
		b = appendString(b, r.Metadata)
	}
	if p&PresenceTransactionalID != 0 {
		b = appendString(b, r.TransactionalID)
	}
	if p&PresenceTransactionState != 0 {
		b = appendString(b, r.TransactionState)
	}
	if p&PresenceTransactionMarker != 0 {
		b = appendString(b, r.TransactionMarker)
	}
	if p&PresenceControlType != 0 {
		b = appendString(b, r.ControlType)
	}
	if p&PresenceControlVersion != 0 {
		b = appendU16(b, uint16(r.ControlVersion))
	}
	if p&PresenceControlCoordinatorEpoch != 0 {
		b = appendU64(b, uint64(r.ControlCoordinatorEpoch))
	}
	if p&PresenceControlKey != 0 {
		b = appendBytes(b, r.ControlKey)
	}
	if p&PresenceControlValue != 0 {
		b = appendBytes(b, r.ControlValue)
	}
	if p&PresenceEventID != 0 {
		b = appendString(b, r.EventID)
	}
	if p&PresencePayloadDigest != 0 {
		b = appendString(b, r.PayloadDigest)
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

package wire

import "slices"

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

// layout returns the presence bitmap the encoder writes for r and the encoded
// size of r with a topic of topicLen bytes, in one pass over the fields (the
// encoder runs once per record of every batch, so no table of optional
// fields is built).
func (r *Record) layout(topicLen int) (p uint64, size int) {
	size = recordFixed + topicLen + len(r.Payload)
	if r.Timestamp != 0 {
		p |= PresenceTimestamp
		size += 8
	}
	if r.ProducerID != "" || r.SeqNum != 0 || r.Epoch != 0 {
		p |= PresenceProducer
		size += 4 + len(r.ProducerID) + 16
	}
	if r.Key != "" {
		p |= PresenceKey
		size += 4 + len(r.Key)
	}
	if r.EventType != "" {
		p |= PresenceEventType
		size += 4 + len(r.EventType)
	}
	if r.SchemaVersion != 0 {
		p |= PresenceSchemaVersion
		size += 4
	}
	if r.AggregateVersion != 0 {
		p |= PresenceAggregateVersion
		size += 8
	}
	if r.Metadata != "" {
		p |= PresenceMetadata
		size += 4 + len(r.Metadata)
	}
	if r.TransactionalID != "" {
		p |= PresenceTransactionalID
		size += 4 + len(r.TransactionalID)
	}
	if r.TransactionState != "" {
		p |= PresenceTransactionState
		size += 4 + len(r.TransactionState)
	}
	if r.TransactionMarker != "" {
		p |= PresenceTransactionMarker
		size += 4 + len(r.TransactionMarker)
	}
	if r.ControlType != "" {
		p |= PresenceControlType
		size += 4 + len(r.ControlType)
	}
	if r.ControlVersion != 0 {
		p |= PresenceControlVersion
		size += 2
	}
	if r.ControlCoordinatorEpoch != 0 {
		p |= PresenceControlCoordinatorEpoch
		size += 8
	}
	// ControlKey and ControlValue are present when non-nil, so
	// present-but-empty survives a round trip.
	if r.ControlKey != nil {
		p |= PresenceControlKey
		size += 4 + len(r.ControlKey)
	}
	if r.ControlValue != nil {
		p |= PresenceControlValue
		size += 4 + len(r.ControlValue)
	}
	if r.EventID != "" {
		p |= PresenceEventID
		size += 4 + len(r.EventID)
	}
	if r.PayloadDigest != "" {
		p |= PresencePayloadDigest
		size += 4 + len(r.PayloadDigest)
	}
	return p, size
}

// Presence returns the presence bitmap the encoder writes for r.
func (r *Record) Presence() uint64 {
	p, _ := r.layout(len(r.Topic))
	return p
}

// recordEncoding is what check decided for one record: the version and
// presence to write and the encoded size (without a length prefix).
type recordEncoding struct {
	version  uint16
	presence uint64
	size     int
}

// check validates what the encoder writes for r with a topic of topicLen
// bytes.
func (r *Record) check(topicLen int) (recordEncoding, error) {
	fail := func(reason, msg string, kv ...string) (recordEncoding, error) {
		return recordEncoding{}, encodeError(payloadRecord, reason, msg, kv...)
	}
	p, size := r.layout(topicLen)
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
	// The transactional strings are empty in most records: test presence
	// before their value sets.
	if p&(PresenceTransactionState|PresenceTransactionMarker|PresenceControlType) != 0 {
		if !validTxnValue(8, r.TransactionState) {
			return fail("bad_value", "transaction_state outside its value set", "value", r.TransactionState)
		}
		if !validTxnValue(9, r.TransactionMarker) {
			return fail("bad_value", "transaction_marker outside its value set", "value", r.TransactionMarker)
		}
		if !validTxnValue(10, r.ControlType) {
			return fail("bad_value", "control_batch_type outside its value set", "value", r.ControlType)
		}
	}
	if size > PublicMaxPayload {
		return fail("too_large", "record above the public 64 MiB bound", "length", itoa(size))
	}
	return recordEncoding{version: v, presence: p, size: size}, nil
}

// AppendTo appends the encoded record (without a length prefix).
func (r *Record) AppendTo(dst []byte) ([]byte, error) {
	e, err := r.check(len(r.Topic))
	if err != nil {
		return dst, err
	}
	return r.appendChecked(slices.Grow(dst, e.size), r.Topic, r.Partition, e), nil
}

// appendChecked appends r as check decided, with the given topic and
// partition (a batch's records may leave them to the header).
func (r *Record) appendChecked(b []byte, topic string, partition int32, e recordEncoding) []byte {
	p := e.presence
	b = appendU16(b, e.version)
	b = appendU64(b, p)
	b = appendString(b, topic)
	b = appendU32(b, uint32(partition))
	b = appendU64(b, r.Offset)
	b = appendBytes(b, r.Payload)
	if p == 0 {
		return b
	}
	// Optional fields follow in bit order.
	if p&PresenceTimestamp != 0 {
		b = appendU64(b, uint64(r.Timestamp))
	}
	if p&PresenceProducer != 0 {
		b = appendU64(appendU64(appendString(b, r.ProducerID), r.SeqNum), uint64(r.Epoch))
	}
	if p&PresenceKey != 0 {
		b = appendString(b, r.Key)
	}
	if p&^(PresenceTimestamp|PresenceProducer|PresenceKey) == 0 {
		return b
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

// DecodeRecord decodes one record (without its length prefix) into a Record
// that owns its data. Errors are errcode.DecodeFailed.
func DecodeRecord(b []byte) (Record, error) {
	v, err := ParseRecord(b)
	if err != nil {
		return Record{}, err
	}
	return v.Record(), nil
}

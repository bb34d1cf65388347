package offsetlog

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/strataio/strata/coordinatord/internal/group"
	"github.com/strataio/strata/libs/errcode"
	"github.com/strataio/strata/libs/wire"
)

// FormatVersion is the "v" of every record this build writes and reads.
const FormatVersion = 1

// Record types.
const (
	TypeGroup           = "group"
	TypeGroupTombstone  = "group_tombstone"
	TypeOffset          = "offset"
	TypeOffsetTombstone = "offset_tombstone"
	TypeOwner           = "owner"
	// A pending transactional offset mark: partitions a transaction staged
	// offsets of, until its commit writes them or its abort drops them
	// (FetchOffset answers unstable_offset_commit meanwhile).
	TypeTxnMark      = "txn_offset_mark"
	TypeTxnMarkClear = "txn_offset_mark_clear"
)

// Value is the JSON value of a record. Fields are used per Type.
type Value struct {
	V           int               `json:"v"`
	Type        string            `json:"type"`
	Group       string            `json:"group,omitempty"`
	Incarnation uint64            `json:"incarnation,omitempty"`
	Selector    *group.Selector   `json:"selector,omitempty"`
	Partitions  []group.TP        `json:"partitions,omitempty"`
	Lifecycle   map[string]uint64 `json:"lifecycle,omitempty"`
	Topic       string            `json:"topic,omitempty"`
	Partition   int32             `json:"partition,omitempty"`
	Offset      uint64            `json:"offset,omitempty"`
	Node        string            `json:"node,omitempty"`
	// Epoch is the owner's producer epoch (owner) or the transaction's
	// producer epoch (marks).
	Epoch           int64  `json:"epoch,omitempty"`
	TransactionalID string `json:"transactional_id,omitempty"`
	ProducerID      string `json:"producer_id,omitempty"`
	// MarkedMs is when the mark was first written (coordinator clock).
	MarkedMs int64 `json:"marked_ms,omitempty"`
}

// GroupKey is the key of a group's registration and tombstone.
func GroupKey(g string) string { return "group/" + strconv.Quote(g) }

// OffsetKey is the key of a committed offset.
func OffsetKey(g string, tp group.TP) string { return offsetKey(strconv.Quote(g), tp) }

// offsetKey is OffsetKey with the group name already quoted.
func offsetKey(quotedGroup string, tp group.TP) string {
	return "offset/" + quotedGroup + "/" + tp.Topic + "/" + strconv.FormatInt(int64(tp.Partition), 10)
}

// TxnMarkKey is the key of a transaction's pending offset mark on a group:
// one per (group, transactional_id), as a transactional_id runs one
// transaction at a time.
func TxnMarkKey(g, txnID string) string {
	return "txnmark/" + strconv.Quote(g) + "/" + strconv.Quote(txnID)
}

// TxnMark builds a pending mark of g's partitions parts for the
// transaction m.
func TxnMark(g string, inc uint64, txnID string, m group.TxnMark) Value {
	return Value{V: FormatVersion, Type: TypeTxnMark, Group: g, Incarnation: inc, TransactionalID: txnID,
		ProducerID: m.ProducerID, Epoch: m.Epoch, Partitions: m.Partitions, MarkedMs: m.Marked.UnixMilli()}
}

// TxnMarkClear builds the record that ends transaction txnID's mark on g.
func TxnMarkClear(g string, inc uint64, txnID string) Value {
	return Value{V: FormatVersion, Type: TypeTxnMarkClear, Group: g, Incarnation: inc, TransactionalID: txnID}
}

// OwnerKey is the key of takeover markers.
const OwnerKey = "owner"

// Registration builds a group registration value.
func Registration(g *group.Group) Value {
	sel := g.Selector
	return Value{V: FormatVersion, Type: TypeGroup, Group: g.Name, Incarnation: g.Incarnation, Selector: &sel, Partitions: g.Partitions, Lifecycle: g.Lifecycle}
}

// Offset builds a committed-offset value.
func Offset(g string, inc uint64, tp group.TP, off uint64) Value {
	return Value{V: FormatVersion, Type: TypeOffset, Group: g, Incarnation: inc, Topic: tp.Topic, Partition: tp.Partition, Offset: off}
}

// Key returns the record key of v.
func (v Value) Key() string {
	switch v.Type {
	case TypeGroup, TypeGroupTombstone:
		return GroupKey(v.Group)
	case TypeOffset, TypeOffsetTombstone:
		return OffsetKey(v.Group, group.TP{Topic: v.Topic, Partition: v.Partition})
	case TypeTxnMark, TypeTxnMarkClear:
		return TxnMarkKey(v.Group, v.TransactionalID)
	}
	return OwnerKey
}

func corrupt(reason string, offset uint64, msg string) *errcode.Error {
	return errcode.StorageCorrupt.New(msg, "reason", reason, "topic", "__consumer_offsets", "offset", strconv.FormatUint(offset, 10))
}

// Decode parses and checks one record's key and value. Errors are
// storage_corrupt with a reason.
func Decode(key, payload []byte, offset uint64) (Value, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(payload, &probe); err != nil {
		return Value{}, corrupt("malformed_value", offset, "record value is not a JSON object")
	}
	if _, ok := probe["v"]; !ok {
		return Value{}, corrupt("unversioned_record", offset, "record value has no format version")
	}
	var v Value
	dec := json.NewDecoder(bytes.NewReader(payload))
	if err := dec.Decode(&v); err != nil {
		return Value{}, corrupt("malformed_value", offset, "record value does not decode: "+err.Error())
	}
	if v.V != FormatVersion {
		return Value{}, corrupt("unsupported_version", offset, "record format version "+strconv.Itoa(v.V)+" is not supported")
	}
	switch v.Type {
	case TypeGroup:
		if v.Selector == nil || v.Selector.Validate() != nil || v.Incarnation == 0 {
			return Value{}, corrupt("inconsistent_record", offset, "group registration lacks a valid selector or incarnation")
		}
	case TypeGroupTombstone, TypeOffset, TypeOffsetTombstone:
		if v.Incarnation == 0 {
			return Value{}, corrupt("inconsistent_record", offset, "record lacks an incarnation")
		}
	case TypeTxnMark:
		if v.Incarnation == 0 || v.TransactionalID == "" || v.ProducerID == "" || v.Epoch <= 0 || len(v.Partitions) == 0 {
			return Value{}, corrupt("inconsistent_record", offset, "transactional offset mark lacks its transaction or partitions")
		}
	case TypeTxnMarkClear:
		if v.Incarnation == 0 || v.TransactionalID == "" {
			return Value{}, corrupt("inconsistent_record", offset, "transactional offset mark clear lacks its transaction")
		}
	case TypeOwner:
	default:
		return Value{}, corrupt("unknown_record_type", offset, "unknown record type "+strconv.Quote(v.Type))
	}
	if v.Type != TypeOwner && v.Group == "" {
		return Value{}, corrupt("inconsistent_record", offset, "record lacks a group")
	}
	if string(key) != v.Key() {
		return Value{}, corrupt("key_mismatch", offset, "record key does not match its value")
	}
	return v, nil
}

// encodeSet builds a record set ([u32 length][record] entries) of values.
func encodeSet(topic string, partition int32, nowMs int64, vals []Value) ([]byte, error) {
	var enc setEncoder
	out := make([]byte, 0, len(vals)*(160+2*len(topic)))
	var payload []byte
	for _, v := range vals {
		var err error
		if payload, err = enc.value(payload[:0], v); err != nil {
			return nil, err
		}
		r := wire.Record{Topic: topic, Partition: partition, Payload: payload, Key: enc.key(v), Timestamp: nowMs}
		at := len(out)
		out = append(out, 0, 0, 0, 0)
		if out, err = r.AppendTo(out); err != nil {
			return nil, err
		}
		binary.BigEndian.PutUint32(out[at:], uint32(len(out)-at-4))
	}
	return out, nil
}

// setEncoder encodes the values of one record set. Offset values are the
// bulk (a BATCH_COMMIT writes up to 1,024 of one group and topic), so they
// are appended without reflection, their strings encoded once per set; the
// bytes are exactly what encoding/json writes for them (tested), so the
// format has one definition: the Value struct. Other types use
// encoding/json.
type setEncoder struct {
	quoted map[string][]byte // JSON string encodings, by value
	keys   map[string]string // strconv.Quote of group names, by value
}

// plainOffset reports whether v carries exactly the fields of an offset
// record, so that the hand-written encoding applies.
func plainOffset(v Value) bool {
	return v.Type == TypeOffset && v.Selector == nil && v.Partitions == nil && v.Lifecycle == nil && v.Node == "" && v.Epoch == 0 &&
		v.TransactionalID == "" && v.ProducerID == "" && v.MarkedMs == 0
}

func (e *setEncoder) value(dst []byte, v Value) ([]byte, error) {
	if !utf8.ValidString(v.Group) || !utf8.ValidString(v.Topic) || !utf8.ValidString(v.TransactionalID) {
		// encoding/json would replace the bad bytes, and the record would
		// then not match its key on replay (storage_corrupt): never write it.
		return nil, errcode.InvalidParameter.New("group and topic names must be UTF-8", "param", "group")
	}
	if !plainOffset(v) {
		b, err := json.Marshal(v)
		return append(dst, b...), err
	}
	// Field order and omitempty as in Value's struct tags.
	dst = append(dst, `{"v":`...)
	dst = strconv.AppendInt(dst, int64(v.V), 10)
	dst = append(dst, `,"type":"offset"`...)
	if v.Group != "" {
		dst = append(dst, `,"group":`...)
		dst = append(dst, e.quote(v.Group)...)
	}
	if v.Incarnation != 0 {
		dst = append(dst, `,"incarnation":`...)
		dst = strconv.AppendUint(dst, v.Incarnation, 10)
	}
	if v.Topic != "" {
		dst = append(dst, `,"topic":`...)
		dst = append(dst, e.quote(v.Topic)...)
	}
	if v.Partition != 0 {
		dst = append(dst, `,"partition":`...)
		dst = strconv.AppendInt(dst, int64(v.Partition), 10)
	}
	if v.Offset != 0 {
		dst = append(dst, `,"offset":`...)
		dst = strconv.AppendUint(dst, v.Offset, 10)
	}
	return append(dst, '}'), nil
}

// quote returns s as encoding/json writes a string.
func (e *setEncoder) quote(s string) []byte {
	if q, ok := e.quoted[s]; ok {
		return q
	}
	q, _ := json.Marshal(s) // a string always marshals
	if e.quoted == nil {
		e.quoted = map[string][]byte{}
	}
	e.quoted[s] = q
	return q
}

// key is v.Key() with the group name quoted once per set.
func (e *setEncoder) key(v Value) string {
	if v.Type != TypeOffset && v.Type != TypeOffsetTombstone {
		return v.Key()
	}
	q, ok := e.keys[v.Group]
	if !ok {
		q = strconv.Quote(v.Group)
		if e.keys == nil {
			e.keys = map[string]string{}
		}
		e.keys[v.Group] = q
	}
	return offsetKey(q, group.TP{Topic: v.Topic, Partition: v.Partition})
}

// rawRecord is one record of a fetched set.
type rawRecord struct {
	offset  uint64
	key     []byte
	payload []byte
	control bool
}

// decodeSet walks a fetched record set.
func decodeSet(b []byte, fromOffset uint64) ([]rawRecord, error) {
	var out []rawRecord
	for pos := 0; pos < len(b); {
		if len(b)-pos < 4 {
			return nil, corrupt("truncated_record_set", fromOffset, "record length prefix truncated")
		}
		l := int(binary.BigEndian.Uint32(b[pos:]))
		pos += 4
		if l > len(b)-pos {
			return nil, corrupt("truncated_record_set", fromOffset, "record exceeds the fetched bytes")
		}
		v, err := wire.ParseRecord(b[pos : pos+l])
		if err != nil {
			return nil, corrupt("undecodable_record", fromOffset, "record does not decode: "+err.Error())
		}
		pos += l
		k, _ := v.Key()
		out = append(out, rawRecord{offset: v.Offset(), key: k, payload: v.Payload(), control: v.IsControl()})
	}
	return out, nil
}

// isOffsetKey reports whether key names an offset record.
func isOffsetKey(key string) bool { return strings.HasPrefix(key, "offset/") }

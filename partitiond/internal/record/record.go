package record

import (
	"encoding/binary"

	"github.com/strataio/strata/libs/wire"
)

// Info is what the log reads from one encoded record. Byte slices alias the
// record's bytes.
type Info struct {
	// OffsetPos and PartitionPos are the byte positions of the u64 offset and
	// the i32 partition inside the record, where the log patches them.
	OffsetPos    int
	PartitionPos int
	Topic        []byte
	Key          []byte
	HasKey       bool
	PayloadLen   int
	Timestamp    int64
	HasTimestamp bool
	ProducerID   []byte
	Sequence     uint64
	Epoch        int64
	HasProducer  bool
	// Transactional is set when the record carries any transaction metadata
	// (transactional_id, transaction_state or transaction_marker).
	Transactional bool
	// Control is set for transaction control markers.
	Control bool
}

// Tombstone reports whether the record deletes its key: a key is present
// and the payload is empty.
func (i *Info) Tombstone() bool { return i.HasKey && i.PayloadLen == 0 }

// Inspector reads Info from one encoded record (without its length prefix).
// A record that does not decode gets a typed *errcode.Error.
type Inspector interface {
	Inspect(rec []byte) (Info, error)
}

// Wire is the Inspector backed by libs/wire. It validates the whole record
// (version, presence bits, every length, transactional value sets, no
// trailing bytes).
type Wire struct{}

// Inspect implements Inspector.
func (Wire) Inspect(rec []byte) (Info, error) {
	v, err := wire.ParseRecord(rec)
	if err != nil {
		return Info{}, err
	}
	in := Info{
		OffsetPos:    v.OffsetPos(),
		PartitionPos: v.PartitionPos(),
		Topic:        v.Topic(),
		PayloadLen:   len(v.Payload()),
	}
	in.Key, in.HasKey = v.Key()
	in.Timestamp, in.HasTimestamp = v.Timestamp()
	in.ProducerID, in.Sequence, in.Epoch, in.HasProducer = v.Producer()
	p := v.Presence()
	in.Transactional = p&(wire.PresenceTransactionalID|wire.PresenceTransactionState|wire.PresenceTransactionMarker) != 0
	in.Control = v.IsControl()
	return in, nil
}

// SetOffset writes off into the record at in.OffsetPos.
func SetOffset(rec []byte, in *Info, off uint64) {
	binary.BigEndian.PutUint64(rec[in.OffsetPos:], off)
}

// SetPartition writes p into the record at in.PartitionPos.
func SetPartition(rec []byte, in *Info, p int32) {
	binary.BigEndian.PutUint32(rec[in.PartitionPos:], uint32(p))
}

// OffsetOf reads the offset of an encoded record that is already known to be
// well formed (it was validated when stored): version u16, presence u64,
// topic (u32 length + bytes), partition i32, offset u64.
func OffsetOf(rec []byte) uint64 {
	tl := int(binary.BigEndian.Uint32(rec[10:]))
	return binary.BigEndian.Uint64(rec[14+tl+4:])
}

// MinRecordLen is the smallest well-formed record: the fixed fields with an
// empty topic and payload.
const MinRecordLen = 30

// Next splits the first length-prefixed record off a record set. It returns
// the record (without prefix), the rest of the set, and false when the set
// is empty or malformed (ok is false and malformed is true for the latter).
func Next(set []byte) (rec, rest []byte, ok, malformed bool) {
	if len(set) == 0 {
		return nil, nil, false, false
	}
	if len(set) < 4 {
		return nil, nil, false, true
	}
	n := binary.BigEndian.Uint32(set)
	if uint64(n) > uint64(len(set)-4) || n < MinRecordLen {
		return nil, nil, false, true
	}
	return set[4 : 4+n], set[4+n:], true, false
}

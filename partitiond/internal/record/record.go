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
	var in Info
	err := InspectInto(rec, &in)
	return in, err
}

// InspectInto is Wire's Inspect writing into *in, which it overwrites
// whole: the append path reuses one Info for every record of a batch
// instead of copying one out per record.
func InspectInto(rec []byte, in *Info) error {
	if inspectCommon(rec, in) {
		return nil
	}
	var err error
	*in, err = inspectFull(rec)
	return err
}

// commonPresence are the optional fields of nearly every published record:
// timestamp, producer (id, sequence, epoch) and key.
const commonPresence = wire.PresenceTimestamp | wire.PresenceProducer | wire.PresenceKey

// inspectCommon reads a well-formed record that carries no optional field
// beyond commonPresence in one pass, without wire.RecordView's table of
// field positions: the hot path of every appended record. Anything else
// (another field, any length that does not fit, trailing bytes, an unknown
// version) is not ok and goes to inspectFull, which decides and names the
// error; for a record it accepts, the Info is the one inspectFull returns
// (FuzzInspect compares the two).
func inspectCommon(rec []byte, in *Info) bool {
	const fixed = 30 // version 2, presence 8, topic length 4, partition 4, offset 8, payload length 4
	n := len(rec)
	if n < fixed {
		return false
	}
	if v := binary.BigEndian.Uint16(rec); v != wire.RecordVersion2 && v != wire.RecordVersion3 {
		return false
	}
	presence := binary.BigEndian.Uint64(rec[2:])
	if presence&^commonPresence != 0 {
		return false
	}
	tl := uint64(binary.BigEndian.Uint32(rec[10:]))
	if tl > uint64(n-fixed) {
		return false
	}
	pos := 14 + int(tl)
	*in = Info{PartitionPos: pos, OffsetPos: pos + 4, Topic: rec[14:pos:pos]}
	pos += 12
	pl := uint64(binary.BigEndian.Uint32(rec[pos:]))
	pos += 4
	if pl > uint64(n-pos) {
		return false
	}
	in.PayloadLen = int(pl)
	pos += int(pl)
	if presence&wire.PresenceTimestamp != 0 {
		if n-pos < 8 {
			return false
		}
		in.Timestamp, in.HasTimestamp = int64(binary.BigEndian.Uint64(rec[pos:])), true
		pos += 8
	}
	if presence&wire.PresenceProducer != 0 {
		if n-pos < 4 {
			return false
		}
		l := uint64(binary.BigEndian.Uint32(rec[pos:]))
		if l+16 > uint64(n-pos-4) {
			return false
		}
		e := pos + 4 + int(l)
		in.ProducerID, in.HasProducer = rec[pos+4:e:e], true
		in.Sequence, in.Epoch = binary.BigEndian.Uint64(rec[e:]), int64(binary.BigEndian.Uint64(rec[e+8:]))
		pos = e + 16
	}
	if presence&wire.PresenceKey != 0 {
		if n-pos < 4 {
			return false
		}
		l := uint64(binary.BigEndian.Uint32(rec[pos:]))
		if l > uint64(n-pos-4) {
			return false
		}
		e := pos + 4 + int(l)
		in.Key, in.HasKey = rec[pos+4:e:e], true
		pos = e
	}
	return pos == n
}

// inspectFull is Inspect through wire.ParseRecord: every record version and
// field, and the typed error of a record that does not decode.
func inspectFull(rec []byte) (Info, error) {
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

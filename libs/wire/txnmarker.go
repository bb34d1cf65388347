package wire

import (
	"encoding/binary"
	"strconv"

	"github.com/strataio/strata/libs/errcode"
)

// Transaction control records (SERVICE-SPEC 4.7 "Marker metadata"): a commit
// or abort marker is one record in a control batch of its own, with
// control_batch_type=transaction, control_batch_version=2, the coordinator
// epoch, and a fixed-layout key and value:
//
//	key   = int16 version (0), int16 markerType (0 abort, 1 commit)
//	value = int16 version (0), int32 coordinatorEpoch
//
// The marker types follow Kafka's numbering so tools that know one know both.
const (
	// TxnControlBatchVersion is control_batch_version of every marker.
	TxnControlBatchVersion int16 = 2
	// TxnMarkerAbortType and TxnMarkerCommitType are the key's markerType.
	TxnMarkerAbortType  int16 = 0
	TxnMarkerCommitType int16 = 1
	// TxnMarkerPayload is the payload of a marker record: Python SDK batch
	// decoders drop records with exactly this payload, so markers stay out of
	// their read_uncommitted message lists (WIRE-V2 7.2).
	TxnMarkerPayload = "__cursus_txn_control_marker__"

	txnMarkerKeyLen   = 4
	txnMarkerValueLen = 6
)

// TxnMarker is the decoded content of a marker's key and value.
type TxnMarker struct {
	Commit           bool
	CoordinatorEpoch int32
}

// AppendKey appends the marker key.
func (m TxnMarker) AppendKey(dst []byte) []byte {
	t := TxnMarkerAbortType
	if m.Commit {
		t = TxnMarkerCommitType
	}
	dst = binary.BigEndian.AppendUint16(dst, 0)
	return binary.BigEndian.AppendUint16(dst, uint16(t))
}

// AppendValue appends the marker value.
func (m TxnMarker) AppendValue(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, 0)
	return binary.BigEndian.AppendUint32(dst, uint32(m.CoordinatorEpoch))
}

// ParseTxnMarker decodes a marker's key and value. Versions other than 0, an
// unknown marker type or any length other than the fixed one are
// malformed_input.
func ParseTxnMarker(key, value []byte) (TxnMarker, error) {
	bad := func(field, msg string) (TxnMarker, error) {
		return TxnMarker{}, errcode.MalformedInput.New("transaction marker "+field+": "+msg, "field", field)
	}
	if len(key) != txnMarkerKeyLen {
		return bad("control_batch_key", "length "+strconv.Itoa(len(key))+", want 4")
	}
	if len(value) != txnMarkerValueLen {
		return bad("control_batch_value", "length "+strconv.Itoa(len(value))+", want 6")
	}
	if v := binary.BigEndian.Uint16(key); v != 0 {
		return bad("control_batch_key", "version "+strconv.Itoa(int(v)))
	}
	if v := binary.BigEndian.Uint16(value); v != 0 {
		return bad("control_batch_value", "version "+strconv.Itoa(int(v)))
	}
	var m TxnMarker
	switch int16(binary.BigEndian.Uint16(key[2:])) {
	case TxnMarkerAbortType:
	case TxnMarkerCommitType:
		m.Commit = true
	default:
		return bad("control_batch_key", "unknown marker type")
	}
	m.CoordinatorEpoch = int32(binary.BigEndian.Uint32(value[2:]))
	return m, nil
}

// TxnMarkerRecord builds the marker record for a partition: the spec's
// control fields, the producer identity (sequence 0: markers are not
// deduplicated by sequence), the transactional id, and the marker and
// state strings older SDKs read.
func TxnMarkerRecord(topic string, partition int32, producerID string, epoch int64, transactionalID string, m TxnMarker, timestampMs int64) Record {
	marker, state := TxnMarkerAbort, TxnStateAborted
	if m.Commit {
		marker, state = TxnMarkerCommit, TxnStateCommitted
	}
	return Record{
		Topic: topic, Partition: partition, Payload: []byte(TxnMarkerPayload), Timestamp: timestampMs,
		ProducerID: producerID, Epoch: epoch, TransactionalID: transactionalID,
		TransactionState: state, TransactionMarker: marker, ControlType: ControlTypeTransaction,
		ControlVersion: TxnControlBatchVersion, ControlCoordinatorEpoch: int64(m.CoordinatorEpoch),
		ControlKey: m.AppendKey(nil), ControlValue: m.AppendValue(nil),
	}
}

package fsm

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// Snapshot format (spec 9): version 9 only, committed-HWM provenance
// version 1.
const (
	SnapshotFormatVersion = 9
	CommittedHWMVersion   = 1
)

// snapshotMagic opens every metad snapshot file.
var snapshotMagic = [8]byte{'S', 'T', 'R', 'A', 'T', 'A', 'M', 'S'}

const (
	snapshotHeaderLen = 24 // magic, format version, HWM version, body length
	// maxSnapshotBody bounds what Restore reads (1 GiB): metadata, not data.
	maxSnapshotBody = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodeSnapshot writes s in the snapshot format:
//
//	0..7    magic "STRATAMS"
//	8..11   format version (9), big-endian
//	12..15  committed HWM version (1)
//	16..23  body length
//	24..    body: FsmSnapshot, deterministic protobuf
//	last 4  CRC32C of the body
//
// The body repeats both versions and carries one CommittedHwmRecord per
// partition: the explicit, numeric committed HWM provenance spec 9 asks for.
func EncodeSnapshot(w io.Writer, s *State) error {
	return encodeSnapshot(w, s, 0)
}

// encodeSnapshot is EncodeSnapshot recording the raft index the state
// reflects.
func encodeSnapshot(w io.Writer, s *State, appliedIndex uint64) error {
	b := snapshotBody(s)
	b.AppliedIndex = appliedIndex
	body, err := proto.MarshalOptions{Deterministic: true}.Marshal(b)
	if err != nil {
		return fmt.Errorf("fsm: encode snapshot: %w", err)
	}
	hdr := make([]byte, 0, snapshotHeaderLen)
	hdr = append(hdr, snapshotMagic[:]...)
	hdr = binary.BigEndian.AppendUint32(hdr, SnapshotFormatVersion)
	hdr = binary.BigEndian.AppendUint32(hdr, CommittedHWMVersion)
	hdr = binary.BigEndian.AppendUint64(hdr, uint64(len(body)))
	if _, err := w.Write(hdr); err != nil {
		return fmt.Errorf("fsm: write snapshot: %w", err)
	}
	if _, err := w.Write(body); err != nil {
		return fmt.Errorf("fsm: write snapshot: %w", err)
	}
	if _, err := w.Write(binary.BigEndian.AppendUint32(nil, crc32.Checksum(body, castagnoli))); err != nil {
		return fmt.Errorf("fsm: write snapshot: %w", err)
	}
	return nil
}

func snapshotBody(s *State) *metav1.FsmSnapshot {
	b := &metav1.FsmSnapshot{
		FormatVersion:                SnapshotFormatVersion,
		CommittedHwmVersion:          CommittedHWMVersion,
		Revision:                     s.revision,
		Initialized:                  s.initialized,
		TransactionCoordinatorShards: s.txnShards,
		CreatedUnixMs:                s.createdUnixMs,
		Topics:                       s.Topics(),
		Nodes:                        s.Nodes(metav1.NodeRole_NODE_ROLE_UNSPECIFIED, false),
	}
	for _, t := range b.Topics {
		for _, p := range t.GetPartitions() {
			b.CommittedHwms = append(b.CommittedHwms, &metav1.CommittedHwmRecord{
				Topic: t.GetConfig().GetName(), Partition: p.GetId(),
				LifecycleEpoch: t.GetConfig().GetLifecycleEpoch(), CommittedHwm: p.GetCommittedHwm(),
			})
		}
	}
	return b
}

func unsupported(msg string, kv ...string) error {
	return errcode.UnsupportedRecoveryProtocol.New(msg+"; recovery is a clean bootstrap of all persistent state", kv...)
}

// DecodeSnapshot reads a snapshot written by EncodeSnapshot. Another format,
// another HWM provenance version or a partition without an explicit HWM
// record is unsupported_recovery_protocol (spec 7); a damaged file is
// storage_corrupt. The restored state is checked for the invariants the
// handlers rely on, so a bad snapshot is refused instead of half-loaded.
func DecodeSnapshot(r io.Reader) (*State, error) {
	st, _, err := decodeSnapshot(r)
	return st, err
}

func decodeSnapshot(r io.Reader) (*State, uint64, error) {
	hdr, err := readHeader(r)
	if err != nil {
		return nil, 0, err
	}
	n := binary.BigEndian.Uint64(hdr[16:24])
	if n > maxSnapshotBody {
		return nil, 0, errcode.StorageCorrupt.New("metadata snapshot body length out of range", "length", strconv.FormatUint(n, 10))
	}
	// Read what is there rather than allocating the declared length up
	// front: a damaged length field must not cost a gigabyte.
	buf, err := io.ReadAll(io.LimitReader(r, int64(n)+4))
	if err != nil {
		return nil, 0, errcode.StorageCorrupt.New("metadata snapshot is unreadable", "reason", err.Error())
	}
	if uint64(len(buf)) != n+4 {
		return nil, 0, errcode.StorageCorrupt.New("metadata snapshot is truncated", "length", strconv.FormatUint(n, 10), "read", strconv.Itoa(len(buf)))
	}
	body := buf[:n]
	if got, want := crc32.Checksum(body, castagnoli), binary.BigEndian.Uint32(buf[n:]); got != want {
		return nil, 0, errcode.StorageCorrupt.New("metadata snapshot checksum mismatch", "reason", "crc32c")
	}
	var b metav1.FsmSnapshot
	if err := proto.Unmarshal(body, &b); err != nil {
		return nil, 0, errcode.StorageCorrupt.New("metadata snapshot body does not decode", "reason", err.Error())
	}
	if b.GetFormatVersion() != SnapshotFormatVersion || b.GetCommittedHwmVersion() != CommittedHWMVersion {
		return nil, 0, unsupported("metadata snapshot body versions disagree with its header")
	}
	st, err := stateFromBody(&b)
	return st, b.GetAppliedIndex(), err
}

func stateFromBody(b *metav1.FsmSnapshot) (*State, error) {
	st := newState()
	st.revision = b.GetRevision()
	st.initialized = b.GetInitialized()
	st.txnShards = b.GetTransactionCoordinatorShards()
	st.createdUnixMs = b.GetCreatedUnixMs()
	bad := func(msg string, kv ...string) error {
		return errcode.StorageCorrupt.New("metadata snapshot: "+msg, kv...)
	}
	for _, n := range b.GetNodes() {
		if err := validateNode(n); err != nil {
			return nil, bad("invalid node", "node", n.GetId(), "reason", err.Error())
		}
		if _, dup := st.nodes[n.GetId()]; dup {
			return nil, bad("duplicate node", "node", n.GetId())
		}
		st.nodes[n.GetId()] = n
	}
	type pkey struct {
		topic string
		id    int32
	}
	hwm := map[pkey]*metav1.CommittedHwmRecord{}
	for _, r := range b.GetCommittedHwms() {
		k := pkey{r.GetTopic(), r.GetPartition()}
		if _, dup := hwm[k]; dup {
			return nil, bad("duplicate committed HWM record", "topic", r.GetTopic(), "partition", itoa(r.GetPartition()))
		}
		hwm[k] = r
	}
	for _, t := range b.GetTopics() {
		cfg := t.GetConfig()
		name := cfg.GetName()
		if !ValidTopicName(name) {
			return nil, bad("invalid topic name", "topic", name)
		}
		if _, dup := st.topics[name]; dup {
			return nil, bad("duplicate topic", "topic", name)
		}
		if err := validateConfig(cfg); err != nil {
			return nil, bad("invalid topic definition", "topic", name, "reason", err.Error())
		}
		if cfg.GetState() != metav1.TopicState_TOPIC_STATE_ACTIVE && cfg.GetState() != metav1.TopicState_TOPIC_STATE_DELETING {
			return nil, bad("invalid topic state", "topic", name)
		}
		if cfg.GetRevision() == 0 || cfg.GetLifecycleEpoch() == 0 {
			return nil, bad("topic without revision or lifecycle epoch", "topic", name)
		}
		if int32(len(t.GetPartitions())) != cfg.GetPartitions() {
			return nil, bad("partition list does not match the partition count", "topic", name)
		}
		for i, p := range t.GetPartitions() {
			if p.GetId() != int32(i) {
				return nil, bad("partition ids are not dense", "topic", name, "partition", itoa(p.GetId()))
			}
			if len(p.GetReplicas()) == 0 || p.GetLeaderEpoch() == 0 {
				return nil, bad("partition without replicas or leader epoch", "topic", name, "partition", itoa(p.GetId()))
			}
			r, ok := hwm[pkey{name, p.GetId()}]
			if !ok {
				return nil, unsupported("partition metadata without explicit committed-HWM provenance", "topic", name, "partition", itoa(p.GetId()))
			}
			delete(hwm, pkey{name, p.GetId()})
			if r.GetLifecycleEpoch() != cfg.GetLifecycleEpoch() || r.GetCommittedHwm() != p.GetCommittedHwm() {
				return nil, bad("committed HWM record disagrees with the partition", "topic", name, "partition", itoa(p.GetId()))
			}
		}
		st.topics[name] = t
	}
	for k := range hwm {
		return nil, bad("committed HWM record for an unknown partition", "topic", k.topic, "partition", itoa(k.id))
	}
	return st, nil
}

// CheckSnapshotHeader reads only the header of a snapshot and fails with
// unsupported_recovery_protocol when it is not a version-9 metad snapshot with
// committed-HWM provenance version 1.
func CheckSnapshotHeader(r io.Reader) error {
	_, err := readHeader(r)
	return err
}

func readHeader(r io.Reader) ([snapshotHeaderLen]byte, error) {
	var hdr [snapshotHeaderLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return hdr, unsupported("not a strata metadata snapshot (short header)")
	}
	if !bytes.Equal(hdr[:8], snapshotMagic[:]) {
		return hdr, unsupported("not a strata metadata snapshot")
	}
	if v := binary.BigEndian.Uint32(hdr[8:12]); v != SnapshotFormatVersion {
		return hdr, unsupported("metadata snapshot format version "+strconv.FormatUint(uint64(v), 10)+" is not supported (only 9)", "version", strconv.FormatUint(uint64(v), 10))
	}
	if v := binary.BigEndian.Uint32(hdr[12:16]); v != CommittedHWMVersion {
		return hdr, unsupported("committed HWM provenance version "+strconv.FormatUint(uint64(v), 10)+" is not supported (only 1)", "committed_hwm_version", strconv.FormatUint(uint64(v), 10))
	}
	return hdr, nil
}

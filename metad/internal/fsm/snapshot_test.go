package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/strataio/strata/libs/errcode"
	metav1 "github.com/strataio/strata/proto/strata/meta/v1"
)

// populated builds a state touching every kind of object.
func populated(t testing.TB) *h {
	x := newH(t)
	x.init()
	x.partitionds(3)
	x.ok(&metav1.RegisterNodeCommand{Node: coord("c1", DefaultTxnShards), NowUnixMs: x.now})
	x.ok(create("orders", func(r *metav1.CreateTopicRequest) { r.Partitions = ptr[int32](3); r.MinInSyncReplicas = ptr("2") }))
	x.ok(create("gone", func(r *metav1.CreateTopicRequest) { r.Partitions = ptr[int32](1) }))
	x.ok(&metav1.DeleteTopicRequest{Name: "gone"})
	x.ok(&metav1.CheckpointHwmRequest{Topic: "orders", Partition: 1, LeaderEpoch: 1, LifecycleEpoch: 1, Hwm: 77})
	x.ok(&metav1.TruncateTopicRequest{Name: "orders", ExpectedRevision: 1})
	x.ok(&metav1.CheckpointHwmRequest{Topic: "orders", Partition: 2, LeaderEpoch: 2, LifecycleEpoch: 2, Hwm: 5})
	return x
}

func snapshotBytes(t testing.TB, f *FSM) []byte {
	t.Helper()
	s, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := s.Persist(sink); err != nil {
		t.Fatal(err)
	}
	s.Release()
	return sink.Bytes()
}

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	x := populated(t)
	b := snapshotBytes(t, x.f)
	g := New(Options{})
	if err := g.Restore(io.NopCloser(bytes.NewReader(b))); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(g.EncodeState(), x.f.EncodeState()) {
		t.Fatal("restored state differs")
	}
	if g.Revision() != x.f.Revision() {
		t.Fatalf("revision %d, want %d", g.Revision(), x.f.Revision())
	}
	// The restored FSM continues identically.
	cmd := MustEncode(create("orders", func(r *metav1.CreateTopicRequest) { r.Partitions = ptr[int32](5) }))
	ra := x.f.ApplyCommand(1000, cmd)
	rb := g.ApplyCommand(1000, cmd)
	if ra.Err != nil || rb.Err != nil || !bytes.Equal(g.EncodeState(), x.f.EncodeState()) {
		t.Fatalf("diverged after restore: %v %v", ra.Err, rb.Err)
	}
}

func TestSnapshotCarriesExplicitHWMProvenance(t *testing.T) {
	x := populated(t)
	b := snapshotBytes(t, x.f)
	if v := binary.BigEndian.Uint32(b[8:12]); v != 9 {
		t.Fatalf("format version %d", v)
	}
	if v := binary.BigEndian.Uint32(b[12:16]); v != 1 {
		t.Fatalf("committed hwm version %d", v)
	}
	var body metav1.FsmSnapshot
	n := binary.BigEndian.Uint64(b[16:24])
	if err := proto.Unmarshal(b[24:24+n], &body); err != nil {
		t.Fatal(err)
	}
	parts := 0
	for _, tp := range body.GetTopics() {
		parts += len(tp.GetPartitions())
	}
	if len(body.GetCommittedHwms()) != parts {
		t.Fatalf("%d HWM records for %d partitions", len(body.GetCommittedHwms()), parts)
	}
	for _, r := range body.GetCommittedHwms() {
		if r.GetTopic() == "orders" && r.GetPartition() == 2 && (r.GetCommittedHwm() != 5 || r.GetLifecycleEpoch() != 2) {
			t.Fatalf("record = %v", r)
		}
	}
}

// rewrite re-encodes a snapshot after changing its body, with a valid CRC.
func rewrite(t *testing.T, b []byte, change func(*metav1.FsmSnapshot), hdr func([]byte)) []byte {
	var body metav1.FsmSnapshot
	n := binary.BigEndian.Uint64(b[16:24])
	if err := proto.Unmarshal(b[24:24+n], &body); err != nil {
		t.Fatal(err)
	}
	if change != nil {
		change(&body)
	}
	nb, err := proto.Marshal(&body)
	if err != nil {
		t.Fatal(err)
	}
	out := append([]byte(nil), b[:24]...)
	binary.BigEndian.PutUint64(out[16:24], uint64(len(nb)))
	if hdr != nil {
		hdr(out)
	}
	out = append(out, nb...)
	return binary.BigEndian.AppendUint32(out, crc32.Checksum(nb, castagnoli))
}

func TestRestoreRejects(t *testing.T) {
	x := populated(t)
	good := snapshotBytes(t, x.f)
	cases := []struct {
		name string
		b    []byte
		code errcode.Code
	}{
		{"Empty", nil, errcode.UnsupportedRecoveryProtocol},
		{"OtherFile", []byte("this is some other snapshot format entirely"), errcode.UnsupportedRecoveryProtocol},
		{"FormatVersion8", rewrite(t, good, nil, func(h []byte) { binary.BigEndian.PutUint32(h[8:12], 8) }), errcode.UnsupportedRecoveryProtocol},
		{"HWMVersion0", rewrite(t, good, nil, func(h []byte) { binary.BigEndian.PutUint32(h[12:16], 0) }), errcode.UnsupportedRecoveryProtocol},
		{"BodyVersionMismatch", rewrite(t, good, func(b *metav1.FsmSnapshot) { b.FormatVersion = 8 }, nil), errcode.UnsupportedRecoveryProtocol},
		{"PartitionWithoutHWMRecord", rewrite(t, good, func(b *metav1.FsmSnapshot) { b.CommittedHwms = b.CommittedHwms[1:] }, nil), errcode.UnsupportedRecoveryProtocol},
		{"NoHWMRecordsAtAll", rewrite(t, good, func(b *metav1.FsmSnapshot) { b.CommittedHwms = nil }, nil), errcode.UnsupportedRecoveryProtocol},
		{"HWMRecordDisagrees", rewrite(t, good, func(b *metav1.FsmSnapshot) { b.CommittedHwms[0].CommittedHwm++ }, nil), errcode.StorageCorrupt},
		{"HWMRecordForUnknownPartition", rewrite(t, good, func(b *metav1.FsmSnapshot) {
			b.CommittedHwms = append(b.CommittedHwms, &metav1.CommittedHwmRecord{Topic: "orders", Partition: 99, LifecycleEpoch: 2})
		}, nil), errcode.StorageCorrupt},
		{"SparsePartitionIDs", rewrite(t, good, func(b *metav1.FsmSnapshot) { b.Topics[1].Partitions[0].Id = 5 }, nil), errcode.StorageCorrupt},
		{"InvalidTopicName", rewrite(t, good, func(b *metav1.FsmSnapshot) { b.Topics[0].Config.Name = "a b" }, nil), errcode.StorageCorrupt},
		{"DuplicateNode", rewrite(t, good, func(b *metav1.FsmSnapshot) { b.Nodes = append(b.Nodes, b.Nodes[0]) }, nil), errcode.StorageCorrupt},
		{"Truncated", good[:len(good)-9], errcode.StorageCorrupt},
		{"BitFlip", func() []byte { c := bytes.Clone(good); c[40] ^= 1; return c }(), errcode.StorageCorrupt},
		{"HugeLength", func() []byte { c := bytes.Clone(good); binary.BigEndian.PutUint64(c[16:24], 1<<40); return c }(), errcode.StorageCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := populated(t)
			before := g.f.EncodeState()
			err := g.f.Restore(io.NopCloser(bytes.NewReader(c.b)))
			if !errors.Is(err, c.code) {
				t.Fatalf("Restore = %v, want %s", err, c.code.Name())
			}
			if !bytes.Equal(before, g.f.EncodeState()) {
				t.Fatal("a refused snapshot changed the state")
			}
		})
	}
}

type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (m *memSink) ID() string    { return "mem" }
func (m *memSink) Cancel() error { m.cancelled = true; return nil }
func (m *memSink) Close() error  { return nil }

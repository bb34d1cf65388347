package partitionv1

import (
	"bytes"
	"slices"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	commonv1 "github.com/strataio/strata/proto/strata/common/v1"
)

// aliasUnmarshaler is what libs/rpc's codec looks for.
type aliasUnmarshaler interface {
	proto.Message
	UnmarshalAlias(b []byte) error
}

// checkAlias decodes b with UnmarshalAlias into got and with proto.Unmarshal
// into a fresh message of the same type, and fails unless they are equal
// and every value of records (the aliased fields of got) lies inside b.
func checkAlias(t *testing.T, b []byte, got aliasUnmarshaler, records func() [][]byte) {
	t.Helper()
	want := got.ProtoReflect().New().Interface()
	if err := proto.Unmarshal(b, want); err != nil {
		t.Fatal(err)
	}
	if err := got.UnmarshalAlias(b); err != nil || !proto.Equal(got, want) {
		t.Fatalf("UnmarshalAlias = %v, %v; proto.Unmarshal %v", got, err, want)
	}
	for _, r := range records() {
		if len(r) == 0 {
			continue
		}
		if i := bytes.Index(b, r); i < 0 || &r[0] != &b[i] {
			t.Fatalf("%q was copied, not aliased", r)
		}
		if cap(r) != len(r) {
			t.Fatal("an append to the aliased field would write into the input")
		}
	}
	// Truncated input is an error, as with proto.Unmarshal.
	if err := got.UnmarshalAlias(b[:len(b)-1]); err == nil {
		t.Fatal("truncated input decoded")
	}
}

func TestProduceRequestUnmarshalAlias(t *testing.T) {
	a := &AppendRequest{Topic: "t", Partition: 3, LifecycleEpoch: 4, Acks: -1, Records: []byte("the records"),
		RecordCount: 7, ProducerId: "p", ProducerEpoch: 9, BaseSequence: 10, LastSequence: 11, Idempotent: true}
	if n := a.ProtoReflect().Descriptor().Fields().Len(); n != 11 {
		t.Fatalf("AppendRequest has %d fields: set the new one here", n)
	}
	m := &ProduceRequest{CorrelationId: 1, Append: a}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var got ProduceRequest
	recs := func() [][]byte { return [][]byte{got.GetAppend().GetRecords()} }
	checkAlias(t, b, &got, recs)

	// The records field is in the middle of AppendRequest: the fields after
	// it are decoded too, whatever their order; and unknown fields are kept.
	inner, _ := proto.Marshal(a)
	inner = protowire.AppendVarint(protowire.AppendTag(inner, 99, protowire.VarintType), 5)
	inner = protowire.AppendBytes(protowire.AppendTag(inner, 2, protowire.BytesType), []byte("last topic wins"))
	outer := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), inner)
	outer = protowire.AppendVarint(protowire.AppendTag(outer, 1, protowire.VarintType), 8)
	checkAlias(t, outer, &got, recs)
	if got.GetAppend().GetTopic() != "last topic wins" || len(got.GetAppend().ProtoReflect().GetUnknown()) == 0 {
		t.Fatalf("fields after the records: %v", &got)
	}

	// A records field twice (proto: the last wins): decoded by proto.
	twice := protowire.AppendBytes(protowire.AppendTag(append([]byte(nil), inner...), 6, protowire.BytesType), []byte("second"))
	outer = protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), twice)
	if err := got.UnmarshalAlias(outer); err != nil || string(got.GetAppend().GetRecords()) != "second" {
		t.Fatalf("records twice: %v, %v", &got, err)
	}
}

func TestReplicaFetchResponseUnmarshalAlias(t *testing.T) {
	full := &ReplicaFetchPartitionData{Topic: "t", Partition: 1, Error: &commonv1.Error{Code: "x"}, HighWatermark: 4,
		LogStartOffset: 5, LogEndOffset: 6, LeaderEpoch: 7, Diverging: &DivergingEpoch{Epoch: 8, EndOffset: 9},
		Batches: []byte("stored batches")}
	if n := full.ProtoReflect().Descriptor().Fields().Len(); n != 9 {
		t.Fatalf("ReplicaFetchPartitionData has %d fields: set the new one here", n)
	}
	m := &ReplicaFetchResponse{Partitions: []*ReplicaFetchPartitionData{
		full, {Topic: "u", Batches: []byte("more batches")}, {Topic: "empty", HighWatermark: 1},
	}}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var got ReplicaFetchResponse
	checkAlias(t, b, &got, func() [][]byte {
		var out [][]byte
		for _, p := range got.GetPartitions() {
			out = append(out, p.GetBatches())
		}
		return out
	})
	// An unknown top-level field: proto.Unmarshal decodes it all.
	unknown := protowire.AppendVarint(protowire.AppendTag(append([]byte(nil), b...), 99, protowire.VarintType), 1)
	if err := got.UnmarshalAlias(unknown); err != nil || len(got.GetPartitions()) != 3 || len(got.ProtoReflect().GetUnknown()) == 0 {
		t.Fatalf("with an unknown field: %v, %v", &got, err)
	}
}

func TestFetchResponseUnmarshalAliasMatchesProto(t *testing.T) {
	m := &FetchResponse{Records: []byte("records"), RecordCount: 2, NextOffset: 3, HighWatermark: 5}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var got FetchResponse
	checkAlias(t, b, &got, func() [][]byte { return [][]byte{got.GetRecords()} })
}

func TestReplicaFetchResponseMarshalAlias(t *testing.T) {
	full := &ReplicaFetchPartitionData{Topic: "t", Partition: 1, Error: &commonv1.Error{Code: "x", Retryable: true},
		HighWatermark: 4, LogStartOffset: 5, LogEndOffset: 6, LeaderEpoch: 7, Diverging: &DivergingEpoch{Epoch: 8, EndOffset: 9},
		Batches: bytes.Repeat([]byte{1}, 300)}
	set := 0
	full.ProtoReflect().Range(func(protoreflect.FieldDescriptor, protoreflect.Value) bool { set++; return true })
	if n := full.ProtoReflect().Descriptor().Fields().Len(); set != n {
		t.Fatalf("the test sets %d of ReplicaFetchPartitionData's %d fields: set the new one, and copy it in MarshalAlias", set, n)
	}
	withUnknown := &ReplicaFetchPartitionData{Topic: "u", Batches: []byte("b")}
	withUnknown.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 1))
	top := &ReplicaFetchResponse{Partitions: []*ReplicaFetchPartitionData{{Topic: "v"}}}
	top.ProtoReflect().SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 98, protowire.VarintType), 2))
	for _, m := range []*ReplicaFetchResponse{
		{},
		{Partitions: []*ReplicaFetchPartitionData{full}},
		{Partitions: []*ReplicaFetchPartitionData{{Topic: "empty", HighWatermark: 1}, full, withUnknown, {Topic: "w", Batches: []byte("c")}}},
		// Negative int32, an empty nested message, zero values.
		{Partitions: []*ReplicaFetchPartitionData{{Partition: -3, Diverging: &DivergingEpoch{}, Error: &commonv1.Error{}}, {}}},
		top,
	} {
		want, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		parts := m.MarshalAlias()
		if got := bytes.Join(parts, nil); !bytes.Equal(got, want) {
			t.Fatalf("%v: MarshalAlias %x, proto.Marshal %x", m, got, want)
		}
		for _, p := range m.GetPartitions() {
			if len(p.Batches) > 0 && !slices.ContainsFunc(parts, func(b []byte) bool { return len(b) > 0 && &b[0] == &p.Batches[0] }) {
				t.Fatal("batches copied, not aliased")
			}
		}
	}
}

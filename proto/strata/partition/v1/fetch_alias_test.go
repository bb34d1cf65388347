package partitionv1

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

func TestFetchResponseUnmarshalAlias(t *testing.T) {
	// Every field set, so a field added to the message but not to the
	// decoder shows up as a difference (the fallback would hide it only if
	// it were taken, and it is not for known fields).
	want := &FetchResponse{Records: []byte("records"), RecordCount: 2, NextOffset: 3, LogStartOffset: 4,
		HighWatermark: 5, LogEndOffset: 6, LastStableOffset: 7}
	fields := want.ProtoReflect().Descriptor().Fields()
	set := 0
	want.ProtoReflect().Range(func(protoreflect.FieldDescriptor, protoreflect.Value) bool { set++; return true })
	if set != fields.Len() {
		t.Fatalf("the test sets %d of FetchResponse's %d fields: set the new one, and encode and decode it in MarshalAlias and UnmarshalAlias", set, fields.Len())
	}
	b, err := proto.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var got FetchResponse
	if err := got.UnmarshalAlias(b); err != nil || !proto.Equal(&got, want) {
		t.Fatalf("UnmarshalAlias = %v, %v; want %v", &got, err, want)
	}
	if i := bytes.Index(b, []byte("records")); &got.Records[0] != &b[i] {
		t.Fatal("Records was copied, not aliased")
	}
	// An unknown field: the proto.Unmarshal fallback keeps it.
	unknown := protowire.AppendVarint(protowire.AppendTag(append([]byte(nil), b...), 99, protowire.VarintType), 1)
	if err := got.UnmarshalAlias(unknown); err != nil || got.GetLastStableOffset() != 7 || len(got.ProtoReflect().GetUnknown()) == 0 {
		t.Fatalf("with an unknown field: %v, %v", &got, err)
	}
	// Truncated input is an error, as with proto.Unmarshal.
	if err := got.UnmarshalAlias(b[:len(b)-1]); err == nil {
		t.Fatal("truncated input decoded")
	}
}

func TestFetchResponseMarshalAlias(t *testing.T) {
	for _, m := range []*FetchResponse{
		{},
		{Records: []byte("records"), RecordCount: 2, NextOffset: 3, LogStartOffset: 4, HighWatermark: 5, LogEndOffset: 6, LastStableOffset: 7},
		{Records: bytes.Repeat([]byte{1}, 300), NextOffset: 1 << 40},
		{HighWatermark: 9},
	} {
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		parts := m.MarshalAlias()
		recs := parts[1]
		if got := bytes.Join(parts, nil); !bytes.Equal(got, want) {
			t.Fatalf("%v: MarshalAlias %x, proto.Marshal %x", m, got, want)
		}
		if len(m.Records) > 0 && &recs[0] != &m.Records[0] {
			t.Fatal("records copied, not aliased")
		}
	}
}

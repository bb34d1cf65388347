package partitionv1

import (
	"google.golang.org/protobuf/encoding/protowire"
)

// UnmarshalAliasRecords is UnmarshalAlias for an encoding the caller split
// after its leading records field (field 1, first in proto.Marshal's
// output): records is that field's content and becomes x.Records as it is,
// capacity included; rest is the encoding of the fields after it. libs/rpc's
// codec copies a fetched record set alone into a pooled buffer this way, so
// the gateway can give the buffer back to the pool once it has copied the
// records into its reply. The caller owns both and never changes them.
func (x *FetchResponse) UnmarshalAliasRecords(records, rest []byte) error {
	if err := x.UnmarshalAlias(rest); err != nil {
		return err
	}
	if x.Records == nil { // a later records field in rest wins, as in proto
		x.Records = records
	}
	return nil
}

// MarshalAlias returns x's encoding in parts whose concatenation is
// proto.Marshal's output (fields in number order, records first): the
// records field's tag and length, x.Records itself (not a copy), and the
// other fields. libs/rpc's codec hands the parts to gRPC as they are, so a
// fetched record set is not copied into a marshal buffer before gRPC copies
// it into its frames. A field added to FetchResponse must be added here
// (TestFetchResponseUnmarshalAlias fails until the test sets it, and
// TestFetchResponseMarshalAlias then until it is encoded). x.Records must not change until gRPC has sent it
// (a server's answer is not touched after its handler returns).
func (x *FetchResponse) MarshalAlias() [][]byte {
	var head, tail []byte
	if len(x.Records) > 0 {
		head = protowire.AppendTag(nil, 1, protowire.BytesType)
		head = protowire.AppendVarint(head, uint64(len(x.Records)))
	}
	for num, v := range [...]uint64{2: uint64(x.RecordCount), 3: x.NextOffset, 4: x.LogStartOffset,
		5: x.HighWatermark, 6: x.LogEndOffset, 7: x.LastStableOffset} {
		if num >= 2 && v != 0 {
			tail = protowire.AppendTag(tail, protowire.Number(num), protowire.VarintType)
			tail = protowire.AppendVarint(tail, v)
		}
	}
	tail = append(tail, x.ProtoReflect().GetUnknown()...)
	return [][]byte{head, x.Records, tail}
}

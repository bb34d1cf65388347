package partitionv1

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// UnmarshalAlias decodes b into x with Records aliasing b instead of copying
// it (proto.Unmarshal always copies bytes fields): b must be owned by the
// caller and never change afterwards. libs/rpc's codec uses it for fetched
// record sets, which it has already copied out of gRPC's frames into an
// owned buffer — one megabyte copy less per fetch. A field this decoder does
// not know (a later schema) makes it fall back to proto.Unmarshal, so it
// never drops data; TestFetchResponseUnmarshalAlias fails when a field is
// added without being decoded here.
func (x *FetchResponse) UnmarshalAlias(b []byte) error {
	x.Reset()
	for rest := b; len(rest) > 0; {
		num, typ, n := protowire.ConsumeTag(rest)
		if n < 0 {
			return protowire.ParseError(n)
		}
		rest = rest[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(rest)
			if n < 0 {
				return protowire.ParseError(n)
			}
			x.Records = v[:len(v):len(v)]
			rest = rest[n:]
		case num >= 2 && num <= 7 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(rest)
			if n < 0 {
				return protowire.ParseError(n)
			}
			switch num {
			case 2:
				x.RecordCount = uint32(v)
			case 3:
				x.NextOffset = v
			case 4:
				x.LogStartOffset = v
			case 5:
				x.HighWatermark = v
			case 6:
				x.LogEndOffset = v
			case 7:
				x.LastStableOffset = v
			}
			rest = rest[n:]
		default:
			return proto.Unmarshal(b, x)
		}
	}
	return nil
}

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

// MarshalAlias returns x's encoding in three parts whose concatenation is
// proto.Marshal's output (fields in number order, records first): the
// records field's tag and length, x.Records itself (not a copy), and the
// other fields. libs/rpc's codec hands the parts to gRPC as they are, so a
// fetched record set is not copied into a marshal buffer before gRPC copies
// it into its frames. A field added to FetchResponse must be added here
// (TestFetchResponseUnmarshalAlias fails until the test sets it, and
// TestFetchResponseMarshalAlias then until it is encoded). x.Records must not change until gRPC has sent it
// (a server's answer is not touched after its handler returns).
func (x *FetchResponse) MarshalAlias() (head, records, tail []byte) {
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
	return head, x.Records, tail
}

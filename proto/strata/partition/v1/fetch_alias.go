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

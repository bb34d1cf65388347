package partitionv1

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// The messages that carry stored records in bulk decode them by aliasing
// the input instead of copying it (proto.Unmarshal always copies bytes
// fields): FetchResponse (a consumer's record set), ProduceRequest (a
// producer's batch on its way to the leader) and ReplicaFetchResponse (the
// stored batches a follower copies). libs/rpc's codec calls UnmarshalAlias
// with a buffer it has just copied out of gRPC's frames and that the message
// then owns: one copy of every record less per hop. b must never change
// afterwards.

// UnmarshalAlias decodes b into x with Records aliasing b.
func (x *FetchResponse) UnmarshalAlias(b []byte) error {
	return unmarshalAliasing(b, x, 1, func(v []byte) error { x.Records = v; return nil })
}

// UnmarshalAlias decodes b into x with Append.Records aliasing b.
func (x *ProduceRequest) UnmarshalAlias(b []byte) error {
	return unmarshalAliasing(b, x, 2, func(v []byte) error {
		a := &AppendRequest{}
		if err := unmarshalAliasing(v, a, 6, func(v []byte) error { a.Records = v; return nil }); err != nil {
			return err
		}
		x.Append = a
		return nil
	})
}

// UnmarshalAlias decodes b into x with every partition's Batches aliasing
// b.
func (x *ReplicaFetchResponse) UnmarshalAlias(b []byte) error {
	x.Reset()
	for rest := b; len(rest) > 0; {
		num, typ, n := protowire.ConsumeTag(rest)
		if n < 0 {
			return protowire.ParseError(n)
		}
		if num != 1 || typ != protowire.BytesType {
			return proto.Unmarshal(b, x) // a field this decoder does not know
		}
		v, m := protowire.ConsumeBytes(rest[n:])
		if m < 0 {
			return protowire.ParseError(m)
		}
		p := &ReplicaFetchPartitionData{}
		if err := unmarshalAliasing(v, p, 9, func(v []byte) error { p.Batches = v; return nil }); err != nil {
			return err
		}
		x.Partitions = append(x.Partitions, p)
		rest = rest[n+m:]
	}
	return nil
}

// unmarshalAliasing decodes b into m as proto.Unmarshal does, except that
// the length-delimited field num is not decoded by proto: set receives its
// value, a slice of b (capacity capped, so an append never writes into b).
// Every other field, known or not, goes through proto.Unmarshal, so a field
// added to the message later is decoded as before. A field num that occurs
// more than once (proto merges or overwrites; no marshaller of ours writes
// that) makes the whole message go through proto.Unmarshal.
func unmarshalAliasing(b []byte, m proto.Message, num protowire.Number, set func([]byte) error) error {
	var (
		val    []byte
		found  bool
		others []byte // the other fields: a prefix of b until one follows the field
		copied bool
	)
	for pos := 0; pos < len(b); {
		fn, typ, n := protowire.ConsumeTag(b[pos:])
		if n < 0 {
			return protowire.ParseError(n)
		}
		l := protowire.ConsumeFieldValue(fn, typ, b[pos+n:])
		if l < 0 {
			return protowire.ParseError(l)
		}
		field := b[pos : pos+n+l]
		switch {
		case fn == num && typ == protowire.BytesType:
			if found {
				return proto.Unmarshal(b, m)
			}
			v, _ := protowire.ConsumeBytes(field[n:])
			val, found = v[:len(v):len(v)], true
		case !found:
			others = b[:pos+n+l]
		default:
			if !copied {
				others, copied = append([]byte(nil), others...), true
			}
			others = append(others, field...)
		}
		pos += n + l
	}
	if err := proto.Unmarshal(others, m); err != nil {
		return err
	}
	if !found {
		return nil
	}
	return set(val)
}

// MarshalAlias returns x's encoding in parts whose concatenation is
// proto.Marshal's output: every partition's Batches is a part of its own,
// not copied (libs/rpc's codec hands the parts to gRPC, which copies them
// into its frames; a marshal buffer would be one more copy of every
// replicated byte). The other fields are encoded by appendPartitionHead; a
// field added to ReplicaFetchPartitionData must be added there
// (TestReplicaFetchResponseMarshalAlias fails until it is).
// The batches must not change until gRPC has sent them (a server's answer
// is not touched after its handler returns).
func (x *ReplicaFetchResponse) MarshalAlias() [][]byte {
	var parts [][]byte
	var small, head []byte
	for _, p := range x.Partitions {
		var ok bool
		head, ok = appendPartitionHead(head[:0], p)
		if !ok {
			// A topic that is not UTF-8: the codec's copying path reports
			// proto.Marshal's error.
			return nil
		}
		unknown := p.ProtoReflect().GetUnknown()
		size := len(head) + len(unknown)
		if len(p.Batches) > 0 {
			size += protowire.SizeTag(9) + protowire.SizeBytes(len(p.Batches))
		}
		small = protowire.AppendTag(small, 1, protowire.BytesType)
		small = protowire.AppendVarint(small, uint64(size))
		small = append(small, head...)
		if len(p.Batches) > 0 {
			small = protowire.AppendTag(small, 9, protowire.BytesType)
			small = protowire.AppendVarint(small, uint64(len(p.Batches)))
			parts = append(parts, small, p.Batches)
			small = nil
		}
		small = append(small, unknown...)
	}
	small = append(small, x.ProtoReflect().GetUnknown()...)
	return append(parts, small)
}

// appendPartitionHead appends p's fields other than Batches and its unknown
// fields to b as proto.Marshal encodes them (in field number order, proto3
// zero values left out), by hand: proto.Marshal of a copy of them was most
// of MarshalAlias's cost, once per partition of every fetch answer. ok is
// false for a topic that is not valid UTF-8, which proto.Marshal refuses.
func appendPartitionHead(b []byte, p *ReplicaFetchPartitionData) (_ []byte, ok bool) {
	if p.Topic != "" {
		if !utf8.ValidString(p.Topic) {
			return b, false
		}
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, p.Topic)
	}
	if p.Partition != 0 {
		b = protowire.AppendTag(b, 2, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(int64(p.Partition))) // int32: sign-extended
	}
	if p.Error != nil {
		m, err := proto.Marshal(p.Error)
		if err != nil {
			return b, false
		}
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendBytes(b, m)
	}
	for _, f := range [...]struct {
		num protowire.Number
		v   uint64
	}{{4, p.HighWatermark}, {5, p.LogStartOffset}, {6, p.LogEndOffset}, {7, p.LeaderEpoch}} {
		if f.v != 0 {
			b = protowire.AppendTag(b, f.num, protowire.VarintType)
			b = protowire.AppendVarint(b, f.v)
		}
	}
	if p.Diverging != nil {
		m, err := proto.Marshal(p.Diverging)
		if err != nil {
			return b, false
		}
		b = protowire.AppendTag(b, 8, protowire.BytesType)
		b = protowire.AppendBytes(b, m)
	}
	return b, true
}

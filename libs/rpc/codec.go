package rpc

import (
	"bytes"
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// codec is the protobuf codec of every internal connection. It is gRPC's
// own proto codec with one change: marshal output and the contiguous copy
// unmarshal needs come from transportPool (not zeroed, classes above 1 MiB)
// instead of gRPC's default pool, which zeroes every buffer it hands out and
// reallocates for messages above 1 MiB — both visible in publish profiles of
// megabyte batches. It is installed per server and per connection (not with
// encoding.RegisterCodecV2), so other gRPC users in the process keep the
// default.
type codec struct{}

var _ encoding.CodecV2 = codec{}

// Name is the content subtype; "proto" keeps the wire format identical to
// the default codec, so peers need not use this one.
func (codec) Name() string { return "proto" }

func (codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("rpc codec: cannot marshal %T: not a proto.Message", v)
	}
	if a, ok := v.(aliasMarshaler); ok {
		parts := a.MarshalAlias()
		size := 0
		for _, p := range parts {
			size += len(p)
		}
		if size >= aliasMin {
			// The records go to gRPC as they are: gRPC copies them into
			// its frames anyway, a marshal buffer would be one more copy.
			out := make(mem.BufferSlice, 0, len(parts))
			for _, p := range parts {
				if len(p) > 0 {
					out = append(out, mem.SliceBuffer(p))
				}
			}
			return out, nil
		}
	}
	size := proto.Size(m)
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := proto.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	buf := transportPool.Get(size)
	// UseCachedSize: proto.Size above just computed and cached the sizes.
	out, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend((*buf)[:0], m)
	if err != nil {
		transportPool.Put(buf)
		return nil, err
	}
	*buf = out
	return mem.BufferSlice{mem.NewBuffer(buf, transportPool)}, nil
}

// aliasUnmarshaler is a message that can decode its large bytes fields by
// aliasing the input (partitionv1.FetchResponse, ProduceRequest and
// ReplicaFetchResponse: records in bulk; see their UnmarshalAlias).
type aliasUnmarshaler interface {
	UnmarshalAlias(b []byte) error
}

// aliasMarshaler is a message that can marshal its large bytes fields
// without copying them: the concatenation of the parts is its encoding, the
// records among them as the message holds them (partitionv1.FetchResponse
// and ReplicaFetchResponse: records read from a log).
type aliasMarshaler interface {
	MarshalAlias() [][]byte
}

// aliasMin is the message size from which an aliasUnmarshaler gets its own
// copy of the message to alias: below it the pooled path is as cheap.
const aliasMin = 64 << 10

func (codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("rpc codec: cannot unmarshal into %T: not a proto.Message", v)
	}
	if a, ok := v.(aliasUnmarshaler); ok && data.Len() >= aliasMin {
		// One copy out of gRPC's frames into a buffer the message then
		// owns, instead of a copy into a pooled buffer and a second one
		// of the bytes field out of it. The garbage collector reclaims
		// the buffer with the message. bytes.Join allocates it without
		// zeroing (a pool buffer that never goes back would be a fresh,
		// zeroed one whenever the pool is empty: 5 % of the replication
		// benchmark's profile).
		parts := make([][]byte, len(data))
		for i, b := range data {
			parts[i] = b.ReadOnlyData()
		}
		return a.UnmarshalAlias(bytes.Join(parts, nil))
	}
	buf := data.MaterializeToBuffer(transportPool)
	defer buf.Free()
	// proto.Unmarshal copies bytes fields out of buf, so the pooled buffer
	// can be reused as soon as this returns.
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}

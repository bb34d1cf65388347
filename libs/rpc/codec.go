package rpc

import (
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

func (codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("rpc codec: cannot unmarshal into %T: not a proto.Message", v)
	}
	buf := data.MaterializeToBuffer(transportPool)
	defer buf.Free()
	// proto.Unmarshal copies bytes fields out of buf, so the pooled buffer
	// can be reused as soon as this returns.
	return proto.Unmarshal(buf.ReadOnlyData(), m)
}

package rpc

import (
	"bytes"
	"fmt"
	"io"
	"slices"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
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
		var pooled [][]byte
		if pm, ok := v.(pooledMarshaler); ok {
			// The codec owns these from here: each goes back to the pool
			// once nothing of gRPC's refers to it any more.
			pooled = slices.Clone(pm.PooledParts())
		}
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
				if len(p) == 0 {
					continue
				}
				if i := samePart(pooled, p); i >= 0 {
					// A reference-counted buffer: gRPC frees it when the
					// send path and the transport (which writes it into
					// its frames later, from its own goroutine) are both
					// done with it, and only then does it return to the
					// pool. A part below gRPC's pooling threshold is a
					// plain slice the garbage collector reclaims.
					b := pooled[i]
					pooled[i] = nil
					bp := &b
					out = append(out, mem.NewBuffer(bp, partsPool))
					continue
				}
				out = append(out, mem.SliceBuffer(p))
			}
			releaseParts(pooled) // not among the parts: nothing refers to them
			return out, nil
		}
		// The copying path below takes the bytes out of them.
		defer releaseParts(pooled)
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

// recordsUnmarshaler is an aliasUnmarshaler whose record set, a leading
// field 1, can live in a pooled buffer of its own that the receiver gives
// back (partitionv1.FetchResponse; see RecycleRecords).
type recordsUnmarshaler interface {
	// UnmarshalAliasRecords takes the content of a leading field 1 (the
	// record set) and the encoding of the fields after it separately.
	UnmarshalAliasRecords(records, rest []byte) error
}

// aliasMarshaler is a message that can marshal its large bytes fields
// without copying them: the concatenation of the parts is its encoding, the
// records among them as the message holds them (partitionv1.FetchResponse
// and ReplicaFetchResponse: records read from a log).
type aliasMarshaler interface {
	MarshalAlias() [][]byte
}

// pooledMarshaler is an aliasMarshaler some of whose parts are transport
// pool buffers (NewPooledBytes) the message hands to the codec with itself:
// a leader's replica fetch answer, whose batches are read into one. The
// codec gives them back to the pool once gRPC has written them into its
// frames (or at once when it copies the message), so each answer reuses
// the buffer of an earlier one instead of allocating for the garbage
// collector.
type pooledMarshaler interface {
	// PooledParts returns those buffers, each exactly as MarshalAlias
	// returns it and starting at its pool buffer's start (as
	// NewPooledBytes returns it). Marshal owns them from the call on: the
	// caller must not use the message after sending it, nor send it
	// twice.
	PooledParts() [][]byte
}

// NewPooledBytes returns an empty slice with room for n bytes from the
// transport pool: a buffer a pooledMarshaler fills and hands to the codec
// (PooledParts). Not handing it back is always safe; the garbage collector
// then reclaims it.
func NewPooledBytes(n int) []byte { return (*transportPool.Get(n))[:0] }

// samePart returns the index of the buffer in pooled that is part (the
// same bytes: start and length), -1 for none.
func samePart(pooled [][]byte, part []byte) int {
	for i, b := range pooled {
		if len(b) == len(part) && len(b) > 0 && &b[0] == &part[0] {
			return i
		}
	}
	return -1
}

// releaseParts gives the buffers of a pooledMarshaler back to the pool
// (nil entries are skipped).
func releaseParts(pooled [][]byte) {
	for i := range pooled {
		if pooled[i] != nil {
			partsPool.Put(&pooled[i])
		}
	}
}

// partsPool is where the codec returns a pooledMarshaler's buffers: the
// transport pool (a test counts them instead).
var partsPool mem.BufferPool = transportPool

// pooledUnmarshaler is a receive target that decodes by aliasing a buffer
// of the transport pool and keeps that buffer, so its receiver can give it
// back (Buffer.Release) once nothing refers into the message: a follower's
// replica fetch answers, whose batches are written to its log and then
// dropped. Without it every large answer is a fresh allocation for the
// garbage collector (and a page-faulting heap that keeps growing and being
// scavenged).
type pooledUnmarshaler interface {
	// UnmarshalPooled decodes b, which is buf's content; buf belongs to
	// the target from then on, also when it fails.
	UnmarshalPooled(b []byte, buf Buffer) error
}

// Pooled is the pooledUnmarshaler receive target (stream.RecvMsg(&p)) for a
// message type that decodes by aliasing its input: a message of at least
// aliasMin bytes is decoded into a transport pool buffer that Msg aliases
// and Buf holds, for the receiver to Release once nothing refers into Msg;
// a smaller one decodes as usual and Buf holds nothing. Msg must be set
// (an empty message) before the receive.
type Pooled[M interface {
	proto.Message
	UnmarshalAlias([]byte) error
}] struct {
	Msg M
	Buf Buffer
}

// ProtoReflect makes p a proto.Message for gRPC and the codec's small path.
func (p *Pooled[M]) ProtoReflect() protoreflect.Message { return p.Msg.ProtoReflect() }

// UnmarshalPooled implements pooledUnmarshaler.
func (p *Pooled[M]) UnmarshalPooled(b []byte, buf Buffer) error {
	p.Buf = buf
	return p.Msg.UnmarshalAlias(b)
}

// Buffer is a transport pool buffer a decoded message aliases (see
// pooledUnmarshaler). The zero Buffer holds nothing.
type Buffer struct{ p *[]byte }

// Release gives the buffer back to the pool, to be handed out again: the
// caller must hold the only reference to the message decoded into it and
// drop it, and must not call Release twice. Not calling it is always safe;
// the garbage collector then reclaims the buffer.
func (b *Buffer) Release() {
	if b.p != nil {
		transportPool.Put(b.p)
		b.p = nil
	}
}

// aliasMin is the message size from which an aliasUnmarshaler gets its own
// copy of the message to alias: below it the pooled path is as cheap.
const aliasMin = 64 << 10

func (codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("rpc codec: cannot unmarshal into %T: not a proto.Message", v)
	}
	if pu, ok := v.(pooledUnmarshaler); ok && data.Len() >= aliasMin {
		bp := transportPool.Get(data.Len())
		data.CopyTo(*bp)
		return pu.UnmarshalPooled(*bp, Buffer{bp})
	}
	if a, ok := v.(aliasUnmarshaler); ok && data.Len() >= aliasMin {
		// One copy out of gRPC's frames into buffers the message then
		// owns, instead of a copy into a pooled buffer and a second one
		// of the bytes field out of it.
		if ra, ok := v.(recordsUnmarshaler); ok {
			if n, size, ok := leadingRecords(data); ok {
				// The record set alone, at the start of a pooled buffer
				// (not zeroed; see RecycleRecords), the few other fields
				// apart.
				r := data.Reader()
				defer r.Close()
				if _, err := r.Discard(n); err != nil {
					return err
				}
				bp := transportPool.Get(size)
				recs := *bp
				rest := make([]byte, data.Len()-n-size)
				if _, err := io.ReadFull(r, recs); err != nil {
					return err
				}
				if _, err := io.ReadFull(r, rest); err != nil {
					return err
				}
				return ra.UnmarshalAliasRecords(recs, rest)
			}
		}
		// Otherwise the whole message in one buffer the garbage collector
		// reclaims with the message. bytes.Join allocates it without
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

// leadingRecords reports whether data starts with field 1 as length-delimited
// bytes (how proto.Marshal and MarshalAlias lay out a FetchResponse): n is
// the length of its tag and size prefix, size that of its content.
func leadingRecords(data mem.BufferSlice) (n, size int, ok bool) {
	// The tag and size are in the first frame's buffer in practice; a
	// prefix split across buffers just takes the other path.
	var head []byte
	if len(data) > 0 {
		head = data[0].ReadOnlyData()
	}
	num, typ, tn := protowire.ConsumeTag(head)
	if tn < 0 || num != 1 || typ != protowire.BytesType {
		return 0, 0, false
	}
	v, vn := protowire.ConsumeVarint(head[tn:])
	if vn < 0 || v > uint64(data.Len()-tn-vn) {
		return 0, 0, false
	}
	return tn + vn, int(v), true
}

// RecycleRecords gives the buffer of a record set this codec decoded
// (FetchResponse.Records of a fetch answer) back to the transport pool, so
// the next fetch copies into it instead of into a fresh allocation that the
// runtime zeroes (a megabyte memclr and garbage per fetch). The caller must
// hold the only reference to recs and drop it: the buffer is handed out
// again. Not calling it is always safe; the garbage collector then reclaims
// the buffer.
//
// On the direct path (Links) nothing was decoded: recs is partitiond's own
// read buffer, handed over (handOver proves the caller holds the only
// reference). Only a buffer of a pool class's exact capacity goes back
// (every buffer the pool makes has one); partitiond's buffers rarely have
// it, and pooling them would only keep them alive longer, since in the
// all-in-one no decode takes fetch buffers from the pool.
//
// A ProduceRequest's records received on the direct path (ReceivesOwned)
// are a pool buffer of cloneSent's, which the handler gives back here once
// the batch is written.
func RecycleRecords(recs []byte) {
	if c := cap(recs); c < aliasMin || c&(c-1) != 0 {
		return
	}
	recs = recs[:0]
	transportPool.Put(&recs)
}

package rpc

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

func TestBufferPoolSizes(t *testing.T) {
	p := &bufferPool{}
	for _, n := range []int{0, 1, 255, 256, 257, 4096, 1<<20 + 1, 3 << 20, 1<<maxPoolClass + 1} {
		bp := p.Get(n)
		if len(*bp) != n {
			t.Fatalf("Get(%d): len %d", n, len(*bp))
		}
		// Fill the whole capacity, put it back and get the same class again:
		// the buffer must still have room for n.
		b := (*bp)[:cap(*bp)]
		for i := range b {
			b[i] = 0xAA
		}
		p.Put(bp)
		bp2 := p.Get(n)
		if len(*bp2) != n || cap(*bp2) < n {
			t.Fatalf("Get(%d) after Put: len %d cap %d", n, len(*bp2), cap(*bp2))
		}
	}
	// A buffer of an odd capacity goes to the class it fully covers.
	odd := make([]byte, 0, 3000)
	p.Put(&odd)
	if bp := p.Get(2048); cap(*bp) < 2048 {
		t.Fatalf("class 2048 returned cap %d", cap(*bp))
	}
	if bp := p.Get(4096); cap(*bp) < 4096 {
		t.Fatalf("class 4096 returned cap %d", cap(*bp))
	}
}

func TestCodecRoundTrip(t *testing.T) {
	for _, n := range []int{10, 100 << 10, 2 << 20} {
		in := wrapperspb.Bytes(bytes.Repeat([]byte{7}, n))
		data, err := codec{}.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := proto.Marshal(in)
		if !bytes.Equal(data.Materialize(), want) {
			t.Fatalf("n=%d: marshal differs from proto.Marshal", n)
		}
		// Split the encoding the way the transport delivers it (16 KiB
		// frames) and decode.
		split := frames(data.Materialize())
		data.Free()
		out := &wrapperspb.BytesValue{}
		if err := (codec{}).Unmarshal(split, out); err != nil {
			t.Fatal(err)
		}
		// Reuse the pool (dirty buffers) before checking: the decoded
		// message must not alias pooled memory.
		for i := 0; i < 4; i++ {
			bp := transportPool.Get(n)
			for j := range *bp {
				(*bp)[j] = 0xFF
			}
			transportPool.Put(bp)
		}
		if !proto.Equal(in, out) {
			t.Fatalf("n=%d: round trip differs", n)
		}
	}
	if _, err := (codec{}).Marshal("not a message"); err == nil {
		t.Fatal("marshal of a non-message succeeded")
	}
	if err := (codec{}).Unmarshal(nil, 42); err == nil {
		t.Fatal("unmarshal into a non-message succeeded")
	}
}

// TestCodecAliasedFetch: a large FetchResponse encodes as proto.Marshal
// does (MarshalAlias) and decodes with its records aliasing one owned copy
// (UnmarshalAlias), never the transport's frames or a buffer that goes back
// to the pool.
func TestCodecAliasedFetch(t *testing.T) {
	for _, n := range []int{100, 100 << 10, 2 << 20} {
		in := &partitionv1.FetchResponse{Records: bytes.Repeat([]byte{7}, n), RecordCount: 3, NextOffset: 9, HighWatermark: 12}
		enc, _ := proto.Marshal(in)
		data, err := codec{}.Marshal(in)
		if err != nil || !bytes.Equal(data.Materialize(), enc) {
			t.Fatalf("n=%d: codec marshal differs from proto.Marshal (%v)", n, err)
		}
		data.Free()
		out := &partitionv1.FetchResponse{}
		if err := (codec{}).Unmarshal(frames(enc), out); err != nil {
			t.Fatal(err)
		}
		for i := range enc { // the frames are reused by the transport
			enc[i] = 0xFF
		}
		for range 4 {
			bp := transportPool.Get(len(enc))
			for j := range *bp {
				(*bp)[j] = 0xFF
			}
			transportPool.Put(bp)
		}
		if !proto.Equal(in, out) {
			t.Fatalf("n=%d: round trip differs", n)
		}
	}
}

// TestCodecFetchRecordsOwnABuffer: a fetched record set is decoded alone
// into a pooled buffer, starting at its first byte and spanning its whole
// size class, so RecycleRecords can give exactly that buffer back; a message
// laid out otherwise (records not first) still decodes.
func TestCodecFetchRecordsOwnABuffer(t *testing.T) {
	for i, n := range []int{100 << 10, 300 << 10, 100 << 10} {
		in := &partitionv1.FetchResponse{Records: bytes.Repeat([]byte{byte(i)}, n), RecordCount: 3, NextOffset: 9, HighWatermark: 12}
		enc, _ := proto.Marshal(in)
		out := &partitionv1.FetchResponse{}
		if err := (codec{}).Unmarshal(frames(enc), out); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(in, out) {
			t.Fatalf("n=%d: round trip differs", n)
		}
		if c := cap(out.Records); c < 1<<class(n) {
			t.Fatalf("n=%d: records capacity %d, want the whole pool buffer of %d", n, c, 1<<class(n))
		}
		RecycleRecords(out.Records)
	}
	// Records after the other fields: one buffer for the whole message.
	in := &partitionv1.FetchResponse{Records: bytes.Repeat([]byte{9}, 100<<10), NextOffset: 9}
	recs := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), in.Records)
	enc := append(protowire.AppendVarint(protowire.AppendTag(nil, 3, protowire.VarintType), 9), recs...)
	out := &partitionv1.FetchResponse{}
	if err := (codec{}).Unmarshal(frames(enc), out); err != nil || !proto.Equal(in, out) {
		t.Fatalf("records last: %v, %v", out, err)
	}
}

// frames cuts enc into 16 KiB buffers, as the transport hands a message to
// the codec.
func frames(enc []byte) mem.BufferSlice {
	var s mem.BufferSlice
	for rest := enc; len(rest) > 0; {
		k := min(len(rest), 16<<10)
		s = append(s, mem.SliceBuffer(rest[:k]))
		rest = rest[k:]
	}
	return s
}

// TestCodecPooledTarget: a large message decodes into one pool buffer the
// target keeps (its batches inside it, not in the transport's frames) and
// Release gives back, so the next one of its size class reuses it; a small
// one takes proto's copying path and holds no buffer.
func TestCodecPooledTarget(t *testing.T) {
	for i, n := range []int{100, 100 << 10, 300 << 10} {
		in := &partitionv1.ReplicaFetchResponse{Partitions: []*partitionv1.ReplicaFetchPartitionData{
			{Topic: "t", Partition: 1, HighWatermark: 5, Batches: bytes.Repeat([]byte{byte(i)}, n)},
			{Topic: "u", Batches: bytes.Repeat([]byte{byte(i + 1)}, n/2)}}}
		enc, _ := proto.Marshal(in)
		out := &Pooled[*partitionv1.ReplicaFetchResponse]{Msg: &partitionv1.ReplicaFetchResponse{}}
		if err := (codec{}).Unmarshal(frames(enc), out); err != nil {
			t.Fatal(err)
		}
		for j := range enc { // the frames are reused by the transport
			enc[j] = 0xFF
		}
		if !proto.Equal(in, out.Msg) {
			t.Fatalf("n=%d: round trip differs", n)
		}
		if n < aliasMin {
			if out.Buf.p != nil {
				t.Fatalf("n=%d: a small message holds a pool buffer", n)
			}
			continue
		}
		bp := out.Buf.p
		if bp == nil || len(*bp) != len(enc) {
			t.Fatalf("n=%d: no pool buffer of the message's size", n)
		}
		if indexOf(*bp, out.Msg.Partitions[0].Batches) < 0 || indexOf(*bp, out.Msg.Partitions[1].Batches) < 0 {
			t.Fatalf("n=%d: batches do not alias the pool buffer", n)
		}
		out.Buf.Release()
		out.Buf.Release() // the same Buffer released again holds nothing
		if out.Buf.p != nil {
			t.Fatal("Release kept the buffer")
		}
	}
}

// indexOf returns where sub starts inside b (by address), or -1.
func indexOf(b, sub []byte) int {
	for i := range b {
		if &b[i] == &sub[0] {
			return i
		}
	}
	return -1
}

// sentAnswer is a fetch answer whose batches are pooled parts (as a
// leader's replica fetch answer is).
type sentAnswer struct {
	*partitionv1.ReplicaFetchResponse
	pooled [][]byte
}

func (a *sentAnswer) PooledParts() [][]byte { return a.pooled }

// countingPool records the buffers put back.
type countingPool struct{ put [][]byte }

func (p *countingPool) Get(n int) *[]byte { b := make([]byte, n); return &b }
func (p *countingPool) Put(b *[]byte)     { p.put = append(p.put, *b) }

// TestCodecPooledParts: a pooledMarshaler's buffers are marshalled as they
// are and go back to the pool only when gRPC frees the marshalled message
// (large), or at once when the codec copied them (small) or did not use
// them; the encoding is proto.Marshal's either way.
func TestCodecPooledParts(t *testing.T) {
	cp := &countingPool{}
	old := partsPool
	partsPool = cp
	defer func() { partsPool = old }()
	for _, n := range []int{100, 100 << 10, 300 << 10} {
		cp.put = nil
		fill := func(b byte, n int) []byte { return append(NewPooledBytes(n), bytes.Repeat([]byte{b}, n)...) }
		a, b, unused := fill(1, n), fill(2, n/2), fill(3, 10)
		in := &partitionv1.ReplicaFetchResponse{Partitions: []*partitionv1.ReplicaFetchPartitionData{
			{Topic: "t", Partition: 1, HighWatermark: 5, Batches: a},
			{Topic: "u", Batches: b}}}
		want, _ := proto.Marshal(in)
		out, err := (codec{}).Marshal(&sentAnswer{ReplicaFetchResponse: in, pooled: [][]byte{a, b, unused}})
		if err != nil {
			t.Fatal(err)
		}
		if got := out.Materialize(); !bytes.Equal(got, want) {
			t.Fatalf("n=%d: encoding differs from proto.Marshal", n)
		}
		released := func(bufs ...[]byte) bool {
			if len(cp.put) != len(bufs) {
				return false
			}
			for _, b := range bufs {
				found := false
				for _, p := range cp.put {
					found = found || (cap(p) == cap(b) && &p[:1][0] == &b[0])
				}
				if !found {
					return false
				}
			}
			return true
		}
		if n < aliasMin {
			// Copied: every buffer goes back at once.
			if !released(a, b, unused) {
				t.Fatalf("n=%d: %d buffers released, want the 3 copied", n, len(cp.put))
			}
			out.Free()
			continue
		}
		if !released(unused) {
			t.Fatalf("n=%d: %d buffers released before gRPC freed the message, want the unused one", n, len(cp.put))
		}
		// gRPC's transport holds its own reference while it writes.
		out.Ref()
		out.Free()
		if !released(unused) {
			t.Fatalf("n=%d: a buffer went back while the transport still held it", n)
		}
		out.Free()
		if !released(unused, a, b) {
			t.Fatalf("n=%d: %d buffers released after gRPC freed the message, want 3", n, len(cp.put))
		}
	}
}

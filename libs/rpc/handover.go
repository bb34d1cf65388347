package rpc

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	partitionv1 "github.com/strataio/strata/proto/strata/partition/v1"
)

// Ownership of messages on the in-process path. Over gRPC every message is
// marshaled and the receiver decodes its own; in process, a message handed
// across must never alias memory its sender goes on using (the gateway
// reuses the client frame its AppendRequest.Records slices as soon as the
// call or Send returns; acks=0 sends do not wait at all; partitiond writes
// offsets into the record bytes it stores; a server may answer from state it
// keeps). So every message is copied once on its way across (proto.Merge or
// proto.Clone: a deep copy) and moved, without another copy, into the
// receiver's message (move). The exception is handOver's list.

// handOver fills reply (a fresh message of the caller's) with a unary
// handler's answer resp.
//
// A *partitionv1.FetchResponse is moved, not copied: its Records are the
// bulk of a consume and copying them would be the one copy per fetched byte
// this path removes. Proof that no one else uses that memory afterwards:
// partitiond's service.Fetch (the only FetchResponse handler of a role)
// builds a new FetchResponse per call and does not keep it; its Records
// are the ReadResult.Records of seglog's Log.read, which is either a buffer
// that read allocated for this call (append into nil, make) or, for a batch
// that is the whole answer, the batch buffer the segment walk allocated
// fresh for this read (handover.fresh) — never a pooled or cached buffer
// and never a slice the log keeps. The caller may therefore own the bytes:
// the gateway copies them into its reply and passes them to RecycleRecords
// (see there). partitiond's TestFetchRecordsAreFreshPerCall checks that
// two fetches of the same records never share memory and that writing
// into one answer changes neither the log nor a later answer.
func handOver(reply, resp proto.Message) {
	if !resp.ProtoReflect().IsValid() { // a nil message: gRPC sends it empty
		proto.Reset(reply)
		return
	}
	if _, ok := resp.(*partitionv1.FetchResponse); ok {
		move(reply, resp)
		return
	}
	proto.Reset(reply)
	proto.Merge(reply, resp)
}

// move makes dst hold src's fields without copying them (bytes, lists,
// maps and sub-messages are shared, not duplicated): dst takes over src,
// which its owner drops. dst is reset first, as decoding into it would.
func move(dst, src proto.Message) {
	proto.Reset(dst)
	d, s := dst.ProtoReflect(), src.ProtoReflect()
	s.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		d.Set(fd, v)
		return true
	})
	if u := s.GetUnknown(); len(u) > 0 {
		d.SetUnknown(u)
	}
}

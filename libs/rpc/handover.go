package rpc

import (
	"context"

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

// cloneSent is the copy of a message a direct stream's SendMsg hands to the
// handler: proto.Clone, except for a ProduceRequest whose record set is
// aliasMin bytes or more. Its records are copied into a transport pool
// buffer, which partitiond gives back with RecycleRecords once the batch is
// written (ReceivesOwned), instead of into a fresh allocation: every published
// byte crossed the in-process hop through a new buffer, the bulk of the
// garbage of a publish run. The copy is as deep as proto.Clone's: the other
// fields of both messages are scalars and strings (immutable, so shared), a
// bytes field is copied; a message, list or map field besides append, which
// the messages do not have today, falls back to proto.Clone.
func cloneSent(m proto.Message) proto.Message {
	pr, ok := m.(*partitionv1.ProduceRequest)
	if !ok || len(pr.GetAppend().GetRecords()) < aliasMin {
		return proto.Clone(m)
	}
	a, ok := shallowCopy(pr.GetAppend(), &partitionv1.AppendRequest{}, nil)
	if !ok {
		return proto.Clone(m)
	}
	c, ok := shallowCopy(pr, &partitionv1.ProduceRequest{}, a)
	if !ok {
		return proto.Clone(m)
	}
	// Assigned, not set through reflection: a protoreflect.Value drops the
	// capacity of a byte slice, and RecycleRecords keeps only a buffer of a
	// pool class's whole capacity.
	recs := pr.Append.Records
	a.Records = (*transportPool.Get(len(recs)))[:len(recs)]
	copy(a.Records, recs)
	return c
}

// shallowCopy sets dst's fields to src's, except AppendRequest.records
// (cloneSent's): scalars and strings shared, other bytes copied, sub as the
// one message field, which must be ProduceRequest.append. ok is false when
// src has a field it cannot copy that way.
func shallowCopy[M proto.Message](src, dst M, sub proto.Message) (M, bool) {
	d, s := dst.ProtoReflect(), src.ProtoReflect()
	_, isAppend := any(src).(*partitionv1.AppendRequest)
	ok := true
	s.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() || fd.IsMap():
			ok = false
		case fd.Kind() == protoreflect.MessageKind:
			if sub == nil || fd.Number() != appendField {
				ok = false
				break
			}
			d.Set(fd, protoreflect.ValueOfMessage(sub.ProtoReflect()))
		case fd.Kind() == protoreflect.BytesKind:
			if !isAppend || fd.Number() != recordsField {
				d.Set(fd, protoreflect.ValueOfBytes(append([]byte(nil), v.Bytes()...)))
			}
		default:
			d.Set(fd, v)
		}
		return ok
	})
	if u := s.GetUnknown(); ok && len(u) > 0 {
		d.SetUnknown(append(protoreflect.RawFields(nil), u...))
	}
	return dst, ok
}

// Field numbers of ProduceRequest.append and AppendRequest.records.
const (
	appendField  = 2
	recordsField = 6
)

type ownedKey struct{}

// ReceivesOwned reports whether the messages a stream handler receives on
// ctx (its stream's context) are its own: deep copies made for it, none
// sharing memory with another message or a transport buffer. It holds on
// the direct path (Links), where a handler may therefore give a received
// ProduceRequest's record set to RecycleRecords once it no longer uses it;
// over gRPC a message may alias the buffer it was decoded from
// (UnmarshalAlias), so it is false there.
func ReceivesOwned(ctx context.Context) bool {
	v, _ := ctx.Value(ownedKey{}).(bool)
	return v
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

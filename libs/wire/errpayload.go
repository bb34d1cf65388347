package wire

import (
	"cmp"
	"slices"

	"github.com/strataio/strata/libs/errcode"
)

// MaxErrorFields bounds the fields of a typed error payload.
const MaxErrorFields = 256

// AppendError appends the typed error payload of e (WIRE-V2 section 8): code,
// class u8, retryable u8, message, then the fields sorted by key. The code
// must be non-empty, the class one of the eight, at most 256 fields with
// non-empty unique keys. e is not modified.
func AppendError(dst []byte, e *errcode.Error) ([]byte, error) {
	fail := func(reason, msg string, kv ...string) ([]byte, error) {
		return dst, encodeError(payloadError, reason, msg, kv...)
	}
	if e == nil || e.Code == "" {
		return fail("empty_code", "error code is empty")
	}
	if !e.Class.Valid() {
		return fail("bad_class", "error class outside 1..8", "class", itoa(int(e.Class)))
	}
	if len(e.Fields) > MaxErrorFields {
		return fail("too_many_fields", "more than 256 error fields", "count", itoa(len(e.Fields)))
	}
	fields := e.Fields
	if !slices.IsSortedFunc(fields, cmpField) {
		fields = slices.SortedFunc(slices.Values(fields), cmpField)
	}
	size := 4 + len(e.Code) + 2 + 4 + len(e.Message) + 2
	for i, f := range fields {
		if f.Key == "" {
			return fail("empty_key", "error field with an empty key")
		}
		if i > 0 && fields[i-1].Key == f.Key {
			return fail("duplicate_key", "error field key repeated", "key", f.Key)
		}
		size += 8 + len(f.Key) + len(f.Value)
	}
	if size > PublicMaxPayload {
		return fail("too_large", "error payload above the public 64 MiB bound")
	}
	dst = appendString(dst, e.Code)
	dst = append(dst, byte(e.Class))
	if e.Retryable {
		dst = append(dst, 1)
	} else {
		dst = append(dst, 0)
	}
	dst = appendString(dst, e.Message)
	dst = appendU16(dst, uint16(len(fields)))
	for _, f := range fields {
		dst = appendString(dst, f.Key)
		dst = appendString(dst, f.Value)
	}
	return dst, nil
}

func cmpField(a, b errcode.Field) int { return cmp.Compare(a.Key, b.Key) }

// DecodeError decodes a typed error payload into an *errcode.Error whose
// fields are sorted by key (the order errcode keeps). It enforces a non-empty
// code, class 1..8, retryable 0 or 1, at most 256 fields backed by enough
// bytes, non-empty unique keys and no trailing bytes; fields need not arrive
// sorted. The returned error is the decoded value; the second result reports
// a malformed payload.
func DecodeError(b []byte) (*errcode.Error, error) {
	fail := func(reason, msg string, kv ...string) (*errcode.Error, error) {
		return nil, decodeError(payloadError, reason, msg, kv...)
	}
	s := string(b) // one copy shared by every string of the result
	d := decoder{b: b}
	str := func() string {
		p := d.bytes()
		if d.short {
			return ""
		}
		return s[d.off-len(p) : d.off]
	}
	e := &errcode.Error{Code: str()}
	class, retry := d.u8(), d.u8()
	e.Message = str()
	n := int(d.u16())
	if d.short {
		return fail("truncated", "error payload truncated")
	}
	if e.Code == "" {
		return fail("empty_code", "error code is empty")
	}
	if !errcode.Class(class).Valid() {
		return fail("bad_class", "error class outside 1..8", "class", itoa(int(class)))
	}
	if retry > 1 {
		return fail("bad_retryable", "retryable must be 0 or 1", "retryable", itoa(int(retry)))
	}
	e.Class, e.Retryable = errcode.Class(class), retry == 1
	if n > MaxErrorFields {
		return fail("too_many_fields", "more than 256 error fields", "count", itoa(n))
	}
	if n*8 > d.remaining() {
		return fail("truncated", "error field count exceeds the payload", "count", itoa(n))
	}
	if n > 0 {
		e.Fields = make([]errcode.Field, 0, n)
	}
	for range n {
		k, v := str(), str()
		if d.short {
			return fail("truncated", "error field truncated")
		}
		if k == "" {
			return fail("empty_key", "error field with an empty key")
		}
		e.Fields = append(e.Fields, errcode.Field{Key: k, Value: v})
	}
	if d.remaining() != 0 {
		return fail("trailing_bytes", "bytes after the last error field", "trailing", itoa(d.remaining()))
	}
	slices.SortStableFunc(e.Fields, cmpField)
	for i := 1; i < len(e.Fields); i++ {
		if e.Fields[i].Key == e.Fields[i-1].Key {
			return fail("duplicate_key", "error field key repeated", "key", e.Fields[i].Key)
		}
	}
	return e, nil
}

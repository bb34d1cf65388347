package wire

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/strataio/strata/libs/errcode"
)

// cmpEmpty treats nil and empty slices as equal where the distinction is not
// part of the wire format.
var cmpEmpty = cmpopts.EquateEmpty()

// wantCode fails t unless err is a typed error with the given code and, when
// reason is not empty, that "reason" field.
func wantCode(t testing.TB, err error, code errcode.Code, reason string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s reason=%s", code.Name(), reason)
	}
	e, ok := errcode.As(err)
	if !ok {
		t.Fatalf("untyped error %v, want %s", err, code.Name())
	}
	if e.Code != code.Name() || e.Class != code.Class() || e.Retryable != code.Retryable() {
		t.Fatalf("error %v, want code %s", err, code.Name())
	}
	if reason != "" && e.Field("reason") != reason {
		t.Fatalf("error %v, want reason=%s", err, reason)
	}
}

// appendCounted appends a u16 count n and then strs as length-prefixed
// strings: a list of n entries (n = len(strs)/2 for key/value pairs).
func appendCounted(b []byte, n int, strs []string) []byte {
	b = appendU16(b, uint16(n))
	for _, s := range strs {
		b = appendString(b, s)
	}
	return b
}

// reencodes checks a value a decoder accepted: encode (given nil) writes
// it, and what it wrote decodes to a value equal under opts. It returns the
// encoding.
func reencodes[T any](t *testing.T, what string, v T, encode func([]byte) ([]byte, error), decode func([]byte) (T, error), opts ...cmp.Option) []byte {
	t.Helper()
	enc, err := encode(nil)
	if err != nil {
		t.Fatalf("%s does not encode: %v", what, err)
	}
	back, err := decode(enc)
	if err != nil {
		t.Fatalf("%s does not decode after encoding: %v", what, err)
	}
	if diff := cmp.Diff(v, back, opts...); diff != "" {
		t.Fatalf("%s round trip (-first +second):\n%s", what, diff)
	}
	return enc
}

// matchesVector checks one vector both ways: raw decodes to want, and want
// encodes (encode is given nil) to raw byte for byte.
func matchesVector[T any](t *testing.T, raw []byte, want T, decode func([]byte) (T, error), encode func([]byte) ([]byte, error), opts ...cmp.Option) {
	t.Helper()
	got, err := decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, opts...); diff != "" {
		t.Fatalf("decoded (-want +got):\n%s", diff)
	}
	enc, err := encode(nil)
	if err != nil || !bytes.Equal(enc, raw) {
		t.Fatalf("re-encode differs (%v)\n got %x\nwant %x", err, enc, raw)
	}
}
